// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { Endpoint as _lbd_common_v1_Endpoint, Endpoint__Output as _lbd_common_v1_Endpoint__Output } from '../../../lbd/common/v1/Endpoint.js';

export interface Connection {
  'protocol'?: (string);
  /**
   * conntrack state: ESTABLISHED, SYN_SENT, TIME_WAIT, ...; UDP: ASSURED or UNREPLIED.
   */
  'state'?: (string);
  'client'?: (_lbd_common_v1_Endpoint | null);
  'vip'?: (_lbd_common_v1_Endpoint | null);
  /**
   * The fullnat source address the real server sees; unset in nat mode.
   */
  'localAddress'?: (_lbd_common_v1_Endpoint | null);
  'realServer'?: (_lbd_common_v1_Endpoint | null);
  'expiresInSec'?: (number);
  /**
   * No reply seen yet.
   */
  'unreplied'?: (boolean);
  /**
   * The connection's ct mark: the id of its real server within its service (was backend_id; the number,
   * all the wire carries, is unchanged, so directors and lbadm of either version still understand each other).
   */
  'realServerId'?: (number);
  /**
   * The service key, or empty when the entry is not one of lbd's services.
   */
  'service'?: (string);
}

export interface Connection__Output {
  'protocol': (string);
  /**
   * conntrack state: ESTABLISHED, SYN_SENT, TIME_WAIT, ...; UDP: ASSURED or UNREPLIED.
   */
  'state': (string);
  'client': (_lbd_common_v1_Endpoint__Output | null);
  'vip': (_lbd_common_v1_Endpoint__Output | null);
  /**
   * The fullnat source address the real server sees; unset in nat mode.
   */
  'localAddress': (_lbd_common_v1_Endpoint__Output | null);
  'realServer': (_lbd_common_v1_Endpoint__Output | null);
  'expiresInSec': (number);
  /**
   * No reply seen yet.
   */
  'unreplied': (boolean);
  /**
   * The connection's ct mark: the id of its real server within its service (was backend_id; the number,
   * all the wire carries, is unchanged, so directors and lbadm of either version still understand each other).
   */
  'realServerId': (number);
  /**
   * The service key, or empty when the entry is not one of lbd's services.
   */
  'service': (string);
}
