// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/sync.proto

import type { SyncedConnection as _lbd_peer_v1_SyncedConnection, SyncedConnection__Output as _lbd_peer_v1_SyncedConnection__Output } from '../../../lbd/peer/v1/SyncedConnection.js';
import type { ConnectionId as _lbd_peer_v1_ConnectionId, ConnectionId__Output as _lbd_peer_v1_ConnectionId__Output } from '../../../lbd/peer/v1/ConnectionId.js';
import type { Endpoint as _lbd_common_v1_Endpoint, Endpoint__Output as _lbd_common_v1_Endpoint__Output } from '../../../lbd/common/v1/Endpoint.js';

export interface Change {
  'upsert'?: (_lbd_peer_v1_SyncedConnection | null);
  'remove'?: (_lbd_peer_v1_ConnectionId | null);
  /**
   * With a remove: the binding of the entry the sender removed (the real server, and in fullnat the local
   * address). A receiver then removes only an entry with that binding, so a copy of the same client
   * connection with another binding, put there from another peer (the client reused its port, and that
   * peer holds the new connection), stays. Unset (an older sender): removed by the client tuple alone.
   */
  'removedRealServer'?: (_lbd_common_v1_Endpoint | null);
  'removedLocalAddress'?: (_lbd_common_v1_Endpoint | null);
  'op'?: "upsert"|"remove";
}

export interface Change__Output {
  'upsert'?: (_lbd_peer_v1_SyncedConnection__Output | null);
  'remove'?: (_lbd_peer_v1_ConnectionId__Output | null);
  /**
   * With a remove: the binding of the entry the sender removed (the real server, and in fullnat the local
   * address). A receiver then removes only an entry with that binding, so a copy of the same client
   * connection with another binding, put there from another peer (the client reused its port, and that
   * peer holds the new connection), stays. Unset (an older sender): removed by the client tuple alone.
   */
  'removedRealServer': (_lbd_common_v1_Endpoint__Output | null);
  'removedLocalAddress': (_lbd_common_v1_Endpoint__Output | null);
  'op'?: "upsert"|"remove";
}
