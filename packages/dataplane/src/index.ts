export * from './types.js';
export { DataPlaneError } from './errors.js';
export { realServerIdsOf } from './real-servers.js';
export type { AddressOwner, Announce, FloatingAddress } from './addresses.js';
export {
  connectionKey, sameBinding, sameProxyState, withProxyState, type SynProxyState, type SeqAdjust, type SeqAdjustDirection, type ConnectionBinding, type SyncedConnection, type ConnectionIdentity, type ConnectionEvent, type ConnectionEventKind, type ConnectionWatchHandlers, type ConnectionWatch, type ConnectionChange,
  type ConnectionApplyResult, type ConnectionApplyOptions, type ConnectionTable,
} from './connections.js';
