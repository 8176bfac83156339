/**
 * @lbd/coordinator: the only package that talks to etcd. For now: the Election interface and EtcdElection
 * with fenced leadership (timing rule in timing.ts). Registration, priorities, preemption and cluster
 * config come next (issue 4).
 */
export type { Election } from './election.js';
export { DEFAULT_TIMING, EtcdElection } from './etcd-election.js';
export type { EtcdElectionOptions } from './etcd-election.js';
export { Fence } from './fence.js';
export { MIN_TTL_MS, checkTiming, keepaliveIntervalOf, timingProblems, worstCaseTakeoverMs } from './timing.js';
export type { FenceTiming } from './timing.js';
export { systemClock, type Clock, type TimerHandle } from '@lbd/clock';
