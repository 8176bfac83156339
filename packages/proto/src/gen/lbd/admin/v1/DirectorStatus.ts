// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { DirectorGroup as _lbd_admin_v1_DirectorGroup, DirectorGroup__Output as _lbd_admin_v1_DirectorGroup__Output } from '../../../lbd/admin/v1/DirectorGroup.js';
import type { Long } from '@grpc/proto-loader';

export interface DirectorStatus {
  'id'?: (string);
  'version'?: (string);
  'healthy'?: (boolean);
  'problems'?: (string)[];
  /**
   * Priority per vip group.
   */
  'priorities'?: ({[key: string]: number});
  /**
   * Time left on its registration lease; -1 when unknown.
   */
  'leaseLeftMs'?: (number | string | Long);
  'peerAddress'?: (string);
  /**
   * Whether the answering director reaches it over the peer link (always true for itself).
   */
  'peerReachable'?: (boolean);
  'groups'?: (_lbd_admin_v1_DirectorGroup)[];
}

export interface DirectorStatus__Output {
  'id': (string);
  'version': (string);
  'healthy': (boolean);
  'problems': (string)[];
  /**
   * Priority per vip group.
   */
  'priorities': ({[key: string]: number});
  /**
   * Time left on its registration lease; -1 when unknown.
   */
  'leaseLeftMs': (number);
  'peerAddress': (string);
  /**
   * Whether the answering director reaches it over the peer link (always true for itself).
   */
  'peerReachable': (boolean);
  'groups': (_lbd_admin_v1_DirectorGroup__Output)[];
}
