import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { isIP, type AddressInfo } from 'node:net';
import { EXIT, hostPort, isLbdEvent, LBD_VERSION, nearestName, type LbdEvent } from '@lbd/config';
import { setTimeout as delay } from 'node:timers/promises';
import { AdminApi } from '@lbd/proto';
import { createLogger, type Logger } from '@lbd/log';
import type { Caller, EventSource, OpsRoute } from '../ops-types.js';
import { Dashboard, type DashboardBackend } from './routes.js';

/**
 * lbd-dashboard: one agent's dashboard, read through its admin socket, on a loopback address of this
 * machine, in plain HTTP. For a person at the director's console and for the lab, whose directors live
 * in network namespaces a browser on the host cannot reach. Whoever can read the admin socket (root)
 * decides to run it; it binds only to loopback, so it shows nothing to the network. Viewers on other
 * machines use the agent's own HTTPS listener (agent.admin.httpListen), with a client certificate.
 */

const USAGE = 'usage: lbd-dashboard --socket PATH [--listen 127.0.0.1:9400]';
const HELP = `${USAGE}

Serves the live dashboard of the lbd-agent behind the admin socket PATH on a loopback address,
plain HTTP, read-only: open http://127.0.0.1:9400/ in a browser on this machine.

  --socket PATH     the agent's admin socket (lbd-agent --admin-socket; /run/lbd/admin.sock by default)
  --listen ADDR     loopback address and port (default 127.0.0.1:9400; 127.0.0.0/8 or [::1]; port 0: any
                    free one, logged)
  --version         prints lbd-dashboard's version

exit codes: 0 stopped by SIGTERM/SIGINT, 64 bad usage, 1 cannot listen`;

const DEFAULT_LISTEN = { host: '127.0.0.1', port: 9400 };

export interface DashboardArgs {
  readonly socket: string;
  readonly host: string;
  readonly port: number;
}

export function parseDashboardArgs(argv: readonly string[]): { kind: 'run'; args: DashboardArgs } | { kind: 'help' } | { kind: 'version' } | { kind: 'usage'; message: string } {
  let socket: string | undefined;
  let listen = `${DEFAULT_LISTEN.host}:${DEFAULT_LISTEN.port}`;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--help' || arg === '-h') return { kind: 'help' };
    if (arg === '--version') return { kind: 'version' };
    const eq = arg.indexOf('=');
    const name = arg.startsWith('--') && eq > 0 ? arg.slice(0, eq) : arg;
    if (name !== '--socket' && name !== '--listen') {
      const nearest = nearestName(name, ['--socket', '--listen', '--help', '--version']);
      return { kind: 'usage', message: arg.startsWith('-') ? `unknown flag ${name}${nearest === undefined ? '' : `; did you mean ${nearest}?`}` : `unexpected argument "${arg}"` };
    }
    const value = eq > 0 ? arg.slice(eq + 1) : argv[++i];
    if (value === undefined || value === '') return { kind: 'usage', message: `${name} needs a value` };
    if (name === '--socket') socket = value;
    else listen = value;
  }
  if (socket === undefined) return { kind: 'usage', message: '--socket is required: the admin socket of the agent to show' };
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(listen);
  const host = m?.[1] ?? m?.[2] ?? '';
  const port = Number(m?.[3]);
  if (m === null || isIP(host) === 0 || !(port >= 0 && port <= 65535)) {
    return { kind: 'usage', message: `--listen: "${listen}" is not ADDRESS:PORT (127.0.0.1:9400, [::1]:9400)` };
  }
  if (!(host === '::1' || (isIP(host) === 4 && host.startsWith('127.')))) {
    return {
      kind: 'usage',
      message: `--listen: ${host} is not a loopback address; lbd-dashboard has no TLS and binds only to 127.0.0.0/8 or ::1 (viewers on other machines use the agent's HTTPS listener, agent.admin.httpListen)`,
    };
  }
  return { kind: 'run', args: { socket, host, port } };
}

/** The dashboard's read calls over an agent's admin API (its unix socket). */
export function adminApiBackend(api: AdminApi, callTimeoutMs = 2000): DashboardBackend {
  return {
    status: () => api.getStatus({ timeoutMs: callTimeoutMs }),
    healthStatus: (service) => api.getHealth(service, { timeoutMs: callTimeoutMs }),
    clusterStatus: () => api.getClusterStatus({ timeoutMs: callTimeoutMs }),
    watchHealth(sinceUnixMs, sink) {
      const stop = new AbortController();
      void (async () => {
        try {
          for await (const e of api.watchHealth(sinceUnixMs, { signal: stop.signal })) sink.event(e);
        } catch {
          // The agent went away or cut the stream: the pollers still show every transition, one poll later.
          return;
        }
        // The agent ended the stream (it is stopping). A restarted agent gets a new watch when a page reconnects.
        if (!stop.signal.aborted) sink.end();
      })();
      return () => stop.abort();
    },
  };
}

/**
 * The agent's event log read over its admin API: a copy of its recent history, kept current by
 * following ListEvents (this director's own log, as the agent's own dashboard shows). A broken stream
 * (the agent restarted) is followed again from the newest event held; an event seen twice is kept once.
 */
export class AdminApiEventSource implements EventSource {
  private readonly kept: LbdEvent[] = [];
  private readonly ids = new Set<string>();
  private readonly subscribers = new Set<(e: LbdEvent) => void>();
  private readonly stop = new AbortController();

  constructor(private readonly api: AdminApi, private readonly keep = 1000, private readonly retryMs = 2000) {
    void this.follow();
  }

  recent(sinceUnixMs: number): LbdEvent[] {
    return this.kept.filter((e) => e.timeUnixMs >= sinceUnixMs);
  }

  subscribe(fn: (e: LbdEvent) => void): () => void {
    this.subscribers.add(fn);
    return () => { this.subscribers.delete(fn); };
  }

  close(): void {
    this.stop.abort();
  }

  private async follow(): Promise<void> {
    const signal = this.stop.signal;
    while (!signal.aborted) {
      const since = this.kept.at(-1)?.timeUnixMs ?? 0;
      try {
        const stream = this.api.listEvents({ sinceUnixMs: since, follow: true, scope: 'local', limit: this.keep, kind: '', director: '' }, { signal });
        for await (const e of stream) if (isLbdEvent(e)) this.add(e);
      } catch {
        // The agent is away or cut the stream; the page shows what is held until it answers again.
      }
      await delay(this.retryMs, undefined, { signal }).catch(() => { /* aborted: the loop ends on the signal */ });
    }
  }

  private add(e: LbdEvent): void {
    if (this.ids.has(e.id)) return;
    this.kept.push(e);
    this.ids.add(e.id);
    while (this.kept.length > this.keep) this.ids.delete(this.kept.shift()!.id);
    for (const fn of this.subscribers) fn(e);
  }
}

/**
 * Answers requests from `routes` as the agent's ops listener does (method, exact path or prefix, the
 * caller's role against the route's), for one fixed caller.
 */
export function opsRequestHandler(routes: readonly OpsRoute[], caller: Caller): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    const route = routes.find((r) => r.method === method && (r.prefix ? path.startsWith(r.path) : path === r.path));
    const text = (code: number, body: string): void => { res.writeHead(code, { 'content-type': 'text/plain; charset=utf-8' }).end(body); };
    if (route === undefined) {
      text(404, `${req.method} ${path}: no such page; the dashboard is at /`);
      return;
    }
    if (route.role === 'write' && caller.role !== 'write') {
      text(403, `${req.method} ${path} needs role write; ${caller.name} has role read`);
      return;
    }
    Promise.resolve(route.handle(req, res, caller)).catch((err: unknown) => {
      if (!res.headersSent) text(500, `${path} failed: ${(err as Error).message}`);
      else res.destroy();
    });
  };
}

/** `routes` on plain HTTP at host:port (port 0: any free one); resolves once listening. */
export async function listenPlain(routes: readonly OpsRoute[], caller: Caller, host: string, port: number): Promise<Server> {
  const server = createServer(opsRequestHandler(routes, caller));
  server.listen(port, host);
  await once(server, 'listening');
  return server;
}

/** lbd-dashboard's main: returns the exit code once a signal stops it. */
export async function runDashboard(argv: readonly string[], deps: { log?: Logger; signals?: NodeJS.EventEmitter; out?: (s: string) => void } = {}): Promise<number> {
  const out = deps.out ?? ((s: string) => { process.stderr.write(s); });
  const parsed = parseDashboardArgs(argv);
  if (parsed.kind === 'help') {
    out(`${HELP}\n`);
    return EXIT.ok;
  }
  if (parsed.kind === 'version') {
    (deps.out ?? ((t: string) => { process.stdout.write(t); }))(`lbd-dashboard ${LBD_VERSION}\n`);
    return EXIT.ok;
  }
  if (parsed.kind === 'usage') {
    out(`lbd-dashboard: ${parsed.message}\n${USAGE}\n`);
    return EXIT.usage;
  }
  const { socket, host, port } = parsed.args;
  const log = deps.log ?? createLogger();
  const api = new AdminApi(socket);
  const events = new AdminApiEventSource(api);
  const dashboard = new Dashboard({ backend: adminApiBackend(api), events, log });
  let server: Server;
  try {
    server = await listenPlain(dashboard.routes(), { role: 'read', name: 'loopback' }, host, port);
  } catch (err) {
    out(`lbd-dashboard: cannot listen on ${host}:${port}: ${(err as Error).message}\n`);
    events.close();
    api.close();
    return EXIT.failure;
  }
  const bound = (server.address() as AddressInfo).port;
  const url = `http://${hostPort(host, bound)}/`;
  log.info('serving the dashboard', { url, socket });
  const signals = deps.signals ?? process;
  const signal = await new Promise<string>((resolve) => {
    const on = (s: string) => () => resolve(s);
    signals.once('SIGTERM', on('SIGTERM'));
    signals.once('SIGINT', on('SIGINT'));
  });
  log.info('stopping', { signal });
  dashboard.close();
  events.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  api.close();
  return EXIT.ok;
}
