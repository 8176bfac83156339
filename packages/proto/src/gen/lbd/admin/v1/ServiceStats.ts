// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { Counters as _lbd_admin_v1_Counters, Counters__Output as _lbd_admin_v1_Counters__Output } from '../../../lbd/admin/v1/Counters.js';
import type { RealServerStats as _lbd_admin_v1_RealServerStats, RealServerStats__Output as _lbd_admin_v1_RealServerStats__Output } from '../../../lbd/admin/v1/RealServerStats.js';

export interface ServiceStats {
  'name'?: (string);
  'key'?: (string);
  'counters'?: (_lbd_admin_v1_Counters | null);
  'realServers'?: (_lbd_admin_v1_RealServerStats)[];
}

export interface ServiceStats__Output {
  'name': (string);
  'key': (string);
  'counters': (_lbd_admin_v1_Counters__Output | null);
  'realServers': (_lbd_admin_v1_RealServerStats__Output)[];
}
