// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/sync.proto

import type { GroupConnection as _lbd_peer_v1_GroupConnection, GroupConnection__Output as _lbd_peer_v1_GroupConnection__Output } from '../../../lbd/peer/v1/GroupConnection.js';
import type { Long } from '@grpc/proto-loader';

/**
 * The first reply carries the group's state; every reply carries a batch of its connections.
 */
export interface GroupConnectionsReply {
  'director'?: (string);
  /**
   * This director's role in the group now: leader, standby, ... as in cluster status.
   */
  'role'?: (string);
  /**
   * Wall-clock times (Unix ms) of this director's last claim and last release of the group's addresses;
   * 0: none since the agent started.
   */
  'claimedAtUnixMs'?: (number | string | Long);
  'releasedAtUnixMs'?: (number | string | Long);
  /**
   * When the kernel's table was read.
   */
  'readAtUnixMs'?: (number | string | Long);
  'connections'?: (_lbd_peer_v1_GroupConnection)[];
  /**
   * Packets this director's kernel has dropped since its lease tables were made because they arrived at
   * (or would have left from) a floating address of a group it did not hold the kernel lease for: during a
   * move, what reached the wrong director. A counter over all its groups; -1 when it cannot be read. In the
   * first reply.
   */
  'leaseDroppedPackets'?: (number | string | Long);
}

/**
 * The first reply carries the group's state; every reply carries a batch of its connections.
 */
export interface GroupConnectionsReply__Output {
  'director': (string);
  /**
   * This director's role in the group now: leader, standby, ... as in cluster status.
   */
  'role': (string);
  /**
   * Wall-clock times (Unix ms) of this director's last claim and last release of the group's addresses;
   * 0: none since the agent started.
   */
  'claimedAtUnixMs': (number);
  'releasedAtUnixMs': (number);
  /**
   * When the kernel's table was read.
   */
  'readAtUnixMs': (number);
  'connections': (_lbd_peer_v1_GroupConnection__Output)[];
  /**
   * Packets this director's kernel has dropped since its lease tables were made because they arrived at
   * (or would have left from) a floating address of a group it did not hold the kernel lease for: during a
   * move, what reached the wrong director. A counter over all its groups; -1 when it cannot be read. In the
   * first reply.
   */
  'leaseDroppedPackets': (number);
}
