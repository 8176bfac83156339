import assert from 'node:assert/strict';
import { formatProblem, validateConfig } from './validate.js';
import { ADMIN_DEFAULTS, DEFAULT_ADMIN_SOCKET, type Config, type DirectorEcmp, type EcmpTier, type Service } from './types.js';

/**
 * The ECMP tier (DESIGN.md, "ECMP tier"): the cluster config's `ecmp` section, a service's `ecmp: true`, and
 * a director's own `agent.cluster.ecmp`. Valid input is asserted as the exact typed value, every rule by its
 * exact one-line message, as in validate.test.ts.
 */

type Raw = Record<string, unknown>;

/** Copies `base` with `over` applied; an undefined value removes the field. */
function with_(base: Raw, over: Raw): Raw {
  const out: Raw = { ...base, ...over };
  for (const k of Object.keys(out)) if (out[k] === undefined) delete out[k];
  return out;
}

/** The tier of deploy/examples/ecmp: 8 slots on the lab's fabric, both families. */
const TIER: Raw = {
  slots: 8,
  ipv4: { nextHops: '198.18.9.64', localAddresses: '198.18.2.64-198.18.2.127' },
  ipv6: { nextHops: 'fd00:9::64', localAddresses: 'fd00:2::100-fd00:2::17f' },
  asn: 65010,
  routers: [{ address: '198.18.9.1', asn: 65000 }],
};

const WEB: Raw = {
  name: 'web', vip: '198.18.10.10', port: 80, mode: 'fullnat', scheduler: 'mh', ecmp: true,
  realServers: [{ address: '198.19.1.11', port: 8080 }],
};

const CLUSTER: Raw = {
  director: 'dir1', etcd: ['http://10.0.3.11:2379'], prefix: '/lbd/ecmp', peerListen: '10.0.4.1:7411',
  peers: [{ id: 'dir2', address: '10.0.4.2:7411' }], interfaces: { vip: 'fab0', local: 'eth1' },
};

/** A cluster config with the tier changed by `over`, and the ECMP service. */
function tier(over: Raw, services: unknown[] = [WEB]): Raw {
  return { ecmp: with_(TIER, over), services };
}

/** The same for one family of the tier. */
function ipv4(over: Raw, services: unknown[] = [WEB]): Raw {
  return tier({ ipv4: with_(TIER.ipv4 as Raw, over) }, services);
}

/** A director's own file with agent.cluster.ecmp set to `ecmp`. */
function director(ecmp: unknown): Raw {
  return { agent: { cluster: { ...CLUSTER, ecmp } } };
}

function problems(raw: unknown): string[] {
  const r = validateConfig(raw);
  return r.ok ? [] : r.problems.map(formatProblem);
}

const range = (first: string, last: string, size: number) => ({ first, last, size });

/** The typed tier of TIER: every default filled in. */
const TYPED_TIER: EcmpTier = {
  slots: 8,
  ipv4: {
    nextHops: ['198.18.9.64', '198.18.9.65', '198.18.9.66', '198.18.9.67', '198.18.9.68', '198.18.9.69', '198.18.9.70', '198.18.9.71'],
    localAddresses: [
      range('198.18.2.64', '198.18.2.71', 8), range('198.18.2.72', '198.18.2.79', 8), range('198.18.2.80', '198.18.2.87', 8), range('198.18.2.88', '198.18.2.95', 8),
      range('198.18.2.96', '198.18.2.103', 8), range('198.18.2.104', '198.18.2.111', 8), range('198.18.2.112', '198.18.2.119', 8), range('198.18.2.120', '198.18.2.127', 8),
    ],
  },
  ipv6: {
    nextHops: ['fd00:9::64', 'fd00:9::65', 'fd00:9::66', 'fd00:9::67', 'fd00:9::68', 'fd00:9::69', 'fd00:9::6a', 'fd00:9::6b'],
    localAddresses: [
      range('fd00:2::100', 'fd00:2::10f', 16), range('fd00:2::110', 'fd00:2::11f', 16), range('fd00:2::120', 'fd00:2::12f', 16), range('fd00:2::130', 'fd00:2::13f', 16),
      range('fd00:2::140', 'fd00:2::14f', 16), range('fd00:2::150', 'fd00:2::15f', 16), range('fd00:2::160', 'fd00:2::16f', 16), range('fd00:2::170', 'fd00:2::17f', 16),
    ],
  },
  asn: 65010,
  routers: [{ address: '198.18.9.1', asn: 65000, holdTimeSec: 9, keepaliveSec: 3 }],
  attributes: { origin: 'igp', med: null, communities: [] },
  preempt: 'after-sync',
  preemptDelayMs: 0,
  announce: { count: 3, intervalMs: 200 },
};

const TYPED_WEB: Service = {
  name: 'web', family: 4, vip: '198.18.10.10', port: 80, protocol: 'tcp', mode: 'fullnat', scheduler: 'mh', persistenceSec: 0,
  localAddresses: null, expireOnRemove: false, realServers: [{ address: '198.19.1.11', port: 8080, weight: 1, healthCheck: null }],
  onDown: 'quiesce', slowStartMs: 0, fallback: 'drop', sorryServer: null, vipGroup: '', sync: { enabled: true, minAgeMs: 0 }, ecmp: true, synProxy: false, connectionLimit: null,
};

describe('the ECMP tier', () => {
  describe('accepts into the exact typed value', () => {
    it('the whole tier: slots split evenly, defaults filled in; an ECMP service is in no vip group, a vip group\'s service beside it is', () => {
      const api = { name: 'api', vip: '198.18.0.20', port: 443, mode: 'fullnat', localAddresses: ['198.18.2.10-198.18.2.13'], vipGroup: 'front', realServers: [] };
      const r = validateConfig({ ecmp: TIER, vipGroups: [{ name: 'front', gateways: ['198.19.1.1'] }], services: [WEB, api] });
      const want: Config = {
        agent: { adminSocket: DEFAULT_ADMIN_SOCKET, cluster: null, admin: ADMIN_DEFAULTS },
        ecmp: TYPED_TIER,
        vipGroups: [{ name: 'front', preempt: 'after-delay', preemptDelayMs: 10000, announce: { count: 3, intervalMs: 200 }, gateways: ['198.19.1.1'] }],
        services: [TYPED_WEB, {
          ...TYPED_WEB, name: 'api', vip: '198.18.0.20', port: 443, scheduler: 'wrr', localAddresses: range('198.18.2.10', '198.18.2.13', 4),
          realServers: [], vipGroup: 'front', ecmp: false,
        }],
      };
      assert.deepEqual(r, { ok: true, config: want });
    });

    it('a dr service on the tier: every director hashes its flows alike, and its real servers answer the client', () => {
      const dr = { name: 'stream-dr', vip: '198.18.10.13', port: 9000, mode: 'dr', ecmp: true, realServers: [{ address: '198.19.1.11' }] };
      const r = validateConfig({ ecmp: TIER, services: [WEB, dr] });
      assert.deepEqual(r, {
        ok: true,
        config: {
          agent: { adminSocket: DEFAULT_ADMIN_SOCKET, cluster: null, admin: ADMIN_DEFAULTS }, ecmp: TYPED_TIER, vipGroups: [],
          services: [TYPED_WEB, {
            ...TYPED_WEB, name: 'stream-dr', vip: '198.18.10.13', port: 9000, mode: 'dr', realServers: [{ address: '198.19.1.11', port: 9000, weight: 1, healthCheck: null }],
          }],
        },
      });
    });

    it('a list per slot, a service-style list of pieces, canonical addresses, every field set', () => {
      const r = validateConfig({
        ecmp: {
          slots: 2,
          ipv4: { nextHops: ['198.18.9.70', '198.18.9.64'], localAddresses: ['198.18.2.64-198.18.2.71', ' 198.18.2.80 '] },
          ipv6: { nextHops: 'FD00:9:0::FE', localAddresses: ['fd00:2::103', 'fd00:2::100', 'FD00:2::101-fd00:2::102'] },
          asn: 4200000000,
          routers: [
            { address: '198.18.9.1', asn: 65000, holdTimeSec: 90, keepaliveSec: 30 },
            { address: 'FD00:9::1', asn: 65000, holdTimeSec: 0 },
            { address: '198.18.9.2', asn: 65001, holdTimeSec: 3 },
            { address: '198.18.9.3', asn: 65001, holdTimeSec: 30 },
          ],
          attributes: { origin: 'incomplete', med: 4294967295, communities: ['65010:0100', ' 0:1 '] },
          preempt: 'after-delay', preemptDelayMs: 5000, announce: { count: 5 },
        },
        services: [],
      });
      assert.ok(r.ok, r.ok ? '' : r.problems.map(formatProblem).join('\n'));
      assert.deepEqual(r.config.ecmp, {
        slots: 2,
        ipv4: { nextHops: ['198.18.9.70', '198.18.9.64'], localAddresses: [range('198.18.2.64', '198.18.2.71', 8), range('198.18.2.80', '198.18.2.80', 1)] },
        ipv6: { nextHops: ['fd00:9::fe', 'fd00:9::ff'], localAddresses: [range('fd00:2::100', 'fd00:2::101', 2), range('fd00:2::102', 'fd00:2::103', 2)] },
        asn: 4200000000,
        routers: [
          { address: '198.18.9.1', asn: 65000, holdTimeSec: 90, keepaliveSec: 30 },
          // No hold timer, no keepalives; a short hold timer gets a third of it; a long one the default 3.
          { address: 'fd00:9::1', asn: 65000, holdTimeSec: 0, keepaliveSec: 0 },
          { address: '198.18.9.2', asn: 65001, holdTimeSec: 3, keepaliveSec: 1 },
          { address: '198.18.9.3', asn: 65001, holdTimeSec: 30, keepaliveSec: 3 },
        ],
        attributes: { origin: 'incomplete', med: 4294967295, communities: ['65010:100', '0:1'] },
        preempt: 'after-delay', preemptDelayMs: 5000, announce: { count: 5, intervalMs: 200 },
      } satisfies EcmpTier);
    });

    it('one slot, one family: the tier may come before any service uses it', () => {
      const r = validateConfig({ ecmp: { slots: 1, ipv6: { nextHops: 'fd00:9::64', localAddresses: 'fd00:2::100' }, asn: 65010, routers: [{ address: 'fd00:9::1', asn: 65000 }] } });
      assert.ok(r.ok);
      assert.deepEqual([r.config.ecmp?.ipv4, r.config.ecmp?.ipv6], [null, { nextHops: ['fd00:9::64'], localAddresses: [range('fd00:2::100', 'fd00:2::100', 1)] }]);
      assert.deepEqual(r.config.services, []);
    });

    it('without an ecmp section there is no tier', () => {
      const r = validateConfig({ services: [] });
      assert.ok(r.ok);
      assert.equal(r.config.ecmp, null);
    });

    it('a director\'s own part: defaults, and every field set', () => {
      const cases: Array<[unknown, DirectorEcmp | null]> = [
        [undefined, null],
        [{ interface: 'fab0', routerId: '198.18.9.11' }, { interface: 'fab0', routerId: '198.18.9.11', gobgpApi: 'unix:///run/lbd/gobgpd.sock', runGobgpd: true }],
        [{ interface: 'fab0.100', routerId: '198.18.9.11', gobgpApi: 'unix:///var/run/gobgpd/api.sock', runGobgpd: true },
          { interface: 'fab0.100', routerId: '198.18.9.11', gobgpApi: 'unix:///var/run/gobgpd/api.sock', runGobgpd: true }],
        [{ interface: 'fab0', routerId: '198.18.9.11', gobgpApi: '[FD00:9:0::11]:50051', runGobgpd: false },
          { interface: 'fab0', routerId: '198.18.9.11', gobgpApi: '[fd00:9::11]:50051', runGobgpd: false }],
        [{ interface: 'fab0', routerId: '198.18.9.11', gobgpApi: 'gobgp.lab.example:50051', runGobgpd: false },
          { interface: 'fab0', routerId: '198.18.9.11', gobgpApi: 'gobgp.lab.example:50051', runGobgpd: false }],
      ];
      for (const [raw, want] of cases) {
        const r = validateConfig(director(raw));
        assert.ok(r.ok, r.ok ? '' : r.problems.map(formatProblem).join('\n'));
        assert.deepEqual(r.config.agent.cluster?.ecmp, want);
      }
    });
  });

  describe('rejects with every problem, exactly worded', () => {
    const NEXT_HOP_FIX = 'choose next hops that no vip, local address, gateway or router uses';
    const POOL_FIX = 'choose local addresses for the slots that no vip, other local address, gateway or router uses';
    const SLOTS = 'give a whole number from 1 to 64, at most the routers\' maximum-paths, e.g. 8';
    const HOLD = 'is not a hold time (0 = off, or whole seconds from 3 to 65535); give whole seconds from 3 to 65535, e.g. 9 (with keepaliveSec 3), or 0 to turn the hold timer off';
    const ASN = 'AS number, a whole number from 1 to 4294967295 (private: 64512-65534 and 4200000000-4294967294)';
    const ROUTER_ID = 'give an IPv4 address unique in the tier, usually this director\'s IPv4 address on the fabric, e.g. 198.18.9.11';
    const API_FIX = 'write unix:///run/lbd/gobgpd.sock (a unix socket, the default) or host:port such as 127.0.0.1:50051';
    const cases: Array<{ name: string; raw: unknown; want: string[] }> = [
      // The section's shape.
      {
        name: 'ecmp is a list',
        raw: { ecmp: [TIER] },
        want: ['ecmp: [{"slots":8,"ipv4":{"nextHops":"198.18.9.64","localAddresses":"198.18.2.64-198.18.2.127"},"ipv6":{"nextHops":"fd00:9::64","localAddresses":"fd00:2::100-fd00:2::17f"},"asn":65010,"routers":[{"address":"198.18.9.1","asn":65000}]}] is a list, not a mapping; write ecmp: {slots: 8, ipv4: {nextHops: ..., localAddresses: ...}, asn: 65010, routers: [...]} as in deploy/examples/ecmp/cluster.yaml, or leave it out'],
      },
      {
        name: 'ecmp is empty (YAML "ecmp:" with nothing after it)',
        raw: { ecmp: null },
        want: ['ecmp: null is empty, not a mapping; write ecmp: {slots: 8, ipv4: {nextHops: ..., localAddresses: ...}, asn: 65010, routers: [...]} as in deploy/examples/ecmp/cluster.yaml, or leave it out'],
      },
      {
        name: 'a misspelt field, and the one it should have been is missing',
        raw: tier({ slots: undefined, slot: 8 }),
        want: [
          'ecmp.slot: 8 is not a known field; did you mean "slots"?',
          `ecmp.slots: a slot count is required; ${SLOTS}`,
        ],
      },
      {
        name: 'neither family, no AS number, no routers: each named once, and the ECMP service is not blamed for it',
        raw: tier({ ipv4: undefined, ipv6: undefined, asn: undefined, routers: undefined }),
        want: [
          'ecmp: needs ipv4, ipv6 or both (the slots\' next hops and local addresses for vips of that family); add e.g. ipv4: {nextHops: 198.18.9.64, localAddresses: 198.18.2.64-198.18.2.127}',
          `ecmp.asn: an AS number is required; give the directors' ${ASN}`,
          'ecmp.routers: at least one router is required (the tier announces its vips to the routers over BGP); list the upstream routers the directors peer with, e.g. routers: [{address: 198.18.9.1, asn: 65000}]',
        ],
      },

      // slots
      { name: 'no slots', raw: tier({ slots: 0 }), want: [`ecmp.slots: 0 is not a slot count (a whole number from 1 to 64); ${SLOTS}`] },
      { name: 'more slots than MAX_SLOTS', raw: tier({ slots: 65 }), want: [`ecmp.slots: 65 is not a slot count (a whole number from 1 to 64); ${SLOTS}`] },
      { name: 'a fraction of a slot', raw: tier({ slots: 7.5 }), want: [`ecmp.slots: 7.5 is not a slot count (a whole number from 1 to 64); ${SLOTS}`] },
      { name: 'slots in quotes', raw: tier({ slots: '8' }), want: ['ecmp.slots: "8" is text, not a number; write it without quotes: 8'] },

      // A family's shape.
      {
        name: 'a family is not a mapping',
        raw: tier({ ipv4: '198.18.9.64' }),
        want: ['ecmp.ipv4: "198.18.9.64" is a string, not a mapping; write ipv4: {nextHops: 198.18.9.64, localAddresses: 198.18.2.64-198.18.2.127}, or leave it out'],
      },
      {
        name: 'a family without next hops or local addresses (a misspelt field)',
        raw: tier({ ipv6: { nexthops: 'fd00:9::64' } }),
        want: [
          'ecmp.ipv6.nexthops: "fd00:9::64" is not a known field; did you mean "nextHops"?',
          'ecmp.ipv6.nextHops: next-hop addresses are required (each slot\'s floating address on the fabric, which the routers send its traffic to); give the first of the slots\' next-hop addresses, e.g. fd00:9::64 (slot i gets fd00:9::64 + i), or a list of one address per slot',
          'ecmp.ipv6.localAddresses: local addresses are required (each slot\'s fullnat SNAT pool, which the real servers reply to); give one range to split evenly over the slots, e.g. fd00:2::100-fd00:2::17f, or a list of one range per slot',
        ],
      },

      // nextHops
      {
        name: 'next hops: a list of the wrong length, a repeated address, an address of the other family',
        raw: tier({ slots: 4, ipv4: { nextHops: ['198.18.9.64', '198.18.9.065', '198.18.9.64', 'fd00:9::64', '198.18.9.68'], localAddresses: '198.18.2.64-198.18.2.127' }, ipv6: undefined }),
        want: [
          'ecmp.ipv4.nextHops: ["198.18.9.64","198.18.9.065","198.18.9.64","fd00:9::64","198.18.9.68"] lists 5 addresses but ecmp.slots is 4; write one address without brackets (slot i gets that address + i), or list exactly 4, one per slot',
          'ecmp.ipv4.nextHops[1]: "198.18.9.065" is not an IPv4 or IPv6 address; give an IPv4 address such as 198.18.0.10 or an IPv6 address such as fd00::10 (no prefix length, port or zone)',
          'ecmp.ipv4.nextHops[2]: "198.18.9.64" is also slot 0\'s next hop (ecmp.ipv4.nextHops[0]); give every slot its own next-hop address',
          'ecmp.ipv4.nextHops[3]: "fd00:9::64" is IPv6, but it is under ecmp.ipv4; give IPv4 addresses here, and IPv6 ones under ecmp.ipv6',
        ],
      },
      {
        name: 'next hops: one address of the other family',
        raw: tier({ ipv6: { nextHops: '198.18.9.64', localAddresses: 'fd00:2::100-fd00:2::17f' } }),
        want: ['ecmp.ipv6.nextHops: "198.18.9.64" is IPv4, but it is under ecmp.ipv6; give IPv6 addresses here, and IPv4 ones under ecmp.ipv4'],
      },
      {
        name: 'next hops counted up from one address run past the last address',
        raw: ipv4({ nextHops: '255.255.255.250' }),
        want: ['ecmp.ipv4.nextHops: "255.255.255.250" leaves no room for 8 consecutive next hops (slot i gets 255.255.255.250 + i); choose a lower first address, or list one address per slot'],
      },
      {
        name: 'next hops counted up from one address run into multicast',
        raw: ipv4({ nextHops: '223.255.255.254' }),
        want: ['ecmp.ipv4.nextHops: "223.255.255.254" gives slot 2 the next hop 224.0.0.0, which is a multicast address; choose a first address followed by 7 more unicast addresses, or list one address per slot'],
      },
      {
        name: 'next hops: an empty list, and a number',
        raw: tier({ ipv4: { nextHops: [], localAddresses: '198.18.2.64-198.18.2.127' }, ipv6: { nextHops: 64, localAddresses: 'fd00:2::100-fd00:2::17f' } }),
        want: [
          'ecmp.ipv4.nextHops: [] is empty; give the first of the slots\' next-hop addresses, e.g. 198.18.9.64 (slot i gets 198.18.9.64 + i), or a list of one address per slot',
          'ecmp.ipv6.nextHops: 64 is a number, not an address or a list; give the first of the slots\' next-hop addresses, e.g. fd00:9::64 (slot i gets fd00:9::64 + i), or a list of one address per slot',
        ],
      },
      {
        name: 'a next hop that is the unspecified address',
        raw: ipv4({ nextHops: '0.0.0.0' }),
        want: ['ecmp.ipv4.nextHops: "0.0.0.0" is the unspecified address; give a unicast address such as 198.18.0.10'],
      },

      // localAddresses
      {
        name: 'one range that does not split evenly: the sizes that would',
        raw: ipv4({ localAddresses: '198.18.2.64-198.18.2.123' }),
        want: ['ecmp.ipv4.localAddresses: "198.18.2.64-198.18.2.123" has 60 addresses, which do not split evenly over 8 slots; give a multiple of 8 addresses such as 56 (198.18.2.64-198.18.2.119) or 64 (198.18.2.64-198.18.2.127), or a list of one range per slot'],
      },
      {
        name: 'one range smaller than the number of slots',
        raw: ipv4({ localAddresses: ['198.18.2.64-198.18.2.66'] }),
        want: ['ecmp.ipv4.localAddresses: ["198.18.2.64-198.18.2.66"] has 3 addresses, fewer than the 8 slots (each slot needs at least one); give a multiple of 8 addresses such as 8 (198.18.2.64-198.18.2.71), or a list of one range per slot'],
      },
      {
        name: 'one range ending at the top of the address space: only the smaller size is offered',
        raw: tier({ slots: 4, ipv4: { nextHops: '198.18.9.64', localAddresses: '255.255.255.249-255.255.255.254' }, ipv6: undefined }),
        want: ['ecmp.ipv4.localAddresses: "255.255.255.249-255.255.255.254" has 6 addresses, which do not split evenly over 4 slots; give a multiple of 4 addresses such as 4 (255.255.255.249-255.255.255.252), or a list of one range per slot'],
      },
      {
        name: 'ranges per slot that overlap',
        raw: tier({ slots: 3, ipv4: { nextHops: '198.18.9.64', localAddresses: ['198.18.2.72-198.18.2.79', '198.18.2.64-198.18.2.71', '198.18.2.75-198.18.2.90'] }, ipv6: undefined }),
        want: ['ecmp.ipv4.localAddresses[2]: "198.18.2.75-198.18.2.90" overlaps ecmp.ipv4.localAddresses[0] ("198.18.2.72-198.18.2.79") at 198.18.2.75; give every slot its own local addresses'],
      },
      {
        name: 'pieces that form neither one range nor one range per slot',
        raw: ipv4({ localAddresses: ['198.18.2.64-198.18.2.71', '198.18.2.80-198.18.2.87'] }),
        want: ['ecmp.ipv4.localAddresses: ["198.18.2.64-198.18.2.71","198.18.2.80-198.18.2.87"] is neither one contiguous range (198.18.2.72 is missing) nor one range per slot (2 ranges for 8 slots); give one range to split evenly over the slots, e.g. 198.18.2.64-198.18.2.79, or exactly 8 ranges, one per slot'],
      },
      {
        name: 'pieces that list an address twice',
        raw: ipv4({ localAddresses: ['198.18.2.64-198.18.2.100', '198.18.2.100-198.18.2.127'] }),
        want: ['ecmp.ipv4.localAddresses: ["198.18.2.64-198.18.2.100","198.18.2.100-198.18.2.127"] lists 198.18.2.100 more than once (in "198.18.2.64-198.18.2.100" and "198.18.2.100-198.18.2.127"); list each local address once'],
      },
      {
        name: 'local addresses: a prefix, a range written backwards, the other family',
        raw: tier({ slots: 3, ipv4: { nextHops: '198.18.9.64', localAddresses: ['198.18.2.64/29', '198.18.2.79-198.18.2.72', 'fd00:2::100-fd00:2::107'] }, ipv6: undefined }),
        want: [
          'ecmp.ipv4.localAddresses[0]: "198.18.2.64/29" is not an address or a first-last address range; write 198.18.2.10 or 198.18.2.10-198.18.2.13',
          'ecmp.ipv4.localAddresses[1]: "198.18.2.79-198.18.2.72" is a range whose last address comes before its first; write the lower address first',
          'ecmp.ipv4.localAddresses[2]: "fd00:2::100-fd00:2::107" is IPv6, but it is under ecmp.ipv4; give IPv4 addresses here, and IPv6 ones under ecmp.ipv6',
        ],
      },
      {
        name: 'local addresses: an empty list, and a mapping',
        raw: tier({ ipv4: { nextHops: '198.18.9.64', localAddresses: [] }, ipv6: { nextHops: 'fd00:9::64', localAddresses: { first: 'fd00:2::100' } } }),
        want: [
          'ecmp.ipv4.localAddresses: [] is empty; give one range to split evenly over the slots, e.g. 198.18.2.64-198.18.2.127, or a list of one range per slot',
          'ecmp.ipv6.localAddresses: {"first":"fd00:2::100"} is a mapping, not a range or a list; give one range to split evenly over the slots, e.g. fd00:2::100-fd00:2::17f, or a list of one range per slot',
        ],
      },
      {
        name: 'with slots bad, the addresses are still checked but not counted',
        raw: tier({ slots: 'eight', ipv4: { nextHops: ['198.18.9.64', '198.18.9.300'], localAddresses: '198.18.2.64-198.18.2.66' } }),
        want: [
          `ecmp.slots: "eight" is not a slot count (a whole number from 1 to 64); ${SLOTS}`,
          'ecmp.ipv4.nextHops[1]: "198.18.9.300" is not an IPv4 or IPv6 address; give an IPv4 address such as 198.18.0.10 or an IPv6 address such as fd00::10 (no prefix length, port or zone)',
        ],
      },

      // asn, routers
      { name: 'AS number 0', raw: tier({ asn: 0 }), want: [`ecmp.asn: 0 is not an AS number (a whole number from 1 to 4294967295); give the directors' ${ASN}`] },
      { name: 'AS number past 32 bits', raw: tier({ asn: 4294967296 }), want: [`ecmp.asn: 4294967296 is not an AS number (a whole number from 1 to 4294967295); give the directors' ${ASN}`] },
      { name: 'AS number in asdot', raw: tier({ asn: '1.10' }), want: [`ecmp.asn: "1.10" is not an AS number (a whole number from 1 to 4294967295); give the directors' ${ASN}`] },
      {
        name: 'routers: not a list, and empty',
        raw: { ...tier({ routers: { address: '198.18.9.1' } }) },
        want: ['ecmp.routers: {"address":"198.18.9.1"} is a mapping, not a list; list the upstream routers the directors peer with, e.g. routers: [{address: 198.18.9.1, asn: 65000}]'],
      },
      {
        name: 'routers: an empty list',
        raw: tier({ routers: [] }),
        want: ['ecmp.routers: [] is empty, but the tier announces its vips to the routers over BGP; list the upstream routers the directors peer with, e.g. routers: [{address: 198.18.9.1, asn: 65000}]'],
      },
      {
        name: 'routers: every problem of each',
        raw: tier({ routers: [
          '198.18.9.1',
          { address: '198.18.9.1', asn: 65000, holdTime: 9 },
          { address: '198.18.9.1', holdTimeSec: 2, keepaliveSec: -1 },
          { address: '198.18.9.2', asn: 65000, holdTimeSec: 9, keepaliveSec: 9 },
          { address: '198.18.9.3', asn: 65000, holdTimeSec: 0, keepaliveSec: 3 },
          { address: '198.18.9.4', asn: 65000, keepaliveSec: 0 },
          { address: '198.18.9.5', asn: 65000, holdTimeSec: 65536 },
        ] }),
        want: [
          'ecmp.routers[0]: "198.18.9.1" is a string, not a router; write {address: 198.18.9.1, asn: 65000}',
          'ecmp.routers[1].holdTime: 9 is not a known field; did you mean "holdTimeSec"?',
          'ecmp.routers[2].address: "198.18.9.1" is already listed by ecmp.routers[1]; list every router once',
          `ecmp.routers[2].asn: an AS number is required; give the router's ${ASN}`,
          `ecmp.routers[2].holdTimeSec: 2 ${HOLD}`,
          'ecmp.routers[2].keepaliveSec: -1 is not a keepalive interval (whole seconds, 0 = off); give whole seconds, usually a third of holdTimeSec, e.g. 3',
          'ecmp.routers[3].keepaliveSec: 9 must be less than holdTimeSec (9); give keepaliveSec from 1 to 8, usually a third of holdTimeSec (3)',
          'ecmp.routers[4].keepaliveSec: 3 is set but holdTimeSec is 0 (with the hold timer off, no keepalives are sent); set keepaliveSec to 0 or remove it, or give holdTimeSec from 3 to 65535',
          'ecmp.routers[5].keepaliveSec: 0 turns keepalives off, which only holdTimeSec 0 allows (with holdTimeSec 9 the session would drop after 9 s); give keepaliveSec from 1 to 8, usually a third of holdTimeSec (3)',
          `ecmp.routers[6].holdTimeSec: 65536 ${HOLD}`,
        ],
      },

      // attributes, preemption, announcements
      {
        name: 'attributes: every problem',
        raw: tier({ attributes: { origin: 'IGP', med: -1, communities: ['65010:100', 6501000100, '65010:0100', '70000:1', 'no-export'], localPref: 100 } }),
        want: [
          'ecmp.attributes.localPref: 100 is not a known field; known fields: origin, med, communities',
          'ecmp.attributes.origin: "IGP" is not a supported route origin; write it in lower case: igp',
          'ecmp.attributes.med: -1 is not a MED (a whole number from 0 to 4294967295); give a whole number, e.g. 0, or leave med out to send none',
          'ecmp.attributes.communities[1]: 6501000100 is not a community ("ASN:VALUE", each a whole number from 0 to 65535); write it in quotes, e.g. "65010:100"',
          'ecmp.attributes.communities[2]: "65010:0100" is already listed by ecmp.attributes.communities[0]; list every community once',
          'ecmp.attributes.communities[3]: "70000:1" is not a community ("ASN:VALUE", each a whole number from 0 to 65535); write it in quotes, e.g. "65010:100"',
          'ecmp.attributes.communities[4]: "no-export" is not a community ("ASN:VALUE", each a whole number from 0 to 65535); write it in quotes, e.g. "65010:100"',
        ],
      },
      {
        name: 'attributes: not a mapping, and communities not a list',
        raw: { ecmp: with_(TIER, { attributes: 'igp' }), services: [] },
        want: ['ecmp.attributes: "igp" is a string, not a mapping; write attributes: {origin: igp, med: 0, communities: ["65010:100"]}, or leave it out'],
      },
      {
        name: 'attributes: communities as one string',
        raw: tier({ attributes: { communities: '65010:100' } }),
        want: ['ecmp.attributes.communities: "65010:100" is a string, not a list; write a list of "ASN:VALUE" in quotes, e.g. ["65010:100"]'],
      },
      {
        name: 'preemption and announcements, checked as a vip group\'s are',
        raw: tier({ preempt: 'always', preemptDelayMs: -5, announce: { count: 0, intervalMs: 5, every: 1 } }),
        want: [
          'ecmp.preempt: "always" is not a supported preemption policy; use one of: never, after-delay, after-sync',
          'ecmp.preemptDelayMs: -5 is not a delay (whole milliseconds from 0 to 3600000); give whole milliseconds, e.g. 10000',
          'ecmp.announce.every: 1 is not a known field; known fields: count, intervalMs',
          'ecmp.announce.count: 0 is not an announcement count (1 to 100); give a whole number from 1 to 100, e.g. 3',
          'ecmp.announce.intervalMs: 5 is not an interval (10 to 60000 ms); give whole milliseconds, e.g. 200',
        ],
      },
      {
        name: 'a preemption delay with preempt never',
        raw: tier({ preempt: 'never', preemptDelayMs: 1000 }),
        want: ['ecmp.preemptDelayMs: 1000 is set but preempt is never; remove preemptDelayMs, or choose preempt: after-delay'],
      },

      // The tier's addresses against each other and the rest of the config.
      {
        name: 'next hops (counted up from one) clash with a slot\'s local addresses, a vip, a gateway and a router',
        raw: {
          ecmp: with_(TIER, { ipv4: { nextHops: '198.18.2.126', localAddresses: '198.18.2.64-198.18.2.127' }, routers: [{ address: '198.18.2.132', asn: 65000 }] }),
          vipGroups: [{ name: 'front', gateways: ['198.18.2.131'] }],
          services: [WEB, { name: 'api', vip: '198.18.2.129', port: 80, mode: 'nat', vipGroup: 'front' }, { name: 'api-tls', vip: '198.18.2.129', port: 443, mode: 'nat', vipGroup: 'front' }],
        },
        want: [
          `ecmp.ipv4.nextHops: "198.18.2.126" gives slot 0 the next hop 198.18.2.126, which is also one of the slots' local addresses (ecmp.ipv4.localAddresses); ${NEXT_HOP_FIX}`,
          `ecmp.ipv4.nextHops: "198.18.2.126" gives slot 3 the next hop 198.18.2.129, which is also the vip of services[1] ("api"); ${NEXT_HOP_FIX}`,
          `ecmp.ipv4.nextHops: "198.18.2.126" gives slot 5 the next hop 198.18.2.131, which is also a gateway of vip group "front"; ${NEXT_HOP_FIX}`,
          `ecmp.ipv4.nextHops: "198.18.2.126" gives slot 6 the next hop 198.18.2.132, which is also the address of ecmp.routers[0]; ${NEXT_HOP_FIX}`,
        ],
      },
      {
        name: 'next hops (one per slot) clash with an ECMP service\'s vip, another service\'s local addresses and a slot\'s own pool',
        raw: {
          ecmp: with_(TIER, { slots: 3, ipv4: { nextHops: ['198.18.10.10', '198.18.2.11', '198.18.2.70'], localAddresses: ['198.18.2.64-198.18.2.71', '198.18.2.72-198.18.2.79', '198.18.2.80-198.18.2.87'] }, ipv6: undefined }),
          services: [WEB, { name: 'api', vip: '198.18.0.20', port: 80, mode: 'fullnat', localAddresses: ['198.18.2.10-198.18.2.13'] }],
        },
        want: [
          `ecmp.ipv4.nextHops[0]: "198.18.10.10" is also the vip of services[0] ("web"); ${NEXT_HOP_FIX}`,
          `ecmp.ipv4.nextHops[1]: "198.18.2.11" is also one of the local addresses of services[1] ("api"); ${NEXT_HOP_FIX}`,
          `ecmp.ipv4.nextHops[2]: "198.18.2.70" is also one of slot 0's local addresses (ecmp.ipv4.localAddresses[0]); ${NEXT_HOP_FIX}`,
        ],
      },
      {
        name: 'slots\' local addresses (split from one range) clash with a service\'s local addresses, a vip, a gateway and a router',
        raw: {
          ecmp: with_(TIER, { routers: [{ address: '198.18.9.1', asn: 65000 }, { address: '198.18.2.127', asn: 65000 }] }),
          vipGroups: [{ name: 'front', gateways: ['198.18.2.100'] }],
          services: [WEB, { name: 'api', vip: '198.18.2.90', port: 80, mode: 'fullnat', vipGroup: 'front', localAddresses: ['198.18.2.60-198.18.2.65'] }],
        },
        want: [
          `ecmp.ipv4.localAddresses: "198.18.2.64-198.18.2.127" gives slot 0 198.18.2.64-198.18.2.71, which overlaps the local addresses of services[1] ("api") at 198.18.2.64; ${POOL_FIX}`,
          `ecmp.ipv4.localAddresses: "198.18.2.64-198.18.2.127" gives slot 3 198.18.2.88-198.18.2.95, which overlaps the vip of services[1] ("api") at 198.18.2.90; ${POOL_FIX}`,
          `ecmp.ipv4.localAddresses: "198.18.2.64-198.18.2.127" gives slot 4 198.18.2.96-198.18.2.103, which overlaps a gateway of vip group "front" at 198.18.2.100; ${POOL_FIX}`,
          `ecmp.ipv4.localAddresses: "198.18.2.64-198.18.2.127" gives slot 7 198.18.2.120-198.18.2.127, which overlaps the address of ecmp.routers[1] at 198.18.2.127; ${POOL_FIX}`,
        ],
      },
      {
        name: 'a slot\'s own range (IPv6) clashes with a service\'s local addresses',
        raw: {
          ecmp: with_(TIER, { slots: 2, ipv4: undefined, ipv6: { nextHops: 'fd00:9::64', localAddresses: ['fd00:2::100-fd00:2::10f', 'fd00:2::110-fd00:2::11f'] } }),
          services: [{ name: 'api6', vip: 'fd00::20', port: 80, mode: 'fullnat', localAddresses: ['fd00:2::118-FD00:2::120'] }],
        },
        want: [`ecmp.ipv6.localAddresses[1]: "fd00:2::110-fd00:2::11f" overlaps the local addresses of services[0] ("api6") at fd00:2::118; ${POOL_FIX}`],
      },

      // Slot group names, and services served by the tier.
      {
        name: 'vip group names slot-<n> are the slots\'',
        raw: {
          vipGroups: [{ name: 'slot-0' }, { name: 'slot-web' }],
          services: [{ name: 'api', vip: '198.18.0.20', port: 80, mode: 'nat', vipGroup: 'slot-12' }],
        },
        want: [
          'services[0].vipGroup: "slot-12" is reserved for the ECMP tier\'s slot 12 (vip group names slot-<n> are the slots\' election groups); give the vip group another name',
          'vipGroups[0].name: "slot-0" is reserved for the ECMP tier\'s slot 0 (vip group names slot-<n> are the slots\' election groups); give the vip group another name',
        ],
      },
      {
        name: 'an ECMP service: fullnat or dr, no local addresses or vip group of its own',
        raw: tier({}, [with_(WEB, { mode: 'nat', localAddresses: ['198.18.2.10'], vipGroup: 'default' })]),
        want: [
          'services[0].ecmp: true needs mode: fullnat (replies come back to the slot that took the connection, through its local addresses) or dr (replies go from the real server to the client), but mode is nat, whose replies go to the real server\'s one gateway; set mode: fullnat or dr, or ecmp: false',
          'services[0].localAddresses: ["198.18.2.10"] is set but an ECMP service (ecmp: true) uses its slots\' local addresses (ecmp.ipv4.localAddresses); remove localAddresses',
          'services[0].vipGroup: "default" is set but an ECMP service (ecmp: true) belongs to no vip group: every director serves it, through the slots it owns; remove vipGroup',
        ],
      },
      {
        name: 'ecmp is not a boolean',
        raw: tier({}, [with_(WEB, { ecmp: 'yes' })]),
        want: ['services[0].ecmp: "yes" is not true or false; write true to serve it through the ECMP tier (every director active behind BGP routers), or false to have a vip group\'s leader serve it (the default)'],
      },
      {
        name: 'an ECMP service without the tier',
        raw: { services: [WEB] },
        want: ['services[0].ecmp: true needs the ECMP tier (a top-level ecmp section), which this config does not have; add ecmp: {slots, ipv4 or ipv6, asn, routers} as in deploy/examples/ecmp/cluster.yaml, or set ecmp: false'],
      },
      {
        name: 'an IPv6 ECMP service without the tier\'s ipv6',
        raw: tier({ ipv6: undefined }, [WEB, with_(WEB, { name: 'web6', vip: 'fd00::10', realServers: [] })]),
        want: ['services[1].ecmp: true needs ecmp.ipv6 (the slots\' IPv6 next hops and local addresses) for its IPv6 vip, which the ecmp section does not have; add ecmp.ipv6: {nextHops: fd00:9::64, localAddresses: fd00:2::100-fd00:2::17f}, or set ecmp: false'],
      },
      {
        name: 'a clustered director\'s own file holds no tier: it is the cluster\'s',
        raw: { agent: { cluster: CLUSTER }, ecmp: TIER },
        want: ["ecmp: cannot be in a director's own file when agent.cluster is set: the cluster config in etcd holds it; move ecmp to a cluster config file and write it with lbadm apply -f FILE, keeping only agent: here (this director's own part of the tier is agent.cluster.ecmp)"],
      },

      // A director's own part: agent.cluster.ecmp.
      {
        name: 'agent.cluster.ecmp is not a mapping',
        raw: director('fab0'),
        want: ['agent.cluster.ecmp: "fab0" is a string, not a mapping; write ecmp: {interface: fab0, routerId: 198.18.9.11}, or leave it out'],
      },
      {
        name: 'agent.cluster.ecmp without its required fields, and a misspelt one',
        raw: director({ routerID: '198.18.9.11' }),
        want: [
          'agent.cluster.ecmp.routerID: "198.18.9.11" is not a known field; did you mean "routerId"?',
          'agent.cluster.ecmp.interface: an interface name is required; give a Linux interface name such as eth0 (at most 15 characters)',
          `agent.cluster.ecmp.routerId: a BGP router id is required; ${ROUTER_ID}`,
        ],
      },
      {
        name: 'an interface name too long, and a router id that is a name',
        raw: director({ interface: 'fabric-uplink-0001', routerId: 'dir1' }),
        want: [
          'agent.cluster.ecmp.interface: "fabric-uplink-0001" is not an interface name; give a Linux interface name such as eth0 (at most 15 characters)',
          `agent.cluster.ecmp.routerId: "dir1" is not an IPv4 address; ${ROUTER_ID}`,
        ],
      },
      {
        name: 'a slot\'s macvlan as the fabric interface, an IPv6 router id',
        raw: director({ interface: 'lbds0', routerId: 'fd00:9::11' }),
        want: [
          'agent.cluster.ecmp.interface: "lbds0" is the name of slot 0\'s macvlan (lbd names them lbds<n>); give the fabric interface the slots\' macvlans are made on, e.g. fab0',
          `agent.cluster.ecmp.routerId: "fd00:9::11" is an IPv6 address, but a BGP router id is 4 bytes written as an IPv4 address (even on an IPv6-only fabric); ${ROUTER_ID}`,
        ],
      },
      {
        name: 'router id 0.0.0.0',
        raw: director({ interface: 'fab0', routerId: '0.0.0.0' }),
        want: [`agent.cluster.ecmp.routerId: "0.0.0.0" is the unspecified address; ${ROUTER_ID}`],
      },
      {
        name: 'gobgpd\'s API over TCP while lbd-agent runs gobgpd, and runGobgpd not a boolean',
        raw: { agent: { cluster: { ...CLUSTER, ecmp: { interface: 'fab0', routerId: '198.18.9.11', gobgpApi: '127.0.0.1:50051' } } }, services: [] },
        want: ['agent.cluster.ecmp.gobgpApi: "127.0.0.1:50051" is host:port, but the gobgpd lbd-agent runs (runGobgpd: true) serves its API on a unix socket only; use a unix:///PATH address such as unix:///run/lbd/gobgpd.sock, or set runGobgpd: false to use a gobgpd already listening there'],
      },
      {
        name: 'runGobgpd is not a boolean',
        raw: director({ interface: 'fab0', routerId: '198.18.9.11', gobgpApi: '127.0.0.1:50051', runGobgpd: 'no' }),
        want: ['agent.cluster.ecmp.runGobgpd: "no" is not true or false; write true to have lbd-agent start and supervise gobgpd, false to use one already running at gobgpApi'],
      },
      ...([
        ['unix://run/lbd/gobgpd.sock', 'is not a unix socket address (unix:// followed by an absolute path); write unix:///run/lbd/gobgpd.sock (three slashes: unix:// and the path\'s own)'],
        ['unix:///run/lbd/', 'is not a unix socket address (unix:// followed by an absolute path); write unix:///run/lbd/gobgpd.sock (three slashes: unix:// and the path\'s own)'],
        [`unix:///run/${'x'.repeat(100)}.sock`, 'has a socket path of 110 bytes, longer than a unix socket\'s 107; use a shorter path, e.g. unix:///run/lbd/gobgpd.sock'],
        ['/run/lbd/gobgpd.sock', 'is a path, not a gRPC address; write unix:///run/lbd/gobgpd.sock'],
        ['fd00:9::11:50051', `is not a gRPC address (unix:///PATH, or host:port with a port from 1 to 65535); ${API_FIX}`],
        ['[198.18.9.11]:50051', `is not a gRPC address (unix:///PATH, or host:port with a port from 1 to 65535); ${API_FIX}`],
        ['127.0.0.1:0', `is not a gRPC address (unix:///PATH, or host:port with a port from 1 to 65535); ${API_FIX}`],
        ['127.0.0.1', `is not a gRPC address (unix:///PATH, or host:port with a port from 1 to 65535); ${API_FIX}`],
        ['gobgp_host:50051', `is not a gRPC address (unix:///PATH, or host:port with a port from 1 to 65535); ${API_FIX}`],
        ['[ff02::1]:50051', `is a multicast address; ${API_FIX}`],
        [50051, `is not a gRPC address (unix:///PATH or host:port); ${API_FIX}`],
      ] as const).map(([api, rule]) => ({
        name: `gobgpApi ${JSON.stringify(api).slice(0, 40)}`,
        raw: director({ interface: 'fab0', routerId: '198.18.9.11', gobgpApi: api, runGobgpd: false }),
        want: [`agent.cluster.ecmp.gobgpApi: ${JSON.stringify(api)} ${rule}`],
      })),
    ];
    for (const tc of cases) {
      it(tc.name, () => {
        assert.deepEqual(problems(tc.raw), tc.want);
        const r = validateConfig(tc.raw);
        for (const p of r.ok ? [] : r.problems) {
          // "path: VALUE rule; fix" must stay splittable: one "; " per line.
          assert.ok(!p.rule.includes(';') && !p.fix.includes(';'), `";" inside rule or fix: ${formatProblem(p)}`);
        }
      });
    }
  });
});
