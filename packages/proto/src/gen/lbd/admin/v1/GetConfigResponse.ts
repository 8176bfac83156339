// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { Long } from '@grpc/proto-loader';

export interface GetConfigResponse {
  /**
   * YAML or JSON, as applied (comments and order as its author wrote them).
   */
  'configText'?: (string);
  /**
   * What an Apply of an edited text passes as expect_revision.
   */
  'revision'?: (number | string | Long);
  /**
   * Whether this is a cluster config (no agent section; it must be validated as one).
   */
  'clustered'?: (boolean);
  /**
   * Where the text came from: the config file, an Apply's source, or the etcd revision.
   */
  'source'?: (string);
}

export interface GetConfigResponse__Output {
  /**
   * YAML or JSON, as applied (comments and order as its author wrote them).
   */
  'configText': (string);
  /**
   * What an Apply of an edited text passes as expect_revision.
   */
  'revision': (number);
  /**
   * Whether this is a cluster config (no agent section; it must be validated as one).
   */
  'clustered': (boolean);
  /**
   * Where the text came from: the config file, an Apply's source, or the etcd revision.
   */
  'source': (string);
}
