// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto


export interface Finding {
  /**
   * "error" | "warning" | "ok"
   */
  'severity'?: (string);
  /**
   * Which check: "nat-return-path", "ip-forward", "rp-filter", "conntrack-table", "fullnat-ports",
   * "real-server-reachable", "own-address".
   */
  'check'?: (string);
  /**
   * The thing the finding is about: a real server in a service, an interface, a sysctl.
   */
  'subject'?: (string);
  /**
   * What is wrong (or, for "ok", what was checked), with the evidence.
   */
  'problem'?: (string);
  /**
   * What to do; empty for "ok".
   */
  'fix'?: (string);
}

export interface Finding__Output {
  /**
   * "error" | "warning" | "ok"
   */
  'severity': (string);
  /**
   * Which check: "nat-return-path", "ip-forward", "rp-filter", "conntrack-table", "fullnat-ports",
   * "real-server-reachable", "own-address".
   */
  'check': (string);
  /**
   * The thing the finding is about: a real server in a service, an interface, a sysctl.
   */
  'subject': (string);
  /**
   * What is wrong (or, for "ok", what was checked), with the evidence.
   */
  'problem': (string);
  /**
   * What to do; empty for "ok".
   */
  'fix': (string);
}
