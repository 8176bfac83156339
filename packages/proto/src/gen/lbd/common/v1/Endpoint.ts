// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/common/v1/endpoint.proto


/**
 * An address and a port: a client, a vip, a local address, a real server.
 */
export interface Endpoint {
  'address'?: (string);
  'port'?: (number);
}

/**
 * An address and a port: a client, a vip, a local address, a real server.
 */
export interface Endpoint__Output {
  'address': (string);
  'port': (number);
}
