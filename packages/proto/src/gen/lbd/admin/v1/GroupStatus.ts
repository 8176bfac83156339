// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { Long } from '@grpc/proto-loader';

export interface GroupStatus {
  'name'?: (string);
  /**
   * Empty when vacant or unknown.
   */
  'leader'?: (string);
  'term'?: (number | string | Long);
  'sinceUnixMs'?: (number | string | Long);
  /**
   * Why the current term began.
   */
  'reason'?: (string);
  /**
   * The floating addresses the leader holds: vips, local addresses, gateways.
   */
  'addresses'?: (string)[];
  /**
   * The answering director's role in it.
   */
  'role'?: (string);
  /**
   * While the answering director leads: ms since its last beat etcd confirmed; -1 otherwise.
   */
  'beatAgeMs'?: (number | string | Long);
  /**
   * "never" | "after-delay" | "after-sync"
   */
  'preempt'?: (string);
  'preemptDelayMs'?: (number);
  /**
   * The answering director's kernel lease on the group: ms left, 0 once ended, -1 when it holds none.
   */
  'kernelLeaseLeftMs'?: (number | string | Long);
}

export interface GroupStatus__Output {
  'name': (string);
  /**
   * Empty when vacant or unknown.
   */
  'leader': (string);
  'term': (number);
  'sinceUnixMs': (number);
  /**
   * Why the current term began.
   */
  'reason': (string);
  /**
   * The floating addresses the leader holds: vips, local addresses, gateways.
   */
  'addresses': (string)[];
  /**
   * The answering director's role in it.
   */
  'role': (string);
  /**
   * While the answering director leads: ms since its last beat etcd confirmed; -1 otherwise.
   */
  'beatAgeMs': (number);
  /**
   * "never" | "after-delay" | "after-sync"
   */
  'preempt': (string);
  'preemptDelayMs': (number);
  /**
   * The answering director's kernel lease on the group: ms left, 0 once ended, -1 when it holds none.
   */
  'kernelLeaseLeftMs': (number);
}
