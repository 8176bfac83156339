/**
 * Connection sync between directors: the leader of vip groups copies its established flows to every
 * standby over gRPC (mutual TLS), numbered and acknowledged, with resync on a gap and bounded memory for
 * a slow peer; a standby injects them into its own kernel so that they survive a failover.
 */
export { ConnectionSync, realServerName, type ConnectionSyncOptions, type SyncPeer, type SyncStatus } from './sync.js';
export { SyncSender, SENDER_DEFAULTS, type Dial, type SenderLink, type SenderLinkHandlers, type SenderStatus, type OutgoingFaults } from './sender.js';
export { SyncReceiver, type ReceiverStatus, type ReceiverContext, type ReceiverLink } from './receiver.js';
export { FlowSource, serviceKeyOfFlow, copiable, type CopiedFlow, type SyncScope, type FlowSourceStats } from './source.js';
export { MalformedMessage, fromWireChange, toWireChange, type WireChange } from './wire.js';
export type { Logger } from './log.js';
