import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { parseConfig, type Service } from '@lbd/config';
import { diffTables, MAP_NAMES, renderFullScript } from './model.js';
import { planTables } from './plan.js';

/** The sample services behind the golden rulesets (testdata/*.nft); also loaded by the privileged tests. */
export const GOLDEN_CONFIG = `
services:
  - name: web
    vip: 198.18.0.10
    port: 80
    mode: fullnat
    scheduler: wrr
    localAddresses: [198.19.1.100-198.19.1.103]
    connectionLimit: 1000
    realServers:
      - { address: 198.19.1.11, port: 8080, weight: 1 }
      - { address: 198.19.1.12, port: 8080, weight: 2 }
      - { address: 198.19.1.13, port: 8080, weight: 0 }
  - name: web-nat
    vip: 198.18.0.11
    port: 80
    mode: nat
    scheduler: rr
    persistenceSec: 300
    realServers:
      - { address: 198.19.1.11, port: 8080 }
      - { address: 198.19.1.12, port: 8080 }
  - name: dns
    vip: 198.18.0.10
    port: 53
    protocol: udp
    mode: fullnat
    scheduler: sh
    localAddresses: [198.19.1.100]
    realServers:
      - { address: 198.19.1.11, port: 5353 }
      - { address: 198.19.1.12, port: 5353 }
  - name: web6
    vip: fd00:0:0:10::10
    port: 80
    mode: fullnat
    scheduler: mh
    localAddresses: [fd00:0:0:2::100]
    synProxy: true
    sync: { enabled: false }
    connectionLimit: 20000
    realServers:
      - { address: fd00:0:0:2::11, port: 8080 }
      - { address: fd00:0:0:2::12, port: 8080 }
  - name: empty
    vip: 198.18.0.12
    port: 443
    mode: nat
    realServers: []
  - name: refused
    vip: 198.18.0.12
    port: 80
    mode: nat
    fallback: reject
    realServers:
      - { address: 198.19.1.11, port: 8080, weight: 0 }
  - name: sorry
    vip: 198.18.0.12
    port: 8000
    mode: nat
    fallback: sorry-server
    sorryServer: { address: 198.19.1.99, port: 8080 }
    realServers:
      - { address: 198.19.1.11, port: 8080, weight: 0 }
  - name: web-dr
    vip: 198.18.0.13
    port: 80
    mode: dr
    realServers:
      - { address: 198.19.1.11 }
      - { address: 198.19.1.12, weight: 2 }
      - { address: 198.19.1.13, weight: 0 }
  - name: dns-dr
    vip: 198.18.0.13
    port: 53
    protocol: udp
    mode: dr
    scheduler: sh
    fallback: reject
    realServers:
      - { address: 198.19.1.11, weight: 0 }
  - name: web6-dr
    vip: fd00:0:0:10::10
    port: 443
    mode: dr
    realServers:
      - { address: fd00:0:0:2::11 }
      - { address: fd00:0:0:2::12 }
  - name: web-proxied
    vip: 198.18.0.14
    port: 443
    mode: nat
    scheduler: mh
    synProxy: true
    sync: { enabled: false }
    connectionLimit: 1000
    realServers:
      - { address: 198.19.1.11, port: 8443 }
`;

export function goldenServices(): readonly Service[] {
  return parseConfig(GOLDEN_CONFIG, 'golden').services;
}

const golden = (name: string): URL => new URL(`../testdata/${name}`, import.meta.url);

function checkGolden(name: string, text: string): void {
  if (process.env.UPDATE_GOLDEN === '1') writeFileSync(golden(name), text);
  assert.equal(text, readFileSync(golden(name), 'utf8'), `${name} differs from the golden file (UPDATE_GOLDEN=1 to rewrite it after review)`);
}

const none = { ip: null, ip6: null };

/**
 * Ops with each element statement split into one line per element, sorted within its statement group: the
 * order of elements inside `add element` / `delete element` of one map does not change what the kernel ends with.
 */
function elementwise(ops: readonly string[]): string[] {
  const out: string[] = [];
  let group: string[] = [];
  let head = '';
  const flush = (): void => { out.push(...group.sort()); group = []; };
  for (const op of ops) {
    const m = /^((?:add|delete) element \S+ \S+ \S+) \{ (.*) \}$/.exec(op);
    if (!m) { flush(); head = ''; out.push(op); continue; }
    if (m[1] !== head) { flush(); head = m[1]!; }
    for (const e of m[2]!.split(', ')) group.push(`${m[1]} ${e}`);
  }
  flush();
  return out;
}

function withWeight(services: readonly Service[], name: string, index: number, weight: number): Service[] {
  return services.map((s) => (s.name !== name ? s : { ...s, realServers: s.realServers.map((rs, i) => (i === index ? { ...rs, weight } : rs)) }));
}

describe('rendering', () => {
  it('renders the golden rulesets (IPv4 and IPv6)', () => {
    const { models } = planTables(goldenServices(), none);
    checkGolden('golden-ip.nft', renderFullScript(models.ip, false).join('\n') + '\n');
    checkGolden('golden-ip6.nft', renderFullScript(models.ip6, false).join('\n') + '\n');
  });

  it('declares no map `typeof jhash` (nft 1.0.6 crashes listing one), and writes no dynamic map key over 16 bytes (it aborts loading one)', () => {
    const sticky6 = parseConfig('services: [{ name: sticky6, vip: "fd00:0:0:1::20", port: 80, mode: nat, persistenceSec: 60, realServers: [{ address: "fd00:0:0:2::11" }] }]', 'test').services;
    const { models } = planTables([...goldenServices(), ...sticky6], none);
    for (const family of ['ip', 'ip6'] as const) {
      const text = renderFullScript(models[family], false).join('\n');
      assert.match(text, /update @persist/, `${family}: a persistence rule to check`);
      assert.doesNotMatch(text, /typeof[^\n]*jhash/, family);
      // Every `update @map { KEY timeout ... : DATA }`: IPv6 addresses only inside a jhash.
      for (const [, key] of text.matchAll(/update @\w+ \{ (.*?) timeout \d+s : /g)) {
        assert.doesNotMatch(key!.replace(/jhash .*? mod 4294967295 seed 0x[0-9a-f]+/g, 'H'), /ip6 (saddr|daddr)/, `${family}: ${key}`);
      }
    }
  });

  it('a fragment\'s element maps answer as Maps do: size, get, has, forEach and iteration agree, and a near key misses', () => {
    const { models } = planTables(goldenServices(), none);
    let slotMaps = 0;
    for (const model of [models.ip, models.ip6]) {
      for (const frag of model.services.values()) {
        for (const name of MAP_NAMES) {
          const m = frag.elements[name];
          const entries = [...m];
          const where = `${frag.key} @${name}`;
          assert.equal(m.size, entries.length, where);
          assert.deepEqual([...m.entries()], entries, where);
          assert.deepEqual([...m.keys()], entries.map(([k]) => k), where);
          assert.deepEqual([...m.values()], entries.map(([, v]) => v), where);
          const seen: Array<[string, string]> = [];
          m.forEach((v, k, map) => { seen.push([k, v]); assert.equal(map, m, where); });
          assert.deepEqual(seen, entries, where);
          for (const [k, v] of entries) assert.ok(m.get(k) === v && m.has(k), `${where}: ${k}`);
          assert.ok(!m.has('') && m.get('nothing') === undefined, where);
          if (name !== 'slots' || m.size === 0) continue;
          slotMaps++;
          const tuple = entries[0]![0].slice(0, entries[0]![0].lastIndexOf(' . '));
          assert.deepEqual(entries.map(([k]) => k), entries.map((_, i) => `${tuple} . ${i}`), where);
          for (const near of [`${tuple} . 01`, `${tuple} . ${m.size}`, `${tuple} . -1`, `${tuple} . 0 `, `${tuple}. 0`, `${tuple} . `, tuple, `x${tuple} . 0`]) {
            assert.ok(!m.has(near) && m.get(near) === undefined, `${where}: ${JSON.stringify(near)}`);
          }
        }
      }
    }
    assert.ok(slotMaps >= 4, `slots maps looked at: ${slotMaps}`);
  });

  it('renders the same table whatever the order of services (same marks, same elements)', () => {
    const a = planTables(goldenServices(), none).models;
    const b = planTables([...goldenServices()].reverse(), none).models;
    assert.deepEqual(renderFullScript(b.ip, false).sort(), renderFullScript(a.ip, false).sort());
  });

  it('writes nothing when nothing changed, even for freshly parsed equal services', () => {
    const first = planTables(goldenServices(), none).models;
    const again = planTables(goldenServices(), first).models;
    assert.deepEqual(diffTables(first.ip, again.ip), []);
    assert.deepEqual(diffTables(first.ip6, again.ip6), []);
    assert.equal(again.ip.services.get('198.18.0.10:80/tcp'), first.ip.services.get('198.18.0.10:80/tcp'));
  });

  const diffCases: Array<{ name: string; change: (s: readonly Service[]) => Service[]; ops: string[] }> = [
    {
      name: 'a real server going quiescent (weight 0) only changes its slots',
      change: (s) => withWeight(s, 'web', 1, 0),
      ops: [
        'delete element ip lbd dispatch { 198.18.0.10 . tcp . 80 }',
        'delete element ip lbd slots { 198.18.0.10 . tcp . 80 . 0, 198.18.0.10 . tcp . 80 . 1, 198.18.0.10 . tcp . 80 . 2 }',
        'add element ip lbd slots { 198.18.0.10 . tcp . 80 . 0 : 131073 }',
        'add element ip lbd dispatch { 198.18.0.10 . tcp . 80 : jump numgen_1 }',
        'flush chain ip lbd numgen_3',
        'delete chain ip lbd numgen_3',
      ],
    },
    {
      name: 'a weight change within the same cycle length only rewrites slots',
      change: (s) => withWeight(withWeight(s, 'web', 0, 2), 'web', 1, 1),
      ops: [
        'delete element ip lbd slots { 198.18.0.10 . tcp . 80 . 0, 198.18.0.10 . tcp . 80 . 1, 198.18.0.10 . tcp . 80 . 2 }',
        'add element ip lbd slots { 198.18.0.10 . tcp . 80 . 0 : 131073, 198.18.0.10 . tcp . 80 . 1 : 131074, 198.18.0.10 . tcp . 80 . 2 : 131073 }',
      ],
    },
    {
      name: 'removing a real server deletes its elements; the others keep their marks',
      change: (s) => s.map((svc) => (svc.name !== 'web-nat' ? svc : { ...svc, realServers: svc.realServers.slice(1) })),
      ops: [
        'add chain ip lbd numgen_1_p300',
        'add rule ip lbd numgen_1_p300 ct mark set ip saddr . ip daddr . meta l4proto . th dport map @persist',
        'add rule ip lbd numgen_1_p300 meta l4proto { tcp, udp } ct mark @eligible dnat ip to ct mark map @backend_dnat',
        'add rule ip lbd numgen_1_p300 ct mark set ip daddr . meta l4proto . th dport . numgen inc mod 1 map @slots',
        'add rule ip lbd numgen_1_p300 update @persist { ip saddr . ip daddr . meta l4proto . th dport timeout 300s : ct mark }',
        'add rule ip lbd numgen_1_p300 meta l4proto { tcp, udp } dnat ip to ct mark map @backend_dnat',
        'add rule ip lbd numgen_1_p300 drop',
        'delete element ip lbd dispatch { 198.18.0.11 . tcp . 80 }',
        'delete element ip lbd slots { 198.18.0.11 . tcp . 80 . 0, 198.18.0.11 . tcp . 80 . 1 }',
        'delete element ip lbd eligible { 196609 }',
        'delete element ip lbd backend_dnat { 196609 }',
        'add element ip lbd slots { 198.18.0.11 . tcp . 80 . 0 : 196610 }',
        'add element ip lbd dispatch { 198.18.0.11 . tcp . 80 : jump numgen_1_p300 }',
        'flush chain ip lbd numgen_2_p300',
        'delete chain ip lbd numgen_2_p300',
      ],
    },
    {
      name: 'a new connection limit adds its set and chain, then the jump to it',
      change: (s) => s.map((svc) => (svc.name !== 'web-nat' ? svc : { ...svc, connectionLimit: 50 })),
      ops: [
        'add set ip lbd conns_50 { type ipv4_addr . inet_proto . inet_service; size 65536; flags dynamic; }',
        'add chain ip lbd limit_50',
        'add rule ip lbd limit_50 add @conns_50 { ip daddr . meta l4proto . th dport ct count over 50 } update @limit_stats { ip daddr . meta l4proto . th dport } drop',
        'add element ip lbd limit_dispatch { 198.18.0.11 . tcp . 80 : jump limit_50 }',
      ],
    },
    {
      name: 'a limit no service has any more goes with its set, after the jumps to it',
      change: (s) => s.map((svc) => (svc.connectionLimit !== 1000 ? svc : { ...svc, connectionLimit: null })),
      ops: [
        'delete element ip lbd limit_dispatch { 198.18.0.10 . tcp . 80, 198.18.0.14 . tcp . 443 }',
        'flush chain ip lbd limit_1000',
        'delete chain ip lbd limit_1000',
        'delete set ip lbd conns_1000',
      ],
    },
    {
      // The syn_proxy chain goes with the last service that uses it: its statement alone registers the kernel's hooks.
      name: 'turning the last SYN proxy off takes the service out of its set and map, and the syn_proxy chain goes',
      change: (s) => s.map((svc) => (svc.name !== 'web-proxied' ? svc : { ...svc, synProxy: false })),
      ops: [
        'delete element ip lbd synproxy_dispatch { 198.18.0.14 . tcp . 443 }',
        'delete element ip lbd synproxy_services { 198.18.0.14 . tcp . 443 }',
        'flush chain ip lbd syn_proxy',
        'delete chain ip lbd syn_proxy',
      ],
    },
  ];
  for (const c of diffCases) {
    it(c.name, () => {
      const before = planTables(goldenServices(), none).models;
      const after = planTables(c.change(goldenServices()), before);
      assert.deepEqual(diffTables(before.ip, after.models.ip), c.ops);
      assert.deepEqual(diffTables(before.ip6, after.models.ip6), []);
      // The same from the keys planTables says changed (how the data plane diffs: only those are looked at).
      assert.deepEqual(diffTables(before.ip, after.models.ip, after.changed.ip), c.ops);
      assert.deepEqual([...after.changed.ip6], []);
    });
  }

  it('says which services changed, came or went; diffing only those gives the whole diff', () => {
    const before = planTables(goldenServices(), none);
    const extra = parseConfig(`services:
  - { name: extra, vip: 198.18.0.20, port: 80, mode: nat, realServers: [{ address: 198.19.1.11, port: 8080 }] }
  - { name: extra6, vip: "fd00:0:0:10::20", port: 80, mode: nat, realServers: [{ address: "fd00:0:0:2::11", port: 8080 }] }`, 'extra').services;
    // web gone, dns changed, two new services (one needs a new id), the rest the same objects.
    const next = [...goldenServices().filter((svc) => svc.name !== 'web'), ...extra].map((svc) => (svc.name !== 'dns' ? svc : { ...svc, realServers: svc.realServers.slice(1) }));
    const after = planTables(next, before.models);
    assert.deepEqual([...after.changed.ip].sort(), ['198.18.0.10:53/udp', '198.18.0.10:80/tcp', '198.18.0.20:80/tcp']);
    assert.deepEqual([...after.changed.ip6], ['[fd00:0:0:10::20]:80/tcp']);
    for (const f of ['ip', 'ip6'] as const) {
      assert.deepEqual(elementwise(diffTables(before.models[f], after.models[f], after.changed[f])), elementwise(diffTables(before.models[f], after.models[f])));
    }
    // web (id 2) and its real servers are leaving, and dns's first real server; the new service took the smallest free id, web's.
    assert.deepEqual([...after.leaving.removedServices.ip], [2 << 16]);
    assert.deepEqual([...after.leaving.removed.ip].sort((a, b) => a - b), [65537, 131073, 131074, 131075]);
    assert.equal(after.models.ip.services.get('198.18.0.20:80/tcp')!.serviceId, 2);
  });

  it('planned from the services the previous plan was made of, looks only at the positions that changed, and plans the same', () => {
    // Enough services that one change is under an eighth of them (past that every service is looked up).
    const more = parseConfig(`services:\n${Array.from({ length: 24 }, (_, i) => `  - { name: more${i}, vip: 198.18.1.${i + 1}, port: 80, mode: nat, realServers: [{ address: 198.19.1.11, port: 8080 }] }`).join('\n')}`, 'more').services;
    const services = [...goldenServices(), ...more];
    const before = planTables(services, none);
    const extra = parseConfig('services:\n  - { name: extra, vip: 198.18.0.20, port: 80, mode: nat, realServers: [{ address: 198.19.1.11, port: 8080 }] }', 'extra').services[0]!;
    const cases: Array<[string, Service[]]> = [
      ['nothing changed', [...services]],
      ['one weight', withWeight(services, 'web', 1, 5)],
      ['one service replaced by another at its position', services.map((svc) => (svc.name === 'dns' ? extra : svc))],
      ['one added (the lists differ in length: every service looked up)', [...services, extra]],
      ['the order changed (every position: every service looked up)', [...services].reverse()],
    ];
    for (const [what, next] of cases) {
      const fast = planTables(next, before.models, [], services);
      const slow = planTables(next, before.models);
      for (const f of ['ip', 'ip6'] as const) {
        assert.deepEqual([...fast.models[f].services].sort(), [...slow.models[f].services].sort(), `${what}: ${f} services`);
        assert.deepEqual([...fast.changed[f]].sort(), [...slow.changed[f]].sort(), `${what}: ${f} changed`);
        assert.deepEqual(elementwise(diffTables(before.models[f], fast.models[f], fast.changed[f])), elementwise(diffTables(before.models[f], slow.models[f])), `${what}: ${f} diff`);
      }
      assert.deepEqual(fast.leaving, slow.leaving, `${what}: leaving`);
    }
    // It does look only at the positions that changed: a service that plannedFrom claims at a position (but
    // `previous` never had) is taken as planned already, where the full path adds it. (A caller that lies
    // gets this; the data plane passes what it applied.)
    const claimed = services.map((svc) => (svc.name === 'dns' ? extra : svc));
    const next = withWeight(claimed, 'web', 1, 5);
    assert.equal(planTables(next, before.models, [], claimed).models.ip.services.has('198.18.0.20:80/tcp'), false);
    assert.equal(planTables(next, before.models).models.ip.services.has('198.18.0.20:80/tcp'), true);
  });

  it('adds a new real server with the smallest free mark and reports removed ones as leaving', () => {
    const before = planTables(goldenServices(), none);
    const removed = goldenServices().map((s) => (s.name !== 'web' ? s : { ...s, expireOnRemove: true, realServers: s.realServers.slice(1) }));
    const mid = planTables(removed, before.models);
    assert.deepEqual([...mid.leaving.removed.ip], [131073]);
    assert.deepEqual(mid.leaving.expire, [131073]);
    const readded = planTables(goldenServices(), mid.models);
    assert.equal(readded.models.ip.services.get('198.18.0.10:80/tcp')!.realServerMarks.get('198.18.0.10:80/tcp|198.19.1.11#8080'), 131073);
  });

  it('drops persistence to a real server gone quiescent in a persistent service', () => {
    const before = planTables(goldenServices(), none);
    const after = planTables(withWeight(goldenServices(), 'web-nat', 0, 0), before.models);
    assert.deepEqual([...after.leaving.affinity.ip], [196609]);
    assert.deepEqual(after.leaving.expire, []);
  });
});
