// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { Long } from '@grpc/proto-loader';

export interface HealthEvent {
  /**
   * Increases by one per transition for the life of the agent process.
   */
  'seq'?: (number | string | Long);
  'timeUnixMs'?: (number | string | Long);
  'service'?: (string);
  'serviceName'?: (string);
  'address'?: (string);
  'port'?: (number);
  'checkKind'?: (string);
  /**
   * "up" | "down"
   */
  'from'?: (string);
  'to'?: (string);
  /**
   * Why, in words: the probe's message and the count, plus any hold-down ("http GET /: got 500,
   * want 200-399 (2 failures)").
   */
  'reason'?: (string);
  /**
   * The probe's reason word (see ProbeResultInfo.reason).
   */
  'probeReason'?: (string);
  'latencyMs'?: (number | string);
  /**
   * Set when this transition holds the server down for flapping.
   */
  'heldDownUntilUnixMs'?: (number | string | Long);
  /**
   * What the agent does about it: "quiescent (weight 0)", "removed, connections expired",
   * "restored (weight 3)", "ramping to weight 3 over 10 s", with "; all real servers down: ..." when
   * it was the last one up.
   */
  'action'?: (string);
}

export interface HealthEvent__Output {
  /**
   * Increases by one per transition for the life of the agent process.
   */
  'seq': (number);
  'timeUnixMs': (number);
  'service': (string);
  'serviceName': (string);
  'address': (string);
  'port': (number);
  'checkKind': (string);
  /**
   * "up" | "down"
   */
  'from': (string);
  'to': (string);
  /**
   * Why, in words: the probe's message and the count, plus any hold-down ("http GET /: got 500,
   * want 200-399 (2 failures)").
   */
  'reason': (string);
  /**
   * The probe's reason word (see ProbeResultInfo.reason).
   */
  'probeReason': (string);
  'latencyMs': (number);
  /**
   * Set when this transition holds the server down for flapping.
   */
  'heldDownUntilUnixMs': (number);
  /**
   * What the agent does about it: "quiescent (weight 0)", "removed, connections expired",
   * "restored (weight 3)", "ramping to weight 3 over 10 s", with "; all real servers down: ..." when
   * it was the last one up.
   */
  'action': (string);
}
