// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto


export interface RunDrillRequest {
  /**
   * "switchover" (the one drill a live cluster runs; failure drills are the lab's).
   */
  'scenario'?: (string);
  /**
   * The vip group, or slot-N for an ECMP slot.
   */
  'group'?: (string);
  /**
   * The director to move it to; empty: the best other one. The group goes back to its leader afterwards.
   */
  'to'?: (string);
  /**
   * Who asks (user@host), for the log.
   */
  'author'?: (string);
}

export interface RunDrillRequest__Output {
  /**
   * "switchover" (the one drill a live cluster runs; failure drills are the lab's).
   */
  'scenario': (string);
  /**
   * The vip group, or slot-N for an ECMP slot.
   */
  'group': (string);
  /**
   * The director to move it to; empty: the best other one. The group goes back to its leader afterwards.
   */
  'to': (string);
  /**
   * Who asks (user@host), for the log.
   */
  'author': (string);
}
