import { isIP } from 'node:net';

/**
 * Command lines of lbd-testserver and lbd-testclient, parsed into typed options. Pure, so the bins stay
 * thin and every bound is tested. Every count and duration has an upper bound: these tools generate load
 * and must never run away.
 */

/** Bad command line; the bins print it with the usage and exit 64 (EX_USAGE). */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export const EXIT_USAGE = 64;

type FlagKind = 'string' | 'int' | 'bool';
type FlagSpec = Record<string, FlagKind>;
type FlagValues = Map<string, string | number | boolean>;

/** `--name value`, `--name=value` and bare `--flag` for booleans; every flag at most once. */
function parseFlags(argv: readonly string[], spec: FlagSpec): FlagValues {
  const out: FlagValues = new Map();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const m = /^--([a-z][a-z0-9-]*)(?:=(.*))?$/.exec(arg);
    if (!m) throw new UsageError(`unexpected argument ${JSON.stringify(arg)}`);
    const name = m[1]!;
    const kind = spec[name];
    if (kind === undefined) throw new UsageError(`unknown option --${name} (known: ${Object.keys(spec).map((k) => `--${k}`).join(', ')})`);
    if (out.has(name)) throw new UsageError(`--${name} given twice`);
    if (kind === 'bool') {
      if (m[2] !== undefined) throw new UsageError(`--${name} takes no value`);
      out.set(name, true);
      continue;
    }
    let value = m[2];
    if (value === undefined) {
      value = argv[++i];
      if (value === undefined) throw new UsageError(`--${name} needs a value`);
    }
    if (kind === 'int') {
      if (!/^\d+$/.test(value)) throw new UsageError(`--${name} ${JSON.stringify(value)} is not a whole number`);
      out.set(name, Number(value));
    } else {
      out.set(name, value);
    }
  }
  return out;
}

function int(flags: FlagValues, name: string, min: number, max: number, dflt?: number): number {
  const v = flags.get(name);
  if (v === undefined) {
    if (dflt === undefined) throw new UsageError(`--${name} is required`);
    return dflt;
  }
  const n = v as number;
  if (n < min || n > max) throw new UsageError(`--${name} ${n} is out of range (${min} to ${max})`);
  return n;
}

function optionalPort(flags: FlagValues, name: string): number | undefined {
  return flags.has(name) ? int(flags, name, 1, 65535) : undefined;
}

function str(flags: FlagValues, name: string): string | undefined {
  return flags.get(name) as string | undefined;
}

export interface HostPort {
  readonly host: string;
  readonly port: number;
  readonly family: 4 | 6;
}

/** `198.18.0.10:80` or `[fd00:0:0:1::10]:80` (brackets required for IPv6, as in URLs). */
export function parseHostPort(text: string): HostPort {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([0-9.]+)):(\d+)$/.exec(text);
  const host = m?.[1] ?? m?.[2];
  const family = host === undefined ? 0 : isIP(host);
  const port = Number(m?.[3]);
  if (!m || host === undefined || family === 0 || (m[1] !== undefined && family !== 6) || !(port >= 1 && port <= 65535)) {
    throw new UsageError(`${JSON.stringify(text)} is not ADDRESS:PORT (write 198.18.0.10:9000 or [fd00:0:0:1::10]:9000)`);
  }
  return { host, port, family: family as 4 | 6 };
}

// ---- lbd-testserver -------------------------------------------------------------------------------

export interface TestServerOptions {
  readonly name: string;
  readonly http?: number;
  readonly stream?: number;
  readonly udp?: number;
  /** Address to listen on; `::` (the default) takes IPv4 and IPv6. */
  readonly bind: string;
  /** A file whose content breaks HTTP answers on purpose (see FAULTS in testserver.ts). */
  readonly faultFile?: string;
}

export const TESTSERVER_USAGE =
  'usage: lbd-testserver --name NAME [--http PORT] [--stream PORT] [--udp PORT] [--bind ADDRESS] [--fault-file PATH]';

export function parseTestServerArgs(argv: readonly string[]): TestServerOptions {
  const f = parseFlags(argv, { name: 'string', http: 'int', stream: 'int', udp: 'int', bind: 'string', 'fault-file': 'string' });
  const name = str(f, 'name');
  if (name === undefined) throw new UsageError('--name is required');
  // The name is what clients report and parse from `<name> <seq>` lines: no spaces.
  if (!/^[A-Za-z0-9_.-]{1,32}$/.test(name)) throw new UsageError(`--name ${JSON.stringify(name)} must be 1-32 letters, digits, "_", "." or "-"`);
  const bind = str(f, 'bind') ?? '::';
  if (isIP(bind) === 0) throw new UsageError(`--bind ${JSON.stringify(bind)} is not an IPv4 or IPv6 address`);
  const faultFile = str(f, 'fault-file');
  const opts = { name, bind, http: optionalPort(f, 'http'), stream: optionalPort(f, 'stream'), udp: optionalPort(f, 'udp'), ...(faultFile ? { faultFile } : {}) };
  if (opts.http === undefined && opts.stream === undefined && opts.udp === undefined) {
    throw new UsageError('nothing to serve: give at least one of --http, --stream, --udp');
  }
  return opts;
}

// ---- lbd-testclient -------------------------------------------------------------------------------

const MAX_COUNT = 1_000_000;
const MAX_CONNECTIONS = 10_000;
/** Default and ceiling for stream runs: a forgotten client ends by itself. */
const DEFAULT_STREAM_DURATION_MS = 60_000;
const MAX_DURATION_MS = 3_600_000;
const DEFAULT_TIMEOUT_MS = 2000;
/** A stream silent this long at the end of a run is reported as stalled. */
const DEFAULT_STALL_MS = 1000;

export interface HttpCommand {
  readonly mode: 'http';
  readonly url: URL;
  readonly count: number;
  readonly concurrency: number;
  /** One request per connection (no keep-alive). */
  readonly newConnection: boolean;
  readonly timeoutMs: number;
}

/**
 * Paced HTTP: a fresh connection every intervalMs, each with its own deadline, whatever the earlier ones
 * are doing (a count-driven `http` run waits for its answers, so it cannot show how long service was gone).
 */
export interface HttpPacedCommand {
  readonly mode: 'http-paced';
  readonly url: URL;
  readonly intervalMs: number;
  /** Each request's deadline: connect, headers and body. */
  readonly timeoutMs: number;
  readonly durationMs: number;
  /** Requests open at once; at the bound a tick starts none. */
  readonly maxInFlight: number;
  readonly maxRequests: number;
}

export interface StreamCommand {
  readonly mode: 'stream';
  readonly target: HostPort;
  readonly connections: number;
  readonly durationMs: number;
  /** How long to wait for each connection's first line. */
  readonly timeoutMs: number;
  readonly stallMs: number;
}

export interface UdpCommand {
  readonly mode: 'udp';
  readonly target: HostPort;
  readonly count: number;
  /** Send every datagram from this port (one flow) instead of a fresh socket each. */
  readonly sourcePort?: number;
  readonly timeoutMs: number;
}

export interface TcpOnceCommand {
  readonly mode: 'tcp-once';
  readonly target: HostPort;
  readonly count: number;
  /** Open every connection from this port (the same flow hash each time). */
  readonly sourcePort?: number;
  readonly timeoutMs: number;
}

export interface UdpFlowsCommand {
  readonly mode: 'udp-flows';
  readonly target: HostPort;
  readonly flows: number;
  /** Flow i uses source port firstPort + i; without it each socket gets a free port of the kernel's choosing. */
  readonly firstPort?: number;
  readonly intervalMs: number;
  readonly durationMs: number;
  /** Time without an answer before a seq is re-sent. */
  readonly timeoutMs: number;
  /** Re-sends of one seq before it counts as lost. */
  readonly maxRetries: number;
}

export type ClientCommand = HttpCommand | HttpPacedCommand | StreamCommand | UdpCommand | TcpOnceCommand | UdpFlowsCommand;

/** Bounds of udp-flows: each flow is a socket, and every re-send is load on a failing path. */
const MAX_UDP_FLOWS = 1000;
const DEFAULT_UDP_FLOW_INTERVAL_MS = 50;
/** Short enough that a flow re-sends a few times during a failover; not so short that a slow answer is a re-send. */
const DEFAULT_UDP_FLOW_TIMEOUT_MS = 500;
const DEFAULT_UDP_FLOW_RETRIES = 20;
/** http-paced: requests open at once, by default. */
const DEFAULT_PACED_IN_FLIGHT = 200;

export const TESTCLIENT_USAGE = `usage: lbd-testclient MODE OPTIONS   (prints one JSON object on stdout)
  http     --url URL --count N [--concurrency C] [--new-connection] [--timeout-ms MS]
  http-paced --url URL --interval-ms MS [--timeout-ms MS] [--duration-ms D] [--max-in-flight N] [--max-requests N]
           (a fresh connection every MS, each with its own deadline, at most N open (default ${DEFAULT_PACED_IN_FLIGHT});
            first line {"started":T0}, then after --duration-ms, --max-requests or SIGTERM/SIGINT
            {"t0":T0,"records":[[start ms after T0, duration ms, 1 ok | 0 failed, error], ...]})
  stream   --target ADDR:PORT --connections N [--duration-ms D] [--timeout-ms MS] [--stall-ms MS]
           (first line {"ready":...} once every connection has its first line or failed; the final
            report after --duration-ms (default ${DEFAULT_STREAM_DURATION_MS}, at most ${MAX_DURATION_MS}) or on SIGTERM/SIGINT)
  udp      --target ADDR:PORT --count N [--source-port P] [--timeout-ms MS]
  tcp-once --target ADDR:PORT --count N [--source-port P] [--timeout-ms MS]
           (with P, each connection is closed with RST so the next may reuse the port; pick P below
            32768, outside the kernel's ephemeral range, or an earlier connection's TIME_WAIT may hold it)
  udp-flows --target ADDR:PORT --flows N [--first-port P] [--interval-ms MS] [--duration-ms D] [--timeout-ms MS] [--max-retries R]
           (N long-lived flows, each one socket on its own source port sending a seq every MS (default
            ${DEFAULT_UDP_FLOW_INTERVAL_MS}) and re-sending it every --timeout-ms (default ${DEFAULT_UDP_FLOW_TIMEOUT_MS}) until answered, at most R times
            (default ${DEFAULT_UDP_FLOW_RETRIES}); {"ready":...} and the final report as for stream)`;

function target(f: FlagValues): HostPort {
  const t = str(f, 'target');
  if (t === undefined) throw new UsageError('--target is required');
  return parseHostPort(t);
}

function httpUrl(f: FlagValues): URL {
  const raw = str(f, 'url');
  if (raw === undefined) throw new UsageError('--url is required');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`--url ${JSON.stringify(raw)} is not a URL`);
  }
  if (url.protocol !== 'http:') throw new UsageError(`--url ${JSON.stringify(raw)}: only http:// is supported`);
  return url;
}

export function parseTestClientArgs(argv: readonly string[]): ClientCommand {
  const [mode, ...rest] = argv;
  switch (mode) {
    case 'http': {
      const f = parseFlags(rest, { url: 'string', count: 'int', concurrency: 'int', 'new-connection': 'bool', 'timeout-ms': 'int' });
      const url = httpUrl(f);
      const count = int(f, 'count', 1, MAX_COUNT);
      return {
        mode, url, count, concurrency: int(f, 'concurrency', 1, 1000, 1), newConnection: f.has('new-connection'),
        timeoutMs: int(f, 'timeout-ms', 1, 60_000, DEFAULT_TIMEOUT_MS),
      };
    }
    case 'http-paced': {
      const f = parseFlags(rest, {
        url: 'string', 'interval-ms': 'int', 'timeout-ms': 'int', 'duration-ms': 'int', 'max-in-flight': 'int', 'max-requests': 'int',
      });
      const url = httpUrl(f);
      const intervalMs = int(f, 'interval-ms', 1, 60_000);
      const durationMs = int(f, 'duration-ms', 1, MAX_DURATION_MS, DEFAULT_STREAM_DURATION_MS);
      return {
        mode, url, intervalMs, durationMs, timeoutMs: int(f, 'timeout-ms', 1, 60_000, DEFAULT_TIMEOUT_MS),
        maxInFlight: int(f, 'max-in-flight', 1, MAX_CONNECTIONS, DEFAULT_PACED_IN_FLIGHT),
        maxRequests: int(f, 'max-requests', 1, MAX_COUNT, Math.min(MAX_COUNT, Math.ceil(durationMs / intervalMs) + 1)),
      };
    }
    case 'stream': {
      const f = parseFlags(rest, { target: 'string', connections: 'int', 'duration-ms': 'int', 'timeout-ms': 'int', 'stall-ms': 'int' });
      return {
        mode, target: target(f), connections: int(f, 'connections', 1, MAX_CONNECTIONS),
        durationMs: int(f, 'duration-ms', 1, MAX_DURATION_MS, DEFAULT_STREAM_DURATION_MS),
        timeoutMs: int(f, 'timeout-ms', 1, 60_000, DEFAULT_TIMEOUT_MS),
        stallMs: int(f, 'stall-ms', 100, 60_000, DEFAULT_STALL_MS),
      };
    }
    case 'udp':
    case 'tcp-once': {
      const f = parseFlags(rest, { target: 'string', count: 'int', 'source-port': 'int', 'timeout-ms': 'int' });
      return {
        mode, target: target(f), count: int(f, 'count', 1, MAX_COUNT), sourcePort: optionalPort(f, 'source-port'),
        timeoutMs: int(f, 'timeout-ms', 1, 60_000, DEFAULT_TIMEOUT_MS),
      };
    }
    case 'udp-flows': {
      const f = parseFlags(rest, {
        target: 'string', flows: 'int', 'first-port': 'int', 'interval-ms': 'int', 'duration-ms': 'int', 'timeout-ms': 'int', 'max-retries': 'int',
      });
      const flows = int(f, 'flows', 1, MAX_UDP_FLOWS);
      const firstPort = optionalPort(f, 'first-port');
      if (firstPort !== undefined && firstPort + flows - 1 > 65535) {
        throw new UsageError(`--first-port ${firstPort} with --flows ${flows} runs past port 65535 (the last flow would use ${firstPort + flows - 1})`);
      }
      return {
        mode, target: target(f), flows, ...(firstPort !== undefined ? { firstPort } : {}),
        intervalMs: int(f, 'interval-ms', 1, 60_000, DEFAULT_UDP_FLOW_INTERVAL_MS),
        durationMs: int(f, 'duration-ms', 1, MAX_DURATION_MS, DEFAULT_STREAM_DURATION_MS),
        timeoutMs: int(f, 'timeout-ms', 1, 60_000, DEFAULT_UDP_FLOW_TIMEOUT_MS),
        maxRetries: int(f, 'max-retries', 0, 1000, DEFAULT_UDP_FLOW_RETRIES),
      };
    }
    case undefined:
      throw new UsageError('a mode is required: http, http-paced, stream, udp, tcp-once or udp-flows');
    default:
      throw new UsageError(`unknown mode ${JSON.stringify(mode)}: use http, http-paced, stream, udp, tcp-once or udp-flows`);
  }
}
