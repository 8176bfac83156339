// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { Long } from '@grpc/proto-loader';

export interface RealServerStatus {
  'address'?: (string);
  'port'?: (number);
  /**
   * As configured.
   */
  'weight'?: (number);
  /**
   * Deprecated: the opposite of quiescent, still sent for lbadm and dashboards of before; read quiescent.
   * @deprecated
   */
  'eligible'?: (boolean);
  /**
   * conntrack entries in ESTABLISHED (IPVS ActiveConn).
   */
  'activeConnections'?: (number | string | Long);
  /**
   * All its other conntrack entries (IPVS InActConn): handshakes, closing, TIME_WAIT, UDP.
   */
  'inactiveConnections'?: (number | string | Long);
  'packets'?: (number | string | Long);
  'bytes'?: (number | string | Long);
  /**
   * Words as in ServiceStatus.flags, and from health checking: "down" (failed its check), "held-down"
   * (down and held there for flapping), "ramping" (slow start after coming up), "removed" (down in a
   * service with onDown remove, so left out of the kernel on purpose), "kept" (down, but kept at its
   * weight by fallback keep-last).
   */
  'flags'?: (string)[];
  /**
   * "up" | "down"; empty for a real server without a health check (always up).
   */
  'health'?: (string);
  /**
   * The weight the agent programs now: the configured weight, 0 while down (quiescent or removed),
   * less while ramping up after slow start.
   */
  'effectiveWeight'?: (number);
  /**
   * Takes no new connections (weight 0 now, or not in the kernel); its established connections live on.
   */
  'quiescent'?: (boolean);
}

export interface RealServerStatus__Output {
  'address': (string);
  'port': (number);
  /**
   * As configured.
   */
  'weight': (number);
  /**
   * Deprecated: the opposite of quiescent, still sent for lbadm and dashboards of before; read quiescent.
   * @deprecated
   */
  'eligible': (boolean);
  /**
   * conntrack entries in ESTABLISHED (IPVS ActiveConn).
   */
  'activeConnections': (number);
  /**
   * All its other conntrack entries (IPVS InActConn): handshakes, closing, TIME_WAIT, UDP.
   */
  'inactiveConnections': (number);
  'packets': (number);
  'bytes': (number);
  /**
   * Words as in ServiceStatus.flags, and from health checking: "down" (failed its check), "held-down"
   * (down and held there for flapping), "ramping" (slow start after coming up), "removed" (down in a
   * service with onDown remove, so left out of the kernel on purpose), "kept" (down, but kept at its
   * weight by fallback keep-last).
   */
  'flags': (string)[];
  /**
   * "up" | "down"; empty for a real server without a health check (always up).
   */
  'health': (string);
  /**
   * The weight the agent programs now: the configured weight, 0 while down (quiescent or removed),
   * less while ramping up after slow start.
   */
  'effectiveWeight': (number);
  /**
   * Takes no new connections (weight 0 now, or not in the kernel); its established connections live on.
   */
  'quiescent': (boolean);
}
