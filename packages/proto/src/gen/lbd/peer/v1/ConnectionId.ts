// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/sync.proto

import type { Endpoint as _lbd_common_v1_Endpoint, Endpoint__Output as _lbd_common_v1_Endpoint__Output } from '../../../lbd/common/v1/Endpoint.js';

export interface ConnectionId {
  /**
   * "tcp" or "udp"
   */
  'protocol'?: (string);
  'client'?: (_lbd_common_v1_Endpoint | null);
  'vip'?: (_lbd_common_v1_Endpoint | null);
}

export interface ConnectionId__Output {
  /**
   * "tcp" or "udp"
   */
  'protocol': (string);
  'client': (_lbd_common_v1_Endpoint__Output | null);
  'vip': (_lbd_common_v1_Endpoint__Output | null);
}
