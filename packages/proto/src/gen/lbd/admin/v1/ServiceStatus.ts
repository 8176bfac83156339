// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { AddressRange as _lbd_admin_v1_AddressRange, AddressRange__Output as _lbd_admin_v1_AddressRange__Output } from '../../../lbd/admin/v1/AddressRange.js';
import type { RealServerStatus as _lbd_admin_v1_RealServerStatus, RealServerStatus__Output as _lbd_admin_v1_RealServerStatus__Output } from '../../../lbd/admin/v1/RealServerStatus.js';
import type { Long } from '@grpc/proto-loader';

export interface ServiceStatus {
  'name'?: (string);
  /**
   * "198.18.0.10:80/tcp", "[fd00::10]:80/tcp": the one way a service is named.
   */
  'key'?: (string);
  'vip'?: (string);
  'port'?: (number);
  'protocol'?: (string);
  'mode'?: (string);
  'scheduler'?: (string);
  /**
   * Seconds of source-address affinity; 0 = off.
   */
  'persistenceSec'?: (number);
  /**
   * The fullnat SNAT pool; unset in nat mode.
   */
  'localAddresses'?: (_lbd_admin_v1_AddressRange | null);
  /**
   * Words such as "expire-on-remove"; "not-in-kernel" when the kernel lacks a configured service (the
   * last apply failed) and "not-in-config" for a service the kernel has but the config does not.
   * While every checked real server is down: "all-down" and the fallback in force, "fallback-drop",
   * "fallback-reject", "fallback-sorry-server" or "fallback-keep-last".
   */
  'flags'?: (string)[];
  'realServers'?: (_lbd_admin_v1_RealServerStatus)[];
  /**
   * The kernel answers the service's SYNs with syncookies (synProxy).
   */
  'synProxy'?: (boolean);
  /**
   * The most conntrack entries its new connections may hold on this director; 0 = no limit.
   */
  'connectionLimit'?: (number);
  /**
   * Packets of new connections the limit dropped (SYNs and their retransmissions), since the limit was set.
   */
  'limitDrops'?: (number | string | Long);
}

export interface ServiceStatus__Output {
  'name': (string);
  /**
   * "198.18.0.10:80/tcp", "[fd00::10]:80/tcp": the one way a service is named.
   */
  'key': (string);
  'vip': (string);
  'port': (number);
  'protocol': (string);
  'mode': (string);
  'scheduler': (string);
  /**
   * Seconds of source-address affinity; 0 = off.
   */
  'persistenceSec': (number);
  /**
   * The fullnat SNAT pool; unset in nat mode.
   */
  'localAddresses': (_lbd_admin_v1_AddressRange__Output | null);
  /**
   * Words such as "expire-on-remove"; "not-in-kernel" when the kernel lacks a configured service (the
   * last apply failed) and "not-in-config" for a service the kernel has but the config does not.
   * While every checked real server is down: "all-down" and the fallback in force, "fallback-drop",
   * "fallback-reject", "fallback-sorry-server" or "fallback-keep-last".
   */
  'flags': (string)[];
  'realServers': (_lbd_admin_v1_RealServerStatus__Output)[];
  /**
   * The kernel answers the service's SYNs with syncookies (synProxy).
   */
  'synProxy': (boolean);
  /**
   * The most conntrack entries its new connections may hold on this director; 0 = no limit.
   */
  'connectionLimit': (number);
  /**
   * Packets of new connections the limit dropped (SYNs and their retransmissions), since the limit was set.
   */
  'limitDrops': (number);
}
