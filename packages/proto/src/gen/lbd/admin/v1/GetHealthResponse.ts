// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { RealServerHealth as _lbd_admin_v1_RealServerHealth, RealServerHealth__Output as _lbd_admin_v1_RealServerHealth__Output } from '../../../lbd/admin/v1/RealServerHealth.js';
import type { HealthSchedulerStats as _lbd_admin_v1_HealthSchedulerStats, HealthSchedulerStats__Output as _lbd_admin_v1_HealthSchedulerStats__Output } from '../../../lbd/admin/v1/HealthSchedulerStats.js';
import type { Long } from '@grpc/proto-loader';

export interface GetHealthResponse {
  /**
   * The agent's clock when the answer was made (milliseconds since the Unix epoch): ages ("up for
   * 5 min") are differences from it, not from the client's clock.
   */
  'sampledAtUnixMs'?: (number | string | Long);
  /**
   * One per (service, real server) with a health check, in config order. A real server in two
   * services appears twice; an identical check of it is probed once (same check.key).
   */
  'realServers'?: (_lbd_admin_v1_RealServerHealth)[];
  'scheduler'?: (_lbd_admin_v1_HealthSchedulerStats | null);
}

export interface GetHealthResponse__Output {
  /**
   * The agent's clock when the answer was made (milliseconds since the Unix epoch): ages ("up for
   * 5 min") are differences from it, not from the client's clock.
   */
  'sampledAtUnixMs': (number);
  /**
   * One per (service, real server) with a health check, in config order. A real server in two
   * services appears twice; an identical check of it is probed once (same check.key).
   */
  'realServers': (_lbd_admin_v1_RealServerHealth__Output)[];
  'scheduler': (_lbd_admin_v1_HealthSchedulerStats__Output | null);
}
