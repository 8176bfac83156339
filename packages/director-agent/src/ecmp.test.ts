import assert from 'node:assert/strict';
import { FakeAnnouncer } from '@lbd/announcer/testing';
import { ECMP_DEFAULTS, type ClusterSettings, type Config, type EcmpTier, type Service } from '@lbd/config';
import { silentLogger } from '@lbd/log';
import { desiredSlots, EcmpSpeaker, slotAddresses, slotPlans, slotRanks, tierRoutes, unixSocketOf } from './ecmp.js';
import { EventLog } from './events.js';

const TIER: EcmpTier = {
  slots: 4,
  ipv4: {
    nextHops: ['198.18.9.64', '198.18.9.65', '198.18.9.66', '198.18.9.67'],
    localAddresses: [0, 1, 2, 3].map((i) => ({ first: `198.19.1.${64 + 2 * i}`, last: `198.19.1.${65 + 2 * i}`, size: 2 })),
  },
  ipv6: {
    nextHops: ['fd00:9::64', 'fd00:9::65', 'fd00:9::66', 'fd00:9::67'],
    localAddresses: [0, 1, 2, 3].map((i) => ({ first: `fd00:2::${100 + i}`, last: `fd00:2::${100 + i}`, size: 1 })),
  },
  asn: 65010,
  routers: [{ address: '198.18.9.1', asn: 65000, holdTimeSec: 9, keepaliveSec: 3 }],
  attributes: { origin: 'igp', med: null, communities: [] },
  preempt: 'after-sync', preemptDelayMs: 0, announce: { ...ECMP_DEFAULTS.announce },
};

function service(name: string, vip: string, over: Partial<Service> = {}): Service {
  return {
    name, family: vip.includes(':') ? 6 : 4, vip, port: 80, protocol: 'tcp', mode: 'fullnat', scheduler: 'mh', persistenceSec: 0,
    localAddresses: null, expireOnRemove: false, realServers: [], onDown: 'quiesce', slowStartMs: 0, fallback: 'drop', sorryServer: null,
    vipGroup: 'default', sync: { enabled: true, minAgeMs: 0 }, ecmp: true, synProxy: false, connectionLimit: null, ...over,
  };
}

const CONFIG: Config = {
  agent: { adminSocket: '/run/lbd/admin.sock', cluster: null, admin: { grpcListen: null, httpListen: null, tls: null, clients: [] } },
  ecmp: TIER,
  vipGroups: [],
  services: [
    service('web', '198.18.10.10'), service('web-tls', '198.18.10.10', { port: 443 }), service('web6', 'fd00:10::10'),
    service('pair', '198.18.0.10', { ecmp: false, localAddresses: { first: '198.19.1.100', last: '198.19.1.100', size: 1 } }),
  ],
};

const SETTINGS: ClusterSettings = {
  director: 'dir1', etcd: ['http://127.0.0.1:2379'], etcdTls: null, prefix: '/lbd/t', peerListen: { address: '127.0.0.1', port: 7411 }, peers: [],
  interfaces: { vip: 'eth0', local: 'eth1' }, priorities: { 'slot-2': 200 }, timing: 'default', realtimePriority: 0, track: [], tls: null,
  ecmp: { interface: 'eth0', routerId: '198.18.9.11', gobgpApi: 'unix:///run/lbd/gobgpd.sock', runGobgpd: true },
};

describe('ecmp: the tier\'s slots and paths on one director', () => {
  it('slot owners are balanced (each member owns ⌊S/N⌋ or ⌈S/N⌉), the same whatever the order members are listed in', () => {
    for (const slots of [1, 4, 8, 16, 64]) {
      for (let n = 1; n <= 6; n++) {
        const members = Array.from({ length: n }, (_, i) => `dir${i + 1}`);
        const ranks = slotRanks(members, slots);
        assert.deepEqual(slotRanks([...members].reverse(), slots), ranks);
        const owned = new Map(members.map((d) => [d, 0]));
        for (const r of ranks) {
          assert.deepEqual([...r].sort(), members, 'every member ranked once per slot');
          owned.set(r[0]!, owned.get(r[0]!)! + 1);
        }
        const counts = [...owned.values()];
        assert.ok(Math.max(...counts) - Math.min(...counts) <= 1, `${slots} slots over ${n}: ${JSON.stringify([...owned])}`);
      }
    }
    // Plain rendezvous hashing gave these 3 / 1 / 0 and 4 / 2 / 2.
    const count = (slots: number): number[] => ['dir1', 'dir2', 'dir3'].map((d) => slotRanks(['dir1', 'dir2', 'dir3'], slots).filter((r) => r[0] === d).length).sort();
    assert.deepEqual(count(4), [1, 1, 2]);
    assert.deepEqual(count(8), [2, 3, 3]);
  });

  it('a director that joins takes about its share: at most twice S/N slots change owner, each to the newcomer or between others', () => {
    for (const slots of [8, 16, 64]) {
      for (let n = 2; n <= 5; n++) {
        const before = slotRanks(Array.from({ length: n }, (_, i) => `dir${i + 1}`), slots).map((r) => r[0]);
        const after = slotRanks(Array.from({ length: n + 1 }, (_, i) => `dir${i + 1}`), slots).map((r) => r[0]);
        const moved = before.filter((o, i) => o !== after[i]).length;
        assert.ok(moved <= 2 * Math.ceil(slots / (n + 1)) + 1, `${slots} slots, ${n} -> ${n + 1} directors: ${moved} moved`);
        assert.ok(after.filter((o) => o === `dir${n + 1}`).length >= Math.floor(slots / (n + 1)), 'the newcomer owns its share');
      }
    }
  });

  it('plans one election group per slot: next hops on the slot\'s macvlan, local addresses on the local interface', () => {
    const plans = slotPlans(TIER, SETTINGS);
    assert.deepEqual(plans.map((p) => p.settings.name), ['slot-0', 'slot-1', 'slot-2', 'slot-3']);
    assert.equal(plans[2]!.settings.priority, 200, 'agent.cluster.priorities names a slot group: it wins over the hash');
    const rank = slotRanks(['dir1', ...SETTINGS.peers.map((p) => p.id)], 4)[1]!.indexOf('dir1');
    assert.equal(plans[1]!.settings.priority, 254 - 10 * rank, 'from its rank: 254 for the owner, 10 less per rank');
    assert.equal(plans[1]!.settings.preempt, 'after-sync');
    assert.deepEqual(plans[1]!.addresses, [
      // The IPv4 next hop solicits the (IPv4) router, so the router resolves it before its first packet;
      // no router of the tier speaks IPv6 here, so the IPv6 next hop has no one to ask.
      { address: '198.18.9.65', ifname: 'lbds1', solicit: ['198.18.9.1'] }, { address: '198.19.1.66', ifname: 'eth1' }, { address: '198.19.1.67', ifname: 'eth1' },
      { address: 'fd00:9::65', ifname: 'lbds1' }, { address: 'fd00:2::101', ifname: 'eth1' },
    ]);
    assert.deepEqual(slotAddresses(TIER, 0, 'eth1').map((a) => a.address), ['198.18.9.64', '198.19.1.64', '198.19.1.65', 'fd00:9::64', 'fd00:2::100']);
    assert.deepEqual(slotPlans(TIER, { ...SETTINGS, ecmp: null }), [], 'a director outside the tier elects no slot');
    assert.deepEqual(slotPlans(null, SETTINGS), []);
  });

  it('gives the data plane every slot with its pools', () => {
    assert.deepEqual(desiredSlots(TIER)[3], {
      index: 3, ifname: 'lbds3', localAddresses: { ipv4: TIER.ipv4!.localAddresses[3], ipv6: TIER.ipv6!.localAddresses[3] },
    });
    assert.deepEqual(desiredSlots(null), []);
  });

  it('announces each ECMP vip once per slot with the slot\'s next hop and path id slot + 1', () => {
    const routes = tierRoutes(CONFIG);
    assert.deepEqual(routes.filter((r) => r.prefix === '198.18.10.10'), [0, 1, 2, 3].map((i) => ({ prefix: '198.18.10.10', nextHop: `198.18.9.${64 + i}`, pathId: i + 1 })));
    assert.deepEqual(routes.filter((r) => r.prefix === 'fd00:10::10').map((r) => r.nextHop), ['fd00:9::64', 'fd00:9::65', 'fd00:9::66', 'fd00:9::67']);
    assert.equal(routes.length, 8, 'one vip with two services counts once; the pair service is not announced');
    assert.deepEqual(tierRoutes({ ...CONFIG, ecmp: null }), []);
  });

  it('reads the socket of a unix:// API address', () => {
    assert.equal(unixSocketOf('unix:///run/lbd/gobgpd.sock'), '/run/lbd/gobgpd.sock');
    assert.equal(unixSocketOf('127.0.0.1:50051'), null);
  });
});

describe('EcmpSpeaker', () => {
  function speaker(): { s: EcmpSpeaker; fake: FakeAnnouncer; connects: EcmpTier[]; events: EventLog } {
    const fake = new FakeAnnouncer();
    const connects: EcmpTier[] = [];
    const events = new EventLog({ director: 'dir1' });
    const s = new EcmpSpeaker({
      director: SETTINGS.ecmp!, log: silentLogger, events, self: 'dir1',
      connect: async (tier) => { connects.push(tier); return fake; },
    });
    return { s, fake, connects, events };
  }

  it('announces the tier while fit, withdraws everything while unfit, with an event each way', async () => {
    const { s, fake, events } = speaker();
    await s.update(CONFIG, null);
    assert.equal(fake.announced().length, 8);
    await s.update(CONFIG, 'data plane apply failed: nft: syntax error');
    assert.deepEqual(fake.announced(), []);
    assert.match(s.status().withdrawnBecause, /data plane apply failed/);
    await s.update(CONFIG, null);
    assert.equal(fake.announced().length, 8);
    const bgp = events.recent(0).filter((e) => e.kind === 'bgp').map((e) => `${e.from}->${e.to}`);
    assert.deepEqual(bgp, ['withdrawn->announced', 'announced->withdrawn', 'withdrawn->announced']);
    await s.close();
  });

  it('reconnects when the tier\'s BGP settings change, and withdraws and closes at close', async () => {
    const { s, fake, connects } = speaker();
    await s.update(CONFIG, null);
    await s.update({ ...CONFIG, services: CONFIG.services.slice(0, 1) }, null);
    assert.equal(connects.length, 1, 'a service change is a new announce, not a new session');
    assert.equal(fake.announced().length, 4);
    await s.update({ ...CONFIG, ecmp: { ...TIER, asn: 65011 } }, null);
    assert.equal(connects.length, 2);
    assert.equal(connects[1]!.asn, 65011);
    await s.close();
    assert.deepEqual(fake.announced(), []);
    assert.ok(fake.closed);
  });

  it('records a bgp event for each session state change it reads, and none while nothing changed', async () => {
    const { s, fake, events } = speaker();
    await s.update(CONFIG, null);
    const sessionEvents = (): string[] => events.recent(0).filter((e) => e.kind === 'bgp' && e.subject.startsWith('session ')).map((e) => `${e.subject}: ${e.from || '-'}->${e.to}`);
    fake.sessionList = [{ address: '198.18.9.1', asn: 65000, state: 'active', advertised: null }];
    await s.pollSessions();
    fake.sessionList = [{ address: '198.18.9.1', asn: 65000, state: 'established', advertised: 8 }];
    await s.pollSessions();
    await s.pollSessions();
    fake.sessionList = [{ address: '198.18.9.1', asn: 65000, state: 'idle', advertised: null }];
    await s.pollSessions();
    assert.deepEqual(sessionEvents(), ['session 198.18.9.1: -->active', 'session 198.18.9.1: active->established', 'session 198.18.9.1: established->idle']);
    await s.close();
  });

  it('a speaker that was restarted (its routers gone from its sessions) is set up and announced to again at the next session read', async () => {
    const { s, fake } = speaker();
    await s.update(CONFIG, null);
    fake.sessionList = [{ address: '198.18.9.1', asn: 65000, state: 'established', advertised: 8 }];
    await s.pollSessions();
    assert.equal(fake.changes.length, 1);
    fake.restart();
    assert.deepEqual(fake.announced(), []);
    await s.pollSessions();
    await s.update(CONFIG, null); // waits for the announce the session read started
    assert.equal(fake.announced().length, 8);
    assert.equal(fake.changes.length, 2, 'announced anew once');
    await s.close();
  });

  it('keeps the last error and tries again with the next change', async () => {
    const { s, fake } = speaker();
    fake.failNext('gobgpd is not running');
    await s.update(CONFIG, null);
    assert.match(s.status().lastError, /gobgpd is not running/);
    assert.deepEqual(fake.announced(), []);
    await s.update(CONFIG, null);
    assert.equal(s.status().lastError, '');
    assert.equal(fake.announced().length, 8);
    await s.close();
  });
});
