// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { Long } from '@grpc/proto-loader';

export interface Event {
  /**
   * Unique and sortable by time: "<13-digit unix ms>-<director>-<6-digit sequence>".
   */
  'id'?: (string);
  'timeUnixMs'?: (number | string | Long);
  /**
   * The director that recorded it (its cluster id, or the host name when alone).
   */
  'director'?: (string);
  /**
   * "role" | "vip" | "health" | "config" | "sync" | "drill" | "admin"
   */
  'kind'?: (string);
  /**
   * What changed: a vip group, a floating address, "<service> <real server>", "config", "<peer> <send|receive>",
   * a drill scenario, an admin operation.
   */
  'subject'?: (string);
  /**
   * The state before ("" when there was none) and after.
   */
  'from'?: (string);
  'to'?: (string);
  /**
   * Why, in words.
   */
  'reason'?: (string);
  'fields'?: ({[key: string]: string});
}

export interface Event__Output {
  /**
   * Unique and sortable by time: "<13-digit unix ms>-<director>-<6-digit sequence>".
   */
  'id': (string);
  'timeUnixMs': (number);
  /**
   * The director that recorded it (its cluster id, or the host name when alone).
   */
  'director': (string);
  /**
   * "role" | "vip" | "health" | "config" | "sync" | "drill" | "admin"
   */
  'kind': (string);
  /**
   * What changed: a vip group, a floating address, "<service> <real server>", "config", "<peer> <send|receive>",
   * a drill scenario, an admin operation.
   */
  'subject': (string);
  /**
   * The state before ("" when there was none) and after.
   */
  'from': (string);
  'to': (string);
  /**
   * Why, in words.
   */
  'reason': (string);
  'fields': ({[key: string]: string});
}
