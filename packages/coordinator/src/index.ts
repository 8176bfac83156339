/**
 * @lbd/coordinator: the only package that talks to etcd (through Kv, kv.ts). Registration of directors, one
 * election per vip group with fenced leadership, priorities and preemption (decisions: decide.ts, a pure
 * step; I/O: group-election.ts; rule: timing.ts), and beside the elections the Coordinator (coordinator.ts):
 * planned switchovers, the cluster config with its history (config-store.ts) and the cluster's event
 * history (event-store.ts). Fakes (FakeCoordinator, MemoryKv, FakeClock) are in `@lbd/coordinator/testing`.
 */
export { EtcdConfigClient, type ConfigWrite, type StoredConfig } from './config-store.js';
export { etcdRolePlan, etcdRoleScript, type EtcdRolePlan } from './rbac.js';
export { EtcdCoordinator, type Coordinator, type FailoverResult, type ListedEvents } from './coordinator.js';
export { Elections, REGISTRATION_TTL_SEC } from './elections.js';
export type { ElectionView, ElectionsOptions } from './elections.js';
export { DEFAULT_EVENTS_KEPT } from './event-store.js';
export type { EtcdTlsMaterial } from './kv.js';
export type { EventStoreLog, EventStoreOptions, EventStoreStats } from './event-store.js';
export type { ClusterStatus, CoordinatorOptions, GroupRecordStatus } from './coordinator.js';
export { GroupElection } from './group-election.js';
export { decide, initialState, leaseForMs } from './decide.js';
export type { Decision, ElectionAction, ElectionEvent, ElectionState, Observation, SeenRecord, World } from './decide.js';
export type { BeatOutcome, GroupHooks, GroupSettings, PeerTransport, PromiseReply, PromiseRequest, Transition } from './group-election.js';
export type { ConfigRecord, DirectorRecord, GroupView, LeaderRecord } from './records.js';
export { TIMING_PROFILES, checkTiming, kernelLeaseMs, timingProblems, worstCaseTakeoverMs } from './timing.js';
export type { ElectionTiming, TimingProfile } from './timing.js';
export { systemClock, type Clock, type TimerHandle } from '@lbd/clock';
