// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/sync.proto

import type { HostPort as _lbd_peer_v1_HostPort, HostPort__Output as _lbd_peer_v1_HostPort__Output } from '../../../lbd/peer/v1/HostPort.js';

export interface ConnectionId {
  /**
   * "tcp" or "udp"
   */
  'protocol'?: (string);
  'client'?: (_lbd_peer_v1_HostPort | null);
  'vip'?: (_lbd_peer_v1_HostPort | null);
}

export interface ConnectionId__Output {
  /**
   * "tcp" or "udp"
   */
  'protocol': (string);
  'client': (_lbd_peer_v1_HostPort__Output | null);
  'vip': (_lbd_peer_v1_HostPort__Output | null);
}
