// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { HealthCheckInfo as _lbd_admin_v1_HealthCheckInfo, HealthCheckInfo__Output as _lbd_admin_v1_HealthCheckInfo__Output } from '../../../lbd/admin/v1/HealthCheckInfo.js';
import type { ProbeResultInfo as _lbd_admin_v1_ProbeResultInfo, ProbeResultInfo__Output as _lbd_admin_v1_ProbeResultInfo__Output } from '../../../lbd/admin/v1/ProbeResultInfo.js';
import type { Long } from '@grpc/proto-loader';

export interface RealServerHealth {
  'service'?: (string);
  'serviceName'?: (string);
  'address'?: (string);
  'port'?: (number);
  'check'?: (_lbd_admin_v1_HealthCheckInfo | null);
  /**
   * "up" | "down"
   */
  'state'?: (string);
  /**
   * When it entered that state (its check started, or its last transition).
   */
  'sinceUnixMs'?: (number | string | Long);
  /**
   * Consecutive successes and failures of the latest results.
   */
  'successes'?: (number);
  'failures'?: (number);
  /**
   * The latest probe's result; unset before the first.
   */
  'lastResult'?: (_lbd_admin_v1_ProbeResultInfo | null);
  /**
   * While held down for flapping: when the hold-down ends; 0 otherwise.
   */
  'heldDownUntilUnixMs'?: (number | string | Long);
  /**
   * As in RealServerStatus.flags: "down", "held-down", "ramping", "removed", "kept".
   */
  'flags'?: (string)[];
  'weight'?: (number);
  'effectiveWeight'?: (number);
}

export interface RealServerHealth__Output {
  'service': (string);
  'serviceName': (string);
  'address': (string);
  'port': (number);
  'check': (_lbd_admin_v1_HealthCheckInfo__Output | null);
  /**
   * "up" | "down"
   */
  'state': (string);
  /**
   * When it entered that state (its check started, or its last transition).
   */
  'sinceUnixMs': (number);
  /**
   * Consecutive successes and failures of the latest results.
   */
  'successes': (number);
  'failures': (number);
  /**
   * The latest probe's result; unset before the first.
   */
  'lastResult': (_lbd_admin_v1_ProbeResultInfo__Output | null);
  /**
   * While held down for flapping: when the hold-down ends; 0 otherwise.
   */
  'heldDownUntilUnixMs': (number);
  /**
   * As in RealServerStatus.flags: "down", "held-down", "ramping", "removed", "kept".
   */
  'flags': (string)[];
  'weight': (number);
  'effectiveWeight': (number);
}
