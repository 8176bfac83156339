// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { Long } from '@grpc/proto-loader';

export interface WatchHealthRequest {
  /**
   * Send the kept transitions at or after this time (milliseconds since the Unix epoch) first;
   * 0 = all of them. A time in the future sends only live transitions.
   */
  'sinceUnixMs'?: (number | string | Long);
}

export interface WatchHealthRequest__Output {
  /**
   * Send the kept transitions at or after this time (milliseconds since the Unix epoch) first;
   * 0 = all of them. A time in the future sends only live transitions.
   */
  'sinceUnixMs': (number);
}
