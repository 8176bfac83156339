export * from './types.js';
export { DataPlaneError } from './errors.js';
export type { AddressOwner, Announce, FloatingAddress } from './addresses.js';
export {
  flowKey, sameBinding, type SyncedFlow, type FlowIdentity, type FlowEvent, type FlowEventKind, type FlowWatchHandlers, type FlowWatch, type FlowChange,
  type FlowApplyResult, type FlowTable,
} from './flows.js';
