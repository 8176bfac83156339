// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { Long } from '@grpc/proto-loader';

export interface HealthSchedulerStats {
  /**
   * Distinct checks (shared checks count once).
   */
  'checks'?: (number);
  'running'?: (number);
  'waiting'?: (number);
  'started'?: (number | string | Long);
  'completed'?: (number | string | Long);
  'timedOut'?: (number | string | Long);
  /**
   * Probes that could not start when due because the concurrency limit was reached.
   */
  'late'?: (number | string | Long);
  /**
   * Rounds skipped because the check's previous probe had not finished.
   */
  'skipped'?: (number | string | Long);
  /**
   * Delay from a probe's due time to its start, over recent probes.
   */
  'startDelayP50Ms'?: (number | string);
  'startDelayP99Ms'?: (number | string);
  'startDelayMaxMs'?: (number | string);
  /**
   * Probes asked again at once because a held-up event loop (a busy box), not the server, decided their timeout.
   */
  'askedAgain'?: (number | string | Long);
}

export interface HealthSchedulerStats__Output {
  /**
   * Distinct checks (shared checks count once).
   */
  'checks': (number);
  'running': (number);
  'waiting': (number);
  'started': (number);
  'completed': (number);
  'timedOut': (number);
  /**
   * Probes that could not start when due because the concurrency limit was reached.
   */
  'late': (number);
  /**
   * Rounds skipped because the check's previous probe had not finished.
   */
  'skipped': (number);
  /**
   * Delay from a probe's due time to its start, over recent probes.
   */
  'startDelayP50Ms': (number);
  'startDelayP99Ms': (number);
  'startDelayMaxMs': (number);
  /**
   * Probes asked again at once because a held-up event loop (a busy box), not the server, decided their timeout.
   */
  'askedAgain': (number);
}
