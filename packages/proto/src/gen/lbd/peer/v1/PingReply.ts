// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/peer.proto

import type { Long } from '@grpc/proto-loader';

export interface PingReply {
  'director'?: (string);
  'version'?: (string);
  /**
   * The answering director's kernel lease per vip group it holds one for: ms left (0 once ended).
   */
  'kernelLeaseLeftMs'?: ({[key: string]: number | string | Long});
}

export interface PingReply__Output {
  'director': (string);
  'version': (string);
  /**
   * The answering director's kernel lease per vip group it holds one for: ms left (0 once ended).
   */
  'kernelLeaseLeftMs': ({[key: string]: number});
}
