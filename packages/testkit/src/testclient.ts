import { createSocket } from 'node:dgram';
import { Agent, request } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { HostPort, HttpCommand, HttpPacedCommand, StreamCommand, TcpOnceCommand, UdpCommand, UdpFlowsCommand } from './args.js';
import { StreamChecker, type StreamReport } from './stream-check.js';
import { UdpFlowChecker, type UdpFlowReport, type UdpFlowTiming } from './udp-flow-check.js';

/**
 * The client side of tests and the lab, run inside the client namespace by lbd-testclient. Each run is
 * bounded in count and time, and returns one JSON-able result counting which real servers answered.
 */

export type Counts = Record<string, number>;

export interface HttpResult {
  readonly ok: number;
  readonly failed: number;
  /** Answers per real server name. */
  readonly servers: Counts;
  /** Answers per peer address the servers saw (a local address in fullnat, the client in nat). */
  readonly peers: Counts;
  /** Failures per kind (`ECONNREFUSED`, `timeout`, `HTTP 503`). */
  readonly errors: Counts;
  readonly bytes: number;
  readonly durationMs: number;
}

export interface ReadyReport {
  /** True when every connection received its first line. */
  readonly ready: boolean;
  readonly connections: number;
  readonly started: number;
  readonly failed: number;
  readonly servers: Counts;
  /** The connections that failed to start (at most 20): client port and what went wrong, to find them in conntrack. */
  readonly failures: ReadonlyArray<{ readonly port: number | null; readonly error: string }>;
}

export interface StreamResult {
  readonly connections: number;
  readonly intact: number;
  readonly broken: number;
  readonly servers: Counts;
  /** Each connection's report, with its client port (null if it never had one). */
  readonly perConnection: ReadonlyArray<StreamReport & { readonly port: number | null }>;
}

export interface UdpResult {
  readonly ok: number;
  readonly failed: number;
  readonly servers: Counts;
  readonly peers: Counts;
  readonly errors: Counts;
}

export interface UdpFlowsReadyReport {
  /** True when every flow got its first answer. */
  readonly ready: boolean;
  readonly flows: number;
  readonly started: number;
  readonly failed: number;
  /** Flows per server of their first answer. */
  readonly servers: Counts;
}

export interface UdpFlowsResult {
  readonly flows: number;
  readonly intact: number;
  readonly broken: number;
  /** Flows per server of their first answer. */
  readonly servers: Counts;
  readonly perFlow: readonly UdpFlowReport[];
}

export interface TcpOnceResult {
  readonly ok: number;
  readonly failed: number;
  readonly servers: Counts;
  /** Server of each connection in order; null where it failed. */
  readonly sequence: readonly (string | null)[];
  readonly errors: Counts;
}

/** Bodies larger than this are counted, not parsed (they are `/bytes` payloads, not answers). */
const MAX_ANSWER_BYTES = 4096;

function bump(c: Counts, key: string): void {
  c[key] = (c[key] ?? 0) + 1;
}

function errorKind(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  return err.code ?? err.message ?? String(e);
}

/** Parses a server answer; undefined when it is not one. */
function parseAnswer(text: string): { server: string; peer?: string } | undefined {
  try {
    const v = JSON.parse(text) as { server?: unknown; peer?: unknown };
    if (typeof v.server !== 'string') return undefined;
    return { server: v.server, ...(typeof v.peer === 'string' ? { peer: v.peer } : {}) };
  } catch {
    return undefined;
  }
}

// ---- http -----------------------------------------------------------------------------------------

export async function runHttp(cmd: HttpCommand): Promise<HttpResult> {
  const started = Date.now();
  const servers: Counts = {};
  const peers: Counts = {};
  const errors: Counts = {};
  let ok = 0;
  let failed = 0;
  let bytes = 0;
  // keep-alive: at most `concurrency` connections, reused; --new-connection: a fresh one per request.
  const agent = cmd.newConnection ? undefined : new Agent({ keepAlive: true, maxSockets: cmd.concurrency });
  let issued = 0;
  const one = async (): Promise<void> => {
    try {
      const { status, body, size } = await httpGet(cmd.url, agent, cmd.timeoutMs);
      bytes += size;
      if (status !== 200) throw new Error(`HTTP ${status}`);
      ok++;
      const a = body === undefined ? undefined : parseAnswer(body);
      if (a) {
        bump(servers, a.server);
        if (a.peer !== undefined) bump(peers, a.peer);
      }
    } catch (e) {
      failed++;
      bump(errors, errorKind(e));
    }
  };
  const worker = async (): Promise<void> => {
    while (issued < cmd.count) {
      issued++;
      await one();
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(cmd.concurrency, cmd.count) }, worker));
  } finally {
    agent?.destroy();
  }
  return { ok, failed, servers, peers, errors, bytes, durationMs: Date.now() - started };
}

function httpGet(url: URL, agent: Agent | undefined, timeoutMs: number): Promise<{ status: number; body: string | undefined; size: number }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: agent ?? false, headers: agent ? {} : { connection: 'close' } }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size <= MAX_ANSWER_BYTES) chunks.push(c);
      });
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, body: size <= MAX_ANSWER_BYTES ? Buffer.concat(chunks).toString('utf8') : undefined, size });
      });
      res.on('error', fail);
    });
    const fail = (e: unknown): void => {
      clearTimeout(timer);
      reject(e);
    };
    // One timer for the whole exchange (connect, headers, body): a stuck transfer is a failure too.
    const timer = setTimeout(() => req.destroy(Object.assign(new Error('timeout'), { code: 'timeout' })), timeoutMs);
    req.on('error', fail);
    req.end();
  });
}

// ---- http-paced -----------------------------------------------------------------------------------

/** One paced request: start (ms after t0), duration (ms), 1 answered 200 or 0 failed, the failure ('' when ok). */
export type PacedRecord = readonly [startMs: number, durationMs: number, ok: 0 | 1, error: string];

export interface HttpPacedResult {
  /** Unix ms when the run started (the `{"started":...}` line says the same at once). */
  readonly t0: number;
  readonly records: readonly PacedRecord[];
}

export interface PacedHooks {
  /** Called once, before the first request. */
  onStart?(started: { started: number }): void;
  /** Ends the run early (SIGTERM/SIGINT in the bin): no new requests; open ones get their deadline. */
  signal?: AbortSignal;
}

/** The slack, beyond one request deadline, given to open requests at the end of a paced run. */
const PACED_DRAIN_SLACK_MS = 200;

/**
 * A fresh connection (`connection: close`) every intervalMs, each with its own deadline, until durationMs,
 * maxRequests or the signal; at most maxInFlight open at once. Every request is recorded, in start order.
 */
export function runHttpPaced(cmd: HttpPacedCommand, hooks: PacedHooks = {}): Promise<HttpPacedResult> {
  const t0 = Date.now();
  const records: PacedRecord[] = [];
  let inFlight = 0;
  let issued = 0;
  hooks.onStart?.({ started: t0 });
  const one = (): void => {
    const s = Date.now();
    inFlight++;
    issued++;
    let done = false;
    const finish = (ok: boolean, err: string): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      inFlight--;
      records.push([s - t0, Date.now() - s, ok ? 1 : 0, ok ? '' : err]);
    };
    const req = request(cmd.url, { agent: false, headers: { connection: 'close' } }, (res) => {
      res.resume();
      res.on('end', () => finish(res.statusCode === 200, `HTTP ${res.statusCode}`));
      res.on('error', (e) => finish(false, errorKind(e)));
    });
    const timer = setTimeout(() => {
      finish(false, 'timeout');
      req.destroy();
    }, cmd.timeoutMs);
    req.on('error', (e) => finish(false, errorKind(e)));
    req.end();
  };
  return new Promise((resolve) => {
    const end = (): void => {
      const deadline = Date.now() + cmd.timeoutMs + PACED_DRAIN_SLACK_MS;
      const wait = (): void => {
        if (inFlight > 0 && Date.now() < deadline) {
          setTimeout(wait, 10);
          return;
        }
        resolve({ t0, records: [...records] });
      };
      wait();
    };
    const tick = (): void => {
      if (hooks.signal?.aborted || Date.now() - t0 > cmd.durationMs || issued >= cmd.maxRequests) {
        end();
        return;
      }
      if (inFlight < cmd.maxInFlight) one();
      setTimeout(tick, cmd.intervalMs);
    };
    tick();
  });
}

// ---- stream ---------------------------------------------------------------------------------------

export interface StreamHooks {
  /** Called once every connection has its first line or has failed. */
  onReady?(report: ReadyReport): void;
  /** Ends the run early (SIGTERM/SIGINT in the bin). */
  signal?: AbortSignal;
}

export async function runStream(cmd: StreamCommand, hooks: StreamHooks = {}): Promise<StreamResult> {
  const conns = Array.from({ length: cmd.connections }, () => openStream(cmd.target, cmd.timeoutMs));
  await Promise.all(conns.map((c) => c.settled));
  const servers: Counts = {};
  for (const c of conns) if (c.checker.started) bump(servers, c.checker.report().server!);
  const started = conns.filter((c) => c.checker.started).length;
  const failures = conns.filter((c) => !c.checker.started).slice(0, 20).map((c) => ({ port: c.localPort, error: c.checker.report().error ?? 'no line' }));
  hooks.onReady?.({ ready: started === conns.length, connections: conns.length, started, failed: conns.length - started, servers, failures });

  await new Promise<void>((resolve) => {
    const timer = setTimeout(done, cmd.durationMs);
    function done(): void {
      clearTimeout(timer);
      hooks.signal?.removeEventListener('abort', done);
      resolve();
    }
    if (hooks.signal?.aborted) done();
    else hooks.signal?.addEventListener('abort', done);
  });

  const now = Date.now();
  const perConnection = conns.map((c) => {
    c.closing = true;
    const report = c.checker.finish(now, cmd.stallMs);
    c.socket.destroy();
    return { ...report, port: c.localPort };
  });
  const intact = perConnection.filter((r) => r.error === null).length;
  return { connections: conns.length, intact, broken: conns.length - intact, servers, perConnection };
}

interface StreamConnection {
  readonly socket: Socket;
  readonly checker: StreamChecker;
  /** Resolves once the first line arrived or the connection failed. */
  readonly settled: Promise<void>;
  closing: boolean;
  /** The client's port, known once the kernel bound it (for the record of a failed start). */
  localPort: number | null;
}

function openStream(target: HostPort, firstLineTimeoutMs: number): StreamConnection {
  const checker = new StreamChecker();
  const socket = connect({ host: target.host, port: target.port });
  let settle!: () => void;
  const settled = new Promise<void>((resolve) => { settle = resolve; });
  const conn: StreamConnection = { socket, checker, settled, closing: false, localPort: null };
  // net.connect starts the kernel's connect on the next tick (for an address, no lookup), which binds the
  // port: a tick queued after it reads the port before any answer (even a loopback reset) can close the socket.
  process.nextTick(() => { conn.localPort = socket.localPort ?? null; });
  socket.once('connect', () => { conn.localPort = socket.localPort ?? conn.localPort; });
  const timer = setTimeout(() => {
    if (!checker.started) checker.fail(`no first line within ${firstLineTimeoutMs} ms`);
    settle();
  }, firstLineTimeoutMs);
  socket.setEncoding('utf8');
  socket.on('data', (text: string) => {
    checker.feed(text, Date.now());
    if (checker.started) {
      clearTimeout(timer);
      settle();
    }
  });
  socket.on('error', (e) => checker.fail(`${errorKind(e)} after ${checker.report().lines} lines`));
  socket.on('close', () => {
    if (!conn.closing) checker.fail(`closed by the other end after ${checker.report().lines} lines`);
    clearTimeout(timer);
    settle();
  });
  return conn;
}

// ---- udp ------------------------------------------------------------------------------------------

export async function runUdp(cmd: UdpCommand): Promise<UdpResult> {
  const servers: Counts = {};
  const peers: Counts = {};
  const errors: Counts = {};
  let ok = 0;
  let failed = 0;
  const type = cmd.target.family === 6 ? 'udp6' : 'udp4';
  // With --source-port every datagram is the same flow; otherwise each comes from a fresh socket (port).
  const shared = cmd.sourcePort === undefined ? undefined : await openUdp(type, cmd.sourcePort);
  // Fresh sockets stay open (up to a bound) until the run ends: a closed one's port can be handed to the
  // next request, whose datagram would then be the earlier flow to conntrack, not a new one.
  const open: UdpSock[] = [];
  try {
    for (let i = 0; i < cmd.count; i++) {
      const sock = shared ?? (await openUdp(type, 0));
      if (!shared) {
        open.push(sock);
        if (open.length > MAX_OPEN_UDP_SOCKETS) open.shift()!.close();
      }
      try {
        const reply = await udpExchange(sock, cmd.target, `lbd-testclient ${process.pid} ${i}`, cmd.timeoutMs);
        const a = parseAnswer(reply);
        if (!a) throw new Error('not a server answer');
        ok++;
        bump(servers, a.server);
        if (a.peer !== undefined) bump(peers, a.peer);
      } catch (e) {
        failed++;
        bump(errors, errorKind(e));
      }
    }
  } finally {
    shared?.close();
    for (const sock of open) sock.close();
  }
  return { ok, failed, servers, peers, errors };
}

export type UdpSock = ReturnType<typeof createSocket>;
/** Fresh-port sockets a udp run keeps open at once. */
const MAX_OPEN_UDP_SOCKETS = 1024;

/**
 * Binds a UDP socket to `port`, or to a fresh port when it is 0. Only a fixed port sets SO_REUSEADDR:
 * Linux's ephemeral-port search skips no port held by sockets that all set it, so fresh sockets with it
 * share a port now and then (24 of 1000 here), and two "fresh" flows are then one flow to conntrack
 * (stop 35's CI: an rr split of 30 datagrams came out 10/11/9).
 */
export function openUdp(type: 'udp4' | 'udp6', port: number): Promise<UdpSock> {
  return new Promise((resolve, reject) => {
    const sock = createSocket({ type, reuseAddr: port !== 0 });
    sock.once('error', reject);
    sock.bind(port, () => {
      sock.off('error', reject);
      resolve(sock);
    });
  });
}

/** Sends `payload` and resolves with the reply that echoes it (late replies to earlier requests are skipped). */
function udpExchange(sock: UdpSock, target: HostPort, payload: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const done = (fn: () => void): void => {
      clearTimeout(timer);
      sock.off('message', onMessage);
      sock.off('error', onError);
      fn();
    };
    const onMessage = (msg: Buffer): void => {
      const text = msg.toString('utf8');
      try {
        if ((JSON.parse(text) as { request?: unknown }).request !== payload) return;
      } catch {
        return;
      }
      done(() => resolve(text));
    };
    const onError = (e: Error): void => done(() => reject(e));
    const timer = setTimeout(() => done(() => reject(Object.assign(new Error('timeout'), { code: 'timeout' }))), timeoutMs);
    sock.on('message', onMessage);
    sock.on('error', onError);
    sock.send(payload, target.port, target.host);
  });
}

// ---- udp-flows -----------------------------------------------------------------------------------

/** Payload prefix: `lbd-udp-flow <pid> <seq>`; the server echoes it back in `request`. */
const FLOW_PAYLOAD = 'lbd-udp-flow';

export interface UdpFlowsHooks {
  /** Called once every flow has its first answer or has failed. */
  onReady?(report: UdpFlowsReadyReport): void;
  /** Ends the run early (SIGTERM/SIGINT in the bin). */
  signal?: AbortSignal;
}

/**
 * N flows, each one socket bound to its own source port for the whole run, so each is one conntrack entry
 * that a failover must carry over (or break). The protocol is UdpFlowChecker's; this is its sockets and
 * timers. At the end no new seq is sent and an outstanding one gets up to two timeouts to be answered.
 */
export async function runUdpFlows(cmd: UdpFlowsCommand, hooks: UdpFlowsHooks = {}): Promise<UdpFlowsResult> {
  const type = cmd.target.family === 6 ? 'udp6' : 'udp4';
  const timing = { intervalMs: cmd.intervalMs, timeoutMs: cmd.timeoutMs, maxRetries: cmd.maxRetries };
  const flows = await Promise.all(Array.from({ length: cmd.flows }, (_, i) => openFlow(type, cmd.firstPort === undefined ? 0 : cmd.firstPort + i, cmd.target, timing)));
  try {
    await Promise.all(flows.map((f) => f.settled));
    const servers: Counts = {};
    for (const f of flows) if (f.checker.started) bump(servers, f.checker.report().server!);
    const started = flows.filter((f) => f.checker.started).length;
    hooks.onReady?.({ ready: started === flows.length, flows: flows.length, started, failed: flows.length - started, servers });

    await abortableDelay(cmd.durationMs, hooks.signal);
    for (const f of flows) f.stop();
    await Promise.race([Promise.all(flows.map((f) => f.idle)), delay(2 * cmd.timeoutMs)]);

    const now = Date.now();
    const perFlow = flows.map((f) => f.checker.finish(now));
    const intact = perFlow.filter((r) => r.error === null).length;
    const finalServers: Counts = {};
    for (const r of perFlow) if (r.server !== null) bump(finalServers, r.server);
    return { flows: flows.length, intact, broken: flows.length - intact, servers: finalServers, perFlow };
  } finally {
    for (const f of flows) f.close();
  }
}

interface UdpFlow {
  readonly checker: UdpFlowChecker;
  /** Resolves once the first answer arrived or the flow failed. */
  readonly settled: Promise<void>;
  /** Resolves once, after stop(), nothing waits for an answer. */
  readonly idle: Promise<void>;
  stop(): void;
  close(): void;
}

async function openFlow(type: 'udp4' | 'udp6', port: number, target: HostPort, timing: UdpFlowTiming): Promise<UdpFlow> {
  let sock: UdpSock;
  try {
    sock = await openUdp(type, port);
  } catch (e) {
    const checker = new UdpFlowChecker(port, timing);
    checker.fail(`bind to port ${port}: ${errorKind(e)}`, { fatal: true });
    return { checker, settled: Promise.resolve(), idle: Promise.resolve(), stop: () => undefined, close: () => undefined };
  }
  const checker = new UdpFlowChecker(sock.address().port, timing);
  let settle!: () => void;
  const settled = new Promise<void>((resolve) => { settle = resolve; });
  let becameIdle!: () => void;
  const idle = new Promise<void>((resolve) => { becameIdle = resolve; });
  let stopped = false;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  const prefix = `${FLOW_PAYLOAD} ${process.pid} `;

  const step = (): void => {
    clearTimeout(timer);
    if (closed) return;
    const now = Date.now();
    const s = checker.tick(now);
    if (s.send !== undefined) {
      sock.send(`${prefix}${s.send}`, target.port, target.host, (e) => { if (e) checker.sendFailed(errorKind(e)); });
    }
    if (checker.settled) settle();
    if (stopped && checker.idle) becameIdle();
    if (Number.isFinite(s.wakeAtMs)) timer = setTimeout(step, Math.max(0, s.wakeAtMs - now));
  };
  sock.on('message', (msg: Buffer) => {
    let v: { server?: unknown; request?: unknown };
    try {
      v = JSON.parse(msg.toString('utf8')) as typeof v;
    } catch {
      return;
    }
    // Only answers to this flow's own requests (the request text is echoed back).
    if (typeof v.server !== 'string' || typeof v.request !== 'string' || !v.request.startsWith(prefix)) return;
    const seq = Number(v.request.slice(prefix.length));
    if (!Number.isInteger(seq)) return;
    if (checker.answer(seq, v.server, Date.now())) step();
  });
  // An unconnected UDP socket reports nothing useful here (no ICMP errors); keep going, the re-sends decide.
  sock.on('error', (e) => checker.sendFailed(errorKind(e)));
  step();
  return {
    checker, settled, idle,
    stop: () => {
      stopped = true;
      checker.stop();
      if (checker.idle) becameIdle();
    },
    close: () => {
      closed = true;
      clearTimeout(timer);
      settle();
      becameIdle();
      sock.close();
    },
  };
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** Resolves after `ms` or as soon as `signal` aborts. */
function abortableDelay(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    if (signal?.aborted) done();
    else signal?.addEventListener('abort', done);
  });
}

// ---- tcp-once -------------------------------------------------------------------------------------

/** Attempts per connection when the fixed source port is briefly still in use. */
const SOURCE_PORT_RETRIES = 5;
const SOURCE_PORT_RETRY_MS = 100;

export async function runTcpOnce(cmd: TcpOnceCommand): Promise<TcpOnceResult> {
  const servers: Counts = {};
  const errors: Counts = {};
  const sequence: (string | null)[] = [];
  for (let i = 0; i < cmd.count; i++) {
    try {
      const server = await firstLineServer(cmd.target, cmd.sourcePort, cmd.timeoutMs);
      sequence.push(server);
      bump(servers, server);
    } catch (e) {
      sequence.push(null);
      bump(errors, errorKind(e));
    }
  }
  const failed = sequence.filter((s) => s === null).length;
  return { ok: sequence.length - failed, failed, servers, sequence, errors };
}

async function firstLineServer(target: HostPort, sourcePort: number | undefined, timeoutMs: number): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await firstLineOnce(target, sourcePort, timeoutMs);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (sourcePort === undefined || attempt >= SOURCE_PORT_RETRIES || (code !== 'EADDRINUSE' && code !== 'EADDRNOTAVAIL')) throw e;
      await new Promise((resolve) => setTimeout(resolve, SOURCE_PORT_RETRY_MS));
    }
  }
}

function firstLineOnce(target: HostPort, sourcePort: number | undefined, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    // libuv sets SO_REUSEADDR before binding localPort.
    const socket = connect({ host: target.host, port: target.port, ...(sourcePort !== undefined ? { localPort: sourcePort } : {}) });
    const checker = new StreamChecker();
    let finished = false;
    const finish = (fn: () => void): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      // With a fixed source port, close with RST: a FIN would leave this side in TIME_WAIT and the next
      // connection from the same port could not reuse the 4-tuple.
      if (sourcePort !== undefined) socket.resetAndDestroy();
      else socket.destroy();
      fn();
    };
    const timer = setTimeout(() => finish(() => reject(Object.assign(new Error('timeout'), { code: 'timeout' }))), timeoutMs);
    socket.setEncoding('utf8');
    socket.on('data', (text: string) => {
      checker.feed(text, Date.now());
      const r = checker.report();
      if (r.server !== null) finish(() => resolve(r.server!));
      else if (r.error !== null) finish(() => reject(new Error(r.error!)));
    });
    socket.on('error', (e) => finish(() => reject(e)));
    socket.on('close', () => finish(() => reject(Object.assign(new Error('closed before the first line'), { code: 'closed' }))));
  });
}
