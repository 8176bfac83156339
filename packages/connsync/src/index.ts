/**
 * Connection sync between directors: the leader of vip groups (and the owner of ECMP slots) copies its established
 * connections to every standby over gRPC (mutual TLS), numbered and acknowledged, with resync on a gap and bounded memory for
 * a slow peer; a standby injects them into its own kernel so that they survive a failover.
 */
export { ConnectionSync, realServerName, type ConnectionSyncOptions, type SyncStatus } from './sync.js';
export { SyncSender, SENDER_DEFAULTS, type Dial, type SenderLink, type SenderLinkHandlers, type SenderStatus, type OutgoingFaults } from './sender.js';
export { SyncReceiver, type ReceiverStatus, type ReceiverContext, type ReceiverLink } from './receiver.js';
export { ConnectionSource, serviceKeyOfConnection, copiable, COPIED_TCP_STATES, YOUNG_STATES, ENDED_TCP_STATES, type CopiedConnection, type SyncScope, type ScopeEntry, type ConnectionSourceStats } from './source.js';
export { SlotMap, type LedSlots } from './slots.js';
export { LagWindow, LAG_WINDOW_MS, type LagQuantiles } from './lag-window.js';
export { bindingOf, holdingFromReplies, holdingReplies, type GroupHolding, type GroupState, type HeldConnection } from './holding.js';
export { MalformedMessage, fromWireChange, toWireChange, type WireChange } from './wire.js';
