// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/sync.proto

import type { Ack as _lbd_peer_v1_Ack, Ack__Output as _lbd_peer_v1_Ack__Output } from '../../../lbd/peer/v1/Ack.js';
import type { Resync as _lbd_peer_v1_Resync, Resync__Output as _lbd_peer_v1_Resync__Output } from '../../../lbd/peer/v1/Resync.js';

export interface SyncReply {
  'ack'?: (_lbd_peer_v1_Ack | null);
  'resync'?: (_lbd_peer_v1_Resync | null);
  'body'?: "ack"|"resync";
}

export interface SyncReply__Output {
  'ack'?: (_lbd_peer_v1_Ack__Output | null);
  'resync'?: (_lbd_peer_v1_Resync__Output | null);
  'body'?: "ack"|"resync";
}
