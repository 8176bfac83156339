import { ConfigError, EXIT, LBD_VERSION, nearestName, parseConfig } from '@lbd/config';
import { DataPlaneError, type DataPlane, type ConnectionTable } from '@lbd/dataplane';
import { AgentError } from '@lbd/operator-surfaces';
import { createLogger, type Logger, type LogLevel } from '@lbd/log';
import { Agent } from './agent.js';
import { readConfigText } from './config-file.js';
import { createDefaultDataPlane, createDefaultLeaseDrops, ctnlHelperFromEnv, ctnlWriterFromEnv, EnvError, tcpConnectorFromEnv } from './default-dataplane.js';
import { ProberSet, TcpProber } from '@lbd/health-checker';
import { electionThread, type ElectionHostFactory } from './election-thread.js';
import { applyAgentV8Flags } from './heap-flags.js';
import { operatorSurfaces } from './operator-surfaces.js';
import { inProcessSync } from './sync-host.js';
import { syncThread } from './sync-thread.js';

/**
 * lbd-agent's command line: flags, start-up order, signals and exit codes. `run` returns the exit code
 * and is what tests call; `main` is the only function that exits the process.
 */

const USAGE = 'usage: lbd-agent --config PATH [--admin-socket PATH] [--log-level info|debug]';
const HELP = `${USAGE}

Programs this director's nftables data plane from the config file and keeps it that way:
re-applies on SIGHUP and when the file changes, serves the admin API (lbadm) on a root-only
unix socket (and, with agent.admin, over TCP and HTTPS with mutual TLS and a role per client
certificate), and logs JSON lines to stdout. SIGTERM/SIGINT stop the agent; the kernel keeps
forwarding.

With agent.cluster in the file, the director is one of a cluster: the services come from etcd
(lbadm apply -f), it takes part in the election of every vip group, and claims the group's
vips and local addresses while it leads. Stopping it then hands its groups to the standbys.

  --config PATH         the config file (YAML or JSON); applied configs are persisted here
  --admin-socket PATH   the admin socket (default: agent.adminSocket from the config,
                        itself /run/lbd/admin.sock by default)
  --log-level LEVEL     info (default) or debug
  --version             prints lbd-agent's version (the one it registers in the cluster)

exit codes: 0 stopped by a signal, 64 bad usage, 78 invalid config (nothing applied),
77 no permission to program the kernel, 69 nft/conntrack missing, 1 other failure`;

export interface AgentArgs {
  readonly configPath: string;
  readonly adminSocket: string | undefined;
  readonly logLevel: LogLevel;
}

export type ParsedArgs = { kind: 'run'; args: AgentArgs } | { kind: 'help' } | { kind: 'version' } | { kind: 'usage'; message: string };

export function parseAgentArgs(argv: readonly string[]): ParsedArgs {
  let configPath: string | undefined;
  let adminSocket: string | undefined;
  let logLevel: LogLevel = 'info';
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--help' || arg === '-h') return { kind: 'help' };
    if (arg === '--version') return { kind: 'version' };
    const eq = arg.indexOf('=');
    const name = arg.startsWith('--') && eq > 0 ? arg.slice(0, eq) : arg;
    const takes = name === '--config' || name === '--admin-socket' || name === '--log-level';
    if (!takes) {
      const nearest = nearestName(name, ['--config', '--admin-socket', '--log-level', '--help', '--version']);
      return { kind: 'usage', message: arg.startsWith('-') ? `unknown flag ${name}${nearest === undefined ? '' : `; did you mean ${nearest}?`}` : `unexpected argument "${arg}"` };
    }
    const value = eq > 0 && arg.startsWith('--') ? arg.slice(eq + 1) : argv[++i];
    if (value === undefined || value === '') return { kind: 'usage', message: `${name} needs a value` };
    if (name === '--config') configPath = value;
    else if (name === '--admin-socket') {
      if (!value.startsWith('/')) return { kind: 'usage', message: `--admin-socket: "${value}" is not an absolute path` };
      adminSocket = value;
    } else {
      if (value !== 'info' && value !== 'debug') return { kind: 'usage', message: `--log-level: "${value}" is not info or debug` };
      logLevel = value;
    }
  }
  if (configPath === undefined) return { kind: 'usage', message: '--config PATH is required' };
  return { kind: 'run', args: { configPath, adminSocket, logLevel } };
}

export interface RunDeps {
  /** Default: the nftables data plane. */
  readonly createDataPlane?: (log: Logger) => Promise<DataPlane>;
  /** Where a clustered director's election runs. Default: a thread of its own with the kernel's addresses. */
  readonly createElection?: () => ElectionHostFactory;
  /** Default: conntrack; only a clustered director with agent.cluster.tls has one. */
  readonly createConnectionTable?: (log: Logger) => Promise<ConnectionTable>;
  /** Log lines (JSON); default stdout. */
  readonly writeLog?: (line: string) => void;
  /** Human messages for start-up failures; default stderr. */
  readonly writeError?: (text: string) => void;
  /** Where signals come from; default the process. */
  readonly signals?: NodeJS.EventEmitter;
  /** The environment (LBD_CTNETLINK, LBD_CTNETLINK_WRITER, LBD_TCP_PROBER); default the process's. */
  readonly env?: NodeJS.ProcessEnv;
  /** Called once the agent serves (tests use it to reach the agent). */
  readonly onStarted?: (agent: Agent) => void;
}

export async function run(argv: readonly string[], deps: RunDeps = {}): Promise<number> {
  const writeError = deps.writeError ?? ((text: string) => { process.stderr.write(`${text}\n`); });
  const parsed = parseAgentArgs(argv);
  if (parsed.kind === 'help') {
    (deps.writeLog ?? ((t: string) => process.stdout.write(`${t}\n`)))(HELP);
    return EXIT.ok;
  }
  if (parsed.kind === 'version') {
    (deps.writeLog ?? ((t: string) => process.stdout.write(`${t}\n`)))(`lbd-agent ${LBD_VERSION}`);
    return EXIT.ok;
  }
  if (parsed.kind === 'usage') {
    writeError(`lbd-agent: ${parsed.message}\n${USAGE}\nRun lbd-agent --help for details.`);
    return EXIT.usage;
  }
  const { configPath, adminSocket, logLevel } = parsed.args;
  const log = createLogger({ level: logLevel, ...(deps.writeLog ? { write: deps.writeLog } : {}) });
  const signals = deps.signals ?? process;

  // Listen before starting: the default action of SIGHUP and SIGTERM is to kill the process.
  let agent: Agent | undefined;
  let stopSignal: ((sig: string) => void) | undefined;
  const stopped = new Promise<string>((resolve) => { stopSignal = resolve; });
  const onStop = (sig: string) => () => stopSignal?.(sig);
  const onTerm = onStop('SIGTERM');
  const onInt = onStop('SIGINT');
  const onHup = (): void => {
    if (!agent) return; // Still starting, and start-up reads the file as it is now.
    agent.reload('sighup').catch((err: unknown) => log.error('reload failed', { trigger: 'sighup', error: err }));
  };
  signals.on('SIGTERM', onTerm);
  signals.on('SIGINT', onInt);
  signals.on('SIGHUP', onHup);
  try {
    // Validate before anything else exists: a bad config at start applies nothing and names every problem.
    let initial;
    let ctnlHelper;
    let ctnlWriter;
    let tcpConnector;
    try {
      const text = await readConfigText(configPath);
      initial = { text, config: parseConfig(text, configPath) };
      ctnlHelper = ctnlHelperFromEnv(deps.env ?? process.env);
      ctnlWriter = await ctnlWriterFromEnv(deps.env ?? process.env);
      tcpConnector = tcpConnectorFromEnv(deps.env ?? process.env);
    } catch (err) {
      if (err instanceof ConfigError || err instanceof EnvError) {
        writeError(`lbd-agent: ${err.message}`);
        return EXIT.config;
      }
      throw err;
    }
    const dataPlane = await (deps.createDataPlane ?? createDefaultDataPlane)(log);
    const cluster = initial.config.agent.cluster;
    // A clustered director's election runs in a thread of its own, which owns the floating addresses.
    const election = cluster === null ? undefined : (deps.createElection ?? electionThread)();
    // Connection sync needs the peer link's TLS: without it there is nothing to read the table for. It runs in a
    // thread of its own with the kernel's table, or in-process over the table a test gives.
    const connectionSync = !cluster?.tls ? undefined
      : deps.createConnectionTable ? inProcessSync(await deps.createConnectionTable(log)) : syncThread({ ...(ctnlHelper === undefined ? {} : { ctnlHelper }), ...(ctnlWriter === undefined ? {} : { ctnlWriter }) });
    const leaseDrops = cluster === null || deps.createDataPlane ? undefined : await createDefaultLeaseDrops();
    try {
      agent = await Agent.start({
        configPath, dataPlane, adminSocket, log, initial, opsRoutes: (a) => operatorSurfaces(a, log),
        ...(tcpConnector ? { health: { prober: new ProberSet({ tcp: new TcpProber({ connector: tcpConnector }) }) } } : {}),
        ...(election ? { election } : {}), ...(connectionSync ? { connectionSync } : {}), ...(leaseDrops ? { leaseDrops } : {}),
      });
    } catch (err) {
      return startFailure(err, writeError);
    }
    deps.onStarted?.(agent);
    const sig = await stopped;
    await agent.stop(`received ${sig}`);
    return EXIT.ok;
  } catch (err) {
    // A bug, not a user error: say what happened; the stack only at debug level.
    writeError(`lbd-agent: internal error: ${(err as Error).message ?? String(err)}`);
    log.debug('internal error', { stack: (err as Error).stack });
    return EXIT.software;
  } finally {
    signals.off('SIGTERM', onTerm);
    signals.off('SIGINT', onInt);
    signals.off('SIGHUP', onHup);
  }
}

function startFailure(err: unknown, writeError: (text: string) => void): number {
  if (err instanceof DataPlaneError) {
    writeError(`lbd-agent: cannot apply the config: ${err.message}`);
    if (err.kind === 'PermissionDenied') return EXIT.noPermission;
    if (err.kind === 'CommandMissing') return EXIT.unavailable;
    return EXIT.failure;
  }
  if (err instanceof AgentError) {
    writeError(`lbd-agent: ${err.message}`);
    return EXIT.failure;
  }
  if (err instanceof ConfigError) {
    writeError(`lbd-agent: ${err.message}`);
    return EXIT.config;
  }
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'EACCES' || code === 'EPERM') {
    writeError(`lbd-agent: ${(err as Error).message} (run as root)`);
    return EXIT.noPermission;
  }
  throw err;
}

/** The process entry point: the only place lbd-agent exits. */
export async function main(): Promise<never> {
  // Everything the agent creates (admin socket, staged config files) is root-only unless chmod says otherwise.
  process.umask(0o077);
  applyAgentV8Flags();
  const code = await run(process.argv.slice(2));
  process.exit(code);
}
