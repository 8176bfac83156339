// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { Long } from '@grpc/proto-loader';

/**
 * Counters of the kernel's SYN proxy (/proc/net/stat/synproxy), since the director booted.
 */
export interface SynProxyStats {
  /**
   * SYNs answered with a syncookie.
   */
  'synReceived'?: (number | string | Long);
  /**
   * ACKs that brought a valid cookie back: handshakes completed, each then opened to a real server.
   */
  'cookieValid'?: (number | string | Long);
  /**
   * ACKs with a wrong or expired cookie: dropped.
   */
  'cookieInvalid'?: (number | string | Long);
  'cookieRetransmitted'?: (number | string | Long);
}

/**
 * Counters of the kernel's SYN proxy (/proc/net/stat/synproxy), since the director booted.
 */
export interface SynProxyStats__Output {
  /**
   * SYNs answered with a syncookie.
   */
  'synReceived': (number);
  /**
   * ACKs that brought a valid cookie back: handshakes completed, each then opened to a real server.
   */
  'cookieValid': (number);
  /**
   * ACKs with a wrong or expired cookie: dropped.
   */
  'cookieInvalid': (number);
  'cookieRetransmitted': (number);
}
