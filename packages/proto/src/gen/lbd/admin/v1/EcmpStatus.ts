// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { BgpSessionStatus as _lbd_admin_v1_BgpSessionStatus, BgpSessionStatus__Output as _lbd_admin_v1_BgpSessionStatus__Output } from '../../../lbd/admin/v1/BgpSessionStatus.js';

/**
 * The ECMP tier's BGP side on one director: its sessions to the routers and the paths it announces.
 */
export interface EcmpStatus {
  'sessions'?: (_lbd_admin_v1_BgpSessionStatus)[];
  /**
   * Paths announced now (each ECMP vip once per slot).
   */
  'pathsAnnounced'?: (number);
  /**
   * Why every path is withdrawn although the tier has vips (the director is unfit to serve); empty otherwise.
   */
  'withdrawnBecause'?: (string);
  /**
   * The speaker's last error (gobgpd unreachable, refused), empty when the last change went through.
   */
  'lastError'?: (string);
}

/**
 * The ECMP tier's BGP side on one director: its sessions to the routers and the paths it announces.
 */
export interface EcmpStatus__Output {
  'sessions': (_lbd_admin_v1_BgpSessionStatus__Output)[];
  /**
   * Paths announced now (each ECMP vip once per slot).
   */
  'pathsAnnounced': (number);
  /**
   * Why every path is withdrawn although the tier has vips (the director is unfit to serve); empty otherwise.
   */
  'withdrawnBecause': (string);
  /**
   * The speaker's last error (gobgpd unreachable, refused), empty when the last change went through.
   */
  'lastError': (string);
}
