// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto


export interface HealthCheckInfo {
  /**
   * "tcp" | "http" | "https" | "icmp" | "udp" | "exec"
   */
  'kind'?: (string);
  /**
   * What is probed: "198.19.1.12:8080" (a health port or address when the check names one), an
   * address for icmp, the command for exec.
   */
  'target'?: (string);
  /**
   * The probe in words, as its messages start: "http GET /healthz", "tcp connect to 198.19.1.12:8080".
   */
  'description'?: (string);
  /**
   * The scheduler's key: equal keys are one check, probed once for every service that has it.
   */
  'key'?: (string);
  'intervalMs'?: (number);
  'timeoutMs'?: (number);
  'rise'?: (number);
  'fall'?: (number);
}

export interface HealthCheckInfo__Output {
  /**
   * "tcp" | "http" | "https" | "icmp" | "udp" | "exec"
   */
  'kind': (string);
  /**
   * What is probed: "198.19.1.12:8080" (a health port or address when the check names one), an
   * address for icmp, the command for exec.
   */
  'target': (string);
  /**
   * The probe in words, as its messages start: "http GET /healthz", "tcp connect to 198.19.1.12:8080".
   */
  'description': (string);
  /**
   * The scheduler's key: equal keys are one check, probed once for every service that has it.
   */
  'key': (string);
  'intervalMs': (number);
  'timeoutMs': (number);
  'rise': (number);
  'fall': (number);
}
