import { once } from 'node:events';
import { chmod, lstat, mkdir, unlink } from 'node:fs/promises';
import { connect } from 'node:net';
import { dirname } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { ConfigError } from '@lbd/config';
import type { ApplyResult } from '@lbd/dataplane';
import {
  CONNECTIONS_PER_MESSAGE, MAX_CONFIG_TEXT_BYTES, MAX_PENDING_HEALTH_EVENTS, MAX_SOURCE_CHARS, SERVER_CHANNEL_OPTIONS,
  adminServiceDefinition, unixTarget,
  type AdminHandlers, type ApplyResponse, type Connection as WireConnection, type Finding as WireFinding,
  type GetHealthResponse, type GetStatsResponse, type GetStatusResponse, type HealthEvent as WireHealthEvent,
  type ClusterStatus, type ConfigHistoryResponse, type FailoverResponse, type GetConfigResponse,
} from '@lbd/proto';
import { AgentError, RequestError, toGrpcStatus } from './errors.js';
import type { Logger } from './log.js';
import { wireProblem } from './views.js';

/**
 * The gRPC admin API on a root-only unix socket. It checks what callers send (sizes, required fields)
 * and maps errors to statuses; what the answers mean is the backend's (the Agent's) business, which
 * keeps this file free of lbd policy and the Agent free of gRPC.
 */

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
  failover(group: string, to: string): Promise<FailoverResponse>;
  configHistory(): Promise<ConfigHistoryResponse>;
  /** Returns the new revision. */
  rollback(revision: number, author: string): Promise<number>;
  /** The running config's text and revision (cluster: etcd's), for edits applied by compare-and-swap. */
  getConfig(): Promise<GetConfigResponse>;
}

/** Lines of problems in a rejected Apply's status message; the response message carries all of them. */
const PROBLEMS_IN_MESSAGE = 20;
const MAX_SERVICE_FILTER_CHARS = 256;
/** How long shutdown waits for calls in flight before cutting them off. */
const SHUTDOWN_GRACE_MS = 2000;

export class AdminServer {
  private constructor(
    private readonly server: grpc.Server,
    readonly socketPath: string,
    /** The inode bound, so close() never removes a socket a newer agent has since created. */
    private readonly inode: number,
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
    server.addService(adminServiceDefinition(), handlers(backend, log));
    await new Promise<void>((resolve, reject) => {
      server.bindAsync(unixTarget(path), grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve()));
    });
    // Root only: the socket's mode is the admin API's authentication. lbd-agent's main also sets a
    // umask of 077, so the socket is never group- or world-accessible, not even before this chmod.
    await chmod(path, 0o600);
    const { ino } = await lstat(path);
    return new AdminServer(server, path, ino);
  }

  /** Stops accepting calls, gives calls in flight a moment, and removes the socket file. */
  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => { this.server.forceShutdown(); resolve(); }, SHUTDOWN_GRACE_MS);
      this.server.tryShutdown(() => { clearTimeout(timer); resolve(); });
    });
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

function handlers(backend: AdminBackend, log: Logger): AdminHandlers {
  /** Answers a unary call from `fn`, mapping whatever it throws to a status. */
  function unary<Req, Res>(method: string, fn: (req: Req) => Promise<Res>): grpc.handleUnaryCall<Req, Res> {
    return (call, callback) => {
      fn(call.request).then((res) => callback(null, res), (err: unknown) => callback(failure(method, err, log)));
    };
  }

  return {
    GetStatus: unary('GetStatus', () => backend.status()),
    GetStats: unary('GetStats', () => backend.stats()),
    Doctor: unary('Doctor', async () => ({ findings: await backend.doctor() })),
    GetClusterStatus: unary('GetClusterStatus', () => backend.clusterStatus()),
    Failover: unary('Failover', (req: { group: string; to: string }) => backend.failover(
      checkText('group', req.group, MAX_SERVICE_FILTER_CHARS, true), checkText('to', req.to, MAX_SERVICE_FILTER_CHARS, false))),
    ConfigHistory: unary('ConfigHistory', () => backend.configHistory()),
    Rollback: unary('Rollback', async (req: { revision: number; author: string }) => {
      if (!(req.revision >= 1)) throw new RequestError(grpc.status.INVALID_ARGUMENT, 'revision', `${req.revision} is not a config revision (1 or more; see lbadm config history)`);
      return { revision: await backend.rollback(req.revision, checkText('author', req.author, MAX_SOURCE_CHARS, false)) };
    }),
    GetConfig: unary('GetConfig', () => backend.getConfig()),
    GetHealth: unary('GetHealth', (req: { service: string }) => backend.healthStatus(checkText('service', req.service, MAX_SERVICE_FILTER_CHARS, false))),

    WatchHealth: (call) => {
      // Writes are queued while the client's flow control says wait: events come from the health checker
      // at their own pace, and a reader that falls too far behind is cut off rather than buffered without end.
      const pending: WireHealthEvent[] = [];
      let waiting = false;
      let done = false;
      let unsubscribe = (): void => {};
      const finish = (status?: Partial<grpc.StatusObject>): void => {
        if (done) return;
        done = true;
        unsubscribe();
        if (status) call.emit('error', status);
        else call.end();
      };
      const flush = (): void => {
        waiting = false;
        for (let e = pending.shift(); !done && e !== undefined; e = pending.shift()) {
          if (!call.write(e)) {
            waiting = true;
            call.once('drain', flush);
            return;
          }
        }
      };
      call.on('cancelled', () => { done = true; unsubscribe(); });
      call.on('error', () => { done = true; unsubscribe(); });
      unsubscribe = backend.watchHealth(call.request.sinceUnixMs, {
        event(e) {
          if (done) return;
          if (pending.length >= MAX_PENDING_HEALTH_EVENTS) {
            finish({ code: grpc.status.RESOURCE_EXHAUSTED, details: `the client read too slowly: ${MAX_PENDING_HEALTH_EVENTS} health events waited unsent; watch again` });
            return;
          }
          pending.push(e);
          if (!waiting) flush();
        },
        end() {
          // The agent is stopping: end after what is queued has been written.
          if (waiting) call.once('drain', () => finish());
          else finish();
        },
      });
      if (done) unsubscribe(); // the call went away (or the agent stopped) while subscribing
    },

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
          const author = checkText('author', req.author, MAX_SOURCE_CHARS, false);
          const outcome = await backend.applyText(req.configText, source, req.dryRun, {
            ...(req.checkRevision ? { expectRevision: req.expectRevision } : {}), ...(author === '' ? {} : { author }),
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

/** Source names and service filters: bounded, and no control characters (they end up in logs and terminals). */
function checkText(field: string, value: string, maxChars: number, required: boolean): string {
  if (required && value.trim() === '') {
    throw new RequestError(grpc.status.INVALID_ARGUMENT, field, 'is required');
  }
  if (value.length > maxChars) {
    throw new RequestError(grpc.status.INVALID_ARGUMENT, field, `is ${value.length} characters long; the limit is ${maxChars}`);
  }
  // eslint-disable-next-line no-control-regex
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
