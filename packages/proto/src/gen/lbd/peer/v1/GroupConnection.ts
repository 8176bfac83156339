// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/sync.proto

import type { ConnectionId as _lbd_peer_v1_ConnectionId, ConnectionId__Output as _lbd_peer_v1_ConnectionId__Output } from '../../../lbd/peer/v1/ConnectionId.js';
import type { Endpoint as _lbd_common_v1_Endpoint, Endpoint__Output as _lbd_common_v1_Endpoint__Output } from '../../../lbd/common/v1/Endpoint.js';

export interface GroupConnection {
  'id'?: (_lbd_peer_v1_ConnectionId | null);
  /**
   * conntrack's TCP state (SYN_RECV, ESTABLISHED, ...), or ASSURED / UNREPLIED for UDP.
   */
  'state'?: (string);
  /**
   * Its NAT binding: a connection held with another real server or local address than the old holder's
   * (a mid-stream packet the new holder scheduled afresh) is not the same connection.
   */
  'realServer'?: (_lbd_common_v1_Endpoint | null);
  'localAddress'?: (_lbd_common_v1_Endpoint | null);
}

export interface GroupConnection__Output {
  'id': (_lbd_peer_v1_ConnectionId__Output | null);
  /**
   * conntrack's TCP state (SYN_RECV, ESTABLISHED, ...), or ASSURED / UNREPLIED for UDP.
   */
  'state': (string);
  /**
   * Its NAT binding: a connection held with another real server or local address than the old holder's
   * (a mid-stream packet the new holder scheduled afresh) is not the same connection.
   */
  'realServer': (_lbd_common_v1_Endpoint__Output | null);
  'localAddress': (_lbd_common_v1_Endpoint__Output | null);
}
