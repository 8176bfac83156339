// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { ApplyRecord as _lbd_admin_v1_ApplyRecord, ApplyRecord__Output as _lbd_admin_v1_ApplyRecord__Output } from '../../../lbd/admin/v1/ApplyRecord.js';
import type { Long } from '@grpc/proto-loader';

export interface AgentInfo {
  /**
   * The config file the agent watches and persists applied configs to.
   */
  'configPath'?: (string);
  /**
   * Where the running config came from: the config path, or the `source` of the Apply that set it.
   */
  'configSource'?: (string);
  /**
   * sha256 (hex) of the running config's text.
   */
  'configSha256'?: (string);
  /**
   * 1 for the config loaded at start, +1 for every config accepted since.
   */
  'configRevision'?: (number | string | Long);
  /**
   * Number of services in the running config.
   */
  'serviceCount'?: (number);
  'adminSocket'?: (string);
  'pid'?: (number);
  /**
   * RFC 3339.
   */
  'startedAt'?: (string);
  /**
   * The most recent apply attempt, successful or not.
   */
  'lastApply'?: (_lbd_admin_v1_ApplyRecord | null);
}

export interface AgentInfo__Output {
  /**
   * The config file the agent watches and persists applied configs to.
   */
  'configPath': (string);
  /**
   * Where the running config came from: the config path, or the `source` of the Apply that set it.
   */
  'configSource': (string);
  /**
   * sha256 (hex) of the running config's text.
   */
  'configSha256': (string);
  /**
   * 1 for the config loaded at start, +1 for every config accepted since.
   */
  'configRevision': (number);
  /**
   * Number of services in the running config.
   */
  'serviceCount': (number);
  'adminSocket': (string);
  'pid': (number);
  /**
   * RFC 3339.
   */
  'startedAt': (string);
  /**
   * The most recent apply attempt, successful or not.
   */
  'lastApply': (_lbd_admin_v1_ApplyRecord__Output | null);
}
