/**
 * The director agent: wiring of config, data plane, health checking and admin API, plus doctor's rules.
 * Tests start an agent in-process with `Agent.start({ configPath, dataPlane, adminSocket })` and any
 * DataPlane (and `health: { prober, clock }` with the health checker's fakes).
 */
export { Agent, type AgentOptions, type HealthOptions } from './agent.js';
export type { ApplyRecord, ApplyResultWord, HealthApplyRecord, Trigger } from './apply-record.js';
export {
  AdminServer, METHOD_ROLES, UNIX_SOCKET_CALLER, roleNeeded, type AdminBackend, type AdminTcpOptions, type ApplyOutcome, type DrillRecord,
  type EventQuery, type EventSink, type HealthSink,
} from './admin-server.js';
export { EventLog, DEFAULT_EVENT_HISTORY, eventId, isLbdEvent, summarizeServiceChanges, type EventLogOptions } from './events.js';
export { EVENT_KINDS, type Caller, type EventKind, type EventSource, type LbdEvent, type OpsRoute, type OpsSurfaces, type Role } from './ops-types.js';
export {
  OPS_LIMITS, OpsHttpServer, authorizeCertificate, certificateNames, healthzRoute, requestBody, roleAllows, roleRefusal,
  type Authorization, type Liveness, type OpsHttpOptions, type OpsLimits, type TlsListenerOptions, type TlsMaterial,
} from './ops-http.js';
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
export { Dashboard, STATIC_DIR, type DashboardBackend, type DashboardOptions } from './dashboard/routes.js';
export { adminApiBackend, opsRequestHandler, parseDashboardArgs, runDashboard, type DashboardArgs } from './dashboard/loopback.js';
export {
  LatencyRings, dashboardState, serverName,
  type Answers, type CounterSample, type DashboardDirector, type DashboardGroup, type DashboardServer, type DashboardService,
  type DashboardState, type DashboardSyncPeer, type LatencySample, type ServerState,
} from './dashboard/state.js';
export { Metrics, metricsRoutes, GROUP_ROLES, type MetricsOptions } from './metrics.js';
export { operatorSurfaces } from './operator-surfaces.js';
export type { ProbeEvent } from './health.js';
