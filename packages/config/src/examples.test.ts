import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseConfig } from './load.js';
import type { ClusterSettings, Config } from './types.js';

/**
 * Every example in deploy/examples/ goes through the real validator, as lbd-agent and lbadm apply would
 * read it, and each must make sense as a whole: one cluster, directors that name each other (a pair, or
 * the ECMP tier's three).
 */

const EXAMPLES = fileURLToPath(new URL('../../../deploy/examples/', import.meta.url));

interface Example {
  readonly name: string;
  readonly cluster: Config;
  readonly directors: ReadonlyArray<ClusterSettings>;
}

async function loadExample(name: string): Promise<Example> {
  const dir = join(EXAMPLES, name);
  const files = (await readdir(dir)).filter((f) => f.endsWith('.yaml')).sort();
  assert.ok(files.includes('cluster.yaml'), `${name}/ has no cluster.yaml`);
  const cluster = parseConfig(await readFile(join(dir, 'cluster.yaml'), 'utf8'), `${name}/cluster.yaml`, { cluster: true });
  const directors: ClusterSettings[] = [];
  for (const f of files.filter((x) => x !== 'cluster.yaml')) {
    const config = parseConfig(await readFile(join(dir, f), 'utf8'), `${name}/${f}`);
    const settings = config.agent.cluster;
    assert.ok(settings !== null, `${name}/${f} has no agent.cluster`);
    assert.equal(`${settings.director}.yaml`, f, `${name}/${f} configures director ${settings.director}`);
    directors.push(settings);
  }
  return { name, cluster, directors };
}

describe('deploy/examples', () => {
  let examples: Example[];
  before(async () => {
    const names = (await readdir(EXAMPLES, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name).sort();
    assert.deepEqual(names, ['dr', 'ecmp', 'fullnat', 'nat']);
    examples = await Promise.all(names.map(loadExample));
  });

  it('each is one cluster of directors (two in a pair, three in the ECMP tier) that name each other as peers', () => {
    for (const { name, directors } of examples) {
      assert.equal(directors.length, name === 'ecmp' ? 3 : 2, `${name}: number of directors`);
      assert.equal(new Set(directors.map((d) => d.director)).size, directors.length, `${name}: distinct director ids`);
      for (const self of directors) {
        assert.deepEqual(self.etcd, directors[0]!.etcd, `${name}: the same etcd members`);
        assert.equal(self.prefix, directors[0]!.prefix, `${name}: the same key prefix`);
        const others = directors.filter((d) => d !== self).map((d) => ({ id: d.director, ...d.peerListen }));
        assert.deepEqual(self.peers, others, `${name}: ${self.director} names every other director at its peerListen`);
      }
    }
  });

  it('each director has a priority in every vip group, and one of them is preferred', () => {
    for (const { name, cluster, directors } of examples) {
      const groups = cluster.vipGroups.map((g) => g.name).sort();
      for (const d of directors) assert.deepEqual(Object.keys(d.priorities).sort(), groups, `${name}: ${d.director}'s priorities`);
      for (const g of groups) {
        const best = Math.max(...directors.map((d) => d.priorities[g]!));
        assert.equal(directors.filter((d) => d.priorities[g] === best).length, 1, `${name}: equal top priorities in ${g} leave no preferred leader`);
      }
    }
  });

  it('keeps TLS material under /etc/lbd, each certificate named for its director', () => {
    for (const { name, directors } of examples) {
      for (const d of directors) {
        assert.ok(d.tls !== null, `${name}: ${d.director} has no peer-link TLS (connection sync needs it)`);
        for (const p of [d.tls.ca, d.tls.cert, d.tls.key]) assert.match(p, /^\/etc\/lbd\//);
        assert.equal(basename(d.tls.cert), `${d.director}.pem`);
        assert.equal(basename(d.tls.key), `${d.director}.key`);
      }
    }
  });

  it('the ECMP tier: every service served by its slots (fullnat and dr), every director a distinct BGP router id on the fabric', () => {
    const ecmp = examples.find((p) => p.name === 'ecmp')!;
    const tier = ecmp.cluster.ecmp;
    assert.ok(tier !== null, 'ecmp/cluster.yaml has an ecmp section');
    assert.ok(ecmp.cluster.services.length > 0);
    for (const s of ecmp.cluster.services) {
      assert.ok(s.ecmp && (s.mode === 'fullnat' || s.mode === 'dr') && s.localAddresses === null, s.name);
      assert.ok((s.family === 4 ? tier.ipv4 : tier.ipv6) !== null, `${s.name}: the tier has its family`);
    }
    // An ECMP service is in no vip group: no group's leader would claim its vip.
    assert.deepEqual(ecmp.cluster.vipGroups, []);
    for (const f of [tier.ipv4, tier.ipv6]) {
      if (f === null) continue;
      assert.equal(f.nextHops.length, tier.slots);
      assert.equal(f.localAddresses.length, tier.slots);
    }
    const ids = ecmp.directors.map((d) => d.ecmp?.routerId);
    assert.ok(ids.every((id) => id !== undefined), 'every director has agent.cluster.ecmp');
    assert.equal(new Set(ids).size, ids.length, 'distinct router ids');
    for (const d of ecmp.directors) assert.ok(!tier.routers.some((r) => r.address === d.ecmp!.routerId), `${d.director}: its router id is not the router's`);
  });

  it('the fullnat pair has SNAT pools and the nat pair a floating gateway for the replies', () => {
    const fullnat = examples.find((p) => p.name === 'fullnat')!;
    assert.ok(fullnat.cluster.services.length > 0);
    for (const s of fullnat.cluster.services) assert.ok(s.mode === 'fullnat' && s.localAddresses !== null, `${s.name}`);
    const nat = examples.find((p) => p.name === 'nat')!;
    assert.ok(nat.cluster.services.length > 0);
    for (const s of nat.cluster.services) {
      assert.equal(s.mode, 'nat', s.name);
      const group = nat.cluster.vipGroups.find((g) => g.name === s.vipGroup);
      assert.ok(group !== undefined && group.gateways.length > 0, `${s.name}: its vip group floats the real servers' gateway`);
    }
  });

  it('the dr pair: stateless services (nothing synced) whose real servers serve the vip\'s own port, and no floating gateway', () => {
    const dr = examples.find((p) => p.name === 'dr')!;
    assert.ok(dr.cluster.services.length > 0);
    for (const s of dr.cluster.services) {
      assert.ok(s.mode === 'dr' && (s.scheduler === 'mh' || s.scheduler === 'sh') && !s.sync.enabled, s.name);
      for (const rs of s.realServers) assert.equal(rs.port, s.port, `${s.name}: ${rs.address}`);
    }
    for (const g of dr.cluster.vipGroups) assert.deepEqual(g.gateways, [], `${g.name}: replies go to the router, not through a director`);
  });
});
