// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { Problem as _lbd_admin_v1_Problem, Problem__Output as _lbd_admin_v1_Problem__Output } from '../../../lbd/admin/v1/Problem.js';
import type { Long } from '@grpc/proto-loader';

export interface ApplyResponse {
  /**
   * False when the kernel already matched (nothing written, or nothing would be).
   */
  'changed'?: (boolean);
  /**
   * The rule diff, one nft command per line.
   */
  'operations'?: (string)[];
  'fullRebuild'?: (boolean);
  'dryRun'?: (boolean);
  /**
   * Connections expired because their real server was removed (services with expireOnRemove).
   */
  'expiredConnections'?: (number);
  'durationMs'?: (number | string);
  'serviceCount'?: (number);
  /**
   * sha256 (hex) of the config text.
   */
  'configSha256'?: (string);
  /**
   * Every problem of an invalid config (the call then ends with INVALID_ARGUMENT); empty otherwise.
   */
  'problems'?: (_lbd_admin_v1_Problem)[];
  /**
   * Cluster mode: the revision the config was written at (0 on a dry run or a single director).
   */
  'clusterRevision'?: (number | string | Long);
}

export interface ApplyResponse__Output {
  /**
   * False when the kernel already matched (nothing written, or nothing would be).
   */
  'changed': (boolean);
  /**
   * The rule diff, one nft command per line.
   */
  'operations': (string)[];
  'fullRebuild': (boolean);
  'dryRun': (boolean);
  /**
   * Connections expired because their real server was removed (services with expireOnRemove).
   */
  'expiredConnections': (number);
  'durationMs': (number);
  'serviceCount': (number);
  /**
   * sha256 (hex) of the config text.
   */
  'configSha256': (string);
  /**
   * Every problem of an invalid config (the call then ends with INVALID_ARGUMENT); empty otherwise.
   */
  'problems': (_lbd_admin_v1_Problem__Output)[];
  /**
   * Cluster mode: the revision the config was written at (0 on a dry run or a single director).
   */
  'clusterRevision': (number);
}
