import assert from 'node:assert/strict';
import { parseConfig, type Config } from '@lbd/config';
import type { Connection, KernelFacts } from '@lbd/dataplane';
import { clusterAgentYaml } from '@lbd/testkit';
import { arpProbes, diagnose, probeTargets, type Finding } from './doctor.js';

const CONFIG = parseConfig(`
services:
  - name: web
    vip: 198.18.0.10
    port: 80
    mode: fullnat
    localAddresses: [198.18.2.10-198.18.2.11]
    realServers:
      - { address: 198.19.1.11, port: 8080 }
  - name: app
    vip: 198.18.0.20
    port: 80
    mode: nat
    realServers:
      - { address: 198.19.1.21, port: 8080 }
      - { address: 198.19.1.22, port: 8080 }
  - name: dns
    vip: 198.18.0.53
    port: 53
    protocol: udp
    mode: nat
    realServers:
      - { address: 198.19.1.53, port: 53 }
`, 'test.yaml');

const V6_CONFIG = parseConfig(`
services:
  - { name: v6, vip: "fd00::10", port: 80, mode: nat, realServers: [{ address: "fd00:1::11", port: 80 }] }
`, 'v6.yaml');

const NO_SERVICES = parseConfig('services: []\n', 'empty.yaml');

const DR_CONFIG = parseConfig(`
services:
  - { name: edge, vip: 198.18.0.30, port: 443, mode: dr, realServers: [{ address: 198.19.1.31 }, { address: 198.19.1.32 }] }
  - { name: edge6, vip: "fd00::30", port: 443, mode: dr, realServers: [{ address: "fd00:1::31" }] }
`, 'dr.yaml');

/** CONFIG's services on a clustered director (the cluster config joined with its own file's agent part). */
const CLUSTERED = {
  ...CONFIG,
  agent: parseConfig(clusterAgentYaml({ director: 'dir1', etcdEndpoint: 'http://127.0.0.1:2379', prefix: '/lbd/test', peerListenPort: 7001, peers: [{ id: 'dir2', port: 7002 }] }), 'dir1.yaml').agent,
};

/** CLUSTERED, its services' vip group with a floating gateway (which the group's leader claims too). */
const CLUSTERED_WITH_GATEWAY: Config = { ...CLUSTERED, vipGroups: CLUSTERED.vipGroups.map((g) => ({ ...g, gateways: ['198.19.1.250'] })) };

const HEALTHY: KernelFacts = {
  ipv4Forwarding: true, ipv6Forwarding: true, rpFilter: { eth0: 2, eth1: 0, lo: 1 }, rpFilterDrops: 0,
  conntrackCount: 100, conntrackMax: 1000, localPortRange: [32768, 60999],
  realServerReachable: { '198.19.1.11:8080': true, '198.19.1.21:8080': true, '198.19.1.22:8080': true },
  directorAddressTowards: { '198.19.1.11': '198.19.1.1', '198.19.1.21': '198.19.1.1', '198.19.1.22': '198.19.1.1' },
  permanentAddresses: [{ address: '198.18.0.2', ifname: 'eth0' }, { address: '198.19.1.1', ifname: 'eth1' }, { address: '127.0.0.1', ifname: 'lo' }],
  vipArpAnswers: [],
  vipOnRealServer: [],
};

const WEB = '198.18.0.10:80/tcp';
const APP = '198.18.0.20:80/tcp';
const DNS = '198.18.0.53:53/udp';

function conn(service: string, rs: string, state: string, unreplied: boolean, opts: { local?: string; protocol?: 'tcp' | 'udp'; clientPort?: number } = {}): Connection {
  const [address, port] = rs.split(':') as [string, string];
  const [vip, vport] = service.split('/')[0]!.split(':') as [string, string];
  return {
    protocol: opts.protocol ?? 'tcp', state, client: { address: '198.18.9.1', port: opts.clientPort ?? 50000 },
    vip: { address: vip, port: Number(vport) },
    localAddress: opts.local ? { address: opts.local, port: 40000 } : null,
    realServer: { address, port: Number(port) }, expiresInSec: 100, unreplied, realServerId: 1, service,
  };
}

function times<T>(n: number, f: (i: number) => T): T[] {
  return Array.from({ length: n }, (_, i) => f(i));
}

/** The findings of one check, as `severity subject` lines: what the table asserts. */
function summary(findings: readonly Finding[], check: Finding['check']): string[] {
  return findings.filter((f) => f.check === check).map((f) => `${f.severity} ${f.subject}`);
}

interface Case {
  readonly name: string;
  readonly config?: Config;
  readonly facts?: Partial<KernelFacts>;
  readonly conns?: readonly Connection[];
  readonly check: Finding['check'];
  readonly want: readonly string[];
  /** Substrings the first finding of the check must contain (problem or fix). */
  readonly mentions?: readonly string[];
}

const CASES: readonly Case[] = [
  // (a) nat return path
  {
    name: 'nat: all connections to a reachable server unreplied -> error naming server and service',
    conns: times(3, (i) => conn(APP, '198.19.1.22:8080', 'SYN_SENT', true, { clientPort: 50000 + i })),
    check: 'nat-return-path',
    want: ['error real server 198.19.1.22:8080 of service "app" (198.18.0.20:80/tcp)'],
    mentions: ['3 of its 3 connections are unreplied', 'SYN_SENT', 'ip route replace default via 198.19.1.1', 'mode: fullnat'],
  },
  {
    name: 'nat: unreplied but the server is unreachable -> not a routing problem',
    facts: { realServerReachable: { ...HEALTHY.realServerReachable, '198.19.1.22:8080': false } },
    conns: times(3, () => conn(APP, '198.19.1.22:8080', 'SYN_SENT', true)),
    check: 'nat-return-path',
    want: ['ok nat-mode real servers'],
  },
  {
    name: 'nat: a handshake in flight among answered connections -> ok',
    conns: [conn(APP, '198.19.1.21:8080', 'SYN_SENT', true), ...times(5, () => conn(APP, '198.19.1.21:8080', 'ESTABLISHED', false))],
    check: 'nat-return-path',
    want: ['ok nat-mode real servers'],
  },
  {
    name: 'nat: half unreplied -> error',
    conns: [...times(2, () => conn(APP, '198.19.1.21:8080', 'SYN_SENT', true)), ...times(2, () => conn(APP, '198.19.1.21:8080', 'ESTABLISHED', false))],
    check: 'nat-return-path',
    want: ['error real server 198.19.1.21:8080 of service "app" (198.18.0.20:80/tcp)'],
  },
  {
    name: 'nat: unreplied UDP, server not probed -> warning',
    conns: times(2, () => conn(DNS, '198.19.1.53:53', 'UNREPLIED', true, { protocol: 'udp' })),
    check: 'nat-return-path',
    want: ['warning real server 198.19.1.53:53 of service "dns" (198.18.0.53:53/udp)'],
    mentions: ['could not probe it (udp)'],
  },
  {
    name: 'fullnat: unreplied connections are not the nat return-path failure',
    conns: times(3, () => conn(WEB, '198.19.1.11:8080', 'SYN_SENT', true, { local: '198.18.2.10' })),
    check: 'nat-return-path',
    want: ['ok nat-mode real servers'],
  },
  {
    name: 'nat: no nat services -> ok saying so',
    config: parseConfig('services: [{ name: w, vip: 198.18.0.10, port: 80, mode: fullnat, localAddresses: [198.18.2.10] }]\n', 'x'),
    check: 'nat-return-path',
    want: ['ok nat-mode real servers'],
    mentions: ['no service uses nat mode'],
  },
  // (b) forwarding
  {
    name: 'ip_forward off -> error with the sysctl',
    facts: { ipv4Forwarding: false },
    check: 'ip-forward',
    want: ['error net.ipv4.ip_forward'],
    mentions: ['sysctl -w net.ipv4.ip_forward=1', '3 IPv4 services'],
  },
  {
    name: 'IPv6 forwarding off without IPv6 services -> ok',
    facts: { ipv6Forwarding: false },
    check: 'ip-forward',
    want: ['ok ip forwarding'],
  },
  {
    name: 'IPv6 forwarding off with an IPv6 service -> error',
    config: V6_CONFIG,
    facts: { ipv6Forwarding: false },
    check: 'ip-forward',
    want: ['error net.ipv6.conf.all.forwarding'],
    mentions: ['sysctl -w net.ipv6.conf.all.forwarding=1'],
  },
  {
    name: 'both off with an IPv6 service -> two errors',
    config: V6_CONFIG,
    facts: { ipv4Forwarding: false, ipv6Forwarding: false },
    check: 'ip-forward',
    want: ['error net.ipv4.ip_forward', 'error net.ipv6.conf.all.forwarding'],
  },
  // (c) rp_filter
  {
    name: 'strict rp_filter without drops -> warning per interface, lo ignored',
    facts: { rpFilter: { eth1: 1, eth0: 1, lo: 1, eth2: 2 } },
    check: 'rp-filter',
    want: ['warning net.ipv4.conf.eth0.rp_filter', 'warning net.ipv4.conf.eth1.rp_filter'],
    mentions: ['sysctl -w net.ipv4.conf.eth0.rp_filter=2', 'no drops counted yet'],
  },
  {
    name: 'strict rp_filter with drops -> error',
    facts: { rpFilter: { eth0: 1 }, rpFilterDrops: 17 },
    check: 'rp-filter',
    want: ['error net.ipv4.conf.eth0.rp_filter'],
    mentions: ['dropped 17 packets'],
  },
  {
    name: 'loose rp_filter everywhere -> ok',
    check: 'rp-filter',
    want: ['ok rp_filter'],
  },
  // (d) conntrack table
  { name: 'conntrack 79% -> ok', facts: { conntrackCount: 790 }, check: 'conntrack-table', want: ['ok net.netfilter.nf_conntrack_max'] },
  {
    name: 'conntrack 80% -> warning', facts: { conntrackCount: 800 }, check: 'conntrack-table',
    want: ['warning net.netfilter.nf_conntrack_max'], mentions: ['80% full (800 of 1000 entries)', 'nf_conntrack_max=2000'],
  },
  { name: 'conntrack 94% -> warning', facts: { conntrackCount: 949 }, check: 'conntrack-table', want: ['warning net.netfilter.nf_conntrack_max'] },
  { name: 'conntrack 95% -> error', facts: { conntrackCount: 950 }, check: 'conntrack-table', want: ['error net.netfilter.nf_conntrack_max'] },
  { name: 'conntrack max unknown -> warning', facts: { conntrackMax: 0 }, check: 'conntrack-table', want: ['warning net.netfilter.nf_conntrack_max'] },
  // (e) fullnat ports: 2 local addresses x 10 ports = 20 pairs
  {
    name: 'fullnat ports 45% -> ok', facts: { localPortRange: [40000, 40009] },
    conns: times(9, () => conn(WEB, '198.19.1.11:8080', 'ESTABLISHED', false, { local: '198.18.2.10' })),
    check: 'fullnat-ports', want: ['ok fullnat local addresses'], mentions: ['45% (9 of 20)'],
  },
  {
    name: 'fullnat ports 50% -> warning naming the pool and the fix', facts: { localPortRange: [40000, 40009] },
    conns: times(10, (i) => conn(WEB, '198.19.1.11:8080', 'ESTABLISHED', false, { local: i % 2 ? '198.18.2.10' : '198.18.2.11' })),
    check: 'fullnat-ports', want: ['warning real server 198.19.1.11:8080 of service "web" (198.18.0.10:80/tcp)'],
    mentions: ['198.18.2.10-198.18.2.11 (2)', 'ports 40000-40009', 'add local addresses to service "web"', '198.18.2.10-198.18.2.13'],
  },
  {
    name: 'fullnat ports 90% -> error', facts: { localPortRange: [40000, 40009] },
    conns: times(18, () => conn(WEB, '198.19.1.11:8080', 'ESTABLISHED', false, { local: '198.18.2.10' })),
    check: 'fullnat-ports', want: ['error real server 198.19.1.11:8080 of service "web" (198.18.0.10:80/tcp)'],
  },
  {
    name: 'fullnat ports: connections through other local addresses do not count', facts: { localPortRange: [40000, 40009] },
    conns: times(18, () => conn(WEB, '198.19.1.11:8080', 'ESTABLISHED', false, { local: '198.18.3.1' })),
    check: 'fullnat-ports', want: ['ok fullnat local addresses'],
  },
  {
    name: 'fullnat ports: no fullnat services -> ok saying so', config: V6_CONFIG,
    check: 'fullnat-ports', want: ['ok fullnat local addresses'], mentions: ['no service uses fullnat'],
  },
  // (f) reachability
  {
    name: 'unreachable real server -> warning',
    facts: { realServerReachable: { ...HEALTHY.realServerReachable, '198.19.1.11:8080': false } },
    check: 'real-server-reachable', want: ['warning real server 198.19.1.11:8080 of service "web" (198.18.0.10:80/tcp)'],
    mentions: ['listening on port 8080'],
  },
  {
    name: 'all reachable -> ok with the count', check: 'real-server-reachable', want: ['ok real servers'],
    mentions: ['all 3 probed real servers'],
  },
  {
    name: 'nothing probed -> ok saying so', config: NO_SERVICES, facts: { realServerReachable: {} },
    check: 'real-server-reachable', want: ['ok real servers'], mentions: ['no real server was probed'],
  },
  // (g) floating addresses that are the box's own
  {
    name: 'a vip and a local address that are a clustered director\'s own addresses -> an error each', config: CLUSTERED,
    facts: { permanentAddresses: [...HEALTHY.permanentAddresses, { address: '198.18.0.20', ifname: 'eth0' }, { address: '198.18.2.11', ifname: 'eth1' }] },
    check: 'own-address', want: ['error service "web" (198.18.0.10:80/tcp)', 'error service "app" (198.18.0.20:80/tcp)'],
    mentions: ['198.18.2.11 (one of its local addresses) is a permanent address of this director\'s eth1', 'remove 198.18.2.11 from eth1'],
  },
  {
    name: 'a vip group\'s gateway and the last address of a local pool that are the box\'s own -> an error each', config: CLUSTERED_WITH_GATEWAY,
    facts: { permanentAddresses: [...HEALTHY.permanentAddresses, { address: '198.19.1.250', ifname: 'eth1' }, { address: '198.18.2.11', ifname: 'eth1' }] },
    check: 'own-address', want: ['error service "web" (198.18.0.10:80/tcp)', 'error vip group "default"'], mentions: ['198.18.2.11 (one of its local addresses)'],
  },
  {
    name: 'no floating address is the box\'s own (the box has others) -> ok', config: CLUSTERED, check: 'own-address', want: ['ok floating addresses'],
    mentions: ['no vip, local address or slot address'],
  },
  {
    name: 'a director without agent.cluster floats nothing: its vips are its own addresses -> ok',
    facts: { permanentAddresses: [...HEALTHY.permanentAddresses, { address: '198.18.0.10', ifname: 'eth0' }] },
    check: 'own-address', want: ['ok floating addresses'], mentions: ['claims no address'],
  },
  // (i) dr real servers that answer ARP for the vip
  {
    name: 'a dr real server answers ARP for the vip -> error naming it, with the sysctls', config: DR_CONFIG,
    facts: { vipArpAnswers: [{ vip: '198.18.0.30', ifname: 'eth1', mac: '02:00:00:00:00:32', address: '198.19.1.32' }] },
    check: 'dr-arp', want: ['error real server 198.19.1.32:443 of service "edge" (198.18.0.30:443/tcp)'],
    mentions: ['answers ARP for the dr vip 198.18.0.30 on eth1 (MAC 02:00:00:00:00:32)', 'arp_ignore=1', 'arp_announce=2', 'dev lo'],
  },
  {
    name: 'a host that is no real server answers ARP for a dr vip -> a warning naming its MAC (another director holding the vip does so)', config: DR_CONFIG,
    facts: { vipArpAnswers: [{ vip: '198.18.0.30', ifname: 'eth1', mac: '02:00:00:00:00:99', address: null }] },
    check: 'dr-arp', want: ['warning host with MAC 02:00:00:00:00:99'], mentions: ['another director holding the vip'],
  },
  {
    name: 'no host answers ARP or a neighbour solicitation for the dr vips -> ok, saying what was asked', config: DR_CONFIG,
    check: 'dr-arp', want: ['ok dr vips'], mentions: ['no host answered ARP for the 1 IPv4 dr vip or a neighbour solicitation for the 1 IPv6 dr vip where'],
  },
  {
    name: 'an IPv6 dr real server that answers neighbour solicitations for the vip -> error: move the vip to lo', config: DR_CONFIG,
    facts: { vipArpAnswers: [{ vip: 'fd00::30', ifname: 'eth1', mac: '02:00:00:00:00:31', address: 'fd00:1::31' }] },
    check: 'dr-arp', want: ['error real server [fd00:1::31]:443 of service "edge6" ([fd00::30]:443/tcp)'],
    mentions: ['answers neighbour solicitations for the dr vip fd00::30 on eth1', 'ip -6 addr add fd00::30/128 dev lo'],
  },
  // (j) dr real servers without the vip
  {
    name: 'a dr real server that does not answer for the vip -> error with the ip addr that fixes it; one that could not be asked -> warning', config: DR_CONFIG,
    facts: { vipOnRealServer: [
      { vip: '198.18.0.30', realServer: '198.19.1.31', answered: true },
      { vip: '198.18.0.30', realServer: '198.19.1.32', answered: false },
      { vip: '198.18.0.30', realServer: '198.19.1.33', answered: null, why: 'no MAC for it on eth1' },
    ] },
    check: 'dr-vip', want: ['error real server 198.19.1.32:443 of service "edge" (198.18.0.30:443/tcp)', 'warning real server 198.19.1.33'],
    mentions: ['did not answer an ICMP echo to the dr vip 198.18.0.30', 'ip addr add 198.18.0.30/32 dev lo'],
  },
  {
    name: 'every dr real server answers for its vip -> ok', config: DR_CONFIG,
    facts: { vipOnRealServer: [{ vip: '198.18.0.30', realServer: '198.19.1.31', answered: true }, { vip: '198.18.0.30', realServer: '198.19.1.32', answered: true }] },
    check: 'dr-vip', want: ['ok dr real servers'], mentions: ['all 2 real servers of dr vips answered'],
  },
  {
    name: 'an IPv6 dr real server without the vip -> error with the ip -6 addr that fixes it', config: DR_CONFIG,
    facts: { vipOnRealServer: [{ vip: 'fd00::30', realServer: 'fd00:1::31', answered: false }] },
    check: 'dr-vip', want: ['error real server [fd00:1::31]:443 of service "edge6" ([fd00::30]:443/tcp)'], mentions: ['ip -6 addr add fd00::30/128 dev lo'],
  },
  // (h) plain etcd
  {
    name: 'a clustered director on plain http:// etcd -> a warning that shouts', config: CLUSTERED,
    check: 'etcd-tls', want: ['warning agent.cluster.etcd'], mentions: ['PLAIN ETCD: http://127.0.0.1:2379', 'run as root on every director', '--client-cert-auth'],
  },
  {
    name: 'https:// endpoints with a client certificate -> ok',
    config: { ...CLUSTERED, agent: { ...CLUSTERED.agent, cluster: { ...CLUSTERED.agent.cluster!, etcd: ['https://198.18.3.11:2379'], etcdTls: { ca: '/etc/lbd/tls/etcd-ca.pem', cert: '/etc/lbd/tls/dir1-etcd.pem', key: '/etc/lbd/tls/dir1-etcd.key' } } } },
    check: 'etcd-tls', want: ['ok etcd'], mentions: ['mutual TLS: 1 https:// endpoint'],
  },
];

describe('diagnose', () => {
  for (const c of CASES) {
    it(c.name, () => {
      const findings = diagnose(c.config ?? CONFIG, { ...HEALTHY, ...c.facts }, c.conns ?? []);
      assert.deepEqual(summary(findings, c.check), c.want);
      const first = findings.find((f) => f.check === c.check)!;
      for (const m of c.mentions ?? []) assert.ok(`${first.problem} ${first.fix}`.includes(m), `"${m}" not in: ${first.problem} / ${first.fix}`);
      if (first.severity === 'ok') assert.equal(first.fix, '');
      else assert.notEqual(first.fix, '');
    });
  }

  it('a healthy director gets exactly one ok finding per check', () => {
    const findings = diagnose(CONFIG, HEALTHY, []);
    assert.deepEqual(findings.map((f) => `${f.severity} ${f.check}`), [
      'ok nat-return-path', 'ok ip-forward', 'ok rp-filter', 'ok conntrack-table', 'ok fullnat-ports', 'ok real-server-reachable', 'ok own-address', 'ok etcd-tls', 'ok dr-arp', 'ok dr-vip',
    ]);
  });
});

describe('arpProbes', () => {
  it('asks about each dr vip once, IPv4 and IPv6, towards its real servers', () => {
    assert.deepEqual(arpProbes(DR_CONFIG), [{ vip: '198.18.0.30', realServers: ['198.19.1.31', '198.19.1.32'] }, { vip: 'fd00::30', realServers: ['fd00:1::31'] }]);
    assert.deepEqual(arpProbes(CONFIG), []);
  });
});

describe('probeTargets', () => {
  it('lists the real servers of TCP services once each, and no UDP ones', () => {
    assert.deepEqual(probeTargets(CONFIG), [
      { address: '198.19.1.11', port: 8080 }, { address: '198.19.1.21', port: 8080 }, { address: '198.19.1.22', port: 8080 },
    ]);
  });
});
