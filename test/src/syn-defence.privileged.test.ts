import assert from 'node:assert/strict';
import { parseConfig, type Service } from '@lbd/config';
import { NftDataPlane, netnsRunner } from '@lbd/dataplane-nft';
import {
  CLIENT, DIRECTOR, LOCAL_ADDRESSES, SERVER_PORTS, VIPS, directorTopology, removeOrphans, requireRoot, runPrefix, runTestClient, spawnTestClient,
  SPOOFED_SOURCES, startTestServers, synFlood, tcpExtCounter, waitFor, type DirectorTopology, type HttpResult, type ReadyReport, type StreamResult, type TcpOnceResult,
} from '@lbd/testkit';

/**
 * SYN-flood defence with the real kernel: the SYN proxy (synProxy) and the per-service connection limit
 * (connectionLimit), in the one-director topology. The flood comes from the client's namespace with spoofed
 * sources of SPOOFED_SOURCES, which the director routes back to the client, where the SYN-ACKs die.
 */

/** Conntrack's source addresses of the flood: 198.18.96.0 to 198.18.111.255. */
const FLOODED = /src=198\.18\.(9[6-9]|10\d|11[01])\.\d+ /;
const HTTP = SERVER_PORTS.http;
const STREAM = SERVER_PORTS.stream;

interface Svc { name: string; vip: string; port: number; mode: 'fullnat' | 'nat'; synProxy?: boolean; connectionLimit?: number }

function services(list: Svc[]): readonly Service[] {
  return parseConfig(JSON.stringify({
    services: list.map((s) => ({
      scheduler: 'mh', ...s,
      ...(s.mode === 'fullnat' ? { localAddresses: [s.vip.includes(':') ? LOCAL_ADDRESSES.ipv6Range : LOCAL_ADDRESSES.ipv4Range] } : {}),
      realServers: [1, 2, 3].map((k) => ({ address: s.vip.includes(':') ? `fd00:0:0:2::${10 + k}` : `198.19.1.${10 + k}`, port: s.port })),
    })),
  }), 'test').services;
}

describe('SYN-flood defence: synProxy and connectionLimit in namespaces @privileged', function () {
  this.timeout(180_000);
  let lab: DirectorTopology;
  let dp: NftDataPlane;

  before(async function () {
    await requireRoot(this, { commands: ['nft', 'conntrack', 'perl'] });
    await removeOrphans('lbdt');
    lab = await directorTopology({ prefix: runPrefix('lbdt', 'syn') });
    await lab.topology.setRoute(DIRECTOR.host, SPOOFED_SOURCES.prefix, CLIENT.ipv4);
    await startTestServers(lab.topology, lab.realServers.map((r) => r.host));
    dp = new NftDataPlane({ runner: netnsRunner(lab.topology.ns(DIRECTOR.host)) });
  });
  after(async () => {
    await lab?.topology.destroy();
  });

  const conntrack = async (): Promise<string[]> => {
    const r = await lab.topology.exec(DIRECTOR.host, 'conntrack', ['-L', '-f', 'ipv4'], { allowFailure: true });
    return r.stdout.split('\n').filter((l) => l.startsWith('tcp'));
  };
  /** A real server's count of handshake ACKs it rejected for a timestamp echo it never sent (TcpExtTSEcrRejected). */
  const tsEcrRejected = async (host: string): Promise<number> => {
    const n = await tcpExtCounter(lab.topology, host, 'TSEcrRejected');
    assert.ok(n !== null, 'this kernel does not count TSEcrRejected');
    return n;
  };
  const flush = (): Promise<unknown> => lab.topology.exec(DIRECTOR.host, 'conntrack', ['-F'], { allowFailure: true });
  const http = (vip: string, count: number): Promise<HttpResult> =>
    runTestClient<HttpResult>(lab.topology, CLIENT.host, ['http', '--url', `http://${vip.includes(':') ? `[${vip}]` : vip}:${HTTP}/`, '--count', String(count), '--new-connection', '--concurrency', '4']);

  for (const [mode, vip] of [['fullnat', VIPS.ipv4], ['nat', VIPS.ipv4Nat], ['fullnat', VIPS.ipv6]] as const) {
    it(`${mode}${vip.includes(':') ? ' IPv6' : ''}: the director completes the handshake with a syncookie and only then connects to the real server; requests and long streams work through the proxy`, async () => {
      await dp.apply({ services: services([{ name: 'web', vip, port: HTTP, mode, synProxy: true }, { name: 'stream', vip, port: STREAM, mode, synProxy: true }]) });
      const before = (await dp.observe()).synProxy;
      assert.ok(before, 'the data plane reports no SYN proxy counters with a SYN-proxied service');
      const rejectedBefore = await Promise.all(lab.realServers.map((rs) => tsEcrRejected(rs.host)));
      const r = await http(vip, 60);
      assert.equal(r.ok, 60, JSON.stringify(r.errors));
      // The proxy's handshake ACK to the real server is accepted at once: with TCP timestamps on, the kernel's
      // synproxy echoes a timestamp the server never sent, and each connection waits for a SYN-ACK retransmission.
      const rejected = await Promise.all(lab.realServers.map((rs) => tsEcrRejected(rs.host)));
      assert.deepEqual(rejected.map((n, i) => n - rejectedBefore[i]!), [0, 0, 0], 'real servers rejected the proxy\'s handshake ACKs');
      assert.equal(Object.keys(r.servers).length, 3, `spread over ${JSON.stringify(r.servers)}`);
      // The sequence numbers the client and the real server chose differ by the cookie: every later segment
      // is rewritten (seqadj). Streams checked byte by byte show that it is, both ways, for seconds.
      const target = vip.includes(':') ? `[${vip}]:${STREAM}` : `${vip}:${STREAM}`;
      const streams = spawnTestClient(lab.topology, CLIENT.host, ['stream', '--target', target, '--connections', '10', '--duration-ms', '3000', '--stall-ms', '2000']);
      const ready = await streams.waitForJson<ReadyReport>((v) => 'ready' in v, 20_000);
      assert.equal(ready.ready, true, JSON.stringify(ready));
      const done = await streams.waitForJson<StreamResult>((v) => 'intact' in v, 30_000);
      assert.equal(done.intact, 10, JSON.stringify(done.perConnection.filter((c) => c.error !== null)));
      const after = (await dp.observe()).synProxy!;
      assert.ok(after.cookieValid - before.cookieValid >= 70, `cookies validated: ${after.cookieValid - before.cookieValid} for 70 connections`);
      assert.ok(after.synReceived - before.synReceived >= 70, `SYNs answered by the proxy: ${after.synReceived - before.synReceived}`);
    });
  }

  it('a client reusing its port while the director still holds the old connection\'s entry (closed by a reset) connects through the proxy again and again', async () => {
    await dp.apply({ services: services([{ name: 'stream', vip: VIPS.ipv4, port: STREAM, mode: 'fullnat', synProxy: true }]) });
    // tcp-once with a fixed port ends each connection with a reset: the director's entry stays, CLOSE, for 10 s.
    // Conntrack must see the next SYN to end it; were the SYN untracked, the client's ACK would follow that
    // entry's NAT binding to the real server instead of reaching the proxy.
    const r = await runTestClient<TcpOnceResult>(lab.topology, CLIENT.host, ['tcp-once', '--target', `${VIPS.ipv4}:${STREAM}`, '--count', '4', '--source-port', '21001', '--timeout-ms', '5000']);
    assert.equal(r.ok, 4, JSON.stringify(r));
  });

  it('a flood of spoofed SYNs: with the proxy it creates no conntrack entry and legitimate clients connect throughout; without it, every spoofed SYN takes an entry', async () => {
    const FLOOD = 20_000;
    const figures: string[] = [];
    for (const synProxy of [true, false]) {
      await dp.apply({ services: services([{ name: 'web', vip: VIPS.ipv4, port: HTTP, mode: 'fullnat', synProxy }]) });
      await flush();
      const before = (await dp.observe()).synProxy;
      const legit = http(VIPS.ipv4, 100);
      const flood = await synFlood(lab.topology, CLIENT.host, { target: { address: VIPS.ipv4, port: HTTP }, sources: SPOOFED_SOURCES.first, count: FLOOD, maxSeconds: 20 });
      const served = await legit;
      const entries = (await conntrack()).filter((l) => FLOODED.test(l)).length;
      figures.push(`synProxy ${synProxy}: ${flood.sent} SYNs in ${flood.seconds} s, ${entries} conntrack entries from them, ${served.ok}/100 legitimate requests served`);
      assert.equal(flood.sent, FLOOD, `the flood was cut short: ${JSON.stringify(flood)}`);
      if (synProxy) {
        assert.equal(entries, 0, figures.join('; '));
        assert.equal(served.ok, 100, `${JSON.stringify(served.errors)}; ${figures.join('; ')}`);
        const after = (await dp.observe()).synProxy!;
        assert.ok(after.synReceived - before!.synReceived >= FLOOD, `the proxy answered ${after.synReceived - before!.synReceived} SYNs of ${FLOOD}`);
      } else {
        // Every distinct spoofed tuple became a connection the director DNATed to a real server.
        assert.ok(entries >= FLOOD * 0.9, figures.join('; '));
      }
    }
    console.log(`      ${figures.join('\n      ')}`);
    await flush();
  });

  it('a flood of one limited service holds at most its limit of entries, and another service on the director keeps connecting', async () => {
    const LIMIT = 2000;
    const FLOOD = 20_000;
    await dp.apply({ services: services([
      { name: 'attacked', vip: VIPS.ipv4, port: HTTP, mode: 'fullnat', connectionLimit: LIMIT },
      { name: 'other', vip: VIPS.ipv4Nat, port: HTTP, mode: 'nat' },
    ]) });
    await flush();
    const before = (await dp.observe()).services.find((x) => x.vip === VIPS.ipv4)!.limitDrops.packets;
    const legit = http(VIPS.ipv4Nat, 100);
    const flood = await synFlood(lab.topology, CLIENT.host, { target: { address: VIPS.ipv4, port: HTTP }, sources: SPOOFED_SOURCES.first, count: FLOOD, maxSeconds: 20 });
    const other = await legit;
    const entries = (await conntrack()).filter((l) => FLOODED.test(l)).length;
    const drops = (await dp.observe()).services.find((x) => x.vip === VIPS.ipv4)!.limitDrops.packets - before;
    console.log(`      limit ${LIMIT}: ${flood.sent} spoofed SYNs left ${entries} entries, ${drops} dropped by the limit; the other service served ${other.ok}/100`);
    assert.equal(flood.sent, FLOOD);
    assert.ok(entries <= LIMIT, `${entries} entries from the flood, over the limit of ${LIMIT}`);
    assert.ok(drops >= FLOOD - LIMIT, `the limit counted ${drops} drops of ${FLOOD - LIMIT} or more`);
    // What the agent's limit watch reads every few seconds (one small listing): the same kernel counter.
    const watched = (await dp.limitDrops()).get(`${VIPS.ipv4}:${HTTP}/tcp`) ?? 0;
    assert.ok(watched >= drops, `limitDrops() says ${watched}, observe() ${drops}`);
    assert.equal(other.ok, 100, JSON.stringify(other.errors));
    await flush();
  });

  for (const synProxy of [false, true]) {
    it(`connectionLimit${synProxy ? ' on a SYN-proxied service' : ''}: a new connection beyond the limit is dropped and counted; once connections end, new ones are admitted again`, async () => {
      const LIMIT = 4;
      await dp.apply({ services: services([{ name: 'stream', vip: VIPS.ipv4, port: STREAM, mode: 'fullnat', connectionLimit: LIMIT, synProxy }]) });
      await flush();
      const before = (await dp.observe()).services.find((s) => s.port === STREAM)!.limitDrops.packets;
      const held = spawnTestClient(lab.topology, CLIENT.host, ['stream', '--target', `${VIPS.ipv4}:${STREAM}`, '--connections', String(LIMIT), '--duration-ms', '60000', '--stall-ms', '5000']);
      try {
        const ready = await held.waitForJson<ReadyReport>((v) => 'ready' in v, 20_000);
        assert.equal(ready.ready, true, JSON.stringify(ready));
        const over = await runTestClient<TcpOnceResult>(lab.topology, CLIENT.host, ['tcp-once', '--target', `${VIPS.ipv4}:${STREAM}`, '--count', '1', '--timeout-ms', '1500']);
        assert.equal(over.ok, 0, `connection ${LIMIT + 1} was served: ${JSON.stringify(over)}`);
        const drops = (await dp.observe()).services.find((s) => s.port === STREAM)!.limitDrops.packets - before;
        assert.ok(drops >= 1, `the limit counted ${drops} drops`);
      } finally {
        await held.stop();
      }
      // conncount forgets a connection once conntrack has it closed (TIME_WAIT or CLOSE): wait for that.
      await waitFor('the held connections to close', 15_000, async () =>
        (await conntrack()).every((l) => !l.includes(`dport=${STREAM} `) || / (TIME_WAIT|CLOSE) /.test(l)));
      const after = await runTestClient<TcpOnceResult>(lab.topology, CLIENT.host, ['tcp-once', '--target', `${VIPS.ipv4}:${STREAM}`, '--count', '2', '--timeout-ms', '5000']);
      assert.equal(after.ok, 2, JSON.stringify(after));
    });
  }
});
