import assert from 'node:assert/strict';
import type {
  ApplyResponse__Output, Connection__Output, Finding__Output, GetHealthResponse__Output, GetStatsResponse__Output, GetStatusResponse__Output,
  ClusterStatus__Output, HealthEvent__Output,
} from '@lbd/proto';
import {
  computeRates, formatAge, formatApply, formatClusterStatus, formatConns, formatStatelessNote, formatDoctor, formatHealth, formatHealthEvent, formatProblems, formatRates,
  formatStats, formatStatus, formatEvent, formatEvents,
} from './format.js';

/** Golden strings: the layout is part of lbadm's interface (people read it, scripts grep it). */

const STATUS: GetStatusResponse__Output = {
  agent: {
    configPath: '/etc/lbd/lbd.yaml', configSource: '/etc/lbd/lbd.yaml', configSha256: '6389edf8d9c8a96f21bbf9704226c5b258e280528c4f20ced979696a66fda7bf',
    configRevision: 3, serviceCount: 3, adminSocket: '/run/lbd/admin.sock', pid: 4242, startedAt: '2026-01-01T00:00:00.000Z',
    lastApply: {
      time: '2026-01-01T00:05:00.000Z', trigger: 'file-change', result: 'rejected', error: '', operations: 0, fullRebuild: false,
      durationMs: 0, source: '/etc/lbd/lbd.yaml', configSha256: 'ab',
      problems: [{ path: 'services[0].vip', value: '"1.2.3"', rule: 'is not an IPv4 or IPv6 address', fix: 'give an address', text: 'services[0].vip: "1.2.3" is not an IPv4 or IPv6 address; give an address' }],
    },
  },
  services: [
    {
      name: 'web', key: '198.18.0.10:80/tcp', vip: '198.18.0.10', port: 80, protocol: 'tcp', mode: 'fullnat', scheduler: 'wrr',
      persistenceSec: 300, localAddresses: { first: '198.18.2.10', last: '198.18.2.13', size: 4 }, flags: ['expire-on-remove'],
      synProxy: true, connectionLimit: 1000, limitDrops: 7,
      realServers: [
        { address: '198.19.1.11', port: 8080, weight: 3, quiescent: false, eligible: true, activeConnections: 12, inactiveConnections: 4, packets: 1, bytes: 2, flags: [], health: 'up', effectiveWeight: 3 },
        { address: '198.19.1.12', port: 8080, weight: 2, quiescent: true, eligible: false, activeConnections: 1, inactiveConnections: 0, packets: 1, bytes: 2, flags: ['down', 'held-down'], health: 'down', effectiveWeight: 0 },
        { address: '198.19.1.13', port: 8080, weight: 4, quiescent: false, eligible: true, activeConnections: 0, inactiveConnections: 0, packets: 0, bytes: 0, flags: ['ramping'], health: 'up', effectiveWeight: 2 },
      ],
    },
    {
      name: 'dns6', key: '[fd00::53]:53/udp', vip: 'fd00::53', port: 53, protocol: 'udp', mode: 'nat', scheduler: 'sh',
      persistenceSec: 0, localAddresses: null, flags: [], synProxy: false, connectionLimit: 0, limitDrops: 0,
      realServers: [
        { address: 'fd00:1234:5678:9abc::1:53', port: 5353, weight: 1, quiescent: false, eligible: true, activeConnections: 0, inactiveConnections: 7, packets: 0, bytes: 0, flags: [], health: '', effectiveWeight: 1 },
      ],
    },
    {
      name: 'new', key: '198.18.0.20:443/tcp', vip: '198.18.0.20', port: 443, protocol: 'tcp', mode: 'nat', scheduler: 'mh',
      persistenceSec: 0, localAddresses: null, flags: ['not-in-kernel'], synProxy: false, connectionLimit: 50, limitDrops: 0,
      realServers: [
        { address: '198.19.1.21', port: 443, weight: 1, quiescent: true, eligible: false, activeConnections: 0, inactiveConnections: 0, packets: 0, bytes: 0, flags: ['not-in-kernel'], health: '', effectiveWeight: 1 },
      ],
    },
  ],
  synProxy: { synReceived: 120_000, cookieValid: 310, cookieInvalid: 12, cookieRetransmitted: 0 },
};

const STATS_A: GetStatsResponse__Output = {
  sampledAtUnixMs: 1_000_000,
  services: [{
    name: 'web', key: '198.18.0.10:80/tcp', counters: { packets: 1000, bytes: 150000, connections: 13 },
    realServers: [
      { address: '198.19.1.11', port: 8080, counters: { packets: 900, bytes: 140000, connections: 12 } },
      { address: '198.19.1.12', port: 8080, counters: { packets: 100, bytes: 10000, connections: 1 } },
    ],
  }],
};

const STATS_B: GetStatsResponse__Output = {
  sampledAtUnixMs: 1_002_000,
  services: [
    {
      name: 'web', key: '198.18.0.10:80/tcp', counters: { packets: 1500, bytes: 350000, connections: 20 },
      realServers: [
        { address: '198.19.1.11', port: 8080, counters: { packets: 1401, bytes: 340000, connections: 19 } },
        // Counter reset between the samples (the table was rebuilt).
        { address: '198.19.1.12', port: 8080, counters: { packets: 5, bytes: 500, connections: 1 } },
      ],
    },
    { name: 'dns6', key: '[fd00::53]:53/udp', counters: { packets: 3, bytes: 300, connections: 0 }, realServers: [] },
  ],
};

const CONNS: Connection__Output[] = [
  {
    protocol: 'tcp', state: 'ESTABLISHED', client: { address: '198.18.9.1', port: 51234 }, vip: { address: '198.18.0.10', port: 80 },
    localAddress: { address: '198.18.2.10', port: 40001 }, realServer: { address: '198.19.1.11', port: 8080 }, expiresInSec: 899,
    unreplied: false, realServerId: 1, service: '198.18.0.10:80/tcp',
  },
  {
    protocol: 'udp', state: 'UNREPLIED', client: { address: 'fd00:9::1', port: 5353 }, vip: { address: 'fd00::53', port: 53 },
    localAddress: null, realServer: { address: 'fd00:1::11', port: 53 }, expiresInSec: 29, unreplied: true, realServerId: 3, service: '[fd00::53]:53/udp',
  },
];

const APPLY: ApplyResponse__Output = {
  changed: true, operations: ['add element inet lbd backend_dnat { 3 : 198.19.1.13 . 8080 }', 'flush map inet lbd rr_1'], fullRebuild: false,
  dryRun: false, expiredConnections: 0, durationMs: 3, serviceCount: 2, configSha256: 'ab', problems: [], clusterRevision: 0,
};

const FINDINGS: Finding__Output[] = [
  { severity: 'ok', check: 'ip-forward', subject: 'ip forwarding', problem: 'IPv4 forwarding is on', fix: '' },
  { severity: 'warning', check: 'rp-filter', subject: 'net.ipv4.conf.eth0.rp_filter', problem: 'is 1 (strict) on eth0', fix: 'sysctl -w net.ipv4.conf.eth0.rp_filter=2' },
  { severity: 'error', check: 'nat-return-path', subject: 'real server 198.19.1.22:8080 of service "app" (198.18.0.20:80/tcp)', problem: '3 of its 3 connections are unreplied', fix: 'route its replies via the director' },
];

describe('formatStatus', () => {
  it('prints ipvsadm -Ln style lines, widening for IPv6, with the programmed weight and marks for quiescent and down servers', () => {
    assert.equal(formatStatus(STATUS), [
      'lbd-agent pid 4242: config /etc/lbd/lbd.yaml (revision 3, sha256 6389edf8d9c8, from /etc/lbd/lbd.yaml)',
      'last apply 2026-01-01T00:05:00.000Z (file-change): REJECTED /etc/lbd/lbd.yaml, 1 problem; the running config stays',
      '  services[0].vip: "1.2.3" is not an IPv4 or IPv6 address; give an address',
      'Prot LocalAddress:Port Scheduler Mode Flags',
      '  -> RemoteAddress:Port               Weight ActiveConn InActConn',
      'TCP  198.18.0.10:80 wrr fullnat persistent 300 synproxy limit 1000 (7 dropped) expire-on-remove (web; local 198.18.2.10-198.18.2.13)',
      '  -> 198.19.1.11:8080                 3      12         4',
      '  -> 198.19.1.12:8080                 0      1          0         quiescent down held-down',
      '  -> 198.19.1.13:8080                 2      0          0         ramping',
      'UDP  [fd00::53]:53 sh nat (dns6)',
      '  -> [fd00:1234:5678:9abc::1:53]:5353 1      0          7',
      'TCP  198.18.0.20:443 mh nat limit 50 not-in-kernel (new)',
      '  -> 198.19.1.21:443                  1      0          0         quiescent not-in-kernel',
      'SYN proxy: 120000 SYNs answered with a cookie, 310 handshakes completed, 12 bad cookies dropped',
      '',
    ].join('\n'));
  });

  it('says when the last apply failed or succeeded', () => {
    const failed = { ...STATUS, services: [], agent: { ...STATUS.agent!, lastApply: { ...STATUS.agent!.lastApply!, result: 'failed', error: 'apply: PermissionDenied', problems: [] } } };
    assert.match(formatStatus(failed), /\(file-change\): FAILED: apply: PermissionDenied; the previous state stays\n/);
    const ok = { ...STATUS, services: [], agent: { ...STATUS.agent!, lastApply: { ...STATUS.agent!.lastApply!, result: 'applied', operations: 1, fullRebuild: true, problems: [] } } };
    assert.match(formatStatus(ok), /\(file-change\): applied, 1 operation \(full rebuild\)\n/);
  });
});

const T0 = Date.UTC(2026, 0, 1, 0, 10, 0);
const CHECK = { kind: 'http', target: '198.19.1.11:8080', description: 'http GET /', key: 'http 198.19.1.11:8080 0a1b2c3d', intervalMs: 1000, timeoutMs: 500, rise: 2, fall: 2 };
const HEALTH: GetHealthResponse__Output = {
  sampledAtUnixMs: T0,
  realServers: [
    {
      service: '198.18.0.10:80/tcp', serviceName: 'web', address: '198.19.1.11', port: 8080, check: CHECK, state: 'up', sinceUnixMs: T0 - 303_000,
      successes: 250, failures: 0, lastResult: { ok: true, reason: 'ok', message: 'http GET /: got 200', latencyMs: 1.24 }, heldDownUntilUnixMs: 0,
      flags: [], weight: 1, effectiveWeight: 1,
    },
    {
      service: '198.18.0.10:80/tcp', serviceName: 'web', address: '198.19.1.12', port: 8080,
      check: { ...CHECK, target: '198.19.1.12:8080', key: 'http 198.19.1.12:8080 0a1b2c3e' }, state: 'down', sinceUnixMs: T0 - 12_400,
      successes: 0, failures: 12, lastResult: { ok: false, reason: 'status', message: 'http GET /: got 500, want 200-399', latencyMs: 13.4 },
      heldDownUntilUnixMs: T0 + 4_200, flags: ['down', 'held-down'], weight: 2, effectiveWeight: 0,
    },
    {
      service: '198.18.0.10:80/tcp', serviceName: 'web', address: '198.19.1.13', port: 8080,
      check: { ...CHECK, target: '198.19.1.13:8080', key: 'http 198.19.1.13:8080 0a1b2c3f' }, state: 'up', sinceUnixMs: T0 - 2_000,
      successes: 4, failures: 0, lastResult: { ok: true, reason: 'ok', message: 'http GET /: got 200', latencyMs: 2 }, heldDownUntilUnixMs: 0,
      flags: ['ramping'], weight: 3, effectiveWeight: 1,
    },
    {
      service: '198.18.0.10:9000/tcp', serviceName: 'stream', address: '198.19.1.11', port: 9000,
      check: { ...CHECK, kind: 'tcp', target: '198.19.1.11:9001', description: 'tcp connect to 198.19.1.11:9001', key: 'tcp 198.19.1.11:9001 00ff00ff' },
      state: 'down', sinceUnixMs: T0 - 7_384_000, successes: 0, failures: 3,
      lastResult: { ok: false, reason: 'refused', message: 'tcp connect to 198.19.1.11:9001: refused', latencyMs: 0.3 }, heldDownUntilUnixMs: 0,
      flags: ['down', 'removed'], weight: 1, effectiveWeight: 0,
    },
    {
      service: '198.18.0.10:53/udp', serviceName: 'dns', address: '198.19.1.11', port: 5353,
      check: { ...CHECK, kind: 'udp', target: '198.19.1.11:5353', description: 'udp 198.19.1.11:5353', key: 'udp 198.19.1.11:5353 12345678' },
      state: 'up', sinceUnixMs: T0 - 200, successes: 0, failures: 0, lastResult: null, heldDownUntilUnixMs: 0, flags: [], weight: 1, effectiveWeight: 1,
    },
  ],
  scheduler: {
    checks: 5, running: 1, waiting: 0, started: 1234, completed: 1233, timedOut: 7, late: 0, skipped: 1, askedAgain: 2,
    startDelayP50Ms: 0.4, startDelayP99Ms: 2.25, startDelayMaxMs: 9,
  },
};

describe('formatHealth', () => {
  it('prints one line per checked real server, with why a state is not plain, then the scheduler\'s figures', () => {
    assert.equal(formatHealth(HEALTH), [
      'SERVICE SERVER           CHECK                 STATE            SINCE LAST RESULT                              LATENCY',
      'web     198.19.1.11:8080 http GET /            up               5m03s http GET /: got 200                      1.2 ms',
      'web     198.19.1.12:8080 http GET /            down (held 5s)   12s   http GET /: got 500, want 200-399        13 ms',
      'web     198.19.1.13:8080 http GET /            up (ramping 1/3) 2s    http GET /: got 200                      2 ms',
      'stream  198.19.1.11:9000 tcp @198.19.1.11:9001 down (removed)   2h03m tcp connect to 198.19.1.11:9001: refused 0.3 ms',
      'dns     198.19.1.11:5353 udp                   up               0s    no result yet                            -',
      '',
      'scheduler: 5 checks; probes started 1234, timed out 7, late 0, skipped 1, asked again after a stall 2; start delay p50 0.4 ms, p99 2.3 ms',
      '',
    ].join('\n'));
  });

  it('says so when nothing is checked', () => {
    assert.equal(formatHealth({ ...HEALTH, realServers: [] }), 'no real server has a health check\n');
  });

  it('prints a transition as one line', () => {
    const e: HealthEvent__Output = {
      seq: 7, timeUnixMs: T0, service: '198.18.0.10:80/tcp', serviceName: 'web', address: '198.19.1.12', port: 8080, checkKind: 'http',
      from: 'up', to: 'down', reason: 'http GET /: got 500, want 200-399 (2 failures)', probeReason: 'status', latencyMs: 3, heldDownUntilUnixMs: 0,
      action: 'quiescent (weight 0)',
    };
    assert.equal(formatHealthEvent(e),
      '2026-01-01T00:10:00.000Z web 198.19.1.12:8080 up -> down: http GET /: got 500, want 200-399 (2 failures) [3 ms]; quiescent (weight 0)\n');
    assert.match(formatHealthEvent({ ...e, heldDownUntilUnixMs: T0 + 5000 }), /\[3 ms\]; held down until 2026-01-01T00:10:05\.000Z; quiescent/);
  });

  it('ages', () => {
    assert.deepEqual([0, 59_999, 60_000, 3_599_000, 3_600_000, 86_400_000 + 3_600_000].map(formatAge), ['0s', '59s', '1m00s', '59m59s', '1h00m', '1d01h']);
  });
});

describe('formatStats and rates', () => {
  it('prints counters with right-aligned numbers', () => {
    assert.equal(formatStats(STATS_A), [
      'Prot LocalAddress:Port    Conns  Packets    Bytes',
      'TCP  198.18.0.10:80          13     1000   150000',
      '  -> 198.19.1.11:8080        12      900   140000',
      '  -> 198.19.1.12:8080         1      100    10000',
      '',
    ].join('\n'));
  });

  it('computes per-second rates over the agent\'s sample times, marking counter resets', () => {
    const r = computeRates(STATS_A, STATS_B);
    assert.equal(r.intervalMs, 2000);
    assert.deepEqual(r.services[0]!.realServers.map((x) => [x.packetsPerSec, x.bytesPerSec]), [[250.5, 100000], [null, null]]);
    assert.deepEqual([r.services[1]!.packetsPerSec, r.services[1]!.connections], [1.5, 0], 'a new service counts from zero');
    assert.equal(formatRates(r), [
      'Prot LocalAddress:Port    Conns   Pkts/s  Bytes/s',
      'TCP  198.18.0.10:80          20      250   100000',
      '  -> 198.19.1.11:8080        19      251   100000',
      '  -> 198.19.1.12:8080         1    reset    reset',
      'UDP  [fd00::53]:53            0      1.5      150',
      'rates over 2.0 s; Conns is the current count',
      '',
    ].join('\n'));
  });
});

describe('formatConns', () => {
  it('prints ipvsadm -Lnc style columns with "-" as the local address in nat mode', () => {
    assert.equal(formatConns(CONNS), [
      'pro expire state       source           virtual        local             destination',
      'TCP 14:59  ESTABLISHED 198.18.9.1:51234 198.18.0.10:80 198.18.2.10:40001 198.19.1.11:8080',
      'UDP 00:29  UNREPLIED   [fd00:9::1]:5353 [fd00::53]:53  -                 [fd00:1::11]:53',
      '',
    ].join('\n'));
  });

  it('prints the header alone when there are no connections', () => {
    assert.equal(formatConns([]), 'pro expire state source virtual local destination\n');
  });

  it('says below the table why a dr service has no connections to list (those the filter names, by name or key)', () => {
    const services = [
      { name: 'web', key: '198.18.0.10:80/tcp', mode: 'fullnat' },
      { name: 'edge', key: '198.18.0.30:443/tcp', mode: 'dr' },
      { name: 'edge6', key: '[fd00::30]:443/tcp', mode: 'dr' },
    ];
    const note = (s: string, fam = 'ip'): string => `${s} is a dr service: the director keeps no conntrack entry for it (each packet goes to the real server its flow memory or its slot table names, which answers the client directly), so it has no connections to list; lbadm stats shows its packets and bytes, and nft list map ${fam} lbd dr_flows_tcp the flow memory of every dr service of its family and protocol\n`;
    assert.equal(formatStatelessNote(services), note('edge (198.18.0.30:443/tcp)') + note('edge6 ([fd00::30]:443/tcp)', 'ip6'));
    assert.equal(formatStatelessNote(services, '[fd00::30]:443/tcp'), note('edge6 ([fd00::30]:443/tcp)', 'ip6'));
    assert.equal(formatStatelessNote(services, 'web'), '');
  });
});

describe('formatApply', () => {
  it('prints the rule diff and a summary', () => {
    assert.equal(formatApply(APPLY), [
      'add element inet lbd backend_dnat { 3 : 198.19.1.13 . 8080 }',
      'flush map inet lbd rr_1',
      'applied: 2 operations for 2 services',
      '',
    ].join('\n'));
  });

  it('says a dry run applied nothing', () => {
    assert.equal(formatApply({ ...APPLY, dryRun: true, fullRebuild: true }), [
      'add element inet lbd backend_dnat { 3 : 198.19.1.13 . 8080 }',
      'flush map inet lbd rr_1',
      'dry run: 2 operations (full rebuild) would be applied',
      'dry run: nothing was applied',
      '',
    ].join('\n'));
    assert.equal(formatApply({ ...APPLY, changed: false, operations: [], dryRun: true }),
      'no changes: the kernel already matches this config\ndry run: nothing was applied\n');
  });

  it('lists every problem of a rejected config', () => {
    assert.equal(formatProblems('new.yaml', STATUS.agent!.lastApply!.problems),
      'new.yaml is invalid (1 problem):\n  services[0].vip: "1.2.3" is not an IPv4 or IPv6 address; give an address\n');
  });
});

describe('formatDoctor', () => {
  it('groups findings by severity, worst first, with each fix under its finding', () => {
    assert.equal(formatDoctor(FINDINGS), [
      'errors (1):',
      '  [nat-return-path] real server 198.19.1.22:8080 of service "app" (198.18.0.20:80/tcp): 3 of its 3 connections are unreplied',
      '    fix: route its replies via the director',
      'warnings (1):',
      '  [rp-filter] net.ipv4.conf.eth0.rp_filter: is 1 (strict) on eth0',
      '    fix: sysctl -w net.ipv4.conf.eth0.rp_filter=2',
      'ok (1):',
      '  [ip-forward] ip forwarding: IPv4 forwarding is on',
      '1 error, 1 warning, 1 ok',
      '',
    ].join('\n'));
  });
});

describe('formatClusterStatus: connection sync', () => {
  const base: ClusterStatus__Output = {
    clustered: true, self: 'dir1', etcdReachable: true, etcdEndpoints: ['http://198.18.3.11:2379'], worstCaseTakeoverMs: 340, timingProfile: 'default',
    beatIntervalMs: 75, safetyWindowMs: 250, takeoverAfterMs: 300, directors: [], groups: [], configRevision: 2, sync: null,
    electionPlacement: '', electionTickLateP99Ms: 0, electionTickLateMaxMs: 0, ecmp: null,
  };
  const peer = {
    peer: 'dir2', direction: 'to', state: 'streaming', caughtUp: true, groups: ['default'], sent: 500, received: 0, injected: 498, removed: 0,
    failed: 2, snapshots: 1, resyncs: 0, queued: 0, lagP50Ms: 3.2, lagP99Ms: 18, lastError: '',
  };
  const tail = (c: ClusterStatus__Output): string => formatClusterStatus(c, 0).split('\n\n').pop()!;

  it('says why sync is off, and lists each stream with its direction, progress and lag', () => {
    assert.equal(tail({ ...base, sync: { enabled: false, disabledReason: 'agent.cluster.tls is not set', connections: 0, lossEvents: 0, peers: [] } }),
      'connection sync: off (agent.cluster.tls is not set)\n');
    assert.equal(tail({ ...base, sync: { enabled: true, disabledReason: '', connections: 500, lossEvents: 1, peers: [peer, { ...peer, peer: 'dir3', direction: 'from', state: 'resync', caughtUp: false, sent: 0, received: 7, injected: 0, lastError: 'gap: expected message 5, got 7' }] } }), [
      'connection sync: dir1 copies 500 connections; kernel events lost 1 time (each time resent whole)',
      'PEER DIRECTION    STATE     CAUGHT UP GROUPS  SENT/RECEIVED INJECTED FAILED RESYNCS QUEUED LAG P50/P99    LAST ERROR',
      'dir2 dir1 -> dir2 streaming yes       default 500           498      2      0       0      3.2 ms / 18 ms -',
      'dir3 dir3 -> dir1 resync    NO        default 7             0        2      0       -      -              gap: expected message 5, got 7',
      '',
    ].join('\n'));
  });
});

describe('formatClusterStatus: the ECMP tier', () => {
  const slot = (i: number, leader: string): ClusterStatus__Output['groups'][number] => ({
    name: `slot-${i}`, leader, term: 1, sinceUnixMs: 0, reason: '', addresses: [], role: 'standby', beatAgeMs: -1, preempt: 'after-sync', preemptDelayMs: 0, kernelLeaseLeftMs: -1,
  });
  const base: ClusterStatus__Output = {
    clustered: true, self: 'dir1', etcdReachable: true, etcdEndpoints: ['http://198.18.3.11:2379'], worstCaseTakeoverMs: 340, timingProfile: 'default',
    beatIntervalMs: 75, safetyWindowMs: 250, takeoverAfterMs: 300, directors: [], configRevision: 2, sync: null,
    electionPlacement: '', electionTickLateP99Ms: 0, electionTickLateMaxMs: 0, ecmp: null,
    groups: [slot(0, 'dir1'), slot(1, 'dir2'), slot(2, 'dir1'), slot(3, '')],
  };
  const tail = (c: ClusterStatus__Output): string => formatClusterStatus(c, 0).split('\n\n').pop()!;

  it('counts the slots each director leads and shows the BGP sessions and paths', () => {
    assert.equal(tail({ ...base, ecmp: { sessions: [{ router: '198.18.9.1', asn: 65000, state: 'established', advertised: 8 }, { router: '198.18.9.2', asn: 65000, state: 'active', advertised: -1 }], pathsAnnounced: 8, withdrawnBecause: '', lastError: '' } }), [
      'ECMP tier: 4 slots; leading them: (none) 1, dir1 2, dir2 1',
      '  dir1: 8 paths announced',
      '  ROUTER     AS    SESSION     PATHS SENT',
      '  198.18.9.1 65000 established 8',
      '  198.18.9.2 65000 ACTIVE      -',
      '',
    ].join('\n'));
  });

  it('says why every path is withdrawn, and when this director is not in the tier', () => {
    assert.match(tail({ ...base, ecmp: { sessions: [], pathsAnnounced: 0, withdrawnBecause: 'data plane apply failed: boom', lastError: 'gobgpd: connection refused' } }),
      /^  dir1: every path WITHDRAWN: data plane apply failed: boom; speaker error: gobgpd: connection refused\n  no BGP session reported by the speaker\n$/m);
    assert.match(tail(base), /dir1 is not in the tier \(no agent.cluster.ecmp\): it announces nothing/);
  });
});

describe('formatClusterStatus: directors, kernel leases and the election thread', () => {
  it('shows each director\'s kernel lease per group (ENDED once the kernel ended it) and where its election runs', () => {
    const group = (role: string, kernelLeaseLeftMs: number): { group: string; role: string; reason: string; atUnixMs: number; kernelLeaseLeftMs: number } => ({
      group: 'front', role, reason: '', atUnixMs: 0, kernelLeaseLeftMs,
    });
    const director = (id: string, g: ReturnType<typeof group>, version = '0.1.0'): ClusterStatus__Output['directors'][number] => ({
      id, version, healthy: true, problems: [], priorities: { front: 100 }, leaseLeftMs: 4000, peerAddress: '', peerReachable: true, groups: [g],
    });
    const out = formatClusterStatus({
      clustered: true, self: 'dir1', etcdReachable: true, etcdEndpoints: ['http://198.18.3.11:2379'], worstCaseTakeoverMs: 310, timingProfile: 'default',
      beatIntervalMs: 75, safetyWindowMs: 250, takeoverAfterMs: 300, groups: [], configRevision: 2, sync: null,
      electionPlacement: 'election thread, SCHED_FIFO 10 (thread 42)', electionTickLateP99Ms: 0.4, electionTickLateMaxMs: 1.2, ecmp: null,
      directors: [director('dir1', group('leader', 231)), director('dir2', group('standby', -1)), director('dir3', group('standby', 0))],
    }, 0);
    assert.match(out, /^election: election thread, SCHED_FIFO 10 \(thread 42\); its timer ran late by p99 0.4 ms, max 1.2 ms$/m);
    const rows = out.split('\n').filter((l) => /^(DIRECTOR|dir\d) /.test(l));
    assert.match(rows[0]!, /^DIRECTOR VERSION GROUP ROLE +KERNEL LEASE PRIO /);
    assert.match(rows[1]!, /^dir1 +0\.1\.0 +front +leader +231 ms /);
    assert.match(rows[2]!, /^dir2 +0\.1\.0 +front +standby +- /);
    assert.match(rows[3]!, /^dir3 +0\.1\.0 +front +standby +ENDED /);
    assert.doesNotMatch(out, /versions/);
  });

  it('shows each director\'s version, and says so when a rolling upgrade left them mixed', () => {
    const director = (id: string, version: string): ClusterStatus__Output['directors'][number] => ({
      id, version, healthy: true, problems: [], priorities: {}, leaseLeftMs: 4000, peerAddress: '', peerReachable: true, groups: [],
    });
    const out = formatClusterStatus({
      clustered: true, self: 'dir1', etcdReachable: true, etcdEndpoints: ['http://198.18.3.11:2379'], worstCaseTakeoverMs: 310, timingProfile: 'default',
      beatIntervalMs: 75, safetyWindowMs: 250, takeoverAfterMs: 300, groups: [], configRevision: 2, sync: null,
      electionPlacement: '', electionTickLateP99Ms: 0, electionTickLateMaxMs: 0, ecmp: null,
      directors: [director('dir1', '0.1.0'), director('dir2', '0.2.0'), director('dir3', '0.1.0')],
    }, 0);
    assert.match(out, /^dir2 +0\.2\.0 +- /m);
    assert.match(out, /^directors run 2 versions \(0\.1\.0: dir1, dir3; 0\.2\.0: dir2\): a rolling upgrade in progress; finish it before the next \(operator guide, "Upgrade"\)$/m);
  });
});

describe('formatEvents', () => {
  const T = Date.UTC(2026, 11, 1, 10, 0, 0);
  const events = [
    { id: '1', timeUnixMs: T, director: 'dir1', kind: 'role', subject: 'front', from: 'leader', to: 'standby', reason: 'handed over to dir2: lbadm failover', fields: {} },
    { id: '2', timeUnixMs: T + 5, director: 'dir2', kind: 'config', subject: 'config', from: '', to: 'applied', reason: 'revision 2 applied', fields: {} },
    { id: '3', timeUnixMs: T + 1250, director: 'dir1', kind: 'health', subject: '198.18.0.10:80/tcp 198.19.1.12:8080', from: 'up', to: 'down', reason: 'http GET /: got 500', fields: {} },
  ];

  it('prints a timeline: time, director, kind, subject, from -> to, reason', () => {
    assert.equal(formatEvents(events), [
      'TIME                     DIRECTOR KIND   SUBJECT                             CHANGE               REASON',
      '2026-12-01T10:00:00.000Z dir1     role   front                               leader -> standby    handed over to dir2: lbadm failover',
      '2026-12-01T10:00:00.005Z dir2     config config                              applied              revision 2 applied',
      '2026-12-01T10:00:01.250Z dir1     health 198.18.0.10:80/tcp 198.19.1.12:8080 up -> down           http GET /: got 500',
      '',
    ].join('\n'));
  });

  it('prints a followed event as one line with the same minimum widths', () => {
    assert.equal(formatEvent(events[0]!), '2026-12-01T10:00:00.000Z dir1   role   front                    leader -> standby    handed over to dir2: lbadm failover\n');
  });
});
