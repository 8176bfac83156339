import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { promisify } from 'node:util';
import type { ProbeTarget } from '../types.js';
import { HttpProber, formatStatus } from './http.js';

/**
 * The http/https prober against servers this test starts on 127.0.0.1 and ::1: status codes, body
 * patterns (within the first 64 KiB), hung servers, the Host header, and TLS with a self-signed certificate
 * made at test time by openssl (Node cannot make X.509 certificates): verification off → ok, on → 'tls',
 * and SNI. Every server is closed, with its connections, in afterEach.
 */

const BIG = 1024 * 1024;

function routes(req: IncomingMessage, res: ServerResponse): void {
  switch (req.url) {
    case '/healthz':
      res.end('status: ok\n');
      return;
    case '/fail':
      res.statusCode = 500;
      res.end('oops\n');
      return;
    case '/moved':
      res.statusCode = 301;
      res.setHeader('location', '/healthz');
      res.end();
      return;
    case '/maintenance':
      res.end('status: maintenance\n');
      return;
    case '/big':
      // The marker comes after 1 MiB: a prober that reads more than 64 KiB would find it.
      res.write('a'.repeat(BIG));
      res.end('MARKER');
      return;
    case '/host':
      res.end(`host=${req.headers.host ?? ''}`);
      return;
    case '/slowbody':
      res.write('status: ');
      return; // the rest never comes
    case '/hang':
      return; // never answers
    default:
      res.statusCode = 404;
      res.end();
  }
}

const servers: Server[] = [];

async function start(server: Server, host: string): Promise<number> {
  servers.push(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  return (server.address() as AddressInfo).port;
}

const prober = new HttpProber();

function http(port: number, over: Partial<ProbeTarget> = {}, address = '127.0.0.1'): ProbeTarget {
  return { kind: 'http', address, port, ...over };
}

/** Closes every server this file started, with its connections (each suite's afterEach). */
async function closeServers(): Promise<void> {
  await Promise.all(
    servers.splice(0).map((s) => {
      s.closeAllConnections();
      return new Promise<void>((resolve) => s.close(() => resolve()));
    }),
  );
}

describe('HttpProber (http)', () => {
  afterEach(closeServers);
  let port: number;
  beforeEach(async () => {
    port = await start(createHttpServer(routes), '127.0.0.1');
  });

  it('200 → ok', async () => {
    const r = await prober.probe(http(port, { path: '/healthz' }), { timeoutMs: 2000 });
    assert.deepEqual([r.ok, r.reason, r.message], [true, 'ok', 'http GET /healthz: got 200']);
  });

  it('500 → status, saying what was wanted', async () => {
    const r = await prober.probe(http(port, { path: '/fail' }), { timeoutMs: 2000 });
    assert.deepEqual([r.ok, r.reason, r.message], [false, 'status', 'http GET /fail: got 500, want 200-399']);
  });

  it('expected status codes and ranges', async () => {
    const want: ProbeTarget['expectStatus'] = [200, [204, 206]];
    const moved = await prober.probe(http(port, { path: '/moved', expectStatus: want }), { timeoutMs: 2000 });
    assert.deepEqual([moved.reason, moved.message], ['status', 'http GET /moved: got 301, want 200 or 204-206']);
    const ok = await prober.probe(http(port, { path: '/moved', expectStatus: [301] }), { timeoutMs: 2000 });
    assert.equal(ok.reason, 'ok');
    const notFound = await prober.probe(http(port, { path: '/nope', expectStatus: [[400, 499]] }), { timeoutMs: 2000 });
    assert.equal(notFound.reason, 'ok');
  });

  it('body pattern: matches → ok; wrong body → body-mismatch', async () => {
    const ok = await prober.probe(http(port, { path: '/healthz', bodyPattern: 'status: (ok|degraded)' }), { timeoutMs: 2000 });
    assert.deepEqual([ok.reason, ok.message], ['ok', 'http GET /healthz: got 200, body matches /status: (ok|degraded)/']);
    const bad = await prober.probe(http(port, { path: '/maintenance', bodyPattern: 'status: ok' }), { timeoutMs: 2000 });
    assert.deepEqual([bad.ok, bad.reason, bad.message], [false, 'body-mismatch', 'http GET /maintenance: body does not match /status: ok/']);
  });

  it('reads at most 64 KiB of the body', async () => {
    const r = await prober.probe(http(port, { path: '/big', bodyPattern: 'MARKER' }), { timeoutMs: 2000 });
    assert.deepEqual([r.reason, r.message], ['body-mismatch', 'http GET /big: body does not match /MARKER/']);
    const prefix = await prober.probe(http(port, { path: '/big', bodyPattern: '^a{65536}$' }), { timeoutMs: 2000 });
    assert.equal(prefix.reason, 'ok', 'exactly the first 64 KiB were matched');
  });

  it('a bodyPattern that is not a regular expression is an error result, not a throw', async () => {
    const r = await prober.probe(http(port, { path: '/healthz', bodyPattern: '(' }), { timeoutMs: 2000 });
    assert.equal(r.reason, 'error');
    assert.match(r.message, /^http GET \/healthz: bodyPattern "\(" is not a regular expression: /);
  });

  it('hung server (accepts, never answers) → timeout naming the phase', async () => {
    const r = await prober.probe(http(port, { path: '/hang' }), { timeoutMs: 200 });
    assert.deepEqual([r.ok, r.reason, r.message], [false, 'timeout', 'http GET /hang: timeout after 200 ms (no response headers)']);
    assert.ok(r.durationMs >= 190 && r.durationMs < 1500, `${r.durationMs} ms`);
  });

  it('a body that never ends → timeout while reading it (only when a body pattern needs it)', async () => {
    const r = await prober.probe(http(port, { path: '/slowbody', bodyPattern: 'ok' }), { timeoutMs: 200 });
    assert.deepEqual([r.reason, r.message], ['timeout', 'http GET /slowbody: timeout after 200 ms (got 200, body incomplete)']);
    const noPattern = await prober.probe(http(port, { path: '/slowbody' }), { timeoutMs: 200 });
    assert.equal(noPattern.reason, 'ok');
  });

  it('method, path and Host header are sent as given', async () => {
    const r = await prober.probe(http(port, { path: '/host', host: 'www.lbd.test', bodyPattern: '^host=www\\.lbd\\.test$' }), { timeoutMs: 2000 });
    assert.equal(r.reason, 'ok', r.message);
    const dflt = await prober.probe(http(port, { path: '/host', bodyPattern: `^host=127\\.0\\.0\\.1:${port}$` }), { timeoutMs: 2000 });
    assert.equal(dflt.reason, 'ok', dflt.message);
    const head = await prober.probe(http(port, { path: '/healthz', method: 'HEAD' }), { timeoutMs: 2000 });
    assert.deepEqual([head.reason, head.message], ['ok', 'http HEAD /healthz: got 200']);
  });

  it('refused: nothing listens', async () => {
    const closed = await start(createHttpServer(routes), '127.0.0.1');
    const s = servers.pop() as Server;
    await new Promise<void>((resolve) => s.close(() => resolve()));
    const r = await prober.probe(http(closed), { timeoutMs: 2000 });
    assert.deepEqual([r.ok, r.reason, r.message], [false, 'refused', 'http GET /: refused']);
  });

  it('a new connection per probe, closed afterwards (no keep-alive left on the server)', async () => {
    const server = servers[0] as Server;
    const seen: string[] = [];
    server.on('connection', (sock) => seen.push(`${sock.remotePort}`));
    for (let i = 0; i < 3; i++) assert.equal((await prober.probe(http(port, { path: '/healthz' }), { timeoutMs: 2000 })).reason, 'ok');
    assert.equal(new Set(seen).size, 3);
    const open = await new Promise<number>((resolve, reject) => server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
    assert.ok(open <= 1, `${open} connections still open`); // the last close may be in flight
  });
});

describe('HttpProber (http over ::1)', () => {
  afterEach(closeServers);
  it('200 → ok and 500 → status on [::1]', async () => {
    const port = await start(createHttpServer(routes), '::1');
    const ok = await prober.probe(http(port, { path: '/healthz' }, '::1'), { timeoutMs: 2000 });
    assert.equal(ok.reason, 'ok', ok.message);
    const fail = await prober.probe(http(port, { path: '/fail' }, '::1'), { timeoutMs: 2000 });
    assert.deepEqual([fail.reason, fail.message], ['status', 'http GET /fail: got 500, want 200-399']);
  });
});

describe('HttpProber (https, self-signed certificate)', () => {
  afterEach(closeServers);
  let dir = '';
  let key = '';
  let cert = '';
  let port = 0;
  let servernames: Array<string | false | null>;

  before(async function () {
    dir = await mkdtemp(join(tmpdir(), 'lbd-hc-tls-'));
    try {
      // A throwaway self-signed certificate for rs.lbd.test and 127.0.0.1, valid for 2 days, made per run.
      await promisify(execFile)('openssl', [
        'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
        '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '2', '-subj', '/CN=rs.lbd.test',
        '-addext', 'subjectAltName=DNS:rs.lbd.test,IP:127.0.0.1',
      ]);
    } catch (err) {
      process.stderr.write(`\n!!! SKIPPING https prober tests: cannot make a test certificate with openssl (${(err as Error).message.split('\n')[0]}); apt-get install openssl\n\n`);
      this.skip();
    }
    key = await readFile(join(dir, 'key.pem'), 'utf8');
    cert = await readFile(join(dir, 'cert.pem'), 'utf8');
  });

  after(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  beforeEach(async () => {
    servernames = [];
    const server = createHttpsServer({ key, cert }, routes);
    server.on('secureConnection', (s: TLSSocket) => servernames.push(s.servername));
    port = await start(server, '127.0.0.1');
  });

  const https = (over: Partial<ProbeTarget> = {}): ProbeTarget => ({ kind: 'https', address: '127.0.0.1', port, path: '/healthz', ...over });

  it('tlsVerify false → ok (status and body checked over TLS)', async () => {
    const r = await prober.probe(https({ tlsVerify: false, bodyPattern: 'ok' }), { timeoutMs: 2000 });
    assert.deepEqual([r.ok, r.reason, r.message], [true, 'ok', 'https GET /healthz: got 200, body matches /ok/']);
  });

  it('tlsVerify true (the default) → tls failure saying why', async () => {
    for (const target of [https(), https({ tlsVerify: true })]) {
      const r = await prober.probe(target, { timeoutMs: 2000 });
      assert.deepEqual([r.ok, r.reason, r.message], [false, 'tls', 'https GET /healthz: tls: self-signed certificate']);
    }
  });

  it('status failures over TLS are still status failures', async () => {
    const r = await prober.probe(https({ tlsVerify: false, path: '/fail' }), { timeoutMs: 2000 });
    assert.deepEqual([r.reason, r.message], ['status', 'https GET /fail: got 500, want 200-399']);
  });

  it('SNI: none for an address, `sni` when set, else the Host header; `sni` wins over Host', async () => {
    await prober.probe(https({ tlsVerify: false }), { timeoutMs: 2000 });
    await prober.probe(https({ tlsVerify: false, sni: 'rs.lbd.test' }), { timeoutMs: 2000 });
    await prober.probe(https({ tlsVerify: false, host: 'www.lbd.test' }), { timeoutMs: 2000 });
    await prober.probe(https({ tlsVerify: false, host: 'www.lbd.test', sni: 'rs.lbd.test' }), { timeoutMs: 2000 });
    assert.deepEqual(servernames, [false, 'rs.lbd.test', 'www.lbd.test', 'rs.lbd.test']);
  });

  it('https to a plain http server → tls failure', async () => {
    const plain = await start(createHttpServer(routes), '127.0.0.1');
    const r = await prober.probe({ kind: 'https', address: '127.0.0.1', port: plain, tlsVerify: false }, { timeoutMs: 2000 });
    assert.equal(r.reason, 'tls', r.message);
  });
});

describe('formatStatus', () => {
  it('names the wanted codes the way an operator writes them', () => {
    const table: Array<[Array<number | [number, number]>, string]> = [
      [[[200, 399]], '200-399'],
      [[200], '200'],
      [[200, 204], '200 or 204'],
      [[200, 204, [300, 302]], '200, 204 or 300-302'],
      [[[301, 301]], '301'],
    ];
    for (const [want, text] of table) assert.equal(formatStatus(want), text);
  });
});
