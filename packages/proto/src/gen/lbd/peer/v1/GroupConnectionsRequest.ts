// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/sync.proto


export interface GroupConnectionsRequest {
  /**
   * The asking director's id.
   */
  'from'?: (string);
  /**
   * A vip group, or an ECMP slot's election group (slot-N).
   */
  'group'?: (string);
  /**
   * The group's state and the kernel's counters only, no connections (one reply): what a drill samples of
   * every director a move may go to. A director that predates this field sends the connections anyway.
   */
  'countersOnly'?: (boolean);
}

export interface GroupConnectionsRequest__Output {
  /**
   * The asking director's id.
   */
  'from': (string);
  /**
   * A vip group, or an ECMP slot's election group (slot-N).
   */
  'group': (string);
  /**
   * The group's state and the kernel's counters only, no connections (one reply): what a drill samples of
   * every director a move may go to. A director that predates this field sends the connections anyway.
   */
  'countersOnly': (boolean);
}
