// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { Long } from '@grpc/proto-loader';

export interface ListEventsRequest {
  /**
   * Events at or after this time (milliseconds since the Unix epoch); 0 = every kept one.
   */
  'sinceUnixMs'?: (number | string | Long);
  /**
   * Keep the stream open and send new events as they happen.
   */
  'follow'?: (boolean);
  /**
   * "local" | "cluster"; empty = "cluster" (which is "local" on a director without agent.cluster).
   */
  'scope'?: (string);
  /**
   * At most this many kept events (the newest), before the followed ones; 0 = 1000. At most 10000.
   */
  'limit'?: (number);
  /**
   * Only this kind ("role", "vip", "health", "config", "sync", "drill", "admin"); empty = all.
   */
  'kind'?: (string);
  /**
   * Only events recorded by this director; empty = all.
   */
  'director'?: (string);
}

export interface ListEventsRequest__Output {
  /**
   * Events at or after this time (milliseconds since the Unix epoch); 0 = every kept one.
   */
  'sinceUnixMs': (number);
  /**
   * Keep the stream open and send new events as they happen.
   */
  'follow': (boolean);
  /**
   * "local" | "cluster"; empty = "cluster" (which is "local" on a director without agent.cluster).
   */
  'scope': (string);
  /**
   * At most this many kept events (the newest), before the followed ones; 0 = 1000. At most 10000.
   */
  'limit': (number);
  /**
   * Only this kind ("role", "vip", "health", "config", "sync", "drill", "admin"); empty = all.
   */
  'kind': (string);
  /**
   * Only events recorded by this director; empty = all.
   */
  'director': (string);
}
