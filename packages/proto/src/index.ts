/**
 * The admin API's wire contract for TypeScript: loads proto/lbd/admin/v1/admin.proto at run time with
 * @grpc/proto-loader and gives typed client and server helpers. The message and service types under
 * ./gen are generated (see scripts/gen.mjs); this file is the only hand-written part, and it holds no
 * behaviour of the agent or of lbadm: limits both sides must agree on, and transport plumbing.
 */
import { existsSync } from 'node:fs';
import { isIP } from 'node:net';
import { checkServerIdentity, type PeerCertificate } from 'node:tls';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type {
  AdminClient, AdminDefinition, ApplyRequest, ApplyResponse__Output, ClusterStatus__Output, ConfigHistoryResponse__Output,
  Connection__Output, DrillResult__Output, Event__Output, FailoverResponse__Output, RunDrillRequest, GetConfigResponse__Output, ListEventsRequest, RecordDrillRequest, RecordDrillResponse__Output,
  RollbackResponse__Output,
  DoctorResponse__Output, GetHealthResponse__Output, GetStatsResponse__Output, GetStatusResponse__Output, HealthEvent__Output,
  ListConnectionsResponse__Output, PeerClient, PeerDefinition, PeerProtoGrpcType, Problem__Output, ProtoGrpcType,
  ConnSyncClient, ConnSyncDefinition, SyncProtoGrpcType,
} from './gen/index.js';
import { decodeSyncMessage, decodeSyncReply, encodeSyncMessage, encodeSyncReply } from './sync-codec.js';

export type * from './gen/index.js';
export { decodeSyncMessage, encodeSyncMessage, SyncCodecError } from './sync-codec.js';

/**
 * Must match the flags in scripts/gen.mjs: the generated types describe what these options produce.
 * Longs as numbers: counters come from the data plane as JS numbers already.
 */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false, longs: Number, enums: String, defaults: true, oneofs: true,
};

export const ADMIN_PROTO_FILE = 'lbd/admin/v1/admin.proto';

/** The largest config text Apply accepts; a real config of 10 000 services is well under 2 MiB. */
export const MAX_CONFIG_TEXT_BYTES = 4 * 1024 * 1024;
/** Events a WatchHealth stream may hold unsent for a slow reader before the agent ends it (RESOURCE_EXHAUSTED). */
export const MAX_PENDING_HEALTH_EVENTS = 10_000;
/** Events a ListEvents stream may hold unsent for a slow reader before the agent ends it (RESOURCE_EXHAUSTED). */
export const MAX_PENDING_EVENTS = 10_000;
/** ListEvents: kept events sent when the request's limit is 0, and the largest limit. */
export const DEFAULT_EVENTS_LIMIT = 1000;
export const MAX_EVENTS_LIMIT = 10_000;
/** The largest Apply `source`. */
export const MAX_SOURCE_CHARS = 256;
/** Connections per ListConnections message: large enough to be cheap, small enough to stream. */
export const CONNECTIONS_PER_MESSAGE = 1000;

/**
 * Channel options. The server accepts a maximal config text plus framing; replies can be large (status
 * of 10 000 services, the problem list of a broken 4 MiB config), so the client's receive limit is
 * generous.
 */
export const SERVER_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.max_receive_message_length': MAX_CONFIG_TEXT_BYTES + 64 * 1024,
  'grpc.max_send_message_length': 256 * 1024 * 1024,
};
export const CLIENT_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.max_receive_message_length': 256 * 1024 * 1024,
};

/**
 * Where admin.proto is. Both candidates are relative to this module, which sits one level below the
 * package directory both as src/index.ts and as dist/index.js: a copy inside the package (for a
 * package used outside the repo) first, then the repo's proto/ directory.
 */
export function protoIncludeDir(): string {
  const candidates = [new URL('../proto/', import.meta.url), new URL('../../../proto/', import.meta.url)].map((u) => fileURLToPath(u));
  const found = candidates.find((dir) => existsSync(`${dir}${ADMIN_PROTO_FILE}`));
  if (found === undefined) {
    throw new Error(`${ADMIN_PROTO_FILE} not found; looked in ${candidates.join(' and ')}`);
  }
  return found;
}

let loaded: { proto: ProtoGrpcType; definition: protoLoader.PackageDefinition } | undefined;

function load(): { proto: ProtoGrpcType; definition: protoLoader.PackageDefinition } {
  if (!loaded) {
    const definition = protoLoader.loadSync(ADMIN_PROTO_FILE, { ...LOADER_OPTIONS, includeDirs: [protoIncludeDir()] });
    loaded = { proto: grpc.loadPackageDefinition(definition) as unknown as ProtoGrpcType, definition };
  }
  return loaded;
}

/** The loaded `lbd.admin.v1` package (message types and the Admin client constructor). */
export function adminProto(): ProtoGrpcType['lbd']['admin']['v1'] {
  return load().proto.lbd.admin.v1;
}

/** The Admin service definition, for `server.addService(adminServiceDefinition(), handlers)`. */
export function adminServiceDefinition(): AdminDefinition {
  return adminProto().Admin.service;
}

export const PEER_PROTO_FILE = 'lbd/peer/v1/peer.proto';

/** A .proto file under proto/, loaded for grpc-js with LOADER_OPTIONS; `T` is its generated type. */
function loadProto<T>(file: string): T {
  return grpc.loadPackageDefinition(protoLoader.loadSync(file, { ...LOADER_OPTIONS, includeDirs: [protoIncludeDir()] })) as unknown as T;
}

let peerLoaded: PeerProtoGrpcType | undefined;

/** The loaded `lbd.peer.v1` package: director-to-director calls over the peer link. */
export function peerProto(): PeerProtoGrpcType['lbd']['peer']['v1'] {
  peerLoaded ??= loadProto<PeerProtoGrpcType>(PEER_PROTO_FILE);
  return peerLoaded.lbd.peer.v1;
}

/** The Peer service definition, for `server.addService(peerServiceDefinition(), handlers)`. */
export function peerServiceDefinition(): PeerDefinition {
  return peerProto().Peer.service;
}

/**
 * The peer link's security: plain gRPC, or mutual TLS with the cluster CA (PEM contents, not paths).
 * `serverName` is the director id the other side's certificate must name.
 */
export type PeerSecurity = { readonly kind: 'insecure' } | { readonly kind: 'tls'; readonly ca: Buffer; readonly cert: Buffer; readonly key: Buffer };

/** Client channel credentials and options towards peer `peerId`. */
function peerChannel(security: PeerSecurity, peerId: string): { creds: grpc.ChannelCredentials; options: grpc.ChannelOptions } {
  const options: grpc.ChannelOptions = {
    // Promises are asked for when things go wrong: fail fast instead of waiting on reconnect backoff.
    'grpc.initial_reconnect_backoff_ms': 50, 'grpc.max_reconnect_backoff_ms': 500,
  };
  if (security.kind === 'insecure') return { creds: grpc.credentials.createInsecure(), options };
  return {
    creds: grpc.credentials.createSsl(security.ca, security.key, security.cert),
    // The peer is reached by address, but its certificate names its director id: check that name.
    options: { ...options, 'grpc.ssl_target_name_override': peerId, 'grpc.default_authority': peerId },
  };
}

/** Server credentials for the peer listener: with TLS, a client must present a certificate of the cluster CA. */
export function peerServerCredentials(security: PeerSecurity): grpc.ServerCredentials {
  if (security.kind === 'insecure') return grpc.ServerCredentials.createInsecure();
  return grpc.ServerCredentials.createSsl(security.ca, [{ private_key: security.key, cert_chain: security.cert }], true);
}

/**
 * The director ids a verified client certificate names (subjectAltName DNS entries), or null when the call
 * came without TLS. grpc-js has already checked the chain against the cluster CA.
 */
export function peerIdsOfCall(call: { getAuthContext?(): { sslPeerCertificate?: { subjectaltname?: string } } | null }): string[] | null {
  const cert = call.getAuthContext?.()?.sslPeerCertificate;
  if (cert === undefined) return null;
  return (cert.subjectaltname ?? '').split(',').map((x) => x.trim()).filter((x) => x.startsWith('DNS:')).map((x) => x.slice(4));
}

function target(address: string, port: number): string {
  return `${address.includes(':') ? `[${address}]` : address}:${port}`;
}

/** Binds `server` to address:port (IPv6 in brackets); resolves with the port bound. */
export function bindServer(server: grpc.Server, address: string, port: number, creds: grpc.ServerCredentials): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(target(address, port), creds, (err, bound) => (err ? reject(err) : resolve(bound)));
  });
}

/** Stops accepting calls and gives calls in flight `graceMs` to end before they are cut. */
export function stopServer(server: grpc.Server | undefined, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    if (server === undefined) return resolve();
    const timer = setTimeout(() => { server.forceShutdown(); resolve(); }, graceMs);
    server.tryShutdown(() => { clearTimeout(timer); resolve(); });
  });
}

/** A Peer client for director `peerId` at `address:port`. */
export function createPeerClient(address: string, port: number, security: PeerSecurity = { kind: 'insecure' }, peerId = ''): PeerClient {
  const { creds, options } = peerChannel(security, peerId);
  return new (peerProto().Peer)(target(address, port), creds, options);
}

export const SYNC_PROTO_FILE = 'lbd/peer/v1/sync.proto';

let syncLoaded: SyncProtoGrpcType | undefined;

/** The loaded connection-sync service (`lbd.peer.v1.ConnSync`). */
export function syncProto(): SyncProtoGrpcType['lbd']['peer']['v1'] {
  syncLoaded ??= loadProto<SyncProtoGrpcType>(SYNC_PROTO_FILE);
  return syncLoaded.lbd.peer.v1;
}

let connSyncDefinition: ConnSyncDefinition | undefined;

/**
 * The ConnSync service definition, for `server.addService(connSyncServiceDefinition(), handlers)`: proto-
 * loader's, except that the stream's SyncMessages and SyncReplies are written and read by sync-codec.ts (the
 * same bytes, the same objects, without proto-loader's conversions). `syncProto().ConnSync.service` is
 * proto-loader's own, which tests and the bench compare against.
 */
export function connSyncServiceDefinition(): ConnSyncDefinition {
  if (connSyncDefinition === undefined) {
    const loaded = syncProto().ConnSync.service;
    connSyncDefinition = {
      ...loaded,
      Stream: {
        ...loaded.Stream, requestSerialize: encodeSyncMessage, requestDeserialize: decodeSyncMessage, responseSerialize: encodeSyncReply, responseDeserialize: decodeSyncReply,
      },
    };
  }
  return connSyncDefinition;
}

let ConnSyncClientClass: (new (address: string, creds: grpc.ChannelCredentials, options: grpc.ChannelOptions) => ConnSyncClient) | undefined;

/**
 * Sync messages are bounded by the sender's batch size; this limit refuses anything far beyond it (a
 * malformed or hostile peer), with room for a full batch of IPv6 connections.
 */
export const MAX_SYNC_MESSAGE_BYTES = 4 * 1024 * 1024;

export function createConnSyncClient(address: string, port: number, security: PeerSecurity, peerId: string): ConnSyncClient {
  const { creds, options } = peerChannel(security, peerId);
  ConnSyncClientClass ??= grpc.makeClientConstructor(connSyncServiceDefinition(), 'ConnSync') as unknown as typeof ConnSyncClientClass & object;
  return new ConnSyncClientClass(target(address, port), creds, {
    ...options, 'grpc.max_receive_message_length': MAX_SYNC_MESSAGE_BYTES, 'grpc.max_send_message_length': MAX_SYNC_MESSAGE_BYTES,
  });
}

/** grpc-js target for a unix socket path. */
export function unixTarget(socketPath: string): string {
  return `unix:${socketPath}`;
}

/**
 * Where the admin API is: the director's root-only unix socket, or its TCP listener (agent.admin.grpcListen)
 * with mutual TLS. `ca`, `cert`, `key` are PEM contents. The agent's certificate must name `serverName`
 * (default: `address`), as any TLS server's must.
 */
export type AdminEndpoint =
  | { readonly kind: 'unix'; readonly path: string }
  | { readonly kind: 'tls'; readonly address: string; readonly port: number; readonly ca: Buffer; readonly cert: Buffer; readonly key: Buffer; readonly serverName?: string };

/** `/run/lbd/admin.sock`, `198.18.3.1:7412`: the endpoint as messages name it. */
export function describeEndpoint(e: string | AdminEndpoint): string {
  if (typeof e === 'string') return e;
  return e.kind === 'unix' ? e.path : target(e.address, e.port);
}

/** A raw generated client; prefer AdminApi, which returns promises. A string is a unix socket path. */
export function createAdminClient(where: string | AdminEndpoint, options: grpc.ChannelOptions = {}): AdminClient {
  const Admin = adminProto().Admin;
  const e: AdminEndpoint = typeof where === 'string' ? { kind: 'unix', path: where } : where;
  if (e.kind === 'unix') return new Admin(unixTarget(e.path), grpc.credentials.createInsecure(), { ...CLIENT_CHANNEL_OPTIONS, ...options });
  const name = e.serverName ?? e.address;
  const creds = grpc.credentials.createSsl(e.ca, e.key, e.cert, {
    // Node's check, with an error that names what the certificate does say, so the fix is obvious.
    checkServerIdentity: (_host: string, cert: PeerCertificate) => {
      const err = checkServerIdentity(name, cert);
      if (err === undefined) return undefined;
      return new Error(`the agent's certificate names ${cert.subjectaltname || `CN=${String(cert.subject?.CN)}`}, not ${name}: name the agent as its certificate does (the server name)`);
    },
  });
  return new Admin(target(e.address, e.port), creds, {
    ...CLIENT_CHANNEL_OPTIONS,
    // Fail fast: lbadm is interactive, and a refused handshake will not succeed on a retry.
    'grpc.initial_reconnect_backoff_ms': 200, 'grpc.max_reconnect_backoff_ms': 1000,
    // The name sent (SNI) and checked; an address is checked (above) but not sent, as RFC 6066 wants.
    ...(e.serverName !== undefined ? { 'grpc.ssl_target_name_override': e.serverName, 'grpc.default_authority': e.serverName }
      : isIP(e.address) !== 0 ? { 'grpc.ssl_target_name_override': 'lbd-agent' } : {}),
    ...options,
  });
}

/** A failed Apply: the gRPC error, with the ApplyResponse that came before it (a rejection's problems). */
export type ApplyError = grpc.ServiceError & { readonly applyResponse?: ApplyResponse__Output };

/** Every problem of a rejected Apply, or null when `err` is not such a rejection. */
export function applyProblemsOf(err: unknown): Problem__Output[] | null {
  if (!isServiceError(err) || err.code !== grpc.status.INVALID_ARGUMENT) return null;
  const problems = (err as ApplyError).applyResponse?.problems;
  return problems && problems.length > 0 ? problems : null;
}

export function isServiceError(err: unknown): err is grpc.ServiceError {
  return err instanceof Error && typeof (err as Partial<grpc.ServiceError>).code === 'number' && 'metadata' in err;
}

export interface CallOptions {
  /** Milliseconds until the call is abandoned with DEADLINE_EXCEEDED. */
  readonly timeoutMs?: number;
}

type Unary<Req, Res> = (req: Req, md: grpc.Metadata, opts: grpc.CallOptions, cb: grpc.requestCallback<Res>) => grpc.ClientUnaryCall;

/** The Admin API with promises; one instance per channel. Close it, or the channel keeps the process alive. */
export class AdminApi {
  readonly client: AdminClient;

  /** The socket path or host:port, for messages. */
  readonly where: string;

  /** `endpoint`: a unix socket path, or an AdminEndpoint (the TCP listener with mutual TLS). */
  constructor(endpoint: string | AdminEndpoint, options: grpc.ChannelOptions = {}) {
    this.client = createAdminClient(endpoint, options);
    this.where = describeEndpoint(endpoint);
  }

  getStatus(opts: CallOptions = {}): Promise<GetStatusResponse__Output> {
    return this.unary(this.client.getStatus, {}, opts);
  }

  getStats(opts: CallOptions = {}): Promise<GetStatsResponse__Output> {
    return this.unary(this.client.getStats, {}, opts);
  }

  /**
   * Resolves to the response; rejects with an ApplyError, whose `applyResponse` holds a rejected config's
   * problems (see the proto: Apply streams one message, then the status).
   */
  async apply(req: ApplyRequest, opts: CallOptions = {}): Promise<ApplyResponse__Output> {
    const stream = this.client.apply(req, callOptions(opts));
    let response: ApplyResponse__Output | undefined;
    try {
      for await (const message of stream as AsyncIterable<ApplyResponse__Output>) response = message;
    } catch (err) {
      if (response !== undefined && isServiceError(err)) Object.assign(err, { applyResponse: response });
      throw err;
    }
    if (response === undefined) throw new Error('Apply ended without a response');
    return response;
  }

  doctor(opts: CallOptions = {}): Promise<DoctorResponse__Output> {
    return this.unary(this.client.doctor, {}, opts);
  }

  /** `service`: a key or name; '' for every service. */
  getHealth(service = '', opts: CallOptions = {}): Promise<GetHealthResponse__Output> {
    return this.unary(this.client.getHealth, { service }, opts);
  }

  /**
   * Health transitions: the kept ones at or after `sinceUnixMs` (0: all), then live ones, until `signal`
   * aborts (the iteration then simply ends) or the agent ends the stream. Other failures are thrown as
   * the call's gRPC error.
   */
  async *watchHealth(sinceUnixMs = 0, opts: { signal?: AbortSignal } = {}): AsyncGenerator<HealthEvent__Output, void, undefined> {
    yield* cancellable<HealthEvent__Output>(this.client.watchHealth({ sinceUnixMs }), opts.signal);
  }

  getClusterStatus(opts: CallOptions = {}): Promise<ClusterStatus__Output> {
    return this.unary(this.client.getClusterStatus, {}, opts);
  }

  /** `to`: '' for the best other director. `author`: who asks (user@host), for the event log. */
  failover(group: string, to = '', opts: CallOptions & { author?: string } = {}): Promise<FailoverResponse__Output> {
    return this.unary(this.client.failover, { group, to, author: opts.author ?? '' }, opts);
  }

  /**
   * Events: the kept ones the request selects, oldest first, then (with `follow`) new ones until `signal`
   * aborts (the iteration then simply ends) or the agent ends the stream. Other failures are thrown as
   * the call's gRPC error.
   */
  async *listEvents(req: ListEventsRequest, opts: { signal?: AbortSignal; timeoutMs?: number } = {}): AsyncGenerator<Event__Output, void, undefined> {
    yield* cancellable<Event__Output>(this.client.listEvents(req, callOptions(opts)), opts.signal);
  }

  recordDrill(req: RecordDrillRequest, opts: CallOptions = {}): Promise<RecordDrillResponse__Output> {
    return this.unary(this.client.recordDrill, req, opts);
  }

  /** A live-cluster drill (`switchover`); give a timeout of tens of seconds: it makes two moves and waits for sync. */
  runDrill(req: RunDrillRequest, opts: CallOptions = {}): Promise<DrillResult__Output> {
    return this.unary(this.client.runDrill, req, opts);
  }

  configHistory(opts: CallOptions = {}): Promise<ConfigHistoryResponse__Output> {
    return this.unary(this.client.configHistory, {}, opts);
  }

  rollback(revision: number, author: string, opts: CallOptions = {}): Promise<RollbackResponse__Output> {
    return this.unary(this.client.rollback, { revision, author }, opts);
  }

  /** The running config's text and the revision an edit of it is applied on (compare-and-swap). */
  getConfig(opts: CallOptions = {}): Promise<GetConfigResponse__Output> {
    return this.unary(this.client.getConfig, {}, opts);
  }

  /** Every matching connection, gathered from the stream. */
  async listConnections(service = '', opts: CallOptions = {}): Promise<Connection__Output[]> {
    const stream = this.client.listConnections({ service }, callOptions(opts));
    const out: Connection__Output[] = [];
    for await (const message of stream as AsyncIterable<ListConnectionsResponse__Output>) {
      out.push(...message.connections);
    }
    return out;
  }

  close(): void {
    this.client.close();
  }

  private unary<Req, Res>(method: Unary<Req, Res>, req: Req, opts: CallOptions): Promise<Res> {
    return new Promise((resolve, reject) => {
      method.call(this.client, req, new grpc.Metadata(), callOptions(opts), (err, res) => {
        if (err) reject(err);
        else resolve(res as Res);
      });
    });
  }
}

/**
 * The messages of a server stream until it ends, or until `signal` aborts (the iteration then simply
 * ends). A consumer that stops iterating early cancels the call too.
 */
async function* cancellable<T>(call: grpc.ClientReadableStream<T>, signal: AbortSignal | undefined): AsyncGenerator<T, void, undefined> {
  const cancel = (): void => call.cancel();
  if (signal?.aborted) cancel();
  signal?.addEventListener('abort', cancel, { once: true });
  try {
    for await (const message of call as AsyncIterable<T>) yield message;
  } catch (err) {
    if (signal?.aborted && isServiceError(err) && err.code === grpc.status.CANCELLED) return;
    throw err;
  } finally {
    signal?.removeEventListener('abort', cancel);
    call.cancel();
  }
}

function callOptions(opts: CallOptions): grpc.CallOptions {
  return opts.timeoutMs === undefined ? {} : { deadline: Date.now() + opts.timeoutMs };
}
