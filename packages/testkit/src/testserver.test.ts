import assert from 'node:assert/strict';
import { get } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { createSocket } from 'node:dgram';
import type { HttpCommand, HttpPacedCommand, StreamCommand, TcpOnceCommand, UdpCommand, UdpFlowsCommand } from './args.js';
import { openUdp, runHttp, runHttpPaced, runStream, runTcpOnce, runUdp, runUdpFlows, type ReadyReport, type UdpFlowsReadyReport, type UdpSock } from './testclient.js';
import { plainAddress, startTestServer, type RunningTestServer } from './testserver.js';

/** The test servers and clients against each other over loopback (no namespaces, no root). */
describe('testserver and testclient over loopback', () => {
  let server: RunningTestServer;
  const v4 = (port: number | undefined) => ({ host: '127.0.0.1', port: port!, family: 4 as const });

  before(async () => {
    server = await startTestServer({ name: 'rsx', bind: '::', http: 0, stream: 0, udp: 0 });
  });
  after(async () => {
    await server?.close();
  });

  it('shows IPv4-mapped peers as plain IPv4', () => {
    assert.equal(plainAddress('::ffff:198.19.1.100'), '198.19.1.100');
    assert.equal(plainAddress('fd00:0:0:2::100'), 'fd00:0:0:2::100');
  });

  it('answers HTTP with its name and the peer it saw, with and without keep-alive', async () => {
    for (const newConnection of [false, true]) {
      const cmd: HttpCommand = { mode: 'http', url: new URL(`http://127.0.0.1:${server.ports.http}/`), count: 20, concurrency: 3, newConnection, timeoutMs: 2000 };
      const r = await runHttp(cmd);
      assert.deepEqual([r.ok, r.failed, r.servers, r.peers, r.errors], [20, 0, { rsx: 20 }, { '127.0.0.1': 20 }, {}]);
    }
  });

  it('serves IPv6 on the same socket', async () => {
    const r = await runHttp({ mode: 'http', url: new URL(`http://[::1]:${server.ports.http}/`), count: 2, concurrency: 1, newConnection: false, timeoutMs: 2000 });
    assert.deepEqual(r.peers, { '::1': 2 });
  });

  it('serves /bytes?n=N and refuses a bad n', async () => {
    const r = await runHttp({ mode: 'http', url: new URL(`http://127.0.0.1:${server.ports.http}/bytes?n=1000000`), count: 2, concurrency: 1, newConnection: false, timeoutMs: 2000 });
    assert.deepEqual([r.ok, r.bytes, r.servers], [2, 2_000_000, {}]);
    const status = await new Promise<number | undefined>((resolve, reject) => {
      get(`http://127.0.0.1:${server.ports.http}/bytes?n=-1`, (res) => { res.resume(); resolve(res.statusCode); }).on('error', reject);
    });
    assert.equal(status, 400);
  });

  it('counts failures by kind', async () => {
    const r = await runHttp({ mode: 'http', url: new URL('http://127.0.0.1:1/'), count: 3, concurrency: 1, newConnection: true, timeoutMs: 500 });
    assert.deepEqual([r.ok, r.failed, r.errors], [0, 3, { ECONNREFUSED: 3 }]);
  });

  it('http-paced: a fresh connection per interval, each recorded with its start, failures by kind; ends on the signal', async () => {
    const cmd: HttpPacedCommand = { mode: 'http-paced', url: new URL(`http://127.0.0.1:${server.ports.http}/`), intervalMs: 5, timeoutMs: 1000, durationMs: 60_000, maxInFlight: 10, maxRequests: 20 };
    let started: number | undefined;
    const r = await runHttpPaced(cmd, { onStart: (s) => { started = s.started; } });
    assert.equal(started, r.t0);
    assert.equal(r.records.length, 20);
    assert.ok(r.records.every(([, , ok, err]) => ok === 1 && err === ''), JSON.stringify(r.records));
    // Paced by the timer, not by the answers: the 20th starts about 19 intervals after the first.
    assert.ok(Math.max(...r.records.map(([s]) => s)) >= 19 * 4, JSON.stringify(r.records));
    const refused = await runHttpPaced({ ...cmd, url: new URL('http://127.0.0.1:1/'), maxRequests: 3 });
    assert.deepEqual(refused.records.map(([, , ok, err]) => `${ok} ${err}`), ['0 ECONNREFUSED', '0 ECONNREFUSED', '0 ECONNREFUSED']);
    const stop = new AbortController();
    stop.abort();
    assert.deepEqual((await runHttpPaced(cmd, { signal: stop.signal })).records, [], 'nothing started once stopped');
  });

  it('streams contiguous sequences, ready first, until stopped', async () => {
    const cmd: StreamCommand = { mode: 'stream', target: v4(server.ports.stream), connections: 5, durationMs: 10_000, timeoutMs: 2000, stallMs: 1000 };
    const stop = new AbortController();
    let ready: ReadyReport | undefined;
    const result = runStream(cmd, { signal: stop.signal, onReady: (r) => { ready = r; setTimeout(() => stop.abort(), 300); } });
    const r = await result;
    assert.deepEqual(ready, { ready: true, connections: 5, started: 5, failed: 0, servers: { rsx: 5 }, failures: [] });
    assert.deepEqual([r.connections, r.intact, r.broken, r.servers], [5, 5, 0, { rsx: 5 }]);
    for (const c of r.perConnection) assert.ok(c.lines >= 5 && c.error === null && c.server === 'rsx', JSON.stringify(c));
  });

  it('reports a stream that never starts as not ready and broken', async () => {
    const r = await runStream({ mode: 'stream', target: v4(1), connections: 2, durationMs: 50, timeoutMs: 500, stallMs: 1000 }, {
      onReady: (ready) => {
        assert.deepEqual([ready.ready, ready.failed], [false, 2]);
        // Each failure names the client port the kernel bound (to find it in conntrack) and what went wrong.
        for (const f of ready.failures) assert.ok(typeof f.port === 'number' && f.port > 0 && /ECONNREFUSED/.test(f.error), JSON.stringify(f));
      },
    });
    assert.deepEqual([r.intact, r.broken], [0, 2]);
    assert.match(r.perConnection[0]!.error!, /ECONNREFUSED/);
  });

  it('answers UDP from fresh sockets and from one source port', async () => {
    const base: UdpCommand = { mode: 'udp', target: v4(server.ports.udp), count: 5, timeoutMs: 1000 };
    const fresh = await runUdp(base);
    assert.deepEqual([fresh.ok, fresh.failed, fresh.servers, fresh.peers], [5, 0, { rsx: 5 }, { '127.0.0.1': 5 }]);
    const pinned = await runUdp({ ...base, sourcePort: 0 });
    assert.equal(pinned.ok, 5);
  });

  it('gives every fresh UDP socket a port of its own, so each fresh datagram is a new flow to conntrack', async () => {
    // With SO_REUSEADDR on fresh sockets, about 24 of 1000 shared a port here (an rr split came out 10/11/9).
    const socks: UdpSock[] = [];
    try {
      for (let i = 0; i < 1000; i++) socks.push(await openUdp('udp4', 0));
      const ports = socks.map((s) => s.address().port);
      assert.equal(new Set(ports).size, ports.length, 'two fresh sockets were bound to one port');
    } finally {
      for (const s of socks) s.close();
    }
  });

  it('keeps UDP flows on their own source ports, every seq answered, ready first, until stopped', async () => {
    const first = await freeUdpPort();
    const cmd: UdpFlowsCommand = { mode: 'udp-flows', target: v4(server.ports.udp), flows: 1, firstPort: first, intervalMs: 20, durationMs: 10_000, timeoutMs: 500, maxRetries: 3 };
    for (const c of [cmd, { ...cmd, flows: 5, firstPort: undefined }]) {
      const stop = new AbortController();
      let ready: UdpFlowsReadyReport | undefined;
      const r = await runUdpFlows(c, { signal: stop.signal, onReady: (x) => { ready = x; setTimeout(() => stop.abort(), 300); } });
      assert.deepEqual(ready, { ready: true, flows: c.flows, started: c.flows, failed: 0, servers: { rsx: c.flows } });
      assert.deepEqual([r.flows, r.intact, r.broken, r.servers], [c.flows, c.flows, 0, { rsx: c.flows }]);
      for (const f of r.perFlow) assert.ok(f.answered >= 5 && f.error === null && f.server === 'rsx', JSON.stringify(f));
      assert.equal(new Set(r.perFlow.map((f) => f.sourcePort)).size, c.flows);
      if (c.firstPort !== undefined) assert.equal(r.perFlow[0]!.sourcePort, c.firstPort);
    }
  });

  it('reports UDP flows nobody answers as not ready and broken', async () => {
    const silent = await freeUdpPort();
    const r = await runUdpFlows({ mode: 'udp-flows', target: v4(silent), flows: 2, intervalMs: 20, durationMs: 50, timeoutMs: 50, maxRetries: 1 }, {
      onReady: (ready) => assert.deepEqual([ready.ready, ready.failed], [false, 2]),
    });
    assert.deepEqual([r.intact, r.broken], [0, 2]);
    assert.match(r.perFlow[0]!.error!, /^no answer at all \(seq 0 never answered \(1 retries/);
  });

  it('tells which server answered each connection, also from a fixed source port', async () => {
    const base: TcpOnceCommand = { mode: 'tcp-once', target: v4(server.ports.stream), count: 5, timeoutMs: 2000 };
    assert.deepEqual((await runTcpOnce(base)).sequence, ['rsx', 'rsx', 'rsx', 'rsx', 'rsx']);
    const port = await freePort();
    const pinned = await runTcpOnce({ ...base, sourcePort: port });
    assert.deepEqual([pinned.ok, pinned.failed, pinned.errors], [5, 0, {}]);
  });
});

/** A TCP port free right now on 127.0.0.1 (the kernel picks it). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    }).on('error', reject);
  });
}

/** A UDP port free right now on 127.0.0.1 (nothing answers on it once closed). */
function freeUdpPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createSocket('udp4');
    s.on('error', reject);
    s.bind(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

describe('testserver faults', () => {
  it('breaks HTTP answers as the fault file says, and mends them when it is emptied', async () => {
    const { mkdtemp, rm, writeFile } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dir = await mkdtemp(join(tmpdir(), 'lbd-fault-'));
    const faultFile = join(dir, 'rs1.fault');
    const server = await startTestServer({ name: 'rs1', http: 0, bind: '127.0.0.1', faultFile });
    const fetchOnce = (): Promise<{ status: number; body: string }> => new Promise((resolve, reject) => {
      get({ host: '127.0.0.1', port: server.ports.http, path: '/', agent: false }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => { body += d.toString(); });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      }).on('error', reject);
    });
    try {
      assert.equal((await fetchOnce()).status, 200);
      await writeFile(faultFile, '500\n');
      assert.equal((await fetchOnce()).status, 500);
      await writeFile(faultFile, 'body');
      assert.deepEqual(await fetchOnce(), { status: 200, body: 'maintenance\n' });
      await writeFile(faultFile, 'close');
      await assert.rejects(fetchOnce());
      await writeFile(faultFile, '');
      assert.match((await fetchOnce()).body, /"server":"rs1"/);
    } finally {
      await server.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
