// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/sync.proto

import type { ConnectionId as _lbd_peer_v1_ConnectionId, ConnectionId__Output as _lbd_peer_v1_ConnectionId__Output } from '../../../lbd/peer/v1/ConnectionId.js';
import type { Endpoint as _lbd_common_v1_Endpoint, Endpoint__Output as _lbd_common_v1_Endpoint__Output } from '../../../lbd/common/v1/Endpoint.js';

export interface SyncedConnection {
  'id'?: (_lbd_peer_v1_ConnectionId | null);
  /**
   * The NAT binding: the real server (DNAT) and, in fullnat, the local address the real server sees (SNAT).
   */
  'realServer'?: (_lbd_common_v1_Endpoint | null);
  'localAddress'?: (_lbd_common_v1_Endpoint | null);
  /**
   * TCP state (ESTABLISHED, ...) or ASSURED for UDP.
   */
  'state'?: (string);
  'timeoutSec'?: (number);
}

export interface SyncedConnection__Output {
  'id': (_lbd_peer_v1_ConnectionId__Output | null);
  /**
   * The NAT binding: the real server (DNAT) and, in fullnat, the local address the real server sees (SNAT).
   */
  'realServer': (_lbd_common_v1_Endpoint__Output | null);
  'localAddress': (_lbd_common_v1_Endpoint__Output | null);
  /**
   * TCP state (ESTABLISHED, ...) or ASSURED for UDP.
   */
  'state': (string);
  'timeoutSec': (number);
}
