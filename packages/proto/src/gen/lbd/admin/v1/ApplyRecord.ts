// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { Problem as _lbd_admin_v1_Problem, Problem__Output as _lbd_admin_v1_Problem__Output } from '../../../lbd/admin/v1/Problem.js';

export interface ApplyRecord {
  /**
   * RFC 3339.
   */
  'time'?: (string);
  /**
   * "start" | "sighup" | "file-change" | "apply-rpc"
   */
  'trigger'?: (string);
  /**
   * "applied" (the kernel was changed) | "unchanged" (it already matched) | "rejected" (invalid config;
   * nothing applied) | "failed" (the data plane refused; the previous state stays)
   */
  'result'?: (string);
  /**
   * For "failed": the data plane's error.
   */
  'error'?: (string);
  /**
   * For "rejected": every problem.
   */
  'problems'?: (_lbd_admin_v1_Problem)[];
  /**
   * Number of rule operations written.
   */
  'operations'?: (number);
  'fullRebuild'?: (boolean);
  'durationMs'?: (number | string);
  /**
   * The source and sha256 of the config that was attempted.
   */
  'source'?: (string);
  'configSha256'?: (string);
}

export interface ApplyRecord__Output {
  /**
   * RFC 3339.
   */
  'time': (string);
  /**
   * "start" | "sighup" | "file-change" | "apply-rpc"
   */
  'trigger': (string);
  /**
   * "applied" (the kernel was changed) | "unchanged" (it already matched) | "rejected" (invalid config;
   * nothing applied) | "failed" (the data plane refused; the previous state stays)
   */
  'result': (string);
  /**
   * For "failed": the data plane's error.
   */
  'error': (string);
  /**
   * For "rejected": every problem.
   */
  'problems': (_lbd_admin_v1_Problem__Output)[];
  /**
   * Number of rule operations written.
   */
  'operations': (number);
  'fullRebuild': (boolean);
  'durationMs': (number);
  /**
   * The source and sha256 of the config that was attempted.
   */
  'source': (string);
  'configSha256': (string);
}
