// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto


export interface ProbeResultInfo {
  'ok'?: (boolean);
  /**
   * A closed set: "ok", "timeout", "refused", "reset", "unreachable", "status", "body-mismatch",
   * "reply-mismatch", "exit-code", "tls", "error".
   */
  'reason'?: (string);
  /**
   * Words: "http GET /: got 500, want 200-399".
   */
  'message'?: (string);
  'latencyMs'?: (number | string);
}

export interface ProbeResultInfo__Output {
  'ok': (boolean);
  /**
   * A closed set: "ok", "timeout", "refused", "reset", "unreachable", "status", "body-mismatch",
   * "reply-mismatch", "exit-code", "tls", "error".
   */
  'reason': (string);
  /**
   * Words: "http GET /: got 500, want 200-399".
   */
  'message': (string);
  'latencyMs': (number);
}
