/**
 * @lbd/operator-surfaces: what operators and their tools talk to, apart from the agent core. The admin gRPC
 * API (admin-server.ts: on the unix socket and, with mutual TLS, on agent.admin.grpcListen), the HTTPS ops
 * listener (ops-http.ts: GET /healthz and the routes it is given), Prometheus metrics (metrics.ts), the
 * live dashboard (dashboard/: its routes, its state, and lbd-dashboard, which reads an agent through its
 * admin socket), and the one mapping of errors to gRPC statuses (errors.ts). They serve what the agent
 * gives them through interfaces (AdminBackend, DashboardBackend, MetricsSource, EventSource) and know
 * nothing of the agent itself. Fakes are in `@lbd/operator-surfaces/testing`.
 */
export {
  AdminServer, METHOD_ROLES, UNIX_SOCKET_CALLER, roleNeeded, wireProblem, type AdminBackend, type AdminTcpOptions, type ApplyOptions, type ApplyOutcome,
  type DrillRecord, type EventQuery, type EventSink, type HealthSink,
} from './admin-server.js';
export { type Caller, type EventSource, type OpsRoute, type OpsSurfaces, type Role } from './ops-types.js';
export {
  OPS_LIMITS, OpsHttpServer, authorizeCertificate, certificateNames, healthzRoute, requestBody, roleAllows, roleRefusal,
  type Authorization, type Liveness, type OpsHttpOptions, type OpsLimits, type TlsListenerOptions, type TlsMaterial,
} from './ops-http.js';
export { AgentError, RequestError, toGrpcStatus } from './errors.js';
export {
  Metrics, metricsRoutes,
  type ApplySample, type CheckedServer, type ClusterCounters, type HealthTransition, type MetricsOptions, type MetricsSource, type ProbeSample,
} from './metrics.js';
export { Dashboard, STATIC_DIR, type DashboardBackend, type DashboardOptions } from './dashboard/routes.js';
export { adminApiBackend, opsRequestHandler, parseDashboardArgs, runDashboard, type DashboardArgs } from './dashboard/loopback.js';
export {
  LatencyRings, dashboardState, serverName,
  type Answers, type CounterSample, type DashboardDirector, type DashboardGroup, type DashboardServer, type DashboardService,
  type DashboardState, type DashboardSyncPeer, type LatencySample, type ServerState,
} from './dashboard/state.js';
