// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/sync.proto


/**
 * The kernel's synproxy extension (u32 each, as it keeps them).
 */
export interface SynProxyState {
  'isn'?: (number);
  'its'?: (number);
  'tsoff'?: (number);
}

/**
 * The kernel's synproxy extension (u32 each, as it keeps them).
 */
export interface SynProxyState__Output {
  'isn': (number);
  'its': (number);
  'tsoff': (number);
}
