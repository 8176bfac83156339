// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { ConnSyncPeer as _lbd_admin_v1_ConnSyncPeer, ConnSyncPeer__Output as _lbd_admin_v1_ConnSyncPeer__Output } from '../../../lbd/admin/v1/ConnSyncPeer.js';
import type { Long } from '@grpc/proto-loader';

export interface ConnSyncStatus {
  'enabled'?: (boolean);
  /**
   * Why sync is off ("agent.cluster.tls is not set"); empty when enabled.
   */
  'disabledReason'?: (string);
  /**
   * Connections this director copies to its peers now (those of the groups it leads). Was `flows`: the
   * number, all the wire carries, is unchanged.
   */
  'connections'?: (number | string | Long);
  /**
   * Kernel event batches the kernel dropped (each costs every peer a snapshot).
   */
  'lossEvents'?: (number | string | Long);
  'peers'?: (_lbd_admin_v1_ConnSyncPeer)[];
}

export interface ConnSyncStatus__Output {
  'enabled': (boolean);
  /**
   * Why sync is off ("agent.cluster.tls is not set"); empty when enabled.
   */
  'disabledReason': (string);
  /**
   * Connections this director copies to its peers now (those of the groups it leads). Was `flows`: the
   * number, all the wire carries, is unchanged.
   */
  'connections': (number);
  /**
   * Kernel event batches the kernel dropped (each costs every peer a snapshot).
   */
  'lossEvents': (number);
  'peers': (_lbd_admin_v1_ConnSyncPeer__Output)[];
}
