import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { CLUSTER, clusterDirector, clusterTopology, etcdMember, type ClusterTopology } from './cluster-topology.js';
import { startEtcdCluster, type RunningEtcdCluster } from './etcd.js';
import { listNamespaces, namespacePids, removeOrphans, runPrefix } from './netns.js';
import { requireRoot } from './privileged.js';

/**
 * The active/standby cluster topology without lbd: the segments connect what they should, the failure
 * drills really cut and restore, and a three-member etcd runs on the management segment.
 */
describe('cluster topology and etcd cluster @privileged', function () {
  this.timeout(120_000);
  const prefix = runPrefix('lbdt', 'clu');
  const [d1, d2] = [clusterDirector(1), clusterDirector(2)];
  const vip = CLUSTER.vips.ipv4;
  let lab: ClusterTopology | undefined;
  let etcd: RunningEtcdCluster | undefined;

  before(async function () {
    await requireRoot(this, { commands: ['ping', 'etcd', 'etcdctl'] });
    await removeOrphans('lbdt');
    lab = await clusterTopology({ prefix });
  });
  after(async () => {
    await etcd?.stop();
    await lab?.topology.destroy();
  });

  /** Whether one ping from `host` to `address` is answered within half a second. */
  async function reaches(host: string, address: string): Promise<boolean> {
    const r = await lab!.topology.exec(host, 'ping', ['-c1', '-W0.5', '-n', '-q', address], { allowFailure: true });
    return r.code === 0;
  }

  async function assertReach(pairs: readonly (readonly [string, string])[], want: boolean): Promise<void> {
    const got = await Promise.all(pairs.map(([h, a]) => reaches(h, a)));
    assert.deepEqual(got, pairs.map(() => want), pairs.map(([h, a], i) => `${h} -> ${a}: ${got[i]}`).join(', '));
  }

  it('connects the client to the router and the router to both directors', async () => {
    const r = CLUSTER.router;
    await assertReach([
      [CLUSTER.client.host, r.clientIpv4], [CLUSTER.client.host, r.clientIpv6], [CLUSTER.client.host, r.frontIpv4],
      [r.host, d1.frontIpv4], [r.host, d2.frontIpv6], [d1.host, lab!.realServers[0]!.ipv4], [d2.host, lab!.realServers[2]!.ipv6],
    ], true);
  });

  it('connects each director to every etcd host and to the other director over the peer link', async () => {
    const etcdHosts = [1, 2, 3].map(etcdMember);
    await assertReach([
      ...[d1, d2].flatMap((d) => etcdHosts.flatMap((m) => [[d.host, m.ipv4], [d.host, m.ipv6]] as const)),
      [d1.host, d2.peerIpv4], [d1.host, d2.peerIpv6], [d2.host, d1.peerIpv4],
    ], true);
  });

  it('holdsAddress sees an address only on an interface that is up, cheaply', async () => {
    await lab!.topology.addAddress(d1.host, d1.frontIf, `${vip}/32`);
    assert.deepEqual([await lab!.holdsAddress(d1.host, d1.frontIf, vip), await lab!.holdsAddress(d2.host, d2.frontIf, vip)], [true, false]);
    const n = 50;
    const start = process.hrtime.bigint();
    for (let i = 0; i < n; i++) await Promise.all([lab!.holdsAddress(d1.host, d1.frontIf, vip), lab!.holdsAddress(d2.host, d2.frontIf, vip)]);
    const ms = Number(process.hrtime.bigint() - start) / 1e6 / n;
    process.stderr.write(`      (holdsAddress on both directors: ${ms.toFixed(2)} ms per sample)\n`);
  });

  it('cut front takes dir1 off the router at once, keeping its addresses; restore brings it back', async () => {
    await lab!.cut('dir1', 'front');
    await lab!.cut('dir1', 'front');
    assert.equal(await lab!.holdsAddress(d1.host, d1.frontIf, vip), false);
    await assertReach([[CLUSTER.router.host, d1.frontIpv4], [CLUSTER.router.host, vip]], false);
    await assertReach([[CLUSTER.router.host, d2.frontIpv4]], true);
    await lab!.restore('dir1', 'front');
    await lab!.restore('dir1', 'front');
    assert.equal(await lab!.holdsAddress(d1.host, d1.frontIf, vip), true);
    await assertReach([[CLUSTER.router.host, d1.frontIpv4], [CLUSTER.router.host, d1.frontIpv6], [CLUSTER.router.host, vip], [d1.host, CLUSTER.client.ipv4]], true);
  });

  it('cut etcd takes dir2 off the management segment only', async () => {
    const m = etcdMember(1);
    await lab!.cut('dir2', 'etcd');
    await assertReach([[d2.host, m.ipv4], [d2.host, m.ipv6]], false);
    await assertReach([[d1.host, m.ipv4], [d2.host, d1.peerIpv4]], true);
    await lab!.restore('dir2', 'etcd');
    await assertReach([[d2.host, m.ipv4], [d2.host, m.ipv6]], true);
  });

  it('cut peer cuts the direct link on both ends; restore puts back its IPv6 addresses too', async () => {
    await lab!.cut('dir1', 'peer');
    await assertReach([[d1.host, d2.peerIpv4], [d2.host, d1.peerIpv6]], false);
    await lab!.restore('dir2', 'peer');
    await lab!.restore('dir2', 'peer');
    await assertReach([[d1.host, d2.peerIpv4], [d1.host, d2.peerIpv6], [d2.host, d1.peerIpv6]], true);
  });

  it('killBox kills every process and holds nothing; reviveBox brings the box back without floating addresses', async () => {
    const sleeper = lab!.topology.spawn(d1.host, 'sleep', ['300']);
    await lab!.killBox('dir1');
    await lab!.killBox('dir1');
    assert.equal(await lab!.holdsAddress(d1.host, d1.frontIf, vip), false);
    assert.equal(await lab!.holdsAddress(d1.host, d1.frontIf, d1.frontIpv4), false);
    await sleeper.exited;
    assert.deepEqual(await namespacePids(lab!.topology.ns(d1.host)), []);
    await assertReach([[CLUSTER.router.host, d1.frontIpv4], [d2.host, d1.peerIpv4]], false);

    await lab!.reviveBox('dir1');
    await lab!.reviveBox('dir1');
    assert.equal(await lab!.holdsAddress(d1.host, d1.frontIf, vip), false, 'a revived box holds no floating address');
    assert.equal(await lab!.holdsAddress(d1.host, d1.frontIf, d1.frontIpv4), true);
    await assertReach([
      [CLUSTER.router.host, d1.frontIpv4], [CLUSTER.router.host, d1.frontIpv6], [d1.host, CLUSTER.client.ipv4], [d1.host, CLUSTER.client.ipv6],
      [d2.host, d1.peerIpv4], [d2.host, d1.peerIpv6], [d1.host, etcdMember(2).ipv6], [d1.host, lab!.realServers[1]!.ipv6],
    ], true);
  });

  it('reviveBox leaves a cut peer link cut', async () => {
    await lab!.cut('dir1', 'peer');
    await lab!.killBox('dir2');
    await lab!.reviveBox('dir2');
    await assertReach([[d2.host, d1.peerIpv4]], false);
    await assertReach([[d2.host, etcdMember(1).ipv4]], true);
    await lab!.restore('dir1', 'peer');
    await assertReach([[d2.host, d1.peerIpv4], [d2.host, d1.peerIpv6]], true);
  });

  it('startEtcdCluster runs three healthy members; a put survives stopping one', async () => {
    const started = Date.now();
    etcd = await startEtcdCluster(lab!.topology);
    process.stderr.write(`      (three etcd members healthy after ${Date.now() - started} ms)\n`);
    assert.deepEqual(etcd.endpoints, ['http://198.18.3.11:2379', 'http://198.18.3.12:2379', 'http://198.18.3.13:2379']);
    await etcd.etcdctl(['put', 'drill', 'one']);
    // A follower: stopping the raft leader would make reads wait out an election (the next test does that).
    const leader = await etcd.leader();
    const follower = ([1, 2, 3] as const).find((k) => k !== leader)!;
    await etcd.stopMember(follower);
    await etcd.stopMember(follower);
    assert.match((await etcd.etcdctl(['get', 'drill', '--print-value-only'])).stdout, /^one$/m);
    await etcd.startMember(follower);
    const back = etcdMember(follower);
    const fromIt = await lab!.topology.exec(back.host, 'etcdctl', ['--endpoints', back.clientUrl, 'get', 'drill', '--print-value-only']);
    assert.match(fromIt.stdout, /^one$/m);
  });

  it('stopping the leader elects another', async () => {
    const first = await etcd!.leader();
    await etcd!.stopMember(first);
    const second = await etcd!.leader();
    assert.notEqual(second, first);
    await etcd!.etcdctl(['put', 'drill', 'two']);
    await etcd!.startMember(first);
  });

  it('pause makes the whole cluster unanswering without losing data; resume brings it back', async () => {
    await etcd!.pause();
    const r = await etcd!.etcdctl(['get', 'drill'], { allowFailure: true, timeoutMs: 5000 });
    assert.notEqual(r.code, 0);
    await etcd!.resume();
    // A quorum read may need the members to re-elect after their long silence: bounded retry.
    let value = '';
    for (let i = 0; i < 50 && value === ''; i++) {
      value = (await etcd!.etcdctl(['get', 'drill', '--print-value-only'], { allowFailure: true })).stdout.trim();
    }
    assert.equal(value, 'two');
  });

  it('stop() leaves no etcd process and no data; destroy removes every namespace', async () => {
    await etcd!.stop();
    await etcd!.stop();
    for (const m of etcd!.members) assert.deepEqual(await namespacePids(lab!.topology.ns(m.host)), []);
    assert.equal(existsSync(etcd!.dataDir), false);
    await lab!.topology.destroy();
    assert.deepEqual((await listNamespaces()).filter((n) => n.startsWith(prefix)), []);
  });
});
