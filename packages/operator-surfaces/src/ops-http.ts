import { once } from 'node:events';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { PeerCertificate, TLSSocket } from 'node:tls';
import { ANY_CLIENT, hostPort, type AdminClientEntry } from '@lbd/config';
import type { Logger } from '@lbd/log';
import type { Caller, OpsRoute, Role } from './ops-types.js';

/**
 * The agent's HTTPS listener for operators (agent.admin.httpListen): /metrics, the dashboard and /api/*,
 * each an OpsRoute that other modules supply. This file owns who may call (mutual TLS against the CA,
 * then the certificate's name looked up in agent.admin.clients), which route answers (method and path)
 * and the limits that keep a slow or hostile client from holding the agent's memory or sockets; what a
 * route answers is the route's business. The admin gRPC listener shares `authorizeCertificate`.
 */

/** PEM contents of the listener's CA, certificate and key. */
export interface TlsMaterial {
  readonly ca: Buffer;
  readonly cert: Buffer;
  readonly key: Buffer;
}

/** Where an operators' listener (admin gRPC or HTTPS) binds, its TLS, and the clients it lets in. */
export interface TlsListenerOptions {
  readonly address: string;
  /** 0: any free port (tests); the server's `port` says which. */
  readonly port: number;
  readonly tls: TlsMaterial;
  readonly clients: readonly AdminClientEntry[];
}

export interface OpsHttpOptions extends TlsListenerOptions {
  readonly log: Logger;
  /** Defaults: OPS_LIMITS. Tests shorten the timeouts. */
  readonly limits?: Partial<OpsLimits>;
}

export interface OpsLimits {
  /** Largest request body; more is 413. No route takes more than a small JSON document. */
  readonly maxBodyBytes: number;
  /** Request line and headers together; more is 431. */
  readonly maxHeaderBytes: number;
  /** Longest request target; more is 414. */
  readonly maxUrlChars: number;
  /** Time from connect to a finished TLS handshake. */
  readonly handshakeTimeoutMs: number;
  /** Time to receive a request's headers (slowloris), then the whole request. */
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  /**
   * A socket with no traffic either way for this long is closed. Streaming routes (server-sent events)
   * keep theirs open by writing at least this often (a comment line is enough).
   */
  readonly idleTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly maxConnections: number;
}

export const OPS_LIMITS: OpsLimits = {
  maxBodyBytes: 64 * 1024,
  maxHeaderBytes: 16 * 1024,
  maxUrlChars: 4096,
  handshakeTimeoutMs: 10_000,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  idleTimeoutMs: 60_000,
  keepAliveTimeoutMs: 5_000,
  maxConnections: 512,
};

/** Who a certificate is, or why it may not call at all. */
export type Authorization = { readonly ok: true; readonly caller: Caller } | { readonly ok: false; readonly reason: string };

/** The names a verified client certificate goes by: its subjectAltName DNS entries, else its common name. */
export function certificateNames(cert: Partial<Pick<PeerCertificate, 'subject' | 'subjectaltname'>> | undefined): string[] {
  const dns = (cert?.subjectaltname ?? '').split(',').map((x) => x.trim()).filter((x) => x.startsWith('DNS:')).map((x) => x.slice(4));
  if (dns.length > 0) return dns;
  const cn = (cert?.subject as { CN?: string | string[] } | undefined)?.CN;
  return (Array.isArray(cn) ? cn : cn === undefined ? [] : [cn]).filter((x) => x !== '');
}

const RANK: Readonly<Record<Role, number>> = { read: 0, write: 1 };

export function roleAllows(have: Role, need: Role): boolean {
  return RANK[have] >= RANK[need];
}

/**
 * The caller a certificate (already verified against the CA) is: a name listed in agent.admin.clients
 * gets that entry's role (the strongest, when the certificate has several listed names); otherwise `*`,
 * if listed, gives its role to any certificate. Names compare without regard to case, as DNS names do.
 */
export function authorizeCertificate(names: readonly string[], clients: readonly AdminClientEntry[]): Authorization {
  if (names.length === 0) {
    return { ok: false, reason: 'the client certificate names nobody (no subjectAltName DNS entry and no common name); issue it with the client\'s name, e.g. subjectAltName DNS:ops-alice' };
  }
  let best: Caller | undefined;
  for (const name of names) {
    const entry = clients.find((c) => c.name !== ANY_CLIENT && c.name.toLowerCase() === name.toLowerCase());
    if (entry !== undefined && (best === undefined || RANK[entry.role] > RANK[best.role])) best = { name, role: entry.role };
  }
  if (best !== undefined) return { ok: true, caller: best };
  const any = clients.find((c) => c.name === ANY_CLIENT);
  if (any !== undefined) return { ok: true, caller: { name: names[0]!, role: any.role } };
  return {
    ok: false,
    reason: `the client certificate ${names.join(', ')} is not listed in agent.admin.clients; add {name: ${names[0]}, role: read} (or role: write) there on this director and restart lbd-agent, or use a listed certificate`,
  };
}

/** Why `caller` may not do `what`, which needs `need`. */
export function roleRefusal(caller: Caller, need: Role, what: string): string {
  return `the client certificate ${caller.name} has role ${caller.role}, and ${what} needs role ${need}; give ${caller.name} role ${need} in agent.admin.clients, or use a certificate that has it`;
}

/** Bodies read by the dispatcher (bounded), for routes that take one: see `requestBody`. */
const bodies = new WeakMap<IncomingMessage, Buffer>();

/** The request's body: the dispatcher has already read it whole, within `maxBodyBytes`. */
export function requestBody(req: IncomingMessage): Buffer {
  return bodies.get(req) ?? Buffer.alloc(0);
}

class HttpRefusal extends Error {
  constructor(readonly status: number, message: string, readonly headers: Readonly<Record<string, string>> = {}) {
    super(message);
  }
}

export class OpsHttpServer {
  private constructor(
    private readonly server: Server,
    readonly address: string,
    readonly port: number,
    private readonly sockets: Set<Socket>,
  ) {}

  /** Listens with mutual TLS; every request is answered by one of `routes`, or refused with a reason. */
  static async listen(opts: OpsHttpOptions, routes: readonly OpsRoute[]): Promise<OpsHttpServer> {
    const limits = { ...OPS_LIMITS, ...opts.limits };
    const log = opts.log;
    const server = createServer({
      ca: opts.tls.ca, cert: opts.tls.cert, key: opts.tls.key,
      // Mutual TLS is the authentication: no certificate, or one the CA did not sign, ends the handshake.
      requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.2',
      handshakeTimeout: limits.handshakeTimeoutMs,
      maxHeaderSize: limits.maxHeaderBytes,
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      // Node checks the two timeouts above this often (30 s by default, which would let them run long).
      connectionsCheckingInterval: Math.min(1000, limits.headersTimeoutMs),
    });
    server.maxConnections = limits.maxConnections;
    server.setTimeout(limits.idleTimeoutMs, (socket: Socket) => socket.destroy());
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      void dispatch(req, res, routes, opts.clients, limits, log);
    });
    // Malformed requests, oversized headers and slow ones: answer in words where the socket still takes them.
    server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
      const [status, text] = err.code === 'HPE_HEADER_OVERFLOW' ? [431, `the request line and headers are larger than ${limits.maxHeaderBytes} bytes`]
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? [408, `the request did not arrive in time (headers within ${limits.headersTimeoutMs} ms, all of it within ${limits.requestTimeoutMs} ms)`]
        : [400, `malformed HTTP request (${err.code ?? err.message})`];
      if (socket.writable && !(socket as TLSSocket & { _httpMessage?: unknown })._httpMessage) {
        const body = `lbd-agent: ${text}\n`;
        socket.end(`HTTP/1.1 ${status} ${status === 431 ? 'Request Header Fields Too Large' : status === 408 ? 'Request Timeout' : 'Bad Request'}\r\n`
          + `Content-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
      } else {
        socket.destroy();
      }
    });
    server.on('tlsClientError', (err: Error, socket: TLSSocket) => {
      log.debug('ops listener: TLS handshake refused', { remote: socket.remoteAddress, error: err.message });
      // With a listener here, Node leaves the socket open: a client that never finishes the handshake would keep it.
      socket.destroy();
    });
    // Every TCP connection, handshake or not: close() ends them all (the HTTP server knows only those past TLS).
    const sockets = new Set<Socket>();
    server.on('connection', (socket: Socket) => {
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
    });
    server.listen(opts.port, opts.address);
    await Promise.race([once(server, 'listening'), once(server, 'error').then(([err]) => { throw err; })]);
    const bound = (server.address() as AddressInfo).port;
    log.info('ops listener started', { listen: hostPort(opts.address, bound), routes: routes.map((r) => `${r.method} ${r.path}${r.prefix ? '*' : ''}`) });
    return new OpsHttpServer(server, opts.address, bound, sockets);
  }

  /** Stops accepting connections and closes the open ones (streams included). */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }
}

async function dispatch(req: IncomingMessage, res: ServerResponse, routes: readonly OpsRoute[], clients: readonly AdminClientEntry[], limits: OpsLimits, log: Logger): Promise<void> {
  let caller: Caller | undefined;
  const names = certificateNames((req.socket as TLSSocket).getPeerCertificate?.());
  try {
    const auth = authorizeCertificate(names, clients);
    if (!auth.ok) throw new HttpRefusal(403, auth.reason);
    caller = auth.caller;
    const url = req.url ?? '/';
    if (url.length > limits.maxUrlChars) throw new HttpRefusal(414, `the request target is ${url.length} characters long; the limit is ${limits.maxUrlChars}`);
    let path: string;
    try {
      path = new URL(url, 'https://lbd-agent').pathname;
    } catch {
      throw new HttpRefusal(400, `the request target ${JSON.stringify(url.slice(0, 200))} is not a path`);
    }
    const matching = routes.filter((r) => (r.prefix ? path.startsWith(r.path) : path === r.path));
    if (matching.length === 0) {
      throw new HttpRefusal(404, `no such path: ${path.slice(0, 200)}; this agent serves ${routes.map((r) => `${r.method} ${r.path}${r.prefix ? '...' : ''}`).join(', ')}`);
    }
    const route = matching.find((r) => r.method === req.method);
    if (route === undefined) {
      const allow = [...new Set(matching.map((r) => r.method))].join(', ');
      throw new HttpRefusal(405, `${String(req.method).slice(0, 16)} is not allowed on ${path}; use ${allow}`, { Allow: allow });
    }
    if (!roleAllows(caller.role, route.role)) throw new HttpRefusal(403, roleRefusal(caller, route.role, `${route.method} ${route.path}`));
    bodies.set(req, await readBody(req, limits.maxBodyBytes));
    await route.handle(req, res, caller);
  } catch (err) {
    if (err instanceof HttpRefusal) {
      if (err.status === 403) log.info('ops request refused', { caller: caller?.name ?? names.join(','), method: req.method, reason: err.message });
      refuse(res, err);
      return;
    }
    log.error('ops route failed', { method: req.method, url: req.url?.slice(0, 200), error: err, stack: err instanceof Error ? err.stack : undefined });
    refuse(res, new HttpRefusal(500, `internal error in lbd-agent: ${err instanceof Error ? err.message : String(err)}`));
  }
}

/** The whole body, refusing (413) one larger than `max` before or while it arrives. */
async function readBody(req: IncomingMessage, max: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > max) throw new HttpRefusal(413, `the request body is ${declared} bytes; the limit is ${max}`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > max) throw new HttpRefusal(413, `the request body is more than ${max} bytes; the limit is ${max}`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function refuse(res: ServerResponse, err: HttpRefusal): void {
  if (res.headersSent) {
    // A route failed mid-answer: all that is left is to cut the response short.
    res.destroy();
    return;
  }
  const body = `lbd-agent: ${err.message}\n`;
  // Whatever of the request was not read stays unread: close rather than parse it as the next request.
  res.writeHead(err.status, {
    ...err.headers, 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff', 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store', Connection: 'close',
  });
  res.end(body);
}

/** What /healthz reports: whether the agent is up and serving, and a few facts for a person reading it. */
export interface Liveness {
  readonly ok: boolean;
  readonly [fact: string]: unknown;
}

/** GET /healthz (read): 200 with the agent's liveness as JSON while it serves, 503 when it is not ok. */
export function healthzRoute(liveness: () => Liveness): OpsRoute {
  return {
    method: 'GET', path: '/healthz', role: 'read',
    handle(_req, res) {
      const l = liveness();
      const body = `${JSON.stringify(l)}\n`;
      res.writeHead(l.ok ? 200 : 503, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store' });
      res.end(body);
    },
  };
}
