// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { Long } from '@grpc/proto-loader';

export interface BgpSessionStatus {
  'router'?: (string);
  'asn'?: (number);
  /**
   * idle | connect | active | opensent | openconfirm | established | unknown
   */
  'state'?: (string);
  /**
   * Paths sent on this session, when the speaker says (-1: unknown).
   */
  'advertised'?: (number | string | Long);
}

export interface BgpSessionStatus__Output {
  'router': (string);
  'asn': (number);
  /**
   * idle | connect | active | opensent | openconfirm | established | unknown
   */
  'state': (string);
  /**
   * Paths sent on this session, when the speaker says (-1: unknown).
   */
  'advertised': (number);
}
