import assert from 'node:assert/strict';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { holdUpEventLoop } from '../testing/index.js';
import { TcpProber } from './tcp.js';

/**
 * The tcp prober against servers this test starts on 127.0.0.1 and ::1: up, refused, hung (accepts and
 * never answers), reply matching and not, reset, and aborts. Every server and socket is closed in afterEach.
 */

interface Started {
  server: Server;
  port: number;
  sockets: Set<Socket>;
}

const started: Started[] = [];

async function listen(host: string, onConnection: (s: Socket) => void = () => {}): Promise<Started> {
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {}); // the prober destroys its end; a reset here is expected
    onConnection(s);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  const entry = { server, port: (server.address() as AddressInfo).port, sockets };
  started.push(entry);
  return entry;
}

/** A port nothing listens on: bound, then closed (the kernel does not hand it out again at once). */
async function closedPort(host: string): Promise<number> {
  const s = await listen(host);
  await close(s);
  return s.port;
}

async function close(s: Started): Promise<void> {
  for (const sock of s.sockets) sock.destroy();
  await new Promise<void>((resolve) => s.server.close(() => resolve()));
  started.splice(started.indexOf(s), 1);
}

// Every test runs with both connectors: plain connects go through lbd-probe ('native') or Node's sockets.
for (const connector of ['native', 'node'] as const) describe(`TcpProber (${connector} connect)`, () => {
  const prober = new TcpProber({ connector });
  after(() => prober.close());

  afterEach(async () => {
    await Promise.all([...started].map(close));
  });

  it('up: connects to 127.0.0.1', async () => {
    const s = await listen('127.0.0.1');
    const r = await prober.probe({ kind: 'tcp', address: '127.0.0.1', port: s.port }, { timeoutMs: 1000 });
    assert.deepEqual([r.ok, r.reason, r.message], [true, 'ok', `tcp connect to 127.0.0.1:${s.port}: connected`]);
    assert.ok(r.durationMs >= 0 && r.durationMs < 1000);
  });

  it('up: connects to ::1', async () => {
    const s = await listen('::1');
    const r = await prober.probe({ kind: 'tcp', address: '::1', port: s.port }, { timeoutMs: 1000 });
    assert.deepEqual([r.reason, r.message], ['ok', `tcp connect to [::1]:${s.port}: connected`]);
  });

  it('refused: nothing listens (127.0.0.1 and ::1)', async () => {
    for (const [host, shown] of [['127.0.0.1', '127.0.0.1'], ['::1', '[::1]']] as const) {
      const port = await closedPort(host);
      const r = await prober.probe({ kind: 'tcp', address: host, port }, { timeoutMs: 1000 });
      assert.deepEqual([r.ok, r.reason, r.message], [false, 'refused', `tcp connect to ${shown}:${port}: refused`]);
    }
  });

  it('send/expect: up when the reply contains expect, even split over several packets', async () => {
    const s = await listen('127.0.0.1', (sock) =>
      sock.once('data', () => {
        sock.write('+PO');
        setImmediate(() => sock.write('NG\r\n'));
      }),
    );
    const r = await prober.probe({ kind: 'tcp', address: '127.0.0.1', port: s.port, send: 'PING\r\n', expect: '+PONG' }, { timeoutMs: 1000 });
    assert.deepEqual([r.reason, r.message], ['ok', `tcp connect to 127.0.0.1:${s.port}: reply contains "+PONG"`]);
  });

  it('expect without send: reads a banner', async () => {
    const s = await listen('127.0.0.1', (sock) => sock.write('220 smtp ready\r\n'));
    const r = await prober.probe({ kind: 'tcp', address: '127.0.0.1', port: s.port, expect: '220 ' }, { timeoutMs: 1000 });
    assert.equal(r.reason, 'ok');
  });

  it('reply-mismatch: the server answers something else and closes', async () => {
    const s = await listen('127.0.0.1', (sock) => sock.once('data', () => sock.end('-ERR loading\r\n')));
    const r = await prober.probe({ kind: 'tcp', address: '127.0.0.1', port: s.port, send: 'PING\r\n', expect: '+PONG' }, { timeoutMs: 1000 });
    assert.deepEqual([r.ok, r.reason, r.message], [false, 'reply-mismatch', `tcp connect to 127.0.0.1:${s.port}: reply "-ERR loading\\r\\n" does not contain "+PONG"`]);
  });

  it('reply-mismatch: the server closes without a word', async () => {
    const s = await listen('127.0.0.1', (sock) => sock.once('data', () => sock.end()));
    const r = await prober.probe({ kind: 'tcp', address: '127.0.0.1', port: s.port, send: 'x', expect: 'y' }, { timeoutMs: 1000 });
    assert.deepEqual([r.reason, r.message], ['reply-mismatch', `tcp connect to 127.0.0.1:${s.port}: closed without a reply (want "y")`]);
  });

  it('timeout: the server accepts and never answers (hung), with send/expect', async () => {
    const s = await listen('127.0.0.1');
    const r = await prober.probe({ kind: 'tcp', address: '127.0.0.1', port: s.port, send: 'PING\r\n', expect: '+PONG' }, { timeoutMs: 200 });
    assert.deepEqual([r.ok, r.reason, r.message], [false, 'timeout', `tcp connect to 127.0.0.1:${s.port}: timeout after 200 ms (connected, no reply)`]);
    assert.ok(r.durationMs >= 190 && r.durationMs < 1000, `${r.durationMs} ms`);
  });

  it('reset: the server resets the connection before answering', async () => {
    const s = await listen('127.0.0.1', (sock) => sock.once('data', () => sock.resetAndDestroy()));
    const r = await prober.probe({ kind: 'tcp', address: '127.0.0.1', port: s.port, send: 'PING\r\n', expect: '+PONG' }, { timeoutMs: 1000 });
    assert.deepEqual([r.reason, r.message], ['reset', `tcp connect to 127.0.0.1:${s.port}: connection reset`]);
  });

  it('an answer that came in while the event loop was held up past the timeout wins over the timeout (a busy box)', async () => {
    const s = await listen('127.0.0.1');
    const probe = prober.probe({ kind: 'tcp', address: '127.0.0.1', port: s.port }, { timeoutMs: 50 });
    // The connect goes out on the next tick (Node's, or the request to lbd-probe); then the loop is held up (a
    // busy box, a long garbage collection) beyond the timeout: the handshake completes in the kernel meanwhile,
    // and node then runs the due timer before it reads the socket. (A probe held up before it went out is the
    // scheduler's to ask again.)
    await new Promise((resolve) => process.nextTick(resolve));
    holdUpEventLoop(300);
    const r = await probe;
    assert.deepEqual([r.ok, r.reason], [true, 'ok'], r.message);
  });

  it('abort: a TimeoutError abort is a timeout, any other abort an error; the socket is closed', async () => {
    const s = await listen('127.0.0.1');
    const timeout = new AbortController();
    // The server has the probe's bytes: the prober is connected and waiting for the reply.
    const written = new Promise<void>((resolve) => s.server.once('connection', (sock: Socket) => sock.once('data', () => resolve())));
    const p1 = prober.probe({ kind: 'tcp', address: '127.0.0.1', port: s.port, send: 'hi', expect: 'x' }, { timeoutMs: 5000, signal: timeout.signal });
    await written;
    timeout.abort(new DOMException('timeout after 5000 ms', 'TimeoutError'));
    const r1 = await p1;
    assert.deepEqual([r1.reason, r1.message], ['timeout', `tcp connect to 127.0.0.1:${s.port}: timeout after 5000 ms (connected, no reply)`]);
    const other = new AbortController();
    other.abort();
    const r2 = await prober.probe({ kind: 'tcp', address: '127.0.0.1', port: s.port }, { timeoutMs: 5000, signal: other.signal });
    assert.deepEqual([r2.reason, r2.message], ['error', `tcp connect to 127.0.0.1:${s.port}: aborted`]);
    // The prober's end of the first connection is gone: the server sees it close.
    await Promise.all([...s.sockets].map((sock) => (sock.closed ? undefined : new Promise((r) => sock.once('close', r)))));
  });
});
