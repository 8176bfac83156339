// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { Long } from '@grpc/proto-loader';

export interface DirectorGroup {
  'group'?: (string);
  /**
   * "leader" | "fail-static" | "standby" | "unhealthy"
   */
  'role'?: (string);
  /**
   * The last transition's reason and time.
   */
  'reason'?: (string);
  'atUnixMs'?: (number | string | Long);
  /**
   * Time left on its kernel lease for the group (the kernel stops serving the group's addresses then,
   * whatever its agent does): 0 once ended, -1 when it holds none or its peer link did not answer.
   */
  'kernelLeaseLeftMs'?: (number | string | Long);
}

export interface DirectorGroup__Output {
  'group': (string);
  /**
   * "leader" | "fail-static" | "standby" | "unhealthy"
   */
  'role': (string);
  /**
   * The last transition's reason and time.
   */
  'reason': (string);
  'atUnixMs': (number);
  /**
   * Time left on its kernel lease for the group (the kernel stops serving the group's addresses then,
   * whatever its agent does): 0 once ended, -1 when it holds none or its peer link did not answer.
   */
  'kernelLeaseLeftMs': (number);
}
