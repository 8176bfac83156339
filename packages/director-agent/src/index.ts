/**
 * The director agent: wiring of config, data plane, health checking and the operator surfaces, plus doctor's rules.
 * Tests start an agent in-process with `Agent.start({ configPath, dataPlane, adminSocket })` and any
 * DataPlane (and `health: { prober, clock }` with the health checker's fakes).
 */
export { Agent, type AgentOptions, type HealthOptions } from './agent.js';
export type { ApplyRecord, HealthApplyRecord, Trigger } from './apply-record.js';
export { EventLog, DEFAULT_EVENT_HISTORY, eventId, summarizeServiceChanges, type EventLogOptions } from './events.js';
export { DesiredState, type HealthLookup, type Merge, type MergedRealServer, type MergedService, type ServerHealth } from './desired.js';
export { HealthManager, type HealthEntry, type HealthEvent, type HealthManagerOptions, type HealthWatcher } from './health.js';
export {
  arpProbes, diagnose, probeTargets, CONNTRACK_ERROR, CONNTRACK_WARN, PORTS_ERROR, PORTS_WARN,
  type CheckId, type Finding,
} from './doctor.js';
// AgentOptions.log takes one: the agent's callers need not depend on @lbd/log themselves.
export { createLogger, silentLogger, LOG_LEVELS, type Logger, type LogLevel, type LogFields } from '@lbd/log';
export { run, main, parseAgentArgs, type RunDeps, type AgentArgs } from './main.js';
export { inProcessSync, SyncService, type SyncHost, type SyncHostFactory, type SyncHostOptions, type SyncHostCallbacks, type SyncReport } from './sync-host.js';
export { syncThread } from './sync-thread.js';
export { AGENT_V8_FLAGS, applyAgentV8Flags } from './heap-flags.js';
export {
  serviceStatuses, serviceStats, toWireConnection, resolveService, healthResponse, wireHealthEvent, healthFlags,
} from './views.js';
export { metricsSource, operatorSurfaces } from './operator-surfaces.js';
export type { ProbeEvent } from './health.js';
