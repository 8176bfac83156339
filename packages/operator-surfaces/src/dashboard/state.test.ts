import assert from 'node:assert/strict';
import type { ClusterStatus, GetHealthResponse, GetStatusResponse, RealServerHealth } from '@lbd/proto';
import { LatencyRings, dashboardState, serverName, type Answers } from './state.js';

const WEB = '198.18.0.10:80/tcp';

function rsStatus(address: string, o: { weight?: number; health?: string; flags?: string[]; packets?: number; bytes?: number; active?: number } = {}) {
  return {
    address, port: 8080, weight: o.weight ?? 1, quiescent: false, eligible: true, activeConnections: o.active ?? 0, inactiveConnections: 1,
    packets: o.packets ?? 0, bytes: o.bytes ?? 0, flags: o.flags ?? [], health: o.health ?? 'up', effectiveWeight: o.weight ?? 1,
  };
}

const STATUS: GetStatusResponse = {
  agent: { configRevision: 7, configSha256: 'abc', configSource: 'etcd revision 7', lastApply: { time: '2026-12-01T10:00:00.000Z', result: 'applied', error: '' } },
  services: [{
    name: 'web', key: WEB, vip: '198.18.0.10', port: 80, protocol: 'tcp', mode: 'fullnat', scheduler: 'wrr', flags: [],
    realServers: [
      rsStatus('198.19.1.11', { packets: 100, bytes: 10_000, active: 3 }),
      // GetStatus read before the transition GetHealth already knows of: health wins.
      rsStatus('198.19.1.12', { weight: 2, health: 'up' }),
      rsStatus('198.19.1.13', { weight: 3, health: 'down', flags: ['down', 'held-down', 'not-in-kernel'] }),
      rsStatus('198.19.1.14', { weight: 0, health: '' }),
      rsStatus('fd00::15', { health: '' }),
    ],
  }],
};

function rsHealth(address: string, state: string, o: Partial<RealServerHealth> = {}): RealServerHealth {
  return {
    service: WEB, serviceName: 'web', address, port: 8080, state, sinceUnixMs: 1000, successes: 3, failures: 0,
    check: { kind: 'http', description: 'http GET /', key: `http|${address}:8080|/`, intervalMs: 1000, target: `${address}:8080` },
    lastResult: { ok: state === 'up', reason: state === 'up' ? 'ok' : 'status', message: state === 'up' ? 'http GET /: got 200' : 'http GET /: got 500, want 200-399', latencyMs: 4.25 },
    heldDownUntilUnixMs: 0, flags: state === 'down' ? ['down'] : [], weight: 1, effectiveWeight: state === 'down' ? 0 : 1, ...o,
  };
}

const HEALTH: GetHealthResponse = {
  sampledAtUnixMs: 5000,
  realServers: [
    rsHealth('198.19.1.11', 'up'),
    rsHealth('198.19.1.12', 'down', { failures: 2, successes: 0 }),
    rsHealth('198.19.1.13', 'down', { flags: ['down', 'held-down'], heldDownUntilUnixMs: 9000 }),
  ],
};

const CLUSTER: ClusterStatus = {
  clustered: true, self: 'dir1', etcdReachable: true, worstCaseTakeoverMs: 840, timingProfile: 'default', configRevision: 12,
  directors: [
    { id: 'dir1', version: '0.1.0', healthy: true, problems: [], priorities: { default: 150 }, leaseLeftMs: 900, peerAddress: '198.18.3.1:7411', peerReachable: true,
      groups: [{ group: 'default', role: 'leader', reason: 'elected: priority 150', atUnixMs: 800 }] },
    { id: 'dir2', version: '0.1.0', healthy: false, problems: ['interface eth0 is down'], priorities: { default: 100 }, leaseLeftMs: -1, peerAddress: '198.18.3.2:7411', peerReachable: false,
      groups: [{ group: 'default', role: 'unhealthy', reason: 'interface eth0 is down', atUnixMs: 900 }] },
  ],
  groups: [{ name: 'default', leader: 'dir1', term: 4, sinceUnixMs: 800, reason: 'elected', addresses: ['198.18.0.10', '198.19.1.100'], role: 'leader', beatAgeMs: 20, preempt: 'after-sync' }],
  sync: { enabled: true, disabledReason: '', connections: 3, lossEvents: 0, peers: [{ peer: 'dir2', direction: 'to', state: 'streaming', caughtUp: true, lagP99Ms: 1.5, lastError: '' }] },
};

const answers = (o: Partial<Answers> = {}): Answers => ({
  status: STATUS, health: HEALTH, cluster: CLUSTER, statusAtUnixMs: 5000, eventLog: true, problems: [], ...o,
});

describe('dashboard state', () => {
  it('names servers as lbd does, IPv6 in brackets', () => {
    assert.equal(serverName('198.19.1.11', 8080), '198.19.1.11:8080');
    assert.equal(serverName('fd00::15', 80), '[fd00::15]:80');
  });

  it('gives each real server its grid state: fresher health over status, held-down, drained, unchecked = up', () => {
    const { state } = dashboardState(answers(), 5000, null, () => []);
    const web = state.services[0]!;
    const cases: [string, string, number, readonly string[]][] = [
      ['198.19.1.11:8080', 'up', 1, []],
      ['198.19.1.12:8080', 'down', 0, ['down']],
      ['198.19.1.13:8080', 'held-down', 0, ['down', 'held-down', 'not-in-kernel']],
      ['198.19.1.14:8080', 'drained', 0, []],
      ['[fd00::15]:8080', 'up', 1, []],
    ];
    for (const [server, st, effective, flags] of cases) {
      const rs = web.realServers.find((r) => r.server === server);
      assert.ok(rs, server);
      assert.equal(rs.state, st, server);
      assert.equal(rs.effectiveWeight, effective, server);
      assert.deepEqual(rs.flags, flags, server);
    }
    assert.deepEqual(web.counts, { up: 2, down: 1, 'held-down': 1, drained: 1 });
    const held = web.realServers[2]!;
    assert.equal(held.check?.heldDownUntilUnixMs, 9000);
    assert.equal(web.realServers[3]!.check, null, 'no health check: no check, no sparkline');
    assert.deepEqual(web.realServers[3]!.latencies, []);
    assert.equal(web.realServers[0]!.check?.lastResult?.message, 'http GET /: got 200');
    assert.equal(web.realServers[0]!.activeConnections, 3);
  });

  it('computes rates from two status reads and none across a counter reset or without a previous read', () => {
    const first = dashboardState(answers(), 5000, null, () => []);
    assert.equal(first.state.services[0]!.realServers[0]!.packetsPerSec, null);
    const later: GetStatusResponse = structuredClone(STATUS);
    later.services![0]!.realServers![0]!.packets = 300;
    later.services![0]!.realServers![0]!.bytes = 30_000;
    later.services![0]!.realServers![1]!.packets = 0;
    const second = dashboardState(answers({ status: later, statusAtUnixMs: 7000 }), 7100, first.counters, () => []);
    const [a, b] = second.state.services[0]!.realServers;
    assert.equal(a!.packetsPerSec, 100);
    assert.equal(a!.bytesPerSec, 10_000);
    assert.equal(b!.packetsPerSec, 0);
    const reset: GetStatusResponse = structuredClone(later);
    reset.services![0]!.realServers![0]!.packets = 5;
    const third = dashboardState(answers({ status: reset, statusAtUnixMs: 9000 }), 9000, second.counters, () => []);
    assert.equal(third.state.services[0]!.realServers[0]!.packetsPerSec, null);
  });

  it('shows the cluster: directors with their roles, priorities and peer links, groups with the addresses held', () => {
    const { state } = dashboardState(answers(), 5000, null, () => []);
    assert.equal(state.self, 'dir1');
    assert.equal(state.config.revision, 12, 'a clustered director runs the cluster revision');
    const [d1, d2] = state.cluster.directors;
    assert.deepEqual({ id: d1!.id, self: d1!.self, roles: d1!.roles }, {
      id: 'dir1', self: true, roles: [{ group: 'default', role: 'leader', reason: 'elected: priority 150', atUnixMs: 800, priority: 150 }],
    });
    assert.deepEqual({ self: d2!.self, healthy: d2!.healthy, peerReachable: d2!.peerReachable, problems: d2!.problems },
      { self: false, healthy: false, peerReachable: false, problems: ['interface eth0 is down'] });
    assert.deepEqual(state.cluster.groups[0]!.addresses, ['198.18.0.10', '198.19.1.100']);
    assert.deepEqual(state.cluster.sync.peers, [{ peer: 'dir2', direction: 'to', state: 'streaming', caughtUp: true, lagP99Ms: 1.5, lastError: '' }]);
    assert.equal(state.cluster.ecmp, null, 'a director outside the ECMP tier has no ECMP part');
  });

  it('shows this director\'s ECMP paths and BGP sessions', () => {
    const ecmp = { sessions: [{ router: '198.18.9.1', asn: 65000, state: 'established', advertised: 8 }], pathsAnnounced: 8, withdrawnBecause: '', lastError: '' };
    const { state } = dashboardState(answers({ cluster: { ...CLUSTER, ecmp } }), 5000, null, () => []);
    assert.deepEqual(state.cluster.ecmp, { pathsAnnounced: 8, withdrawnBecause: '', lastError: '', sessions: [{ router: '198.18.9.1', asn: 65000, state: 'established' }] });
  });

  it('a single director, and parts that could not be read, still give a state', () => {
    const { state } = dashboardState(answers({ cluster: { clustered: false }, health: null, problems: ['health: boom'], eventLog: false }), 5000, null, () => []);
    assert.equal(state.self, 'standalone');
    assert.equal(state.config.revision, 7);
    assert.equal(state.cluster.clustered, false);
    assert.deepEqual(state.cluster.directors, []);
    assert.deepEqual(state.problems, ['health: boom']);
    assert.equal(state.eventLog, false);
    // Without GetHealth, GetStatus's health words decide.
    assert.equal(state.services[0]!.realServers[1]!.state, 'up');
    assert.equal(state.services[0]!.realServers[2]!.state, 'held-down');
    const empty = dashboardState(answers({ status: null, health: null, cluster: null }), 5000, null, () => []).state;
    assert.deepEqual(empty.services, []);
    assert.equal(empty.config.lastApply, null);
  });
});

describe('dashboard latency rings', () => {
  const health = (successes: number, latencyMs: number, ok = true): GetHealthResponse => ({
    realServers: [
      rsHealth('198.19.1.11', ok ? 'up' : 'down', { successes, lastResult: { ok, reason: ok ? 'ok' : 'timeout', message: '', latencyMs } }),
      // The same check in another service: one ring.
      rsHealth('198.19.1.11', ok ? 'up' : 'down', { service: '198.18.0.11:80/tcp', successes, lastResult: { ok, reason: ok ? 'ok' : 'timeout', message: '', latencyMs } }),
    ],
  });
  const KEY = 'http|198.19.1.11:8080|/';

  it('keeps one sample per probe: a read that finds the same result adds none', () => {
    const rings = new LatencyRings(3);
    rings.record(health(1, 4), 1000);
    rings.record(health(1, 4), 1500);
    rings.record(health(2, 4), 2000);
    rings.record(health(0, 1000, false), 3000);
    assert.deepEqual(rings.samples(KEY), [
      { atUnixMs: 1000, latencyMs: 4, ok: true }, { atUnixMs: 2000, latencyMs: 4, ok: true }, { atUnixMs: 3000, latencyMs: 1000, ok: false },
    ]);
  });

  it('is bounded, and forgets checks that are gone', () => {
    const rings = new LatencyRings(3);
    for (let i = 1; i <= 10; i++) rings.record(health(i, i), i * 1000);
    assert.deepEqual(rings.samples(KEY).map((s) => s.latencyMs), [8, 9, 10]);
    rings.record({ realServers: [] }, 11_000);
    assert.deepEqual(rings.samples(KEY), []);
  });

  it('feeds each server its check\'s samples in the state', () => {
    const rings = new LatencyRings();
    rings.record(HEALTH, 1000);
    const { state } = dashboardState(answers(), 5000, null, (k) => rings.samples(k));
    assert.deepEqual(state.services[0]!.realServers[0]!.latencies, [{ atUnixMs: 1000, latencyMs: 4.3, ok: true }]);
  });
});
