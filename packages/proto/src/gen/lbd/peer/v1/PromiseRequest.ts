// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/peer.proto

import type { Long } from '@grpc/proto-loader';

export interface PromiseRequest {
  /**
   * The asking director's id.
   */
  'from'?: (string);
  'group'?: (string);
  'term'?: (number | string | Long);
  'durationMs'?: (number);
  /**
   * The leader's last beat that etcd confirmed to it: a peer that has seen two later ones knows the
   * leader's beats still land (etcd is slow, not gone) and promises.
   */
  'beat'?: (number | string | Long);
}

export interface PromiseRequest__Output {
  /**
   * The asking director's id.
   */
  'from': (string);
  'group': (string);
  'term': (number);
  'durationMs': (number);
  /**
   * The leader's last beat that etcd confirmed to it: a peer that has seen two later ones knows the
   * leader's beats still land (etcd is slow, not gone) and promises.
   */
  'beat': (number);
}
