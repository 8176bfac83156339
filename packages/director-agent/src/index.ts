/**
 * The director agent: wiring of config, data plane, health checking and admin API, plus doctor's rules.
 * Tests start an agent in-process with `Agent.start({ configPath, dataPlane, adminSocket })` and any
 * DataPlane (and `health: { prober, clock }` with the health checker's fakes).
 */
export {
  Agent, type AgentOptions, type ApplyRecord, type ApplyResultWord, type HealthApplyRecord, type HealthOptions, type Trigger,
} from './agent.js';
export { AdminServer, type AdminBackend, type ApplyOutcome, type HealthSink } from './admin-server.js';
export { DesiredState, type HealthLookup, type Merge, type MergedRealServer, type MergedService, type ServerHealth } from './desired.js';
export { HealthManager, type HealthEntry, type HealthEvent, type HealthManagerOptions, type HealthWatcher } from './health.js';
export { AgentError, RequestError, toGrpcStatus } from './errors.js';
export {
  diagnose, probeTargets, CONNTRACK_ERROR, CONNTRACK_WARN, PORTS_ERROR, PORTS_WARN,
  type CheckId, type Finding, type Severity,
} from './doctor.js';
export { createLogger, silentLogger, LOG_LEVELS, type Logger, type LogLevel, type LogFields } from './log.js';
export { run, main, parseAgentArgs, type RunDeps, type AgentArgs } from './main.js';
export {
  serviceStatuses, serviceStats, toWireConnection, resolveService, wireProblem, healthResponse, wireHealthEvent, healthFlags,
} from './views.js';
export { Metrics, metricsRoutes, GROUP_ROLES, type MetricsOptions } from './metrics.js';
export type { ProbeEvent } from './health.js';
