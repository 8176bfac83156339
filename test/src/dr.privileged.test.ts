import assert from 'node:assert/strict';
import { parseConfig, type Service } from '@lbd/config';
import { NftDataPlane, netnsRunner } from '@lbd/dataplane-nft';
import { arpProbes, diagnose } from '@lbd/director-agent';
import {
  CLIENT, DIRECTOR, SERVER_PORTS, directorTopology, removeOrphans, requireRoot, runPrefix, runTestClient, setUpDrRealServer, spawnTestClient, startTestServers,
  type DirectorTopology, type HttpResult, type ReadyReport, type StreamResult, type TcpOnceResult, type UdpResult,
} from '@lbd/testkit';

/**
 * Direct routing (mode: dr) with the real kernel. The standard one-director topology, set up the way a dr
 * site is: each real server holds the vips on its loopback and does not answer ARP for them (arp_ignore=1,
 * arp_announce=2), and routes its replies to the client over a path that does not cross the director (the
 * client has a second leg on the server segment). So a reply the client gets came straight from the real
 * server, and the director saw only the client's half of each connection.
 */

const DR_VIP = { ipv4: '198.18.0.13', ipv6: 'fd00:0:0:1::13' } as const;
/** The client's leg on the server segment: the real servers' way back to it. */
const CLIENT_ON_SERVER_NET = { ipv4: '198.19.1.200', ipv6: 'fd00:0:0:2::200' } as const;
const HTTP = 80;
const STREAM = SERVER_PORTS.stream;

interface Svc {
  name: string; vip: string; port: number; protocol?: 'tcp' | 'udp'; scheduler?: string; fallback?: string;
  realServers: Array<{ address: string; weight?: number }>;
}

function services(list: Svc[]): readonly Service[] {
  return parseConfig(JSON.stringify({ services: list.map((s) => ({ mode: 'dr', ...s })) }), 'test').services;
}

const rsV4 = (k: number): string => `198.19.1.${10 + k}`;
const rsV6 = (k: number): string => `fd00:0:0:2::${10 + k}`;
const weights = (w: number[]): Svc['realServers'] => w.map((weight, i) => ({ address: rsV4(i + 1), weight }));

describe('direct routing (mode: dr) in namespaces @privileged', function () {
  this.timeout(120_000);
  let lab: DirectorTopology;
  let dp: NftDataPlane;

  before(async function () {
    await requireRoot(this, { commands: ['nft', 'conntrack'] });
    await removeOrphans('lbdt');
    lab = await directorTopology({ prefix: runPrefix('lbdt', 'dr') });
    const t = lab.topology;
    await t.attach(CLIENT.host, 'sw', 'eth1');
    await t.addAddress(CLIENT.host, 'eth1', `${CLIENT_ON_SERVER_NET.ipv4}/24`);
    await t.addAddress(CLIENT.host, 'eth1', `${CLIENT_ON_SERVER_NET.ipv6}/64`);
    // Replies come in on eth1 from the vip, which the client routes through eth0: not a spoof here.
    for (const scope of ['all', 'eth1']) await t.sysctl(CLIENT.host, `net.ipv4.conf.${scope}.rp_filter`, '0');
    await t.addAddress(DIRECTOR.host, DIRECTOR.clientIf, `${DR_VIP.ipv4}/32`, { serviceAddress: true });
    await t.addAddress(DIRECTOR.host, DIRECTOR.clientIf, `${DR_VIP.ipv6}/128`, { serviceAddress: true });
    for (const rs of lab.realServers) {
      await setUpDrRealServer(t, rs.host, { vips: [DR_VIP.ipv4, DR_VIP.ipv6] });
      await t.setRoute(rs.host, `${CLIENT.ipv4}/32`, CLIENT_ON_SERVER_NET.ipv4);
      await t.setRoute(rs.host, `${CLIENT.ipv6}/128`, CLIENT_ON_SERVER_NET.ipv6);
    }
    await startTestServers(t, lab.realServers.map((r) => r.host), { http: HTTP, stream: STREAM, udp: 53 });
    dp = new NftDataPlane({ runner: netnsRunner(t.ns(DIRECTOR.host)) });
  });
  after(async () => {
    await lab?.topology.destroy();
  });

  const http = (url: string, count: number, extra: string[] = []): Promise<HttpResult> =>
    runTestClient<HttpResult>(lab.topology, CLIENT.host, ['http', '--url', url, '--count', String(count), ...extra]);
  /** The director's conntrack entries for a vip: dr keeps none. */
  const conntrackOfVip = async (vip: string): Promise<string> => {
    const family = vip.includes(':') ? 'ipv6' : 'ipv4';
    const r = await lab.topology.exec(DIRECTOR.host, 'conntrack', ['-L', '-f', family, '-d', vip]);
    return r.stdout.trim();
  };

  const streamDr = (w: number[]): readonly Service[] => services([{ name: 'stream-dr', vip: DR_VIP.ipv4, port: STREAM, realServers: weights(w) }]);
  /**
   * stream-dr at weights 1,1,1 and 60 streams through it for 8 s; `changes` runs once they all started; returns
   * the streams' report at their end.
   */
  const streamsThrough = async (changes: (ready: ReadyReport) => Promise<void>): Promise<StreamResult> => {
    await dp.apply({ services: streamDr([1, 1, 1]) });
    const streams = spawnTestClient(lab.topology, CLIENT.host, ['stream', '--target', `${DR_VIP.ipv4}:${STREAM}`, '--connections', '60', '--duration-ms', '8000', '--stall-ms', '2000']);
    try {
      const ready = await streams.waitForJson<ReadyReport>((v) => 'ready' in v, 20_000);
      assert.equal(ready.ready, true, JSON.stringify(ready));
      await changes(ready);
      await streams.exited;
      return streams.lastJson<StreamResult>()!;
    } finally {
      await streams.stop(2000);
    }
  };

  it('the packet reaches the real server unchanged (it sees the client, and answers from the vip straight to the client); mh spreads by weight; the director keeps no conntrack entry', async () => {
    await dp.apply({ services: services([{ name: 'web-dr', vip: DR_VIP.ipv4, port: HTTP, realServers: weights([1, 1, 2]) }]) });
    const r = await http(`http://${DR_VIP.ipv4}/`, 400, ['--new-connection']);
    assert.equal(r.ok, 400, JSON.stringify(r.errors));
    assert.deepEqual(r.peers, { [CLIENT.ipv4]: 400 }, 'the real servers saw the client itself');
    for (const [server, want] of [['rs1', 0.25], ['rs2', 0.25], ['rs3', 0.5]] as const) {
      const share = (r.servers[server] ?? 0) / 400;
      assert.ok(Math.abs(share - want) <= 0.1, `${server}: share ${share.toFixed(3)} for weight share ${want} (${JSON.stringify(r.servers)})`);
    }
    assert.equal(await conntrackOfVip(DR_VIP.ipv4), '', 'the director tracked dr connections');
    const observed = (await dp.observe()).services.find((s) => s.key === `${DR_VIP.ipv4}:${HTTP}/tcp`);
    assert.ok(observed && observed.counters.packets > 0, `the service counted the packets it sent on: ${JSON.stringify(observed?.counters)}`);
    for (const rs of observed.realServers) assert.ok(rs.counters.packets > 0, `${rs.address} counted none`);
  });

  it('every packet of a connection hashes to the same real server (from a fixed client port, again and again), UDP too', async () => {
    await dp.apply({ services: services([
      { name: 'web-dr', vip: DR_VIP.ipv4, port: STREAM, realServers: weights([1, 1, 1]) },
      { name: 'dns-dr', vip: DR_VIP.ipv4, port: 53, protocol: 'udp', realServers: weights([1, 1, 1]) },
    ]) });
    const seen = new Set<string>();
    // Below the ephemeral range: no earlier connection's TIME_WAIT holds them.
    for (const port of [21001, 21002, 21003, 21004, 21005, 21006]) {
      const r = await runTestClient<TcpOnceResult>(lab.topology, CLIENT.host, ['tcp-once', '--target', `${DR_VIP.ipv4}:${STREAM}`, '--count', '4', '--source-port', String(port)]);
      assert.equal(r.ok, 4, JSON.stringify(r.errors));
      assert.equal(new Set(r.sequence).size, 1, `connection from port ${port} went to ${r.sequence.join(', ')}`);
      seen.add(r.sequence[0]!);
    }
    assert.ok(seen.size > 1, `6 connections all went to ${[...seen].join(', ')}: no hashing`);
    const udp = await runTestClient<UdpResult>(lab.topology, CLIENT.host, ['udp', '--target', `${DR_VIP.ipv4}:53`, '--count', '20', '--source-port', '21010']);
    assert.equal(udp.ok, 20, JSON.stringify(udp.errors));
    assert.equal(Object.keys(udp.servers).length, 1, `one UDP flow spread over ${JSON.stringify(udp.servers)}`);
  });

  it('a weight change or a server drained (weight 0) moves no flow the director has seen (its flow memory); new connections follow the new table', async () => {
    const r = await streamsThrough(async (ready) => {
      assert.ok((ready.servers as Record<string, number>).rs3! > 0, `rs3 has streams to keep: ${JSON.stringify(ready.servers)}`);
      // Each change gives slots to other servers; without the memory their streams would break (below).
      await dp.apply({ services: streamDr([1, 1, 2]) });
      await dp.apply({ services: streamDr([1, 1, 0]) });
      // While rs3's streams go on, it takes no new connection.
      const fresh = await runTestClient<TcpOnceResult>(lab.topology, CLIENT.host, ['tcp-once', '--target', `${DR_VIP.ipv4}:${STREAM}`, '--count', '30']);
      assert.equal(fresh.ok, 30, JSON.stringify(fresh.errors));
      assert.ok(!fresh.sequence.includes('rs3'), `the drained rs3 took new connections: ${fresh.sequence.join(', ')}`);
    });
    const broken = r.perConnection.filter((c) => c.error !== null);
    assert.deepEqual(broken.map((c) => `${c.server}: ${c.error}`), [], `streams broke through weights 1,1,1 -> 1,1,2 -> 1,1,0 (${JSON.stringify(r.servers)})`);
  });

  it('a director without the memory (emptied here, as on the director a failover moves flows to) sends each flow by the table: after a weight change, the flows in the slots that changed hands break, the rest live on', async () => {
    const r = await streamsThrough(async () => {
      // rs3 goes from 1 to 2: Maglev gives it slots from rs1 and rs2, and only the streams hashed to those move.
      await dp.apply({ services: streamDr([1, 1, 2]) });
      await lab.topology.exec(DIRECTOR.host, 'nft', ['flush', 'map', 'ip', 'lbd', 'dr_flows_tcp']);
    });
    // rs3 only gains slots: its own streams stay, and of rs1's and rs2's, those in the slots it gained
    // break (about a sixth of all: Maglev moves little more than the share that changed).
    const broken = r.perConnection.filter((c) => c.error !== null);
    assert.deepEqual(broken.filter((c) => c.server === 'rs3'), [], 'a connection of the server that only gained slots broke');
    assert.ok(broken.length > 0 && broken.length <= r.connections * 0.4,
      `${broken.length} of ${r.connections} streams broke when rs3's weight went from 1 to 2 with no memory (expected about a sixth): ${JSON.stringify(r.servers)}`);
  });

  it('an IPv6 dr service works', async () => {
    await dp.apply({ services: services([{ name: 'web6-dr', vip: DR_VIP.ipv6, port: HTTP, realServers: [1, 2].map((k) => ({ address: rsV6(k) })) }]) });
    const r = await http(`http://[${DR_VIP.ipv6}]/`, 60, ['--new-connection']);
    assert.equal(r.ok, 60, JSON.stringify(r.errors));
    assert.deepEqual(Object.keys(r.servers).sort(), ['rs1', 'rs2']);
    assert.deepEqual(r.peers, { [CLIENT.ipv6]: 60 });
    assert.equal(await conntrackOfVip(DR_VIP.ipv6), '');
    // The flow memory holds IPv6 flows too (its key hashes the addresses: see model.ts, DR_FLOWS_MAP), each
    // on a real server of the service.
    const list = async (what: string): Promise<Array<{ elem?: unknown[] }>> =>
      (JSON.parse((await lab.topology.exec(DIRECTOR.host, 'nft', ['-j', 'list', 'map', 'ip6', 'lbd', what])).stdout) as { nftables: Array<{ map?: { elem?: unknown[] } }> }).nftables.flatMap((x) => (x.map ? [x.map] : []));
    const targets = new Set(((await list('dr_target'))[0]?.elem ?? []).map((e) => String((e as [number, string])[0])));
    const remembered = ((await list('dr_flows_tcp'))[0]?.elem ?? []).map((e) => String((e as [unknown, number])[1]));
    assert.ok(remembered.length > 0 && remembered.length <= 60, `${remembered.length} IPv6 flows remembered for 60 connections`);
    assert.ok(remembered.every((m) => targets.has(m)), `remembered marks ${[...new Set(remembered)].join(', ')}, targets ${[...targets].join(', ')}`);
  });

  it('lbadm doctor names a real server that answers ARP for the vip (the classic dr mistake), with the sysctls that fix it', async () => {
    const config = { ...parseConfig('services: []\n', 'test'), services: services([{ name: 'web-dr', vip: DR_VIP.ipv4, port: HTTP, realServers: weights([1, 1, 1]) }]) };
    const judged = async (): Promise<string[]> => diagnose(config, await dp.kernelFacts([], arpProbes(config)), []).filter((f) => f.check === 'dr-arp').map((f) => `${f.severity} ${f.subject}`);
    assert.deepEqual(await judged(), ['ok dr vips'], 'the lab\'s real servers are set up for dr');
    // rs2 as a real server is out of the box: it answers ARP for every address it holds, the vip on lo included.
    for (const scope of ['all', 'eth0']) await lab.topology.sysctl('rs2', `net.ipv4.conf.${scope}.arp_ignore`, '0');
    try {
      assert.deepEqual(await judged(), [`error real server ${rsV4(2)}:80 of service "web-dr" (${DR_VIP.ipv4}:80/tcp)`]);
    } finally {
      for (const scope of ['all', 'eth0']) await lab.topology.sysctl('rs2', `net.ipv4.conf.${scope}.arp_ignore`, '1');
    }
  });

  it('lbadm doctor names a real server without the vip (it drops every dr packet while its health checks pass), with the ip addr that fixes it', async () => {
    const config = { ...parseConfig('services: []\n', 'test'), services: services([{ name: 'web-dr', vip: DR_VIP.ipv4, port: HTTP, realServers: weights([1, 1, 1]) }]) };
    const judged = async (): Promise<string[]> => diagnose(config, await dp.kernelFacts([], arpProbes(config)), []).filter((f) => f.check === 'dr-vip').map((f) => `${f.severity} ${f.subject}`);
    assert.deepEqual(await judged(), ['ok dr real servers'], 'the lab\'s real servers hold the vip');
    await lab.topology.removeAddress('rs3', 'lo', `${DR_VIP.ipv4}/32`);
    try {
      assert.deepEqual(await judged(), [`error real server ${rsV4(3)}:80 of service "web-dr" (${DR_VIP.ipv4}:80/tcp)`]);
    } finally {
      await lab.topology.addAddress('rs3', 'lo', `${DR_VIP.ipv4}/32`, { serviceAddress: true });
    }
  });

  it('lbadm doctor probes IPv6 dr vips too: a real server that answers neighbour solicitations for the vip (it holds it on eth0, not lo), and one without the vip', async () => {
    const config = { ...parseConfig('services: []\n', 'test'), services: services([{ name: 'web-dr6', vip: DR_VIP.ipv6, port: HTTP, realServers: [1, 2, 3].map((k) => ({ address: rsV6(k) })) }]) };
    const judged = async (check: string): Promise<string[]> => diagnose(config, await dp.kernelFacts([], arpProbes(config)), []).filter((f) => f.check === check).map((f) => `${f.severity} ${f.subject}`);
    assert.deepEqual([await judged('dr-arp'), await judged('dr-vip')], [['ok dr vips'], ['ok dr real servers']], 'the lab\'s real servers hold the IPv6 vip on lo');
    const subject = (k: number): string => `real server [${rsV6(k)}]:80 of service "web-dr6" ([${DR_VIP.ipv6}]:80/tcp)`;
    // rs2 holds the vip on its network interface as well: there Linux answers neighbour solicitations for it.
    await lab.topology.exec('rs2', 'ip', ['-6', 'addr', 'add', `${DR_VIP.ipv6}/128`, 'dev', 'eth0', 'nodad']);
    try {
      assert.deepEqual(await judged('dr-arp'), [`error ${subject(2)}`]);
    } finally {
      await lab.topology.exec('rs2', 'ip', ['-6', 'addr', 'del', `${DR_VIP.ipv6}/128`, 'dev', 'eth0']);
    }
    await lab.topology.exec('rs3', 'ip', ['-6', 'addr', 'del', `${DR_VIP.ipv6}/128`, 'dev', 'lo']);
    try {
      assert.deepEqual(await judged('dr-vip'), [`error ${subject(3)}`]);
    } finally {
      await lab.topology.exec('rs3', 'ip', ['-6', 'addr', 'add', `${DR_VIP.ipv6}/128`, 'dev', 'lo', 'nodad']);
    }
  });

  it('with every real server out: fallback drop times out, fallback reject resets at once', async () => {
    await dp.apply({ services: services([{ name: 'web-dr', vip: DR_VIP.ipv4, port: HTTP, fallback: 'reject', realServers: weights([0, 0, 0]) }]) });
    const refused = await http(`http://${DR_VIP.ipv4}/`, 3, ['--new-connection']);
    assert.deepEqual(refused.errors, { ECONNREFUSED: 3 }, 'a reset, not a timeout');
    await dp.apply({ services: services([{ name: 'web-dr', vip: DR_VIP.ipv4, port: HTTP, realServers: weights([0, 1, 0]) }]) });
    assert.deepEqual((await http(`http://${DR_VIP.ipv4}/`, 5, ['--new-connection'])).servers, { rs2: 5 });
  });
});
