import assert from 'node:assert/strict';
import { parseConfig, type Service } from '@lbd/config';
import { NftDataPlane, netnsRunner } from '@lbd/dataplane-nft';
import {
  CLIENT, DIRECTOR, LOCAL_ADDRESSES, SERVER_PORTS, VIPS, directorTopology, removeOrphans, requireRoot, runPrefix,
  runTestClient, spawnTestClient, startTestServers,
  type DirectorTopology, type HttpResult, type ReadyReport, type StreamResult, type TcpOnceResult, type UdpResult,
} from '@lbd/testkit';

/**
 * Forwarding through lbd's nftables table with the real kernel: a client, a director and three real
 * servers in namespaces of their own. The data plane is driven directly here; the agent and lbadm on top
 * of it are tested in agent.privileged.test.ts.
 */

const HTTP = SERVER_PORTS.http;
const STREAM = SERVER_PORTS.stream;
const UDP = SERVER_PORTS.udp;

interface Svc {
  name: string; vip: string; port: number; protocol?: 'tcp' | 'udp'; mode: 'fullnat' | 'nat'; scheduler: string;
  persistenceSec?: number; expireOnRemove?: boolean; fallback?: string; sorryServer?: { address: string; port: number };
  localAddresses?: string[]; realServers: Array<{ address: string; port: number; weight?: number }>;
}

function services(list: Svc[]): readonly Service[] {
  return parseConfig(JSON.stringify({ services: list }), 'test').services;
}

const rsV4 = (k: number): string => `198.19.1.${10 + k}`;
const rsV6 = (k: number): string => `fd00:0:0:2::${10 + k}`;

function weights(w: number[], port: number = HTTP): Svc['realServers'] {
  return w.map((weight, i) => ({ address: rsV4(i + 1), port, weight }));
}

describe('data plane forwarding in namespaces @privileged', function () {
  this.timeout(120_000);
  let lab: DirectorTopology;
  let dp: NftDataPlane;

  before(async function () {
    await requireRoot(this, { commands: ['nft', 'conntrack'] });
    await removeOrphans('lbdt');
    lab = await directorTopology({ prefix: runPrefix('lbdt', 'dp') });
    await startTestServers(lab.topology, lab.realServers.map((r) => r.host));
    dp = new NftDataPlane({ runner: netnsRunner(lab.topology.ns(DIRECTOR.host)) });
  });
  after(async () => {
    await lab?.topology.destroy();
  });

  const http = (url: string, count: number, extra: string[] = []): Promise<HttpResult> =>
    runTestClient<HttpResult>(lab.topology, CLIENT.host, ['http', '--url', url, '--count', String(count), ...extra]);

  it('fullnat: 600 requests spread within ±5% of wrr weights, every server seeing a local address', async () => {
    await dp.apply({ services: services([{ name: 'web', vip: VIPS.ipv4, port: 80, mode: 'fullnat', scheduler: 'wrr', localAddresses: [LOCAL_ADDRESSES.ipv4Range], realServers: weights([1, 2, 3]) }]) });
    const r = await http(`http://${VIPS.ipv4}/`, 600, ['--new-connection']);
    assert.equal(r.ok, 600, JSON.stringify(r.errors));
    const total = 1 + 2 + 3;
    [1, 2, 3].forEach((w, i) => {
      const share = (r.servers[`rs${i + 1}`] ?? 0) / 600;
      assert.ok(Math.abs(share - w / total) <= 0.05, `rs${i + 1}: share ${share.toFixed(3)}, weight share ${(w / total).toFixed(3)}`);
    });
    for (const peer of Object.keys(r.peers)) assert.ok((LOCAL_ADDRESSES.ipv4 as readonly string[]).includes(peer), `peer ${peer} is not a local address`);
  });

  it('nat: real servers see the client address', async () => {
    await dp.apply({ services: services([{ name: 'web-nat', vip: VIPS.ipv4Nat, port: 80, mode: 'nat', scheduler: 'rr', realServers: weights([1, 1, 1]) }]) });
    const r = await http(`http://${VIPS.ipv4Nat}/`, 30, ['--new-connection']);
    assert.equal(r.ok, 30, JSON.stringify(r.errors));
    assert.deepEqual(r.peers, { [CLIENT.ipv4]: 30 });
    assert.deepEqual(r.servers, { rs1: 10, rs2: 10, rs3: 10 });
  });

  it('an IPv6 fullnat service works', async () => {
    await dp.apply({ services: services([{
      name: 'web6', vip: VIPS.ipv6, port: 80, mode: 'fullnat', scheduler: 'rr', localAddresses: [LOCAL_ADDRESSES.ipv6Range],
      realServers: [1, 2].map((k) => ({ address: rsV6(k), port: HTTP })),
    }]) });
    const r = await http(`http://[${VIPS.ipv6}]/`, 20, ['--new-connection']);
    assert.equal(r.ok, 20, JSON.stringify(r.errors));
    assert.deepEqual(r.servers, { rs1: 10, rs2: 10 });
    assert.deepEqual(Object.keys(r.peers), [LOCAL_ADDRESSES.ipv6[0]]);
  });

  it('a UDP fullnat service works', async () => {
    await dp.apply({ services: services([{ name: 'dns', vip: VIPS.ipv4, port: 53, protocol: 'udp', mode: 'fullnat', scheduler: 'rr', localAddresses: [LOCAL_ADDRESSES.ipv4Range], realServers: weights([1, 1, 1], UDP) }]) });
    const r = await runTestClient<UdpResult>(lab.topology, CLIENT.host, ['udp', '--target', `${VIPS.ipv4}:53`, '--count', '30']);
    assert.equal(r.ok, 30, JSON.stringify(r.errors));
    assert.deepEqual(r.servers, { rs1: 10, rs2: 10, rs3: 10 });
  });

  it('sh sends every connection of a client to one server; mh sends a given connection to the same server every time', async () => {
    await dp.apply({ services: services([
      { name: 'sh', vip: VIPS.ipv4, port: 80, mode: 'fullnat', scheduler: 'sh', localAddresses: [LOCAL_ADDRESSES.ipv4Range], realServers: weights([1, 1, 1]) },
      { name: 'mh', vip: VIPS.ipv4, port: STREAM, mode: 'fullnat', scheduler: 'mh', localAddresses: [LOCAL_ADDRESSES.ipv4Range], realServers: weights([1, 1, 1], STREAM) },
    ]) });
    const sh = await http(`http://${VIPS.ipv4}/`, 30, ['--new-connection']);
    assert.equal(sh.ok, 30);
    assert.equal(Object.keys(sh.servers).length, 1, `sh spread one client over ${JSON.stringify(sh.servers)}`);
    const seen = new Set<string>();
    // Fixed source ports below the ephemeral range (32768-60999): a port the kernel had handed to an earlier
    // connection (curl's, a stream's) may still be held in TIME_WAIT by a socket without SO_REUSEADDR, and
    // binding it then fails with EADDRINUSE for as long as TIME_WAIT lasts (suite 39 met one).
    for (const port of [20001, 20002, 20003, 20004, 20005, 20006]) {
      const r = await runTestClient<TcpOnceResult>(lab.topology, CLIENT.host, ['tcp-once', '--target', `${VIPS.ipv4}:${STREAM}`, '--count', '5', '--source-port', String(port)]);
      assert.equal(r.ok, 5, JSON.stringify(r.errors));
      assert.equal(new Set(r.sequence).size, 1, `connection from port ${port} went to ${r.sequence.join(', ')}`);
      seen.add(r.sequence[0]!);
    }
    // Different connections do spread (6 connections over 3 servers all landing on one would mean no hashing at all).
    assert.ok(seen.size > 1, `all connections went to ${[...seen].join(', ')}`);
  });

  for (const family of [4, 6] as const) {
    it(`persistence keeps a client on one server, and lets go when that server goes quiescent (IPv${family})`, async () => {
      const vip = family === 4 ? VIPS.ipv4Nat : VIPS.ipv6;
      const url = family === 4 ? `http://${vip}/` : `http://[${vip}]/`;
      // IPv4 through nat; IPv6 through fullnat (its key is hashed: model.ts, persistKey).
      const svc = (w: number[]): Svc => (family === 4
        ? { name: 'sticky', vip, port: 80, mode: 'nat', scheduler: 'rr', persistenceSec: 300, realServers: weights(w) }
        : { name: 'sticky6', vip, port: 80, mode: 'fullnat', scheduler: 'rr', persistenceSec: 300, localAddresses: [LOCAL_ADDRESSES.ipv6Range], realServers: w.map((weight, i) => ({ address: rsV6(i + 1), port: HTTP, weight })) });
      await dp.apply({ services: services([svc([1, 1, 1])]) });
      const first = await http(url, 12, ['--new-connection']);
      assert.equal(first.ok, 12, JSON.stringify(first.errors));
      const servers = Object.keys(first.servers);
      assert.equal(servers.length, 1, `persistence spread one client over ${JSON.stringify(first.servers)}`);
      const sticky = Number(servers[0]!.slice(2));
      const quiescent = [1, 1, 1].map((w, i) => (i + 1 === sticky ? 0 : w));
      await dp.apply({ services: services([svc(quiescent)]) });
      const after = await http(url, 12, ['--new-connection']);
      assert.equal(after.ok, 12, JSON.stringify(after.errors));
      assert.equal(after.servers[`rs${sticky}`], undefined, 'the quiescent server kept its persistent client');
      assert.equal(Object.keys(after.servers).length, 1, `the client was not re-pinned: ${JSON.stringify(after.servers)}`);
    });
  }

  it('fallback reject resets new connections at once when no real server may take them', async () => {
    await dp.apply({ services: services([{ name: 'down', vip: VIPS.ipv4, port: 80, mode: 'fullnat', scheduler: 'wrr', fallback: 'reject', localAddresses: [LOCAL_ADDRESSES.ipv4Range], realServers: weights([0, 0, 0]) }]) });
    const r = await http(`http://${VIPS.ipv4}/`, 5, ['--new-connection']);
    assert.equal(r.failed, 5);
    assert.deepEqual(r.errors, { ECONNREFUSED: 5 }, 'a reset, not a timeout');
    assert.ok(r.durationMs < 1000, `refusing took ${r.durationMs} ms`);
    await dp.apply({ services: services([{ name: 'down', vip: VIPS.ipv4, port: 80, mode: 'fullnat', scheduler: 'wrr', fallback: 'reject', localAddresses: [LOCAL_ADDRESSES.ipv4Range], realServers: weights([0, 1, 0]) }]) });
    const back = await http(`http://${VIPS.ipv4}/`, 5, ['--new-connection']);
    assert.deepEqual(back.servers, { rs2: 5 });
  });

  it('fallback sorry-server sends new connections to the sorry server only while every real server is out', async () => {
    const svc = (w: number[]): Svc => ({
      name: 'sorry', vip: VIPS.ipv4, port: 80, mode: 'fullnat', scheduler: 'wrr', fallback: 'sorry-server', sorryServer: { address: rsV4(3), port: HTTP },
      localAddresses: [LOCAL_ADDRESSES.ipv4Range], realServers: weights(w),
    });
    await dp.apply({ services: services([svc([0, 0])]) });
    assert.deepEqual((await http(`http://${VIPS.ipv4}/`, 6, ['--new-connection'])).servers, { rs3: 6 });
    await dp.apply({ services: services([svc([1, 0])]) });
    assert.deepEqual((await http(`http://${VIPS.ipv4}/`, 6, ['--new-connection'])).servers, { rs1: 6 });
  });

  describe('changes never move or break established connections', () => {
    const streamService = (w: number[], rs = [1, 2, 3]): Svc => ({
      name: 'stream', vip: VIPS.ipv4, port: STREAM, mode: 'fullnat', scheduler: 'rr', localAddresses: [LOCAL_ADDRESSES.ipv4Range],
      realServers: rs.map((k, i) => ({ address: rsV4(k), port: STREAM, weight: w[i] })),
    });
    const web = (rs: number[]): Svc => ({
      name: 'web', vip: VIPS.ipv4, port: 80, mode: 'fullnat', scheduler: 'rr', localAddresses: [LOCAL_ADDRESSES.ipv4Range],
      realServers: rs.map((k) => ({ address: rsV4(k), port: HTTP })),
    });

    it('weight 0 stops new connections to a server while its long-lived connection keeps streaming', async () => {
      await dp.apply({ services: services([streamService([1, 1, 1]), web([1, 2, 3])]) });
      const streams = spawnTestClient(lab.topology, CLIENT.host, ['stream', '--target', `${VIPS.ipv4}:${STREAM}`, '--connections', '6', '--duration-ms', '60000']);
      const ready = (await streams.waitForJson((v) => 'ready' in v, 15_000)) as unknown as ReadyReport;
      assert.equal(ready.ready, true);
      assert.equal(ready.servers.rs1, 2);
      await dp.apply({ services: services([streamService([0, 1, 1]), web([2, 3])]) });
      const r = await http(`http://${VIPS.ipv4}/`, 60, ['--new-connection']);
      assert.equal(r.servers.rs1, undefined, `rs1 got new connections: ${JSON.stringify(r.servers)}`);
      const fresh = await runTestClient<TcpOnceResult>(lab.topology, CLIENT.host, ['tcp-once', '--target', `${VIPS.ipv4}:${STREAM}`, '--count', '10']);
      assert.equal(fresh.servers.rs1, undefined, `quiescent rs1 got new stream connections: ${JSON.stringify(fresh.servers)}`);
      await streams.stop();
      const result = streams.lastJson() as unknown as StreamResult;
      assert.equal(result.broken, 0, JSON.stringify(result.perConnection));
      assert.equal(result.servers.rs1, 2, 'the quiescent server\'s streams kept running');
    });

    it('removing a server leaves connections to the others intact', async () => {
      await dp.apply({ services: services([streamService([1, 1, 1])]) });
      const streams = spawnTestClient(lab.topology, CLIENT.host, ['stream', '--target', `${VIPS.ipv4}:${STREAM}`, '--connections', '9', '--duration-ms', '60000']);
      const ready = (await streams.waitForJson((v) => 'ready' in v, 15_000)) as unknown as ReadyReport;
      assert.equal(ready.ready, true);
      await dp.apply({ services: services([streamService([1, 1], [2, 3])]) });
      const fresh = await runTestClient<TcpOnceResult>(lab.topology, CLIENT.host, ['tcp-once', '--target', `${VIPS.ipv4}:${STREAM}`, '--count', '10']);
      assert.equal(fresh.servers.rs1, undefined);
      await streams.stop();
      const result = streams.lastJson() as unknown as StreamResult;
      const others = result.perConnection.filter((c) => c.server !== 'rs1');
      assert.equal(others.length, 6);
      assert.ok(others.every((c) => c.error === null), JSON.stringify(others));
    });

    it('expireOnRemove expires the removed server\'s connections and only those', async () => {
      const svc = (rs: number[]): Svc => ({ ...streamService(rs.map(() => 1), rs), expireOnRemove: true });
      await dp.apply({ services: services([svc([1, 2, 3])]) });
      const before = (await dp.connections()).length;
      const streams = spawnTestClient(lab.topology, CLIENT.host, ['stream', '--target', `${VIPS.ipv4}:${STREAM}`, '--connections', '6', '--duration-ms', '60000']);
      await streams.waitForJson((v) => 'ready' in v, 15_000);
      const result = await dp.apply({ services: services([svc([2, 3])]) });
      assert.ok(result.expiredConnections >= 2, `expired ${result.expiredConnections} (before: ${before})`);
      const conns = await dp.connections();
      assert.ok(conns.every((c) => c.realServer.address !== rsV4(1)), 'a connection to the removed server survived');
      await streams.stop();
    });
  });

  it('counts packets and bytes per service and real server, and lists connections like ipvsadm -Lnc', async () => {
    await dp.apply({ services: services([{ name: 'web', vip: VIPS.ipv4, port: 80, mode: 'fullnat', scheduler: 'rr', localAddresses: [LOCAL_ADDRESSES.ipv4Range], realServers: weights([1, 1, 1]) }]) });
    const before = (await dp.observe()).services.find((s) => s.key === `${VIPS.ipv4}:80/tcp`)!;
    await http(`http://${VIPS.ipv4}/`, 30);
    const after = (await dp.observe()).services.find((s) => s.key === `${VIPS.ipv4}:80/tcp`)!;
    assert.ok(after.counters.packets > before.counters.packets);
    assert.equal(after.counters.packets - before.counters.packets,
      after.realServers.reduce((a, r) => a + r.counters.packets, 0) - before.realServers.reduce((a, r) => a + r.counters.packets, 0));
    const conns = await dp.connections({ service: `${VIPS.ipv4}:80/tcp` });
    assert.ok(conns.length > 0);
    const c = conns[0]!;
    assert.equal(c.client.address, CLIENT.ipv4);
    assert.equal(c.vip.address, VIPS.ipv4);
    assert.ok(c.localAddress && (LOCAL_ADDRESSES.ipv4 as readonly string[]).includes(c.localAddress.address));
    assert.ok([1, 2, 3].map(rsV4).includes(c.realServer.address));
  });
});
