// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/sync.proto

import type { ConnectionId as _lbd_peer_v1_ConnectionId, ConnectionId__Output as _lbd_peer_v1_ConnectionId__Output } from '../../../lbd/peer/v1/ConnectionId.js';
import type { Endpoint as _lbd_common_v1_Endpoint, Endpoint__Output as _lbd_common_v1_Endpoint__Output } from '../../../lbd/common/v1/Endpoint.js';
import type { SynProxyState as _lbd_peer_v1_SynProxyState, SynProxyState__Output as _lbd_peer_v1_SynProxyState__Output } from '../../../lbd/peer/v1/SynProxyState.js';
import type { SeqAdjust as _lbd_peer_v1_SeqAdjust, SeqAdjust__Output as _lbd_peer_v1_SeqAdjust__Output } from '../../../lbd/peer/v1/SeqAdjust.js';

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
  /**
   * A connection the kernel's SYN proxy opened (synProxy services): the proxy's cookie numbers, and once the
   * real server has answered, the sequence-number adjustment between the client's side and the server's.
   * Without them the copy's numbers are off and the connection breaks on its first packet after a move.
   * Absent for every other connection. A 0.1.0 peer neither sends nor reads them (its config refuses
   * synProxy on a synced service, so it holds no such connection).
   */
  'synProxy'?: (_lbd_peer_v1_SynProxyState | null);
  'seqAdjust'?: (_lbd_peer_v1_SeqAdjust | null);
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
  /**
   * A connection the kernel's SYN proxy opened (synProxy services): the proxy's cookie numbers, and once the
   * real server has answered, the sequence-number adjustment between the client's side and the server's.
   * Without them the copy's numbers are off and the connection breaks on its first packet after a move.
   * Absent for every other connection. A 0.1.0 peer neither sends nor reads them (its config refuses
   * synProxy on a synced service, so it holds no such connection).
   */
  'synProxy': (_lbd_peer_v1_SynProxyState__Output | null);
  'seqAdjust': (_lbd_peer_v1_SeqAdjust__Output | null);
}
