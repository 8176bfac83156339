export { NftDataPlane, type NftDataPlaneOptions } from './nft-dataplane.js';
export { localRunner, netnsRunner, type CommandRunner, type CommandResult } from './runner.js';
export {
  renderService, renderFullScript, diffTables, emptyTable, realServerKey, HASH_SEED, SCHEMA_VERSION, TABLE_NAME, type ServiceFragment,
  type TableModel, type NftFamily,
} from './model.js';
export { parseTable } from './parse.js';
export { buildSlotTable, reduceWeights, smoothWeightedSequence, type SlotTable, type Selector } from './schedule.js';
export { buildMaglevTable, maglevTableSize, nextPrime, type MaglevRealServer } from './maglev.js';
export { parseConntrack, parseConntrackLine, type ConntrackEntry, type ConntrackLine } from './conntrack.js';
export { parseEventLine, type EventLine } from './ctnetlink.js';
export { ctnlWriterAddon } from './ctnl-writer.js';
export { ConntrackConnectionTable, defaultCtnlHelper, listConntrack, type ConntrackConnectionTableOptions, type CtnlHelper, type CtnlWriterKind } from './connection-table.js';
export { planTables, type Plan, type Leaving } from './plan.js';
export { KernelAddressOwner, type KernelAddressOwnerOptions } from './addresses.js';
export { KernelLease, readLeaseDrops, type KernelLeaseOptions } from './lease.js';
export { raiseThreadToRealtime } from './realtime.js';
