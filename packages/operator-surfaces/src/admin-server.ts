import { once } from 'node:events';
import { chmod, lstat, mkdir, unlink } from 'node:fs/promises';
import { connect } from 'node:net';
import { dirname } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { DRILL_RESULTS, EVENT_KINDS, formatProblem, hostPort, type ConfigError, type DrillResultWord, type EventKind, type LbdEvent, type Problem } from '@lbd/config';
import type { ApplyResult } from '@lbd/dataplane';
import {
  CONNECTIONS_PER_MESSAGE, DEFAULT_EVENTS_LIMIT, MAX_CONFIG_TEXT_BYTES, MAX_EVENTS_LIMIT, MAX_PENDING_EVENTS, MAX_PENDING_HEALTH_EVENTS,
  MAX_SOURCE_CHARS, SERVER_CHANNEL_OPTIONS, adminServiceDefinition, bindServer, stopServer, unixTarget, type Event as WireEvent,
  type AdminDefinition, type AdminHandlers, type ApplyResponse, type Connection as WireConnection, type Finding as WireFinding,
  type GetHealthResponse, type GetStatsResponse, type GetStatusResponse, type HealthEvent as WireHealthEvent,
  type ClusterStatus, type ConfigHistoryResponse, type DrillResult, type FailoverResponse, type GetConfigResponse, type Problem as WireProblem,
} from '@lbd/proto';
import type { Logger } from '@lbd/log';
import { AgentError, RequestError, toGrpcStatus } from './errors.js';
import { authorizeCertificate, certificateNames, roleAllows, roleRefusal, type Authorization, type TlsListenerOptions } from './ops-http.js';
import type { Caller, Role } from './ops-types.js';

/**
 * The gRPC admin API, on a root-only unix socket and, with agent.admin.grpcListen, over TCP with mutual
 * TLS. It decides who may call what (METHOD_ROLES), checks what callers send (well-formed messages,
 * sizes, required fields) and maps errors to statuses; what the answers mean is the backend's (lbd-agent's
 * DirectorAdmin) business, which keeps this file free of lbd policy and the agent free of gRPC.
 */

/**
 * The least role each admin method needs over TCP (the unix socket is root-only and always writes).
 * A method that changes anything (the data plane, the cluster config, who leads, the event log) needs
 * `write`. When you add an RPC to admin.proto, add it here: a method missing from this table needs
 * `write`, so a forgotten read-only method is refused to readers rather than a write opened to them.
 */
export const METHOD_ROLES: Readonly<Record<string, Role | ((request: Record<string, unknown>) => Role)>> = {
  GetStatus: 'read',
  GetStats: 'read',
  ListConnections: 'read',
  // A dry run applies nothing: it shows the rule diff.
  Apply: (req) => (req.dryRun === true ? 'read' : 'write'),
  Doctor: 'read',
  GetHealth: 'read',
  WatchHealth: 'read',
  GetClusterStatus: 'read',
  Failover: 'write',
  ConfigHistory: 'read',
  Rollback: 'write',
  ListEvents: 'read',
  // A drill's result is stored in the event log (and in etcd, for the cluster).
  RecordDrill: 'write',
  // Moves a vip group twice.
  RunDrill: 'write',
  GetConfig: 'read',
};

/** The role `method` needs for `request` (undefined when the request could not be read: then the strictest). */
export function roleNeeded(method: string, request: Record<string, unknown> | undefined): Role {
  const r = METHOD_ROLES[method];
  if (r === undefined) return 'write';
  if (typeof r === 'string') return r;
  return request === undefined ? 'write' : r(request);
}

/** Every caller on the unix socket: its mode (0600, root) is the authentication. */
export const UNIX_SOCKET_CALLER: Caller = { name: 'unix-socket', role: 'write' };

export type AdminTcpOptions = TlsListenerOptions;

export type ApplyOutcome =
  | { readonly ok: true; readonly result: ApplyResult; readonly serviceCount: number; readonly sha256: string; readonly clusterRevision?: number }
  | { readonly ok: false; readonly error: ConfigError; readonly sha256: string };

/** Where a WatchHealth call receives events. */
export interface HealthSink {
  event(e: WireHealthEvent): void;
  /** No more events will come (the agent is stopping). */
  end(): void;
}

export interface ApplyOptions {
  /** Cluster mode: the config revision the caller based the change on. */
  readonly expectRevision?: number;
  readonly author?: string;
  /** Who asked (the unix socket, or a client certificate). */
  readonly caller?: Caller;
}

/** What a ListEvents call selects (checked: scope and kind are valid, limit within bounds). */
export interface EventQuery {
  readonly sinceUnixMs: number;
  readonly follow: boolean;
  readonly scope: 'local' | 'cluster';
  readonly limit: number;
  /** '' = every kind. */
  readonly kind: EventKind | '';
  /** '' = every director. */
  readonly director: string;
}

/** Where a ListEvents call receives events. */
export interface EventSink {
  event(e: LbdEvent): void;
  /** No more events: the kept ones are sent (without follow), or the agent is stopping. */
  end(): void;
  /** The stream cannot go on (etcd's watch failed). */
  fail(err: unknown): void;
}

export interface DrillRecord {
  readonly scenario: string;
  readonly result: DrillResultWord;
  readonly reason: string;
  readonly fields: Readonly<Record<string, string>>;
}

export interface AdminBackend {
  status(): Promise<GetStatusResponse>;
  stats(): Promise<GetStatsResponse>;
  /** `service`: a key or name, '' for all. */
  connections(service: string): Promise<WireConnection[]>;
  applyText(text: string, source: string, dryRun: boolean, opts?: ApplyOptions): Promise<ApplyOutcome>;
  doctor(): Promise<WireFinding[]>;
  /** `service`: a key or name, '' for all. */
  healthStatus(service: string): Promise<GetHealthResponse>;
  /** Sends the kept transitions at or after `sinceUnixMs`, then live ones; returns the unsubscribe. */
  watchHealth(sinceUnixMs: number, sink: HealthSink): () => void;
  clusterStatus(): Promise<ClusterStatus>;
  failover(group: string, to: string, author?: string, caller?: Caller): Promise<FailoverResponse>;
  /** Runs a live-cluster drill (`switchover`: `group` to `to` and back), measured from both directors. */
  runDrill(scenario: string, group: string, to: string, author: string, caller?: Caller): Promise<DrillResult>;
  configHistory(): Promise<ConfigHistoryResponse>;
  /** Returns the new revision. */
  rollback(revision: number, author: string, caller?: Caller): Promise<number>;
  /**
   * Sends the kept events `q` selects, oldest first, then (with `q.follow`) new ones; without follow it
   * ends the sink itself. Resolves to the stop function once the kept events are sent.
   */
  listEvents(q: EventQuery, sink: EventSink): Promise<() => void>;
  /** Records a drill's result as a `drill` event; returns its id. */
  recordDrill(d: DrillRecord, caller: Caller): string;
  /** The running config's text and revision (cluster: etcd's), for edits applied by compare-and-swap. */
  getConfig(): Promise<GetConfigResponse>;
}

/** Lines of problems in a rejected Apply's status message; the response message carries all of them. */
const PROBLEMS_IN_MESSAGE = 20;
const MAX_SERVICE_FILTER_CHARS = 256;
/** RecordDrill: figures per drill, and the longest reason. */
const MAX_DRILL_FIELDS = 64;
const MAX_DRILL_REASON_CHARS = 2000;
/** RunDrill: a scenario is a word. */
const MAX_SCENARIO_CHARS = 64;
/** How long shutdown waits for calls in flight before cutting them off. */
const SHUTDOWN_GRACE_MS = 2000;

export class AdminServer {
  private constructor(
    private readonly server: grpc.Server,
    /** The unix socket, or null for the TCP listener. */
    readonly socketPath: string | null,
    /** The inode bound, so close() never removes a socket a newer agent has since created. */
    private readonly inode: number,
    /** The TCP port bound (0 for the unix socket). */
    readonly port = 0,
  ) {}

  /**
   * Makes sure `path` can be bound: creates its directory (0700) if missing, removes a stale socket
   * left by an agent that died, and refuses when a live agent answers there or the path is not a socket.
   */
  static async checkSocketFree(path: string): Promise<void> {
    await mkdir(dirname(path), { recursive: true, mode: 0o700 });
    let st;
    try {
      st = await lstat(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    if (!st.isSocket()) {
      throw new AgentError('SocketInUse', `${path} exists and is not a socket; refusing to replace it (remove it, or choose another --admin-socket)`);
    }
    if (await answers(path)) {
      throw new AgentError('SocketInUse', `another process is serving ${path}: is another lbd-agent running? (stop it, or choose another --admin-socket)`);
    }
    await unlink(path);
  }

  static async listen(path: string, backend: AdminBackend, log: Logger): Promise<AdminServer> {
    await AdminServer.checkSocketFree(path);
    const server = new grpc.Server(SERVER_CHANNEL_OPTIONS);
    addGuardedService(server, backend, log, () => ({ ok: true, caller: UNIX_SOCKET_CALLER }));
    await new Promise<void>((resolve, reject) => {
      server.bindAsync(unixTarget(path), grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve()));
    });
    // Root only: the socket's mode is the admin API's authentication. lbd-agent's main also sets a
    // umask of 077, so the socket is never group- or world-accessible, not even before this chmod.
    await chmod(path, 0o600);
    const { ino } = await lstat(path);
    return new AdminServer(server, path, ino);
  }

  /**
   * The admin API over TCP: mutual TLS against `tls.ca` (no certificate, or one the CA did not sign, ends
   * the handshake), then per call the certificate's role from `clients` against METHOD_ROLES.
   */
  static async listenTcp(opts: AdminTcpOptions, backend: AdminBackend, log: Logger): Promise<AdminServer> {
    const server = new grpc.Server({
      ...SERVER_CHANNEL_OPTIONS,
      // Enough for lbadm and a few watchers; a client that opens streams without end is held to this.
      'grpc.max_concurrent_streams': 64,
      // A connection with no call for this long is closed, and one whose client vanished (no ping answer)
      // ends its calls: an idle or dead client does not hold a connection for good. (A client that never
      // finishes the TLS handshake is cut off by Node after 120 s.)
      'grpc.max_connection_idle_ms': 5 * 60_000,
      'grpc.keepalive_time_ms': 60_000,
      'grpc.keepalive_timeout_ms': 20_000,
    });
    addGuardedService(server, backend, log, (call) => authorizeCertificate(certificateNames(call.getAuthContext?.()?.sslPeerCertificate), opts.clients));
    const creds = grpc.ServerCredentials.createSsl(opts.tls.ca, [{ private_key: opts.tls.key, cert_chain: opts.tls.cert }], true);
    const port = await bindServer(server, opts.address, opts.port, creds);
    log.info('admin listener started', { listen: hostPort(opts.address, port), clients: opts.clients.map((c) => `${c.name}:${c.role}`) });
    return new AdminServer(server, null, 0, port);
  }

  /** Stops accepting calls, gives calls in flight a moment, and removes the socket file. */
  async close(): Promise<void> {
    await stopServer(this.server, SHUTDOWN_GRACE_MS);
    if (this.socketPath === null) return;
    try {
      if ((await lstat(this.socketPath)).ino === this.inode) await unlink(this.socketPath);
    } catch {
      // Already gone.
    }
  }
}

/** Whether something accepts connections on the unix socket at `path`. */
async function answers(path: string): Promise<boolean> {
  const socket = connect(path);
  try {
    await once(socket, 'connect');
    return true;
  } catch {
    return false; // ECONNREFUSED: the socket file outlived its process.
  } finally {
    socket.destroy();
  }
}

/** Marks a request the service's message type could not decode; see guardedDefinition. */
const MALFORMED = Symbol('malformed request');
type Malformed = { readonly [MALFORMED]: string };

function isMalformed(req: unknown): req is Malformed {
  return typeof req === 'object' && req !== null && MALFORMED in req;
}

/**
 * The service definition with decoders that never throw: grpc-js answers a request it cannot decode
 * with INTERNAL "Error deserializing request", which reads like a bug in the agent. A malformed request
 * is the caller's: the guard answers INVALID_ARGUMENT naming the message type and the decoder's reason.
 */
function guardedDefinition(): AdminDefinition {
  const def = adminServiceDefinition();
  return Object.fromEntries(Object.entries(def).map(([name, m]) => [name, {
    ...m,
    requestDeserialize: (bytes: Buffer): unknown => {
      try {
        return m.requestDeserialize(bytes);
      } catch (err) {
        return { [MALFORMED]: err instanceof Error ? err.message : String(err) };
      }
    },
  }])) as unknown as AdminDefinition;
}

/** The caller of each call the guard let through, for handlers that record who asked. */
const callers = new WeakMap<object, Caller>();

function callerOf(call: object): Caller {
  return callers.get(call) ?? UNIX_SOCKET_CALLER;
}

type AnyCall = grpc.ServerUnaryCall<unknown, unknown> & { getAuthContext?(): { sslPeerCertificate?: { subject?: unknown; subjectaltname?: string } } | null };

/**
 * Adds the admin service with every method behind the same checks, in this order: who the caller is
 * (`authenticate`), whether its role suffices for the method (METHOD_ROLES), whether the request could
 * be decoded. Iterating the definition covers methods added later without touching this function.
 */
function addGuardedService(server: grpc.Server, backend: AdminBackend, log: Logger, authenticate: (call: AnyCall) => Authorization): void {
  const definition = guardedDefinition();
  const inner = handlers(backend, log) as unknown as Record<string, (call: AnyCall, callback?: grpc.sendUnaryData<unknown>) => void>;
  const guarded: Record<string, (call: AnyCall, callback?: grpc.sendUnaryData<unknown>) => void> = {};
  for (const [name, m] of Object.entries(definition)) {
    const handler = inner[name];
    if (handler === undefined) continue; // grpc-js answers UNIMPLEMENTED
    guarded[name] = (call, callback) => {
      const refuse = (code: grpc.status, details: string): void => {
        if (callback !== undefined) callback({ code, details });
        else (call as unknown as NodeJS.EventEmitter).emit('error', { code, details });
      };
      const auth = authenticate(call);
      if (!auth.ok) {
        log.info('admin call refused', { method: name, reason: auth.reason });
        refuse(grpc.status.PERMISSION_DENIED, auth.reason);
        return;
      }
      // Client-streaming methods have no request yet: they get the strictest role of their entry.
      const request = m.requestStream ? undefined : (call.request as Record<string, unknown> | undefined);
      const malformed = isMalformed(request);
      const need = roleNeeded(name, malformed ? undefined : request);
      if (!roleAllows(auth.caller.role, need)) {
        const what = name === 'Apply' && need === 'write' ? 'Apply without dry_run' : name;
        log.info('admin call refused', { method: name, caller: auth.caller.name, role: auth.caller.role, needs: need });
        refuse(grpc.status.PERMISSION_DENIED, roleRefusal(auth.caller, need, what));
        return;
      }
      if (malformed) {
        const type = (m as { requestType?: { type?: { name?: string } } }).requestType?.type?.name ?? 'request';
        refuse(grpc.status.INVALID_ARGUMENT, `request: not a valid lbd.admin.v1.${type} (${request[MALFORMED]}); lbadm and lbd-agent must speak the same admin.proto`);
        return;
      }
      callers.set(call, auth.caller);
      handler(call, callback);
    };
  }
  server.addService(definition, guarded as unknown as AdminHandlers);
}

/**
 * The recorded author of a write: what the client says for the unix socket (root may say anything);
 * over TCP the certificate's name, which the client cannot forge, with what it says beside it.
 */
function authorOf(caller: Caller, said: string): string {
  if (caller === UNIX_SOCKET_CALLER) return said;
  return said === '' || said === caller.name ? caller.name : `${said} (certificate ${caller.name})`;
}

function handlers(backend: AdminBackend, log: Logger): AdminHandlers {
  /** Answers a unary call from `fn`, mapping whatever it throws to a status. */
  function unary<Req, Res>(method: string, fn: (req: Req, caller: Caller) => Promise<Res>): grpc.handleUnaryCall<Req, Res> {
    return (call, callback) => {
      // A promise chain from the start: a handler that throws at once is a status too, never a crash.
      Promise.resolve().then(() => fn(call.request, callerOf(call))).then((res) => callback(null, res), (err: unknown) => callback(failure(method, err, log)));
    };
  }

  return {
    GetStatus: unary('GetStatus', () => backend.status()),
    GetStats: unary('GetStats', () => backend.stats()),
    Doctor: unary('Doctor', async () => ({ findings: await backend.doctor() })),
    GetClusterStatus: unary('GetClusterStatus', () => backend.clusterStatus()),
    Failover: unary('Failover', (req: { group: string; to: string; author: string }, caller) => backend.failover(
      checkText('group', req.group, MAX_SERVICE_FILTER_CHARS, true), checkText('to', req.to, MAX_SERVICE_FILTER_CHARS, false),
      authorOf(caller, checkText('author', req.author, MAX_SOURCE_CHARS, false)), caller)),
    RunDrill: unary('RunDrill', (req: { scenario: string; group: string; to: string; author: string }, caller) => {
      if (checkText('scenario', req.scenario, MAX_SCENARIO_CHARS, true) !== 'switchover') {
        throw new RequestError(grpc.status.INVALID_ARGUMENT, 'scenario', `${JSON.stringify(req.scenario)} is not a drill a live cluster runs: only "switchover" (failure drills are the lab's: deploy/lab/lab drill)`);
      }
      return backend.runDrill(req.scenario, checkText('group', req.group, MAX_SERVICE_FILTER_CHARS, true), checkText('to', req.to, MAX_SERVICE_FILTER_CHARS, false),
        authorOf(caller, checkText('author', req.author, MAX_SOURCE_CHARS, false)), caller);
    }),
    ConfigHistory: unary('ConfigHistory', () => backend.configHistory()),
    Rollback: unary('Rollback', async (req: { revision: number; author: string }, caller) => {
      if (!(req.revision >= 1)) throw new RequestError(grpc.status.INVALID_ARGUMENT, 'revision', `${req.revision} is not a config revision (1 or more; see lbadm config history)`);
      return { revision: await backend.rollback(req.revision, authorOf(caller, checkText('author', req.author, MAX_SOURCE_CHARS, false)), caller) };
    }),
    GetConfig: unary('GetConfig', () => backend.getConfig()),
    GetHealth: unary('GetHealth', (req: { service: string }) => backend.healthStatus(checkText('service', req.service, MAX_SERVICE_FILTER_CHARS, false))),

    WatchHealth: (call) => {
      // Events come from the health checker at their own pace; a reader that falls too far behind is cut off.
      const out = feed<WireHealthEvent>(call, MAX_PENDING_HEALTH_EVENTS,
        `the client read too slowly: ${MAX_PENDING_HEALTH_EVENTS} health events waited unsent; watch again`);
      out.onStop(backend.watchHealth(call.request.sinceUnixMs, { event: (e) => out.push(e), end: () => out.end() }));
    },

    ListEvents: (call) => {
      const out = feed<WireEvent>(call, MAX_PENDING_EVENTS,
        `the client read too slowly: ${MAX_PENDING_EVENTS} events waited unsent; list again with --since`);
      void (async () => {
        try {
          const stop = await backend.listEvents(eventQuery(call.request), {
            event: (e) => out.push({ ...e, fields: { ...e.fields } }),
            end: () => out.end(),
            fail: (err) => out.fail(failure('ListEvents', err, log)),
          });
          out.onStop(stop);
        } catch (err) {
          out.fail(failure('ListEvents', err, log));
        }
      })();
    },
    RecordDrill: unary('RecordDrill', async (req: { scenario: string; result: string; reason: string; fields: Record<string, string> }, caller) => {
      return { id: backend.recordDrill(drillRecord(req), caller) };
    }),

    ListConnections: (call) => {
      void (async () => {
        try {
          const service = checkText('service', call.request.service, MAX_SERVICE_FILTER_CHARS, false);
          const conns = await backend.connections(service);
          for (let i = 0; i < conns.length && !call.cancelled; i += CONNECTIONS_PER_MESSAGE) {
            // Respect flow control: a slow reader must not make the agent buffer the whole table.
            if (!call.write({ connections: conns.slice(i, i + CONNECTIONS_PER_MESSAGE) })) await once(call, 'drain');
          }
          call.end();
        } catch (err) {
          // grpc-js ends a server stream with the status of an 'error' event.
          call.emit('error', failure('ListConnections', err, log));
        }
      })();
    },

    // One response, then the status (see the proto for why Apply is a stream).
    Apply: (call) => {
      void (async () => {
        const req = call.request;
        try {
          const bytes = Buffer.byteLength(req.configText, 'utf8');
          if (bytes > MAX_CONFIG_TEXT_BYTES) {
            throw new RequestError(grpc.status.INVALID_ARGUMENT, 'config_text', `${bytes} bytes is more than the limit of ${MAX_CONFIG_TEXT_BYTES} (4 MiB); split the config or remove what it does not need`);
          }
          const source = checkText('source', req.source, MAX_SOURCE_CHARS, true);
          const caller = callerOf(call);
          const author = authorOf(caller, checkText('author', req.author, MAX_SOURCE_CHARS, false));
          const outcome = await backend.applyText(req.configText, source, req.dryRun, {
            ...(req.checkRevision ? { expectRevision: req.expectRevision } : {}), ...(author === '' ? {} : { author }), caller,
          });
          if (outcome.ok) {
            call.write({ ...applyResponse(outcome.result, req.dryRun, outcome.serviceCount, outcome.sha256), clusterRevision: outcome.clusterRevision ?? 0 });
            call.end();
            return;
          }
          call.write({ dryRun: req.dryRun, configSha256: outcome.sha256, problems: outcome.error.problems.map(wireProblem) });
          call.emit('error', rejection(outcome.error));
        } catch (err) {
          call.emit('error', failure('Apply', err, log));
        }
      })();
    },
  };
}

/**
 * A server stream fed at the producer's pace (health transitions, events): messages wait while the
 * client's flow control says so, and a reader that falls `maxPending` behind is cut off with
 * RESOURCE_EXHAUSTED (`tooSlow`) rather than buffered without end. `onStop` takes the producer's
 * unsubscribe, called once however the stream ends (the client cancels, it fails, it ends).
 */
function feed<T>(call: grpc.ServerWritableStream<unknown, T>, maxPending: number, tooSlow: string): {
  push(m: T): void; end(): void; fail(status: Partial<grpc.StatusObject>): void; onStop(stop: () => void): void;
} {
  const pending: T[] = [];
  let waiting = false;
  let done = false;
  let stop = (): void => { /* replaced once the call's source is wired */ };
  const finish = (status?: Partial<grpc.StatusObject>): void => {
    if (done) return;
    done = true;
    stop();
    if (status) call.emit('error', status);
    else call.end();
  };
  /** Set by end(): the stream ends once everything pending is written. */
  let ending = false;
  const flush = (): void => {
    waiting = false;
    for (let m = pending.shift(); !done && m !== undefined; m = pending.shift()) {
      if (!call.write(m)) {
        waiting = true;
        call.once('drain', flush);
        return;
      }
    }
    if (ending) finish();
  };
  call.on('cancelled', () => { done = true; stop(); });
  call.on('error', () => { done = true; stop(); });
  return {
    push(m) {
      if (done) return;
      if (pending.length >= maxPending) {
        finish({ code: grpc.status.RESOURCE_EXHAUSTED, details: tooSlow });
        return;
      }
      pending.push(m);
      if (!waiting) flush();
    },
    end() {
      // End after what is queued has been written (flush ends it when the queue is empty).
      ending = true;
      if (!waiting) flush();
    },
    fail: (status) => finish(status),
    onStop(fn) {
      stop = fn;
      // The call went away (or the producer ended it) while subscribing.
      if (done) fn();
    },
  };
}

function eventQuery(req: { sinceUnixMs: number; follow: boolean; scope: string; limit: number; kind: string; director: string }): EventQuery {
  if (req.scope !== '' && req.scope !== 'local' && req.scope !== 'cluster') {
    throw new RequestError(grpc.status.INVALID_ARGUMENT, 'scope', `${quoted(req.scope)} is not "local" or "cluster" (or empty, for cluster)`);
  }
  if (req.limit > MAX_EVENTS_LIMIT) {
    throw new RequestError(grpc.status.INVALID_ARGUMENT, 'limit', `${req.limit} is more than ${MAX_EVENTS_LIMIT}; narrow the request with since_unix_ms instead`);
  }
  if (req.kind !== '' && !(EVENT_KINDS as readonly string[]).includes(req.kind)) {
    throw new RequestError(grpc.status.INVALID_ARGUMENT, 'kind', `${quoted(req.kind)} is not one of ${EVENT_KINDS.join(', ')}`);
  }
  return {
    sinceUnixMs: req.sinceUnixMs, follow: req.follow, scope: req.scope === 'local' ? 'local' : 'cluster',
    limit: req.limit === 0 ? DEFAULT_EVENTS_LIMIT : req.limit, kind: req.kind as EventKind | '',
    director: checkText('director', req.director, MAX_SERVICE_FILTER_CHARS, false),
  };
}

/**
 * A caller's value inside an error message, cut short: the message travels back in the status
 * trailer, and echoing a megabyte of it would make the error itself fail to arrive.
 */
function quoted(value: string): string {
  const MAX = 64;
  return value.length <= MAX ? JSON.stringify(value) : `${JSON.stringify(value.slice(0, MAX))}... (${value.length} characters)`;
}

function drillRecord(req: { scenario: string; result: string; reason: string; fields: Record<string, string> }): DrillRecord {
  const scenario = checkText('scenario', req.scenario, MAX_SERVICE_FILTER_CHARS, true);
  if (!(DRILL_RESULTS as readonly string[]).includes(req.result)) {
    throw new RequestError(grpc.status.INVALID_ARGUMENT, 'result', `${quoted(req.result)} is not ${DRILL_RESULTS.map((r) => JSON.stringify(r)).join(' or ')}`);
  }
  const reason = checkText('reason', req.reason, MAX_DRILL_REASON_CHARS, false);
  const entries = Object.entries(req.fields ?? {});
  if (entries.length > MAX_DRILL_FIELDS) {
    throw new RequestError(grpc.status.INVALID_ARGUMENT, 'fields', `has ${entries.length} entries; the limit is ${MAX_DRILL_FIELDS}`);
  }
  for (const [k, v] of entries) {
    checkText(`fields key "${k.slice(0, 40)}"`, k, MAX_SERVICE_FILTER_CHARS, true);
    checkText(`fields["${k}"]`, v, MAX_SERVICE_FILTER_CHARS, false);
  }
  return { scenario, result: req.result as DrillResultWord, reason, fields: Object.fromEntries(entries) };
}

/** Source names and service filters: bounded, and no control characters (they end up in logs and terminals). */
function checkText(field: string, value: string, maxChars: number, required: boolean): string {
  if (required && value.trim() === '') {
    throw new RequestError(grpc.status.INVALID_ARGUMENT, field, 'is required');
  }
  if (value.length > maxChars) {
    throw new RequestError(grpc.status.INVALID_ARGUMENT, field, `is ${value.length} characters long; the limit is ${maxChars}`);
  }
  if (/[\u0000-\u001f\u007f]/.test(value)) {
    throw new RequestError(grpc.status.INVALID_ARGUMENT, field, 'contains control characters');
  }
  return value;
}

function applyResponse(result: ApplyResult, dryRun: boolean, serviceCount: number, sha256: string): ApplyResponse {
  return {
    changed: result.changed, operations: [...result.operations], fullRebuild: result.fullRebuild, dryRun,
    expiredConnections: result.expiredConnections, durationMs: result.durationMs, serviceCount, configSha256: sha256, problems: [],
    clusterRevision: 0,
  };
}

/** A rejected config's status: INVALID_ARGUMENT, and the problems in words for any gRPC client. */
function rejection(error: ConfigError): Partial<grpc.StatusObject> {
  const lines = error.message.split('\n');
  const shown = lines.slice(0, PROBLEMS_IN_MESSAGE + 1);
  if (lines.length > shown.length) shown.push(`  ... and ${lines.length - shown.length} more in the response message`);
  return { code: grpc.status.INVALID_ARGUMENT, details: shown.join('\n') };
}

function failure(method: string, err: unknown, log: Logger): Partial<grpc.StatusObject> {
  const { code, details, unexpected } = toGrpcStatus(err);
  if (unexpected) log.error('admin call failed', { method, error: err, stack: err instanceof Error ? err.stack : undefined });
  return { code, details };
}

/** A config problem on the wire: its parts, and the one-line text lbadm and the logs print. */
export function wireProblem(p: Problem): WireProblem {
  return {
    path: p.path,
    value: p.value === undefined ? '' : (JSON.stringify(p.value) ?? String(p.value)),
    rule: p.rule,
    fix: p.fix,
    text: formatProblem(p),
  };
}
