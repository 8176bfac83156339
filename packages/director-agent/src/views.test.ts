import assert from 'node:assert/strict';
import { parseConfig } from '@lbd/config';
import type { Connection, ObservedState } from '@lbd/dataplane';
import { serviceStats, serviceStatuses } from './views.js';

const CONFIG = parseConfig(`
services:
  - name: web
    vip: 198.18.0.10
    port: 80
    mode: fullnat
    expireOnRemove: true
    localAddresses: [198.18.2.10]
    realServers:
      - { address: 198.19.1.11, port: 8080, weight: 2 }
      - { address: 198.19.1.12, port: 8080, weight: 0 }
  - { name: new, vip: 198.18.0.20, port: 80, mode: nat }
`, 'views.yaml');

const OBSERVED: ObservedState = {
  services: [
    {
      key: '198.18.0.10:80/tcp', vip: '198.18.0.10', port: 80, protocol: 'tcp', counters: { packets: 30, bytes: 3000 }, limitDrops: { packets: 7, bytes: 420 },
      realServers: [
        { address: '198.19.1.11', port: 8080, realServerId: 1, quiescent: false, counters: { packets: 20, bytes: 2000 } },
        { address: '198.19.1.12', port: 8080, realServerId: 2, quiescent: true, counters: { packets: 10, bytes: 1000 } },
        { address: '198.19.1.13', port: 8080, realServerId: 3, quiescent: false, counters: { packets: 0, bytes: 0 } },
      ],
    },
    { key: '198.18.0.99:443/tcp', vip: '198.18.0.99', port: 443, protocol: 'tcp', counters: { packets: 1, bytes: 1 }, limitDrops: { packets: 0, bytes: 0 }, realServers: [] },
  ],
};

function conn(state: string, rs: string): Connection {
  return {
    protocol: 'tcp', state, client: { address: '198.18.9.1', port: 1 }, vip: { address: '198.18.0.10', port: 80 },
    localAddress: { address: '198.18.2.10', port: 2 }, realServer: { address: rs, port: 8080 }, expiresInSec: 1,
    unreplied: false, realServerId: 1, service: '198.18.0.10:80/tcp',
  };
}

const CONNS = [conn('ESTABLISHED', '198.19.1.11'), conn('ESTABLISHED', '198.19.1.11'), conn('TIME_WAIT', '198.19.1.11'), conn('FIN_WAIT', '198.19.1.12')];

describe('serviceStatuses', () => {
  const s = serviceStatuses(CONFIG, OBSERVED, CONNS);

  it('lists configured services first, then what only the kernel has, with presence flags', () => {
    assert.deepEqual(s.map((x) => [x.name, x.key, x.flags]), [
      ['web', '198.18.0.10:80/tcp', ['expire-on-remove']],
      ['new', '198.18.0.20:80/tcp', ['not-in-kernel']],
      ['', '198.18.0.99:443/tcp', ['not-in-config']],
    ]);
  });

  it('counts ESTABLISHED as active and every other state as inactive, per real server', () => {
    assert.deepEqual(s[0]!.realServers!.map((r) => [r.address, r.weight, r.quiescent, r.activeConnections, r.inactiveConnections, r.packets, r.flags]), [
      ['198.19.1.11', 2, false, 2, 1, 20, []],
      ['198.19.1.12', 0, true, 0, 1, 10, []],
      ['198.19.1.13', 0, false, 0, 0, 0, ['not-in-config']],
    ]);
  });
});

describe('serviceStats', () => {
  it('sums connections per service and keeps the kernel counters', () => {
    const st = serviceStats(CONFIG, OBSERVED, CONNS);
    assert.deepEqual(st[0]!.counters, { packets: 30, bytes: 3000, connections: 4 });
    assert.deepEqual(st[0]!.realServers!.map((r) => r.counters?.connections), [3, 1, 0]);
    assert.deepEqual(st[1]!.counters, { packets: 0, bytes: 0, connections: 0 });
  });
});
