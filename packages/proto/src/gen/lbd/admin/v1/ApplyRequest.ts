// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { Long } from '@grpc/proto-loader';

export interface ApplyRequest {
  /**
   * YAML or JSON, at most 4 MiB.
   */
  'configText'?: (string);
  /**
   * Names the text in messages and in status, e.g. the file path lbadm read it from (1 to 256 chars).
   */
  'source'?: (string);
  /**
   * Validate and compute the rule diff only; change nothing.
   */
  'dryRun'?: (boolean);
  /**
   * Cluster mode: apply only if the cluster config is still at expect_revision (0: none yet);
   * otherwise the apply swaps on whatever revision this director has now. A single director: apply
   * only if it still runs revision expect_revision (ABORTED otherwise).
   */
  'checkRevision'?: (boolean);
  'expectRevision'?: (number | string | Long);
  /**
   * Who applies (user@host), recorded in the cluster config history.
   */
  'author'?: (string);
}

export interface ApplyRequest__Output {
  /**
   * YAML or JSON, at most 4 MiB.
   */
  'configText': (string);
  /**
   * Names the text in messages and in status, e.g. the file path lbadm read it from (1 to 256 chars).
   */
  'source': (string);
  /**
   * Validate and compute the rule diff only; change nothing.
   */
  'dryRun': (boolean);
  /**
   * Cluster mode: apply only if the cluster config is still at expect_revision (0: none yet);
   * otherwise the apply swaps on whatever revision this director has now. A single director: apply
   * only if it still runs revision expect_revision (ABORTED otherwise).
   */
  'checkRevision': (boolean);
  'expectRevision': (number);
  /**
   * Who applies (user@host), recorded in the cluster config history.
   */
  'author': (string);
}
