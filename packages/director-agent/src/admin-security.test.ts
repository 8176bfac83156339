import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request as httpsRequest } from 'node:https';
import { connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { ConfigError } from '@lbd/config';
import { FakeDataPlane } from '@lbd/dataplane/testing';
import { AdminApi, adminServiceDefinition, applyProblemsOf, isServiceError, unixTarget, type AdminEndpoint } from '@lbd/proto';
import { freePort, issueCert, makeCa } from '@lbd/testkit';
import { createLogger, silentLogger } from '@lbd/log';
import { AdminServer, METHOD_ROLES, requestBody, roleNeeded, type AdminBackend, type OpsRoute } from '@lbd/operator-surfaces';
import { Agent } from './agent.js';

/**
 * The operators' TCP listeners, for real on loopback: a real Agent (FakeDataPlane) with agent.admin set,
 * certificates from a test CA (testkit), and clients that present none, a foreign CA's, an unlisted
 * name's, a reader's and a writer's. Then malformed and oversized requests to every admin method and to
 * the HTTPS listener, after which both still answer.
 */

const SERVICES = `services:
  - name: web
    vip: 198.18.0.10
    port: 80
    mode: fullnat
    localAddresses: [198.18.2.10]
    realServers:
      - { address: 198.19.1.11, port: 8080, weight: 1 }
`;

interface Pem { readonly ca: Buffer; readonly cert: Buffer; readonly key: Buffer }

interface Harness {
  readonly dir: string;
  readonly configPath: string;
  /** The file as written at start (an Apply replaces the file with the config it applied). */
  readonly configText: string;
  readonly socket: string;
  readonly grpcPort: number;
  readonly httpPort: number;
  readonly dp: FakeDataPlane;
  readonly agent: Agent;
  /** Client material by name: ops-alice (write), viewer (read), mallory (unlisted), rogue (ops-alice from another CA). */
  readonly pem: Readonly<Record<'ops-alice' | 'viewer' | 'mallory' | 'rogue', Pem>>;
  readonly ca: Buffer;
  readonly logs: Record<string, unknown>[];
}

async function startHarness(): Promise<Harness> {
  const dir = await mkdtemp(join(tmpdir(), 'lbd-admin-sec-'));
  const ca = await makeCa(join(dir, 'pki'), 'ca');
  const server = await issueCert(ca, join(dir, 'pki'), 'dir1');
  const rogueCa = await makeCa(join(dir, 'rogue'), 'rogue-ca');
  const read = async (c: { certPath: string; keyPath: string }): Promise<Pem> =>
    ({ ca: await readFile(ca.certPath), cert: await readFile(c.certPath), key: await readFile(c.keyPath) });
  const pem = {
    'ops-alice': await read(await issueCert(ca, join(dir, 'pki'), 'ops-alice')),
    viewer: await read(await issueCert(ca, join(dir, 'pki'), 'viewer')),
    mallory: await read(await issueCert(ca, join(dir, 'pki'), 'mallory')),
    rogue: await read(await issueCert(rogueCa, join(dir, 'rogue'), 'ops-alice')),
  };
  const [grpcPort, httpPort] = [await freePort(), await freePort()];
  const configPath = join(dir, 'lbd.yaml');
  const configText = `agent:
  admin:
    grpcListen: 127.0.0.1:${grpcPort}
    httpListen: 127.0.0.1:${httpPort}
    tls: { ca: ${ca.certPath}, cert: ${server.certPath}, key: ${server.keyPath} }
    clients:
      - { name: ops-alice, role: write }
      - { name: viewer, role: read }
${SERVICES}`;
  await writeFile(configPath, configText);
  const dp = new FakeDataPlane();
  const logs: Record<string, unknown>[] = [];
  const socket = join(dir, 'run', 'admin.sock');
  const agent = await Agent.start({
    configPath, dataPlane: dp, adminSocket: socket, watch: false,
    log: createLogger({ level: 'debug', write: (line) => logs.push(JSON.parse(line) as Record<string, unknown>) }),
    opsRoutes: () => ({ routes: [echoRoute] }),
    opsLimits: { headersTimeoutMs: 500, requestTimeoutMs: 1000, handshakeTimeoutMs: 500 },
  });
  return { dir, configPath, configText, socket, grpcPort, httpPort, dp, agent, pem, ca: await readFile(ca.certPath), logs };
}

/** A write route that answers with what it was sent: shows the body reached it, whole. */
const echoRoute: OpsRoute = {
  method: 'POST', path: '/api/echo', role: 'write',
  handle(req, res, caller) {
    const body = requestBody(req);
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    res.end(`${caller.name}:${caller.role}:${body.length}`);
  },
};

function tcpEndpoint(h: Harness, who: Pem | { ca: Buffer }): AdminEndpoint {
  // No key and certificate: grpc-js then offers none in the handshake.
  const { cert, key } = who as Partial<Pem>;
  return { kind: 'tls', address: '127.0.0.1', port: h.grpcPort, ca: h.ca, cert: cert as Buffer, key: key as Buffer, serverName: 'dir1' };
}

async function grpcError(p: Promise<unknown>): Promise<grpc.ServiceError> {
  try {
    await p;
  } catch (err) {
    if (isServiceError(err)) return err;
    throw err;
  }
  assert.fail('the call succeeded');
}

interface HttpAnswer { status: number; headers: Record<string, string | string[] | undefined>; body: string }

function https(h: Harness, who: Pem | { ca: Buffer }, opts: { method?: string; path?: string; body?: Buffer | string; headers?: Record<string, string>; chunked?: boolean } = {}): Promise<HttpAnswer> {
  const { cert, key } = who as Partial<Pem>;
  return new Promise((resolve, reject) => {
    const req = httpsRequest({
      host: '127.0.0.1', port: h.httpPort, method: opts.method ?? 'GET', path: opts.path ?? '/healthz', servername: 'dir1',
      ca: h.ca, ...(cert ? { cert, key } : {}), agent: false, headers: { ...opts.headers, ...(opts.chunked ? { 'Transfer-Encoding': 'chunked' } : {}) },
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    // Headers first: with the whole body known before they go out, Node would declare its length instead.
    if (opts.chunked) req.flushHeaders();
    if (opts.body !== undefined) req.write(opts.body);
    req.end();
  });
}

/** Raw bytes over a TLS connection with a client certificate: what a broken or hostile client sends. */
async function rawTls(h: Harness, who: Pem, bytes: string | Buffer, opts: { end?: boolean } = {}): Promise<string> {
  const socket = tlsConnect({ host: '127.0.0.1', port: h.httpPort, servername: 'dir1', ca: h.ca, cert: who.cert, key: who.key });
  await once(socket, 'secureConnect');
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.write(bytes);
  if (opts.end !== false) socket.end();
  await Promise.race([once(socket, 'close'), once(socket, 'error')]);
  return Buffer.concat(chunks).toString();
}

describe('admin API security (TCP listeners, mutual TLS, roles)', function () {
  this.timeout(60_000);
  let h: Harness;
  const apis: AdminApi[] = [];
  const api = (e: string | AdminEndpoint): AdminApi => {
    const a = new AdminApi(e);
    apis.push(a);
    return a;
  };

  before(async () => {
    h = await startHarness();
  });
  after(async () => {
    for (const a of apis) a.close();
    await h?.agent.stop();
    if (h) await rm(h.dir, { recursive: true, force: true });
  });

  describe('admin gRPC over TCP', () => {
    it('refuses a client without a certificate, and one from another CA, at the handshake', async () => {
      for (const who of [{ ca: h.ca }, h.pem.rogue]) {
        const err = await grpcError(api(tcpEndpoint(h, who)).getStatus({ timeoutMs: 5000 }));
        assert.ok(err.code === grpc.status.UNAVAILABLE || err.code === grpc.status.DEADLINE_EXCEEDED, `${grpc.status[err.code]}: ${err.details}`);
      }
    });

    it('refuses a certificate the CA signed whose name is not listed, naming it and the fix', async () => {
      const err = await grpcError(api(tcpEndpoint(h, h.pem.mallory)).getStatus({ timeoutMs: 5000 }));
      assert.equal(err.code, grpc.status.PERMISSION_DENIED);
      assert.equal(err.details, 'the client certificate mallory is not listed in agent.admin.clients; add {name: mallory, role: read} (or role: write) there on this director and restart lbd-agent, or use a listed certificate');
    });

    it('a reader reads, dry-runs, and is refused every write, with its name, role and the role needed', async () => {
      const viewer = api(tcpEndpoint(h, h.pem.viewer));
      assert.equal((await viewer.getStatus()).services[0]?.name, 'web');
      const applies = h.dp.applyCount;
      const dry = await viewer.apply({ configText: h.configText.replace('weight: 1', 'weight: 7'), source: 'x.yaml', dryRun: true });
      assert.equal(dry.dryRun, true);
      const apply = await grpcError(viewer.apply({ configText: h.configText.replace('weight: 1', 'weight: 7'), source: 'x.yaml', dryRun: false }));
      assert.equal(apply.code, grpc.status.PERMISSION_DENIED);
      assert.equal(apply.details, 'the client certificate viewer has role read, and Apply without dry_run needs role write; give viewer role write in agent.admin.clients, or use a certificate that has it');
      for (const call of [viewer.failover('default'), viewer.rollback(1, 'x')]) {
        const err = await grpcError(call);
        assert.equal(err.code, grpc.status.PERMISSION_DENIED);
        assert.match(err.details, /^the client certificate viewer has role read, and (Failover|Rollback) needs role write;/);
      }
      assert.equal(h.dp.applyCount, applies, 'nothing reached the data plane');
      assert.equal(h.dp.applied.services[0]?.realServers[0]?.weight, 1);
    });

    it('a writer writes: its apply reaches the data plane, and a failover reaches the agent', async () => {
      const alice = api(tcpEndpoint(h, h.pem['ops-alice']));
      const res = await alice.apply({ configText: h.configText.replace('weight: 1', 'weight: 3'), source: '/tmp/alice.yaml', dryRun: false, author: 'alice@laptop' });
      assert.equal(res.changed, true);
      assert.equal(h.dp.applied.services[0]?.realServers[0]?.weight, 3);
      // Past the role check: refused by the agent itself, for its own reason.
      const err = await grpcError(alice.failover('default'));
      assert.equal(err.code, grpc.status.FAILED_PRECONDITION);
      assert.match(err.details, /failover needs a cluster/);
    });

    it('a writer over the network may not change the director\'s own agent settings (who may call, and how)', async () => {
      const alice = api(tcpEndpoint(h, h.pem['ops-alice']));
      for (const text of [SERVICES, h.configText.replace('{ name: viewer, role: read }', '{ name: \'*\', role: write }')]) {
        const err = await grpcError(alice.apply({ configText: text, source: '/tmp/alice.yaml', dryRun: false }));
        assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
        assert.deepEqual(applyProblemsOf(err)?.map((p) => [p.path, p.rule]), [['agent', 'differs from this director\'s own agent settings, which a client over the network (here ops-alice) may not change']]);
      }
      assert.equal(h.dp.applied.services[0]?.realServers[0]?.weight, 3, 'nothing was applied');
    });

    it('the unix socket still answers, and writes', async () => {
      const local = api(h.socket);
      assert.equal((await local.getStatus()).agent?.configRevision, h.agent.revision);
      const res = await local.apply({ configText: SERVICES, source: '/tmp/root.yaml', dryRun: false });
      assert.equal(res.changed, true);
      assert.equal(h.dp.applied.services[0]?.realServers[0]?.weight, 1);
    });

    it('a write records the certificate\'s name as its author (with what the client says beside it) and passes the caller on', async () => {
      const seen: unknown[] = [];
      const backend = {
        applyText: async (_t: string, _s: string, _d: boolean, o: { author?: string; caller?: unknown }) => { seen.push(['apply', o.author, o.caller]); return { ok: false, error: new ConfigError('Invalid', 'x', []), sha256: '' }; },
        rollback: async (_r: number, author: string, caller: unknown) => { seen.push(['rollback', author, caller]); return 2; },
      } as unknown as AdminBackend;
      const tls = { ca: h.ca, cert: await readFile(join(h.dir, 'pki', 'dir1.pem')), key: await readFile(join(h.dir, 'pki', 'dir1.key')) };
      const server = await AdminServer.listenTcp({ address: '127.0.0.1', port: 0, tls, clients: [{ name: 'ops-alice', role: 'write' }] }, backend, silentLogger);
      const alice = api({ kind: 'tls', address: '127.0.0.1', port: server.port, ...h.pem['ops-alice'], serverName: 'dir1' });
      try {
        await alice.rollback(1, 'alice@laptop');
        await alice.rollback(1, '');
        await grpcError(alice.apply({ configText: 'services: []', source: '/x.yaml', dryRun: false, author: 'root@host' }));
      } finally {
        await server.close();
      }
      const caller = { name: 'ops-alice', role: 'write' };
      assert.deepEqual(seen, [
        ['rollback', 'alice@laptop (certificate ops-alice)', caller], ['rollback', 'ops-alice', caller], ['apply', 'root@host (certificate ops-alice)', caller],
      ]);
    });

    it('every admin method: a reader is refused exactly the ones that need write; unknown methods need write', async () => {
      const viewer = new grpc.Client(`127.0.0.1:${h.grpcPort}`, grpc.credentials.createSsl(h.ca, h.pem.viewer.key, h.pem.viewer.cert), { 'grpc.ssl_target_name_override': 'dir1' });
      try {
        for (const [name, m] of Object.entries(adminServiceDefinition())) {
          // An empty request: every field at its default (so Apply is not a dry run).
          const status = await rawCall(viewer, m, Buffer.alloc(0), 1000);
          const needsWrite = roleNeeded(name, {}) === 'write';
          assert.equal(status.code === grpc.status.PERMISSION_DENIED, needsWrite, `${name}: ${grpc.status[status.code]} ${status.details}`);
        }
      } finally {
        viewer.close();
      }
      assert.equal(roleNeeded('SomeMethodAddedLater', {}), 'write');
      assert.equal(roleNeeded('Apply', undefined), 'write');
      assert.equal(roleNeeded('Apply', { dryRun: true }), 'read');
      assert.ok(Object.keys(METHOD_ROLES).every((k) => k in adminServiceDefinition()), 'the role table names only methods that exist');
    });
  });

  describe('ops HTTPS listener', () => {
    it('refuses a client without a certificate, and one from another CA, at the handshake', async () => {
      for (const who of [{ ca: h.ca }, h.pem.rogue]) {
        await assert.rejects(https(h, who), (err: NodeJS.ErrnoException) => {
          assert.ok(err.code !== undefined, String(err));
          return true;
        });
      }
    });

    it('refuses an unlisted certificate with 403 and the fix in words', async () => {
      const r = await https(h, h.pem.mallory);
      assert.equal(r.status, 403);
      assert.equal(r.body, 'lbd-agent: the client certificate mallory is not listed in agent.admin.clients; add {name: mallory, role: read} (or role: write) there on this director and restart lbd-agent, or use a listed certificate\n');
      assert.ok(h.logs.some((l) => l.msg === 'ops request refused' && l.caller === 'mallory' && l.method === 'GET'), 'the refusal is logged with the certificate\'s name');
    });

    it('GET /healthz answers a reader with the agent\'s liveness', async () => {
      const r = await https(h, h.pem.viewer);
      assert.equal(r.status, 200);
      const l = JSON.parse(r.body) as Record<string, unknown>;
      assert.equal(l.ok, true);
      assert.equal(l.pid, process.pid);
      assert.equal(l.configRevision, h.agent.revision);
    });

    it('a write route: a reader gets 403 naming its role, a writer gets through with its body', async () => {
      const refused = await https(h, h.pem.viewer, { method: 'POST', path: '/api/echo', body: 'hello' });
      assert.equal(refused.status, 403);
      assert.equal(refused.body, 'lbd-agent: the client certificate viewer has role read, and POST /api/echo needs role write; give viewer role write in agent.admin.clients, or use a certificate that has it\n');
      const ok = await https(h, h.pem['ops-alice'], { method: 'POST', path: '/api/echo', body: 'hello' });
      assert.deepEqual([ok.status, ok.body], [200, 'ops-alice:write:5']);
    });

    it('unknown paths are 404 listing what is served; a wrong method is 405 with Allow', async () => {
      const missing = await https(h, h.pem.viewer, { path: '/nope' });
      assert.equal(missing.status, 404);
      assert.equal(missing.body, 'lbd-agent: no such path: /nope; this agent serves GET /healthz, POST /api/echo\n');
      const wrong = await https(h, h.pem.viewer, { method: 'DELETE', path: '/healthz' });
      assert.equal(wrong.status, 405);
      assert.equal(wrong.headers.allow, 'GET');
      assert.equal(wrong.body, 'lbd-agent: DELETE is not allowed on /healthz; use GET\n');
    });

    it('oversized bodies (declared or chunked), headers and URLs are refused in words', async () => {
      const big = Buffer.alloc(64 * 1024 + 1, 0x61);
      const declared = await https(h, h.pem['ops-alice'], { method: 'POST', path: '/api/echo', body: big, headers: { 'Content-Length': String(big.length) } });
      assert.deepEqual([declared.status, declared.body], [413, `lbd-agent: the request body is ${big.length} bytes; the limit is 65536\n`]);
      const chunked = await https(h, h.pem['ops-alice'], { method: 'POST', path: '/api/echo', body: big, chunked: true });
      assert.deepEqual([chunked.status, chunked.body], [413, 'lbd-agent: the request body is more than 65536 bytes; the limit is 65536\n']);
      const exact = await https(h, h.pem['ops-alice'], { method: 'POST', path: '/api/echo', body: big.subarray(1) });
      assert.deepEqual([exact.status, exact.body], [200, 'ops-alice:write:65536']);
      const url = await https(h, h.pem.viewer, { path: `/healthz?${'x'.repeat(5000)}` });
      assert.equal(url.status, 414);
      const headers = await rawTls(h, h.pem.viewer, `GET /healthz HTTP/1.1\r\nHost: dir1\r\nX-Big: ${'y'.repeat(20_000)}\r\n\r\n`);
      assert.match(headers, /^HTTP\/1\.1 431 [^\r]*\r\n[\s\S]*lbd-agent: the request line and headers are larger than 16384 bytes\n$/);
    });

    it('malformed requests get 400; a slow client is cut off; a silent TCP connection is closed', async () => {
      for (const junk of ['GARBAGE\r\n\r\n', 'GET / HTTP/9.9\r\n\r\n', 'GET /healthz HTTP/1.1\r\nContent-Length: -1\r\n\r\n', '\u0000\u0001\u0002\r\n\r\n']) {
        assert.match(await rawTls(h, h.pem.viewer, junk), /^HTTP\/1\.1 400 /, JSON.stringify(junk));
      }
      // Headers that never finish (slowloris): cut off after headersTimeoutMs (500 ms here).
      const started = Date.now();
      const slow = await rawTls(h, h.pem.viewer, 'GET /healthz HTTP/1.1\r\nHost: dir1\r\n', { end: false });
      assert.ok(Date.now() - started < 10_000, 'the slow client was cut off');
      assert.match(slow, /^(HTTP\/1\.1 408 |$)/);
      // A TCP connection that never starts TLS: closed after handshakeTimeoutMs.
      const tcp = netConnect({ host: '127.0.0.1', port: h.httpPort });
      await once(tcp, 'connect');
      await Promise.race([once(tcp, 'close'), once(tcp, 'error')]);
    });

    it('seeded random requests (methods, paths, header and body bytes) each get an answer or a closed connection', async () => {
      const random = mulberry32(0x0b5);
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
      const bytes = (n: number): string => Array.from({ length: n }, () => String.fromCharCode(Math.floor(random() * 256))).join('');
      const statuses = new Map<string, number>();
      for (let i = 0; i < 40; i++) {
        const method = pick(['GET', 'POST', 'PUT', 'HEAD', 'OPTIONS', 'G\u00ffT', bytes(4)]);
        const path = pick(['/healthz', '/api/echo', '/', '/%00', '/../../etc/passwd', `/${bytes(8)}`, '*', `/healthz?${'q'.repeat(Math.floor(random() * 6000))}`]);
        const headers = pick(['', 'Content-Length: 5\r\n', 'Content-Length: abc\r\n', 'Transfer-Encoding: chunked\r\n', `X-Junk: ${bytes(Math.floor(random() * 100))}\r\n`, `X-Big: ${'h'.repeat(Math.floor(random() * 30_000))}\r\n`]);
        const body = pick(['', 'hello', bytes(64), 'zz\r\nnot a chunk\r\n']);
        const answer = await rawTls(h, pick([h.pem.viewer, h.pem['ops-alice'], h.pem.mallory]), `${method} ${path} HTTP/1.1\r\nHost: dir1\r\n${headers}\r\n${body}`);
        const status = /^HTTP\/1\.1 (\d{3}) /.exec(answer)?.[1] ?? 'closed';
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        assert.ok(status === 'closed' || /^(200|400|403|404|405|408|413|414|431)$/.test(status), `${JSON.stringify(`${method} ${path.slice(0, 40)}`)}: ${answer.slice(0, 200)}`);
        if (status !== 'closed' && status !== '200' && !method.startsWith('HEAD')) assert.match(answer, /\r\n\r\nlbd-agent: /, `refusals say why: ${answer.slice(0, 300)}`);
      }
      assert.ok(statuses.size >= 4, `a spread of answers: ${JSON.stringify([...statuses])}`);
    });

    it('after all of that it still serves', async () => {
      assert.equal((await https(h, h.pem.viewer)).status, 200);
      assert.equal(h.logs.filter((l) => l.msg === 'ops route failed').length, 0, 'no route failed unexpectedly');
    });
  });

  describe('settings', () => {
    it('a change of agent.admin in a reload is warned about and waits for a restart; the listeners keep serving', async () => {
      const warnings = (): number => h.logs.filter((l) => l.msg === 'agent.admin changed; it takes effect when lbd-agent restarts').length;
      await writeFile(h.configPath, h.configText);
      let before = warnings();
      await h.agent.reload('sighup');
      assert.equal(warnings(), before, 'the settings it serves: nothing to warn about');
      await writeFile(h.configPath, h.configText.replace('{ name: viewer, role: read }', '{ name: viewer, role: write }'));
      before = warnings();
      await h.agent.reload('sighup');
      assert.equal(warnings(), before + 1, 'warned');
      const err = await grpcError(api(tcpEndpoint(h, h.pem.viewer)).rollback(1, 'x'));
      assert.equal(err.code, grpc.status.PERMISSION_DENIED, 'the role the agent started with still holds');
    });

    it('a listener that cannot bind stops the start, naming the setting and the address', async () => {
      for (const [setting, port] of [['grpcListen', h.grpcPort], ['httpListen', h.httpPort]] as const) {
        const configPath = join(h.dir, `busy-${setting}.yaml`);
        // The other listener on a free port: only `setting` collides with the running agent's.
        const other = setting === 'grpcListen' ? h.httpPort : h.grpcPort;
        await writeFile(configPath, h.configText.replace(`127.0.0.1:${other}`, `127.0.0.1:${await freePort()}`));
        const started = Agent.start({ configPath, dataPlane: new FakeDataPlane(), adminSocket: join(h.dir, `busy-${setting}.sock`), watch: false });
        await assert.rejects(started.then(async (a) => { await a.stop(); return a; }), (err: Error) => {
          assert.match(err.message, new RegExp(`^agent\\.admin\\.${setting}: cannot listen on 127\\.0\\.0\\.1:${port} \\(.*\\); stop what uses that port, or choose another address or port`));
          return true;
        });
      }
    });

    it('an unreadable TLS file stops the start, naming the setting and the file', async () => {
      const configPath = join(h.dir, 'bad-tls.yaml');
      const missing = join(h.dir, 'no-such-key.pem');
      await writeFile(configPath, h.configText.replace(/key: \S+\.key \}/, `key: ${missing} }`).replace(/127\.0\.0\.1:\d+/g, () => `127.0.0.1:${50000 + Math.floor(Math.random() * 10000)}`));
      const started = Agent.start({ configPath, dataPlane: new FakeDataPlane(), adminSocket: join(h.dir, 'other.sock'), watch: false });
      await assert.rejects(started.then(async (a) => { await a.stop(); return a; }), { message: `agent.admin.tls.key: cannot read ${missing} (ENOENT); give a readable PEM file` });
    });
  });

  describe('fuzz: malformed and oversized requests to every admin method', () => {
    it('each gets a gRPC status (never INTERNAL or a crash), over the unix socket and TCP; afterwards both answer', async function () {
      this.timeout(120_000);
      const clients = {
        unix: new grpc.Client(unixTarget(h.socket), grpc.credentials.createInsecure()),
        tcp: new grpc.Client(`127.0.0.1:${h.grpcPort}`, grpc.credentials.createSsl(h.ca, h.pem['ops-alice'].key, h.pem['ops-alice'].cert), { 'grpc.ssl_target_name_override': 'dir1' }),
      };
      const random = mulberry32(0x1bd6);
      const seen: string[] = [];
      try {
        for (const [transport, client] of Object.entries(clients)) {
          for (const [name, m] of Object.entries(adminServiceDefinition())) {
            for (const { what, bytes } of fuzzCases(m, random)) {
              const s = await rawCall(client, m, bytes, m.responseStream ? 1500 : 10_000);
              const label = `${transport} ${name} ${what}: ${grpc.status[s.code]} ${s.details.slice(0, 160)}`;
              seen.push(label);
              assert.ok(![grpc.status.INTERNAL, grpc.status.UNKNOWN, grpc.status.UNIMPLEMENTED].includes(s.code), label);
              if (s.code !== grpc.status.OK) assert.ok(s.details.length > 0, `${label}: a status without words`);
              if (s.code === grpc.status.DEADLINE_EXCEEDED) assert.ok(name === 'WatchHealth', `${label}: only a watch may still be open at its deadline`);
              if (what === 'past the channel limit') assert.equal(s.code, grpc.status.RESOURCE_EXHAUSTED, label);
            }
          }
        }
      } finally {
        for (const c of Object.values(clients)) c.close();
      }
      const malformed = seen.filter((l) => /INVALID_ARGUMENT request: not a valid lbd\.admin\.v1\./.test(l));
      assert.ok(malformed.length > 10, `malformed requests are named as such (${malformed.length}):\n${seen.join('\n')}`);
      assert.equal((await api(h.socket).getStatus()).services.length, 1);
      assert.equal((await api(tcpEndpoint(h, h.pem.viewer)).getStatus()).services.length, 1);
      assert.equal(h.logs.filter((l) => l.msg === 'admin call failed').length, 0, 'no call failed unexpectedly');
    });
  });
});

type MethodDef = ReturnType<typeof adminServiceDefinition>[keyof ReturnType<typeof adminServiceDefinition>];

/** One call with raw request bytes; resolves to its final status, whatever it is. */
function rawCall(client: grpc.Client, m: MethodDef, bytes: Buffer, timeoutMs: number): Promise<{ code: grpc.status; details: string }> {
  const identity = (b: Buffer): Buffer => b;
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve) => {
    if (!m.responseStream) {
      const call = client.makeUnaryRequest(m.path, identity, identity, bytes, new grpc.Metadata(), { deadline }, () => undefined);
      call.on('status', (s: grpc.StatusObject) => resolve({ code: s.code, details: s.details }));
      return;
    }
    const call = client.makeServerStreamRequest(m.path, identity, identity, bytes, new grpc.Metadata(), { deadline });
    call.on('data', () => undefined);
    call.on('error', () => undefined);
    call.on('status', (s: grpc.StatusObject) => resolve({ code: s.code, details: s.details }));
  });
}

/** A small seeded PRNG (mulberry32): the same cases every run, so a failure can be replayed. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface FieldInfo { readonly name: string; readonly number: number; readonly type: string }

function fieldsOf(m: MethodDef): FieldInfo[] {
  return ((m as unknown as { requestType: { type: { field: FieldInfo[] } } }).requestType.type.field ?? []);
}

function varint(n: number | bigint): Buffer {
  let v = BigInt(n);
  const out: number[] = [];
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) b |= 0x80;
    out.push(b);
  } while (v > 0n);
  return Buffer.from(out);
}

function lengthDelimited(field: number, payload: Buffer): Buffer {
  return Buffer.concat([varint((field << 3) | 2), varint(payload.length), payload]);
}

/**
 * Requests no correct client sends, per method, from its message type's own fields: random bytes,
 * a valid request cut short, every field with the wrong wire type, every string field oversized (within
 * the channel limit: the agent's own limits answer) and a message past the channel limit.
 */
function fuzzCases(m: MethodDef, random: () => number): { what: string; bytes: Buffer }[] {
  const cases: { what: string; bytes: Buffer }[] = [];
  const fields = fieldsOf(m);
  for (let i = 0; i < 6; i++) {
    cases.push({ what: `random bytes #${i}`, bytes: Buffer.from(Array.from({ length: 1 + Math.floor(random() * 64) }, () => Math.floor(random() * 256))) });
  }
  const full = Buffer.concat(fields.map((f) => (f.type === 'TYPE_STRING' ? lengthDelimited(f.number, Buffer.from('x'.repeat(20))) : Buffer.concat([varint(f.number << 3), varint(1)]))));
  if (full.length > 1) cases.push({ what: 'a valid request cut short', bytes: full.subarray(0, 1 + Math.floor(random() * (full.length - 1))) });
  for (const f of fields) {
    cases.push({
      what: `${f.name} with the wrong wire type`,
      bytes: f.type === 'TYPE_STRING' ? Buffer.concat([varint(f.number << 3), varint(2n ** 63n)]) : lengthDelimited(f.number, Buffer.from('not a number')),
    });
    if (f.type === 'TYPE_STRING') {
      cases.push({ what: `${f.name} of 1 MiB`, bytes: lengthDelimited(f.number, Buffer.alloc(1024 * 1024, 0x41)) });
      cases.push({ what: `${f.name} with a length past the end`, bytes: Buffer.concat([varint((f.number << 3) | 2), varint(1_000_000), Buffer.from('short')]) });
    }
  }
  cases.push({ what: 'an unknown field number, wire type 7', bytes: Buffer.from([0xff, 0xff, 0xff, 0x0f]) });
  cases.push({ what: 'past the channel limit', bytes: lengthDelimited(fields[0]?.number ?? 15, Buffer.alloc(5 * 1024 * 1024, 0x42)) });
  return cases;
}
