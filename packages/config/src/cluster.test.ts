import assert from 'node:assert/strict';
import { formatProblem, validateConfig } from './validate.js';

/** Cluster settings (agent.cluster, director-local) and vip groups (shared, in the cluster config). */

const CLUSTER = {
  director: 'dir1', etcd: ['http://198.18.3.11:2379', 'http://198.18.3.12:2379'], prefix: '/lbd/lab',
  peerListen: '198.18.4.1:7411', peers: [{ id: 'dir2', address: '198.18.4.2:7411' }], interfaces: { vip: 'eth0', local: 'eth1' },
  priorities: { default: 150 },
};

function problems(raw: unknown): string[] {
  const r = validateConfig(raw);
  return r.ok ? [] : r.problems.map(formatProblem);
}

describe('cluster settings and vip groups', () => {
  it('a director of a cluster: settings typed, timing default, groups filled in for the services that name them', () => {
    const own = validateConfig({ agent: { adminSocket: '/run/lbd/dir1.sock', cluster: CLUSTER } });
    const r = validateConfig({
      vipGroups: [{ name: 'front', preempt: 'never', gateways: ['198.19.1.250'], announce: { count: 5 } }],
      services: [{ name: 'web', vip: '198.18.0.10', port: 80, mode: 'fullnat', localAddresses: ['198.19.1.100'], vipGroup: 'front', realServers: [{ address: '198.19.1.11' }] },
        { name: 'dns', vip: '198.18.0.11', port: 53, protocol: 'udp', mode: 'nat', realServers: [{ address: '198.19.1.11' }] }],
    });
    assert.ok(own.ok && r.ok);
    assert.deepEqual(own.config.agent.cluster, {
      director: 'dir1', etcd: CLUSTER.etcd, etcdTls: null, prefix: '/lbd/lab', peerListen: { address: '198.18.4.1', port: 7411 },
      peers: [{ id: 'dir2', address: '198.18.4.2', port: 7411 }], interfaces: { vip: 'eth0', local: 'eth1' }, priorities: { default: 150 }, timing: 'default', realtimePriority: 10, track: [], tls: null, ecmp: null,
    });
    assert.deepEqual(r.config.vipGroups, [
      { name: 'front', preempt: 'never', preemptDelayMs: 10000, announce: { count: 5, intervalMs: 200 }, gateways: ['198.19.1.250'] },
      { name: 'default', preempt: 'after-delay', preemptDelayMs: 10000, announce: { count: 3, intervalMs: 200 }, gateways: [] },
    ]);
  });

  it('every problem of a bad cluster section, each with its path, value, rule and fix', () => {
    assert.deepEqual(problems({
      agent: { cluster: { ...CLUSTER, director: 'Dir 1', etcd: ['etcd:2379'], prefix: 'lbd/', peerListen: '198.18.4.1', peers: [{ id: 'dir2', address: '198.18.4.2:99999' }, { id: 'dir2', address: '198.18.4.3:7411' }], interfaces: { vip: 'a-very-long-interface-name' }, priorities: { default: 300 }, timing: 'turbo', realtimePriority: 100 } },
    }), [
      'agent.cluster.director: "Dir 1" is not a valid director id; use 1 to 63 lower-case letters, digits, "-", "_" or ".", starting and ending with a letter or digit',
      'agent.cluster.etcd[0]: "etcd:2379" is not an http:// or https:// URL; give a client URL such as http://198.18.3.11:2379',
      'agent.cluster.prefix: "lbd/" is not an etcd key prefix; give an absolute path without a trailing slash, e.g. /lbd/prod (every director of the cluster uses the same)',
      'agent.cluster.peerListen: "198.18.4.1" is not address:port; write address:port, e.g. 198.18.4.1:7411 or [fd00::1]:7411',
      'agent.cluster.peers[0].address: "198.18.4.2:99999" has a port outside 1 to 65535; write address:port, e.g. 198.18.4.1:7411 or [fd00::1]:7411',
      'agent.cluster.peers[1].id: "dir2" is listed twice; list every peer once',
      'agent.cluster.interfaces.vip: "a-very-long-interface-name" is not an interface name; give a Linux interface name such as eth0 (at most 15 characters)',
      'agent.cluster.interfaces.local: an interface name is required; give a Linux interface name such as eth0 (at most 15 characters)',
      'agent.cluster.priorities.default: 300 is not a priority (a whole number from 1 to 255); give a whole number from 1 to 255; the highest healthy director leads',
      'agent.cluster.timing: "turbo" is not a supported timing profile; use one of: default, fast, relaxed',
      'agent.cluster.realtimePriority: 100 is not a real-time priority (a whole number from 0 to 99); give 1..99 for the election thread\'s SCHED_FIFO priority (default 10), or 0 for normal priority',
    ]);
  });

  it('a peer port must leave the next port for connection sync', () => {
    assert.deepEqual(problems({ agent: { cluster: { ...CLUSTER, peerListen: '198.18.4.1:65535', peers: [{ id: 'dir2', address: '198.18.4.2:65535' }] } } }), [
      'agent.cluster.peerListen: "198.18.4.1:65535" has port 65535, which leaves no port for connection sync (it listens on the next one); give a port from 1 to 65534, e.g. 7411 (connection sync then uses 7412)',
      'agent.cluster.peers[0].address: "198.18.4.2:65535" has port 65535, which leaves no port for connection sync (it listens on the next one); give a port from 1 to 65534, e.g. 7411 (connection sync then uses 7412)',
    ]);
  });

  it('a clustered director\'s own file holds no services, vip groups or ECMP tier: they are the cluster\'s', () => {
    const ecmp = { slots: 2, ipv4: { nextHops: '198.18.9.64', localAddresses: '198.18.2.64-198.18.2.65' }, asn: 65010, routers: [{ address: '198.18.9.1', asn: 65000 }] };
    assert.deepEqual(problems({ agent: { cluster: CLUSTER }, vipGroups: [{ name: 'default' }], services: [{ name: 'web', vip: '198.18.0.10', port: 80, mode: 'nat', realServers: [{ address: '198.19.1.11' }] }], ecmp }), [
      "services: cannot be in a director's own file when agent.cluster is set: the cluster config in etcd holds them; move services to a cluster config file and write it with lbadm apply -f FILE, keeping only agent: here",
      "vipGroups: cannot be in a director's own file when agent.cluster is set: the cluster config in etcd holds them; move vipGroups to a cluster config file and write it with lbadm apply -f FILE, keeping only agent: here",
      "ecmp: cannot be in a director's own file when agent.cluster is set: the cluster config in etcd holds it; move ecmp to a cluster config file and write it with lbadm apply -f FILE, keeping only agent: here (this director's own part of the tier is agent.cluster.ecmp)",
    ]);
    // Its own part of the tier is what it keeps.
    const own = validateConfig({ agent: { cluster: { ...CLUSTER, ecmp: { interface: 'fab0', routerId: '198.18.9.11' } } } });
    assert.ok(own.ok);
    assert.deepEqual(own.config.agent.cluster?.ecmp, { interface: 'fab0', routerId: '198.18.9.11', gobgpApi: 'unix:///run/lbd/gobgpd.sock', runGobgpd: true });
  });

  it('peer TLS files and per-service connection sync: typed, and every problem named', () => {
    const tls = { ca: '/etc/lbd/tls/ca.pem', cert: '/etc/lbd/tls/dir1.pem', key: '/etc/lbd/tls/dir1.key' };
    const own = validateConfig({ agent: { cluster: { ...CLUSTER, tls } } });
    assert.ok(own.ok);
    assert.deepEqual(own.config.agent.cluster?.tls, tls);
    const r = validateConfig({ services: [
      { name: 'web', vip: '198.18.0.10', port: 80, mode: 'nat', realServers: [{ address: '198.19.1.11' }] },
      { name: 'dns', vip: '198.18.0.11', port: 53, protocol: 'udp', mode: 'nat', sync: { enabled: false }, realServers: [{ address: '198.19.1.11' }] },
      { name: 'api', vip: '198.18.0.12', port: 80, mode: 'nat', sync: { minAgeMs: 2000 }, realServers: [{ address: '198.19.1.11' }] },
    ] });
    assert.ok(r.ok);
    assert.deepEqual(r.config.services.map((s) => s.sync), [{ enabled: true, minAgeMs: 0 }, { enabled: false, minAgeMs: 0 }, { enabled: true, minAgeMs: 2000 }]);
    assert.deepEqual(problems({ agent: { cluster: { ...CLUSTER, tls: { ca: 'ca.pem', cert: '/x.pem', keys: '/x.key' } } } }), [
      'agent.cluster.tls.keys: "/x.key" is not a known field; did you mean "key"?',
      'agent.cluster.tls.ca: "ca.pem" is not an absolute path; write tls: {ca: /etc/lbd/tls/ca.pem, cert: /etc/lbd/tls/dir1.pem, key: /etc/lbd/tls/dir1.key} (PEM files; the certificate names this director, DNS:<director id>)',
      'agent.cluster.tls.key: a file is required; write tls: {ca: /etc/lbd/tls/ca.pem, cert: /etc/lbd/tls/dir1.pem, key: /etc/lbd/tls/dir1.key} (PEM files; the certificate names this director, DNS:<director id>)',
    ]);
    assert.deepEqual(problems({ services: [{ name: 'web', vip: '198.18.0.10', port: 80, mode: 'nat', sync: { enabled: 'yes', minAgeMs: -1 }, realServers: [{ address: '198.19.1.11' }] }] }), [
      'services[0].sync.enabled: "yes" is not true or false; write true to copy this service\'s connections to the standbys, false to let them break on a failover',
      'services[0].sync.minAgeMs: -1 is not a duration in milliseconds from 0 to 3600000; give a whole number of milliseconds: connections younger than that are not copied (0 copies every established connection)',
    ]);
  });

  it('etcd over TLS: https:// endpoints with this director\'s client certificate, and neither without the other', () => {
    const etcdTls = { ca: '/etc/lbd/tls/etcd-ca.pem', cert: '/etc/lbd/tls/dir1-etcd.pem', key: '/etc/lbd/tls/dir1-etcd.key' };
    const https = ['https://198.18.3.11:2379', 'https://198.18.3.12:2379'];
    const own = validateConfig({ agent: { cluster: { ...CLUSTER, etcd: https, etcdTls } } });
    assert.ok(own.ok);
    assert.deepEqual([own.config.agent.cluster?.etcd, own.config.agent.cluster?.etcdTls], [https, etcdTls]);
    const fix = 'write etcdTls: {ca: /etc/lbd/tls/etcd-ca.pem, cert: /etc/lbd/tls/dir1-etcd.pem, key: /etc/lbd/tls/dir1-etcd.key} (the CA that signed etcd\'s certificate, and this director\'s client certificate for etcd)';
    assert.deepEqual(problems({ agent: { cluster: { ...CLUSTER, etcd: https } } }), [
      `agent.cluster.etcdTls: is missing, but agent.cluster.etcd has https:// endpoints (https://198.18.3.11:2379), which need this director's client certificate; ${fix}`,
    ]);
    assert.deepEqual(problems({ agent: { cluster: { ...CLUSTER, etcd: [https[0], 'http://198.18.3.12:2379'], etcdTls: { ...etcdTls, key: 'dir1-etcd.key' } } } }), [
      `agent.cluster.etcdTls.key: "dir1-etcd.key" is not an absolute path; ${fix}`,
      'agent.cluster.etcd[1]: "http://198.18.3.12:2379" is plain http:// while etcdTls is set: calls to it would go unencrypted and without the client certificate; write https://198.18.3.12:2379',
    ]);
  });

  it('track checks: defaults filled in, and every problem named', () => {
    const r = validateConfig({ agent: { cluster: { ...CLUSTER, track: [{ name: 'uplink', command: ['/usr/local/bin/check-uplink', '-q'] }] } } });
    assert.ok(r.ok);
    assert.deepEqual(r.config.agent.cluster?.track, [{ name: 'uplink', command: ['/usr/local/bin/check-uplink', '-q'], intervalMs: 1000, timeoutMs: 1000, rise: 2, fall: 2 }]);
    assert.deepEqual(problems({ agent: { cluster: { ...CLUSTER, track: [{ name: 'uplink', command: ['check-uplink'], rise: 0 }, { name: 'uplink', command: ['/bin/true'], every: 5 }] } } }), [
      'agent.cluster.track[0].command: ["check-uplink"] is not a command (a list: an absolute path, then arguments); write command: [/usr/local/bin/check-uplink, arg...]; exit status 0 means fit to lead',
      'agent.cluster.track[0].rise: 0 is not a count from 1 to 100; give a whole number from 1 to 100',
      'agent.cluster.track[1].every: 5 is not a known field; known fields: name, command, intervalMs, timeoutMs, rise, fall',
      'agent.cluster.track[1].name: "uplink" is used by an earlier track check; give every track check its own name',
    ]);
  });

  it('bad vip groups and a bad service vipGroup', () => {
    assert.deepEqual(problems({
      vipGroups: [{ name: 'front', preempt: 'always', announce: { count: 0 } }, { name: 'front', preempt: 'never', preemptDelayMs: 5 }],
      services: [{ name: 'web', vip: '198.18.0.10', port: 80, mode: 'nat', vipGroup: 'Front!', realServers: [{ address: '198.19.1.11' }] }],
    }), [
      'services[0].vipGroup: "Front!" is not a valid vip group name; use 1 to 63 lower-case letters, digits, "-", "_" or ".", starting and ending with a letter or digit',
      'vipGroups[0].preempt: "always" is not a supported preemption policy; use one of: never, after-delay, after-sync',
      'vipGroups[0].announce.count: 0 is not an announcement count (1 to 100); give a whole number from 1 to 100, e.g. 3',
      'vipGroups[1].preemptDelayMs: 5 is set but preempt is never; remove preemptDelayMs, or choose preempt: after-delay',
      'vipGroups[1].name: "front" is already defined by an earlier vip group; give every vip group its own name',
    ]);
  });
});
