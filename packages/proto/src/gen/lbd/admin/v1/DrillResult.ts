// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { DrillMove as _lbd_admin_v1_DrillMove, DrillMove__Output as _lbd_admin_v1_DrillMove__Output } from '../../../lbd/admin/v1/DrillMove.js';

export interface DrillResult {
  'scenario'?: (string);
  'group'?: (string);
  /**
   * The leader before (and after) the drill, and the director it visited.
   */
  'leader'?: (string);
  'visited'?: (string);
  /**
   * "pass" | "fail", and the result in words (one line).
   */
  'result'?: (string);
  'summary'?: (string);
  /**
   * There, then back.
   */
  'moves'?: (_lbd_admin_v1_DrillMove)[];
  /**
   * Flat figures for the drill event (RecordDrill's fields).
   */
  'fields'?: ({[key: string]: string});
}

export interface DrillResult__Output {
  'scenario': (string);
  'group': (string);
  /**
   * The leader before (and after) the drill, and the director it visited.
   */
  'leader': (string);
  'visited': (string);
  /**
   * "pass" | "fail", and the result in words (one line).
   */
  'result': (string);
  'summary': (string);
  /**
   * There, then back.
   */
  'moves': (_lbd_admin_v1_DrillMove__Output)[];
  /**
   * Flat figures for the drill event (RecordDrill's fields).
   */
  'fields': ({[key: string]: string});
}
