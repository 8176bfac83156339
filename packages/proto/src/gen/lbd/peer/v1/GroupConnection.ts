// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/sync.proto

import type { ConnectionId as _lbd_peer_v1_ConnectionId, ConnectionId__Output as _lbd_peer_v1_ConnectionId__Output } from '../../../lbd/peer/v1/ConnectionId.js';

export interface GroupConnection {
  'id'?: (_lbd_peer_v1_ConnectionId | null);
  /**
   * conntrack's TCP state (SYN_RECV, ESTABLISHED, ...), or ASSURED / UNREPLIED for UDP.
   */
  'state'?: (string);
}

export interface GroupConnection__Output {
  'id': (_lbd_peer_v1_ConnectionId__Output | null);
  /**
   * conntrack's TCP state (SYN_RECV, ESTABLISHED, ...), or ASSURED / UNREPLIED for UDP.
   */
  'state': (string);
}
