// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/sync.proto

import type { Flow as _lbd_peer_v1_Flow, Flow__Output as _lbd_peer_v1_Flow__Output } from '../../../lbd/peer/v1/Flow.js';
import type { FlowId as _lbd_peer_v1_FlowId, FlowId__Output as _lbd_peer_v1_FlowId__Output } from '../../../lbd/peer/v1/FlowId.js';

export interface Change {
  'upsert'?: (_lbd_peer_v1_Flow | null);
  'remove'?: (_lbd_peer_v1_FlowId | null);
  'op'?: "upsert"|"remove";
}

export interface Change__Output {
  'upsert'?: (_lbd_peer_v1_Flow__Output | null);
  'remove'?: (_lbd_peer_v1_FlowId__Output | null);
  'op'?: "upsert"|"remove";
}
