// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/sync.proto

import type { Long } from '@grpc/proto-loader';

/**
 * Everything the sender has for these groups follows, then SnapshotEnd: the receiver then removes what
 * it holds for these groups that the snapshot did not name.
 */
export interface SnapshotBegin {
  'groups'?: (string)[];
  /**
   * Connections in the snapshot (for progress in status).
   */
  'connections'?: (number | string | Long);
  /**
   * Why: "first", "resync: gap at 41", "groups changed", "events lost".
   */
  'reason'?: (string);
}

/**
 * Everything the sender has for these groups follows, then SnapshotEnd: the receiver then removes what
 * it holds for these groups that the snapshot did not name.
 */
export interface SnapshotBegin__Output {
  'groups': (string)[];
  /**
   * Connections in the snapshot (for progress in status).
   */
  'connections': (number);
  /**
   * Why: "first", "resync: gap at 41", "groups changed", "events lost".
   */
  'reason': (string);
}
