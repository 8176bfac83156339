/**
 * @lbd/health-checker: probes real servers and decides when they are up or down.
 * Pure core (the state machine, the scheduler on an injected Clock) and thin probers (tcp, http/https,
 * icmp, udp, exec). It does not know services or program the data plane: the agent maps transitions to
 * weights. Fakes (FakeClock, FakeProber) are in `@lbd/health-checker/testing`.
 */
export type { CheckKind, ProbeOptions, ProbeReason, ProbeResult, ProbeTarget, Prober } from './types.js';
export { CHECK_KINDS } from './types.js';
export { describeTarget, endpoint } from './attempt.js';
export { checkSpecFor } from './from-config.js';
export { systemClock, type Clock, type TimerHandle } from '@lbd/clock';
export {
  DEFAULT_FLAP_POLICY, formatDuration, initialHealth, nextHealth, slowStartWeight,
  type FlapPolicy, type HealthRecord, type HealthTransition, type Thresholds,
} from './health.js';
export {
  ExecProber, HttpProber, IcmpProber, ProberSet, TcpProber, UdpProber, createProber, formatStatus, statusMatches,
} from './probers/index.js';
export {
  HealthScheduler, checkKey,
  type CheckSpec, type HealthSchedulerEvents, type HealthSchedulerOptions, type ResultEvent, type SchedulerStats,
  type SetResult, type TransitionEvent,
} from './scheduler.js';
