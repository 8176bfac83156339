import { readFileSync } from 'node:fs';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { once } from 'node:events';
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, isIPv6, type AddressInfo, type Server as TcpServer, type Socket } from 'node:net';

/**
 * The real servers' side of tests and the lab: tiny HTTP, TCP-stream and UDP servers that answer with their
 * own name and the peer address they saw, so a client can tell which server it reached and whether the
 * director translated its source address (fullnat) or not (nat).
 */

export interface TestServerConfig {
  readonly name: string;
  /** Ports to serve; 0 picks a free port (unit tests). Omitted = not served. */
  readonly http?: number;
  readonly stream?: number;
  readonly udp?: number;
  /** `::` (default) serves IPv4 and IPv6. */
  readonly bind?: string;
  /** Read before every HTTP answer: its first word breaks the answer on purpose (FAULTS). */
  readonly faultFile?: string;
}

/**
 * Ways to break a real server's HTTP answers on purpose, for health-check tests and the lab:
 * `echo 500 > FILE` answers 500, `body` answers 200 with an unexpected body, `hang` accepts and never
 * answers, `close` closes the connection at once; an empty or missing file answers normally.
 */
const FAULTS = ['500', 'body', 'hang', 'close'] as const;
type Fault = (typeof FAULTS)[number];

function currentFault(file: string | undefined): Fault | null {
  if (file === undefined) return null;
  try {
    const word = readFileSync(file, 'utf8').trim().split(/\s+/)[0] ?? '';
    return (FAULTS as readonly string[]).includes(word) ? (word as Fault) : null;
  } catch {
    return null;
  }
}

export interface RunningTestServer {
  /** The ports actually bound. */
  readonly ports: { readonly http?: number; readonly stream?: number; readonly udp?: number };
  close(): Promise<void>;
}

/** What HTTP and UDP answers carry (JSON). */
export interface ServerAnswer {
  readonly server: string;
  /** The client address as this server sees it (IPv4-mapped IPv6 shown as plain IPv4). */
  readonly peer: string;
  readonly peerPort: number;
  /** The address the client reached (the real server's own address after DNAT). */
  readonly local: string;
  readonly localPort: number;
}

/** Interval of the stream's sequence lines. */
export const STREAM_INTERVAL_MS = 50;
/** A stream connection ends after this long even if its client never closes (a bound, not a feature). */
const MAX_STREAM_MS = 3_600_000;
/** Upper bound of `GET /bytes?n=N`. */
const MAX_BYTES = 1024 ** 3;
const CHUNK = Buffer.alloc(64 * 1024, 0x61);
/** Longest line the stream server will echo; a client sending an endless line is cut off. */
const MAX_ECHO_LINE = 4096;

/** `::ffff:198.19.1.100` -> `198.19.1.100`: dual-stack sockets show IPv4 peers mapped. */
export function plainAddress(address: string | undefined): string {
  if (address === undefined) return '';
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return m ? m[1]! : address;
}

function answer(name: string, peer: string | undefined, peerPort: number | undefined, local: string | undefined, localPort: number | undefined): ServerAnswer {
  return { server: name, peer: plainAddress(peer), peerPort: peerPort ?? 0, local: plainAddress(local), localPort: localPort ?? 0 };
}

export async function startTestServer(cfg: TestServerConfig): Promise<RunningTestServer> {
  const bind = cfg.bind ?? '::';
  const closers: (() => Promise<void>)[] = [];
  const ports: { http?: number; stream?: number; udp?: number } = {};
  const close = async (): Promise<void> => {
    await Promise.all(closers.map((c) => c()));
  };
  try {
    if (cfg.http !== undefined) {
      const s = httpServer(cfg.name, cfg.faultFile);
      ports.http = await listenTcp(s, cfg.http, bind);
      closers.push(() => closeTcp(s));
    }
    if (cfg.stream !== undefined) {
      const s = streamServer(cfg.name);
      ports.stream = await listenTcp(s, cfg.stream, bind);
      closers.push(() => closeTcp(s));
    }
    if (cfg.udp !== undefined) {
      const s = await udpServer(cfg.name, cfg.udp, bind);
      ports.udp = (s.address() as AddressInfo).port;
      closers.push(() => new Promise((resolve) => s.close(() => resolve())));
    }
  } catch (e) {
    await close();
    throw e;
  }
  return { ports, close };
}

function httpServer(name: string, faultFile: string | undefined): HttpServer {
  const server = createHttpServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume(); // bodies are not used, but must be drained for keep-alive
    switch (currentFault(faultFile)) {
      case '500':
        res.writeHead(500, { 'content-type': 'text/plain' });
        return void res.end(`${name}: failing on purpose\n`);
      case 'body':
        res.writeHead(200, { 'content-type': 'text/plain' });
        return void res.end('maintenance\n');
      case 'hang':
        return; // the socket stays open and silent until the client gives up
      case 'close':
        return void req.socket.destroy();
      case null:
        break;
    }
    const url = new URL(req.url ?? '/', 'http://server');
    if (url.pathname === '/bytes') return sendBytes(res, url.searchParams.get('n'));
    const s = req.socket;
    const body = `${JSON.stringify(answer(name, s.remoteAddress, s.remotePort, s.localAddress, s.localPort))}\n`;
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
  trackSockets(server);
  return server;
}

function sendBytes(res: ServerResponse, nText: string | null): void {
  const n = Number(nText);
  if (nText === null || !Number.isInteger(n) || n < 0 || n > MAX_BYTES) {
    const body = `n must be a whole number from 0 to ${MAX_BYTES}\n`;
    res.writeHead(400, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body) });
    res.end(body);
    return;
  }
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': n });
  let left = n;
  // Written in chunks with backpressure so a 1 GiB answer never sits in memory.
  const pump = (): void => {
    while (left > 0) {
      const size = Math.min(left, CHUNK.length);
      left -= size;
      if (!res.write(size === CHUNK.length ? CHUNK : CHUNK.subarray(0, size))) {
        res.once('drain', pump);
        return;
      }
    }
    res.end();
  };
  pump();
}

/**
 * On connect: `<name> <seq>\n` every STREAM_INTERVAL_MS from seq 0 until the client closes; each line the
 * client sends comes back as `echo <line>\n` (checks the client-to-server direction by hand, e.g. with nc).
 */
function streamServer(name: string): TcpServer {
  const server = createTcpServer((sock: Socket) => {
    sock.setNoDelay(true);
    let seq = 0;
    const send = (): void => {
      if (!sock.writable) return;
      sock.write(`${name} ${seq++}\n`);
    };
    send();
    const ticker = setInterval(send, STREAM_INTERVAL_MS);
    const limit = setTimeout(() => sock.end(), MAX_STREAM_MS);
    const stop = (): void => {
      clearInterval(ticker);
      clearTimeout(limit);
    };
    sock.on('close', stop);
    sock.on('error', stop);
    let pending = '';
    sock.setEncoding('utf8');
    sock.on('data', (text: string) => {
      pending += text;
      let nl: number;
      while ((nl = pending.indexOf('\n')) >= 0) {
        sock.write(`echo ${pending.slice(0, nl).replace(/\r$/, '')}\n`);
        pending = pending.slice(nl + 1);
      }
      if (pending.length > MAX_ECHO_LINE) sock.destroy();
    });
  });
  trackSockets(server);
  return server;
}

async function udpServer(name: string, port: number, bind: string): Promise<UdpSocket> {
  const bindOnce = async (address: string): Promise<UdpSocket> => {
    const sock = createSocket({ type: isIPv6(address) ? 'udp6' : 'udp4', ipv6Only: false });
    sock.bind(port, address);
    try {
      await once(sock, 'listening');
    } catch (e) {
      sock.close();
      throw e;
    }
    return sock;
  };
  const sock = await withIpv4Fallback(bind, bindOnce);
  sock.on('message', (msg, rinfo) => {
    const local = sock.address();
    // The request text (bounded) lets a client match replies to requests on one socket.
    const reply = { ...answer(name, rinfo.address, rinfo.port, local.address, local.port), request: msg.toString('utf8', 0, 100) };
    sock.send(`${JSON.stringify(reply)}\n`, rinfo.port, rinfo.address);
  });
  // A reply to a vanished client (ICMP unreachable) must not kill the server.
  sock.on('error', () => undefined);
  return sock;
}

async function listenTcp(server: TcpServer | HttpServer, port: number, bind: string): Promise<number> {
  await withIpv4Fallback(bind, async (address) => {
    server.listen({ port, host: address, ipv6Only: false });
    await once(server, 'listening');
  });
  return (server.address() as AddressInfo).port;
}

/** `::` on a machine without IPv6 falls back to `0.0.0.0`; any other address is taken as given. */
async function withIpv4Fallback<T>(bind: string, fn: (address: string) => Promise<T>): Promise<T> {
  try {
    return await fn(bind);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (bind === '::' && (code === 'EAFNOSUPPORT' || code === 'EADDRNOTAVAIL')) return fn('0.0.0.0');
    throw e;
  }
}

const openSockets = new WeakMap<TcpServer | HttpServer, Set<Socket>>();

/** Remembers open connections: closing a server must also end its long-lived streams and keep-alives. */
function trackSockets(server: TcpServer | HttpServer): void {
  const set = new Set<Socket>();
  openSockets.set(server, set);
  server.on('connection', (s: Socket) => {
    set.add(s);
    s.on('close', () => set.delete(s));
  });
}

function closeTcp(server: TcpServer | HttpServer): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
    for (const s of openSockets.get(server) ?? []) s.destroy();
  });
}
