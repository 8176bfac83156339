import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseConfig } from './load.js';
import type { ClusterSettings, Config } from './types.js';

/**
 * Every example in deploy/examples/ goes through the real validator, as lbd-agent and lbadm apply would
 * read it, and each pair must make sense as a pair: one cluster, two directors that name each other.
 */

const EXAMPLES = fileURLToPath(new URL('../../../deploy/examples/', import.meta.url));

interface Pair {
  readonly name: string;
  readonly cluster: Config;
  readonly directors: ReadonlyArray<ClusterSettings>;
}

async function loadPair(name: string): Promise<Pair> {
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
  let pairs: Pair[];
  before(async () => {
    const names = (await readdir(EXAMPLES, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name).sort();
    assert.deepEqual(names, ['fullnat', 'nat']);
    pairs = await Promise.all(names.map(loadPair));
  });

  it('each pair is one cluster of two directors that name each other as peers', () => {
    for (const { name, directors } of pairs) {
      assert.equal(directors.length, 2, `${name}: two directors`);
      const [a, b] = directors as [ClusterSettings, ClusterSettings];
      assert.notEqual(a.director, b.director);
      assert.deepEqual(a.etcd, b.etcd, `${name}: the same etcd members`);
      assert.equal(a.prefix, b.prefix, `${name}: the same key prefix`);
      for (const [self, other] of [[a, b], [b, a]] as const) {
        assert.deepEqual(self.peers, [{ id: other.director, ...other.peerListen }], `${name}: ${self.director} names ${other.director} at its peerListen`);
      }
    }
  });

  it('each director has a priority in every vip group, and one of them is preferred', () => {
    for (const { name, cluster, directors } of pairs) {
      const groups = cluster.vipGroups.map((g) => g.name).sort();
      for (const d of directors) assert.deepEqual(Object.keys(d.priorities).sort(), groups, `${name}: ${d.director}'s priorities`);
      for (const g of groups) {
        assert.notEqual(directors[0]!.priorities[g], directors[1]!.priorities[g], `${name}: equal priorities in ${g} leave no preferred leader`);
      }
    }
  });

  it('keeps TLS material under /etc/lbd, each certificate named for its director', () => {
    for (const { name, directors } of pairs) {
      for (const d of directors) {
        assert.ok(d.tls !== null, `${name}: ${d.director} has no peer-link TLS (connection sync needs it)`);
        for (const p of [d.tls.ca, d.tls.cert, d.tls.key]) assert.match(p, /^\/etc\/lbd\//);
        assert.equal(basename(d.tls.cert), `${d.director}.pem`);
        assert.equal(basename(d.tls.key), `${d.director}.key`);
      }
    }
  });

  it('the fullnat pair has SNAT pools and the nat pair a floating gateway for the replies', () => {
    const fullnat = pairs.find((p) => p.name === 'fullnat')!;
    assert.ok(fullnat.cluster.services.length > 0);
    for (const s of fullnat.cluster.services) assert.ok(s.mode === 'fullnat' && s.localAddresses !== null, `${s.name}`);
    const nat = pairs.find((p) => p.name === 'nat')!;
    assert.ok(nat.cluster.services.length > 0);
    for (const s of nat.cluster.services) {
      assert.equal(s.mode, 'nat', s.name);
      const group = nat.cluster.vipGroups.find((g) => g.name === s.vipGroup);
      assert.ok(group !== undefined && group.gateways.length > 0, `${s.name}: its vip group floats the real servers' gateway`);
    }
  });
});
