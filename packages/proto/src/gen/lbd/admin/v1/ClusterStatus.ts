// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { DirectorStatus as _lbd_admin_v1_DirectorStatus, DirectorStatus__Output as _lbd_admin_v1_DirectorStatus__Output } from '../../../lbd/admin/v1/DirectorStatus.js';
import type { GroupStatus as _lbd_admin_v1_GroupStatus, GroupStatus__Output as _lbd_admin_v1_GroupStatus__Output } from '../../../lbd/admin/v1/GroupStatus.js';
import type { ConnSyncStatus as _lbd_admin_v1_ConnSyncStatus, ConnSyncStatus__Output as _lbd_admin_v1_ConnSyncStatus__Output } from '../../../lbd/admin/v1/ConnSyncStatus.js';
import type { EcmpStatus as _lbd_admin_v1_EcmpStatus, EcmpStatus__Output as _lbd_admin_v1_EcmpStatus__Output } from '../../../lbd/admin/v1/EcmpStatus.js';
import type { Long } from '@grpc/proto-loader';

export interface ClusterStatus {
  /**
   * False for a single director with a config file (no etcd); every other field is then empty.
   */
  'clustered'?: (boolean);
  /**
   * The director that answered.
   */
  'self'?: (string);
  'etcdReachable'?: (boolean);
  'etcdEndpoints'?: (string)[];
  /**
   * Worst case from a leader's death to a standby leading, from the timing rule (plus one etcd write
   * and the address claim).
   */
  'worstCaseTakeoverMs'?: (number);
  /**
   * "default" | "fast" | "relaxed"
   */
  'timingProfile'?: (string);
  'beatIntervalMs'?: (number);
  'safetyWindowMs'?: (number);
  'takeoverAfterMs'?: (number);
  'directors'?: (_lbd_admin_v1_DirectorStatus)[];
  'groups'?: (_lbd_admin_v1_GroupStatus)[];
  /**
   * The cluster config revision this director runs (0: none yet).
   */
  'configRevision'?: (number | string | Long);
  /**
   * Connection sync as this director sees it.
   */
  'sync'?: (_lbd_admin_v1_ConnSyncStatus | null);
  /**
   * Where this director's election runs: "election thread, SCHED_FIFO 10 (thread 1234)", or why it runs
   * at normal priority.
   */
  'electionPlacement'?: (string);
  /**
   * How late the election thread's own timer ran over its last 4 096 ticks (what a beat would suffer).
   */
  'electionTickLateP99Ms'?: (number | string);
  'electionTickLateMaxMs'?: (number | string);
  /**
   * This director's part in the ECMP tier (its slots are among `groups`, named slot-<i>); unset when it
   * is not in the tier.
   */
  'ecmp'?: (_lbd_admin_v1_EcmpStatus | null);
}

export interface ClusterStatus__Output {
  /**
   * False for a single director with a config file (no etcd); every other field is then empty.
   */
  'clustered': (boolean);
  /**
   * The director that answered.
   */
  'self': (string);
  'etcdReachable': (boolean);
  'etcdEndpoints': (string)[];
  /**
   * Worst case from a leader's death to a standby leading, from the timing rule (plus one etcd write
   * and the address claim).
   */
  'worstCaseTakeoverMs': (number);
  /**
   * "default" | "fast" | "relaxed"
   */
  'timingProfile': (string);
  'beatIntervalMs': (number);
  'safetyWindowMs': (number);
  'takeoverAfterMs': (number);
  'directors': (_lbd_admin_v1_DirectorStatus__Output)[];
  'groups': (_lbd_admin_v1_GroupStatus__Output)[];
  /**
   * The cluster config revision this director runs (0: none yet).
   */
  'configRevision': (number);
  /**
   * Connection sync as this director sees it.
   */
  'sync': (_lbd_admin_v1_ConnSyncStatus__Output | null);
  /**
   * Where this director's election runs: "election thread, SCHED_FIFO 10 (thread 1234)", or why it runs
   * at normal priority.
   */
  'electionPlacement': (string);
  /**
   * How late the election thread's own timer ran over its last 4 096 ticks (what a beat would suffer).
   */
  'electionTickLateP99Ms': (number);
  'electionTickLateMaxMs': (number);
  /**
   * This director's part in the ECMP tier (its slots are among `groups`, named slot-<i>); unset when it
   * is not in the tier.
   */
  'ecmp': (_lbd_admin_v1_EcmpStatus__Output | null);
}
