// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto


export interface Problem {
  /**
   * "services[1].realServers[0].weight"
   */
  'path'?: (string);
  /**
   * The offending value as JSON; empty when the value is missing.
   */
  'value'?: (string);
  /**
   * What is wrong: "is not an IPv4 or IPv6 address".
   */
  'rule'?: (string);
  /**
   * What to do about it.
   */
  'fix'?: (string);
  /**
   * The problem as one line, as lbd-agent and lbadm validate print it.
   */
  'text'?: (string);
}

export interface Problem__Output {
  /**
   * "services[1].realServers[0].weight"
   */
  'path': (string);
  /**
   * The offending value as JSON; empty when the value is missing.
   */
  'value': (string);
  /**
   * What is wrong: "is not an IPv4 or IPv6 address".
   */
  'rule': (string);
  /**
   * What to do about it.
   */
  'fix': (string);
  /**
   * The problem as one line, as lbd-agent and lbadm validate print it.
   */
  'text': (string);
}
