/**
 * The director agent: wiring of config, data plane and admin API, plus doctor's rules. Tests start an
 * agent in-process with `Agent.start({ configPath, dataPlane, adminSocket })` and any DataPlane.
 */
export { Agent, type AgentOptions, type ApplyRecord, type ApplyResultWord, type Trigger } from './agent.js';
export { AdminServer, type AdminBackend, type ApplyOutcome } from './admin-server.js';
export { AgentError, RequestError, toGrpcStatus } from './errors.js';
export {
  diagnose, probeTargets, CONNTRACK_ERROR, CONNTRACK_WARN, PORTS_ERROR, PORTS_WARN,
  type CheckId, type Finding, type Severity,
} from './doctor.js';
export { createLogger, silentLogger, LOG_LEVELS, type Logger, type LogLevel, type LogFields } from './log.js';
export { run, main, parseAgentArgs, type RunDeps, type AgentArgs } from './main.js';
export { serviceStatuses, serviceStats, toWireConnection, resolveService, wireProblem } from './views.js';
