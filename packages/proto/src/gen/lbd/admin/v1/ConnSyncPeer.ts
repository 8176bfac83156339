// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { Long } from '@grpc/proto-loader';

export interface ConnSyncPeer {
  'peer'?: (string);
  /**
   * "to": this director sends (it leads); "from": it receives (it stands by).
   */
  'direction'?: (string);
  /**
   * to: connecting | snapshot | streaming | down; from: snapshot | streaming | resync | ended
   */
  'state'?: (string);
  /**
   * to: the peer acknowledged a whole snapshot and nothing waits; from: the groups whose snapshot completed.
   */
  'caughtUp'?: (boolean);
  'groups'?: (string)[];
  /**
   * to: changes sent; from: messages received.
   */
  'sent'?: (number | string | Long);
  'received'?: (number | string | Long);
  /**
   * Connections injected into the receiving kernel (as the receiver counts them).
   */
  'injected'?: (number | string | Long);
  'removed'?: (number | string | Long);
  'failed'?: (number | string | Long);
  'snapshots'?: (number | string | Long);
  'resyncs'?: (number | string | Long);
  /**
   * to: changes waiting behind the window.
   */
  'queued'?: (number | string | Long);
  /**
   * to: from the kernel event here to the peer's acknowledgement, over the messages acknowledged in the last
   * 10 s (0 with none).
   */
  'lagP50Ms'?: (number | string);
  'lagP99Ms'?: (number | string);
  'lastError'?: (string);
}

export interface ConnSyncPeer__Output {
  'peer': (string);
  /**
   * "to": this director sends (it leads); "from": it receives (it stands by).
   */
  'direction': (string);
  /**
   * to: connecting | snapshot | streaming | down; from: snapshot | streaming | resync | ended
   */
  'state': (string);
  /**
   * to: the peer acknowledged a whole snapshot and nothing waits; from: the groups whose snapshot completed.
   */
  'caughtUp': (boolean);
  'groups': (string)[];
  /**
   * to: changes sent; from: messages received.
   */
  'sent': (number);
  'received': (number);
  /**
   * Connections injected into the receiving kernel (as the receiver counts them).
   */
  'injected': (number);
  'removed': (number);
  'failed': (number);
  'snapshots': (number);
  'resyncs': (number);
  /**
   * to: changes waiting behind the window.
   */
  'queued': (number);
  /**
   * to: from the kernel event here to the peer's acknowledgement, over the messages acknowledged in the last
   * 10 s (0 with none).
   */
  'lagP50Ms': (number);
  'lagP99Ms': (number);
  'lastError': (string);
}
