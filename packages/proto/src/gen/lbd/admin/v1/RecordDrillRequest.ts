// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto


export interface RecordDrillRequest {
  /**
   * The drill scenario: "switchover", "kill-agent", "box-death", "etcd-partition", "peer-partition",
   * "etcd-outage", "pause-leader", "pause-standby" (@lbd/config DRILL_SCENARIOS). Was `mode`: the number,
   * all the wire carries, is unchanged.
   */
  'scenario'?: (string);
  /**
   * "pass" | "fail"
   */
  'result'?: (string);
  /**
   * The result in words (the drill's summary line).
   */
  'reason'?: (string);
  /**
   * Figures: tookMs, noServiceMs, failedRequests, brokenConnections, dualForwarding, dualAnswering, dualHolding, oldLeader, newLeader, ...
   */
  'fields'?: ({[key: string]: string});
}

export interface RecordDrillRequest__Output {
  /**
   * The drill scenario: "switchover", "kill-agent", "box-death", "etcd-partition", "peer-partition",
   * "etcd-outage", "pause-leader", "pause-standby" (@lbd/config DRILL_SCENARIOS). Was `mode`: the number,
   * all the wire carries, is unchanged.
   */
  'scenario': (string);
  /**
   * "pass" | "fail"
   */
  'result': (string);
  /**
   * The result in words (the drill's summary line).
   */
  'reason': (string);
  /**
   * Figures: tookMs, noServiceMs, failedRequests, brokenConnections, dualForwarding, dualAnswering, dualHolding, oldLeader, newLeader, ...
   */
  'fields': ({[key: string]: string});
}
