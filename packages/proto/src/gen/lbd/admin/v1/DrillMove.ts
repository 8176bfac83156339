// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { Long } from '@grpc/proto-loader';

export interface DrillMove {
  'from'?: (string);
  'to'?: (string);
  /**
   * The planned failover, asked to answered.
   */
  'tookMs'?: (number | string);
  /**
   * From the old holder's release to the new holder's claim of the group's addresses, by each director's
   * own clock; -1 when either time is unknown.
   */
  'holderlessMs'?: (number | string | Long);
  /**
   * The old holder's established connections of the group just before the move.
   */
  'establishedBefore'?: (number | string | Long);
  /**
   * Of those, the ones still open on the old holder after the move that the new holder did not hold: a
   * client's next packet finds no state there (broken). -1: not measured (see not_measured).
   */
  'establishedMissing'?: (number | string | Long);
  /**
   * Connections of the group on the old holder after the move too young to have been copied (a TCP
   * handshake, a UDP flow not yet assured: sync copies neither), which the new holder does not hold with
   * the same binding: a retried SYN or the flow's next datagram is scheduled afresh there. -1: not measured.
   */
  'youngCaught'?: (number | string | Long);
  /**
   * Why a figure is -1 (e.g. connection sync is off, or a director too old to answer).
   */
  'notMeasured'?: (string);
  /**
   * Packets the two directors' kernels dropped during the move because they reached a director that did
   * not hold the kernel lease of the address they were for (new connections and established ones alike:
   * the clients' and routers' neighbour caches still pointing at the old holder, or not yet at the new):
   * the lease counters of both, after the move less before. -1: not measured.
   */
  'droppedPackets'?: (number | string | Long);
}

export interface DrillMove__Output {
  'from': (string);
  'to': (string);
  /**
   * The planned failover, asked to answered.
   */
  'tookMs': (number);
  /**
   * From the old holder's release to the new holder's claim of the group's addresses, by each director's
   * own clock; -1 when either time is unknown.
   */
  'holderlessMs': (number);
  /**
   * The old holder's established connections of the group just before the move.
   */
  'establishedBefore': (number);
  /**
   * Of those, the ones still open on the old holder after the move that the new holder did not hold: a
   * client's next packet finds no state there (broken). -1: not measured (see not_measured).
   */
  'establishedMissing': (number);
  /**
   * Connections of the group on the old holder after the move too young to have been copied (a TCP
   * handshake, a UDP flow not yet assured: sync copies neither), which the new holder does not hold with
   * the same binding: a retried SYN or the flow's next datagram is scheduled afresh there. -1: not measured.
   */
  'youngCaught': (number);
  /**
   * Why a figure is -1 (e.g. connection sync is off, or a director too old to answer).
   */
  'notMeasured': (string);
  /**
   * Packets the two directors' kernels dropped during the move because they reached a director that did
   * not hold the kernel lease of the address they were for (new connections and established ones alike:
   * the clients' and routers' neighbour caches still pointing at the old holder, or not yet at the new):
   * the lease counters of both, after the move less before. -1: not measured.
   */
  'droppedPackets': (number);
}
