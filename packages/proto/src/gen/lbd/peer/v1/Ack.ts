// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/sync.proto

import type { Long } from '@grpc/proto-loader';

/**
 * Every message up to seq is applied (or refused, counted in failed).
 */
export interface Ack {
  'seq'?: (number | string | Long);
  'injected'?: (number | string | Long);
  'failed'?: (number | string | Long);
}

/**
 * Every message up to seq is applied (or refused, counted in failed).
 */
export interface Ack__Output {
  'seq': (number);
  'injected': (number);
  'failed': (number);
}
