// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/sync.proto

import type { Hello as _lbd_peer_v1_Hello, Hello__Output as _lbd_peer_v1_Hello__Output } from '../../../lbd/peer/v1/Hello.js';
import type { SnapshotBegin as _lbd_peer_v1_SnapshotBegin, SnapshotBegin__Output as _lbd_peer_v1_SnapshotBegin__Output } from '../../../lbd/peer/v1/SnapshotBegin.js';
import type { Changes as _lbd_peer_v1_Changes, Changes__Output as _lbd_peer_v1_Changes__Output } from '../../../lbd/peer/v1/Changes.js';
import type { SnapshotEnd as _lbd_peer_v1_SnapshotEnd, SnapshotEnd__Output as _lbd_peer_v1_SnapshotEnd__Output } from '../../../lbd/peer/v1/SnapshotEnd.js';
import type { Long } from '@grpc/proto-loader';

export interface SyncMessage {
  /**
   * 1, 2, 3, ... within one stream; Hello is 1.
   */
  'seq'?: (number | string | Long);
  'hello'?: (_lbd_peer_v1_Hello | null);
  'snapshotBegin'?: (_lbd_peer_v1_SnapshotBegin | null);
  'changes'?: (_lbd_peer_v1_Changes | null);
  'snapshotEnd'?: (_lbd_peer_v1_SnapshotEnd | null);
  'body'?: "hello"|"snapshotBegin"|"changes"|"snapshotEnd";
}

export interface SyncMessage__Output {
  /**
   * 1, 2, 3, ... within one stream; Hello is 1.
   */
  'seq': (number);
  'hello'?: (_lbd_peer_v1_Hello__Output | null);
  'snapshotBegin'?: (_lbd_peer_v1_SnapshotBegin__Output | null);
  'changes'?: (_lbd_peer_v1_Changes__Output | null);
  'snapshotEnd'?: (_lbd_peer_v1_SnapshotEnd__Output | null);
  'body'?: "hello"|"snapshotBegin"|"changes"|"snapshotEnd";
}
