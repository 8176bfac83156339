// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { ServiceStats as _lbd_admin_v1_ServiceStats, ServiceStats__Output as _lbd_admin_v1_ServiceStats__Output } from '../../../lbd/admin/v1/ServiceStats.js';
import type { Long } from '@grpc/proto-loader';

export interface GetStatsResponse {
  /**
   * When the counters were read (milliseconds since the Unix epoch); rates divide by differences of it.
   */
  'sampledAtUnixMs'?: (number | string | Long);
  'services'?: (_lbd_admin_v1_ServiceStats)[];
}

export interface GetStatsResponse__Output {
  /**
   * When the counters were read (milliseconds since the Unix epoch); rates divide by differences of it.
   */
  'sampledAtUnixMs': (number);
  'services': (_lbd_admin_v1_ServiceStats__Output)[];
}
