// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { Long } from '@grpc/proto-loader';

export interface RealServerStatus {
  'address'?: (string);
  'port'?: (number);
  'weight'?: (number);
  /**
   * New connections may be scheduled to it (weight > 0 and in the kernel); false = quiescent.
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
   * Words as in ServiceStatus.flags.
   */
  'flags'?: (string)[];
}

export interface RealServerStatus__Output {
  'address': (string);
  'port': (number);
  'weight': (number);
  /**
   * New connections may be scheduled to it (weight > 0 and in the kernel); false = quiescent.
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
   * Words as in ServiceStatus.flags.
   */
  'flags': (string)[];
}
