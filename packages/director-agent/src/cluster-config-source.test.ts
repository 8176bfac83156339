import assert from 'node:assert/strict';
import { parseConfig } from '@lbd/config';
import { FakeCoordinator } from '@lbd/coordinator/testing';
import { FakeDataPlane } from '@lbd/dataplane/testing';
import { FakeClock, FakeProber } from '@lbd/health-checker/testing';
import { silentLogger } from '@lbd/log';
import { ClusterConfigSource } from './cluster-config-source.js';
import type { ElectionHostFactory } from './election-thread.js';
import { EventLog } from './events.js';
import { HealthManager } from './health.js';
import { Reconciler } from './reconciler.js';

const FILE = `agent:
  cluster:
    director: dir1
    etcd: [http://127.0.0.1:2379]
    prefix: /lbd/test
    interfaces: { vip: eth0, local: eth1 }
    peerListen: 127.0.0.1:7001
    peers: [{ id: dir2, address: "127.0.0.1:7002" }]
`;

const SERVICES = `services:
  - name: web
    vip: 198.18.0.10
    port: 80
    mode: nat
    realServers:
      - { address: 198.19.1.11, port: 8080 }
`;

/** A cluster member that is never started here: these tests never join, so no election runs. */
const noElection: ElectionHostFactory = () => { throw new Error('the election is not started in these tests'); };

/** The cluster config source over the FakeCoordinator: what it writes, refuses and reads, without etcd. */
describe('ClusterConfigSource', () => {
  let coordinator: FakeCoordinator;
  let dp: FakeDataPlane;
  let events: EventLog;
  let reconciler: Reconciler;
  let source: ClusterConfigSource;
  beforeEach(() => {
    const file = parseConfig(FILE, 'lbd.yaml');
    coordinator = new FakeCoordinator();
    dp = new FakeDataPlane();
    events = new EventLog({ director: 'dir1' });
    const clock = new FakeClock(0);
    const health = new HealthManager({ prober: new FakeProber(clock), clock, log: silentLogger });
    reconciler = new Reconciler({
      dataPlane: dp, health, clock, batchMs: 20, events, log: silentLogger, now: () => new Date(),
      initial: { config: file, sha256: '', source: 'lbd.yaml', revision: 0 },
    });
    source = new ClusterConfigSource({
      reconciler, coordinator, fileAgent: file.agent, events, log: silentLogger,
      member: { settings: file.agent.cluster!, version: 'test', election: noElection, log: silentLogger, events, dataPlaneProblem: () => null },
    });
  });

  it('an apply is written by compare-and-swap and answered once this director applied it from the watch', async () => {
    // What the cluster member does once it joined: hand every cluster config to the source.
    const stop = await coordinator.watchConfig((c) => { if (c !== null) void reconciler.serialize(() => source.applyFromCluster(c)); });
    const out = await source.apply(SERVICES, 'web.yaml', false, { author: 'alice' });
    await stop();
    assert.ok(out.ok);
    assert.equal(out.clusterRevision, 1);
    assert.equal(reconciler.running.revision, 1);
    assert.equal(dp.applied.services.length, 1);
    assert.equal((await source.read()).revision, 1);
    assert.deepEqual((await source.history()).versions!.map((v) => [v.revision, v.author, v.serviceCount]), [[1, 'alice', 1]]);
    const admin = events.recent(0).filter((e) => e.kind === 'admin');
    assert.deepEqual(admin.map((e) => [e.subject, e.to]), [['apply', 'done']]);
  });

  it('a stale revision, an unknown rollback and an unreachable etcd are refused with why, and write nothing', async () => {
    await coordinator.writeConfig({ text: SERVICES, author: 'bob', at: 1, comment: '' }, 0);
    await assert.rejects(source.apply(SERVICES, 'web.yaml', false, { expectRevision: 0 }), { kind: 'Conflict' });
    await assert.rejects(source.rollback(7, 'alice'), { kind: 'NotFound' });
    coordinator.setUnreachable(true);
    await assert.rejects(source.read(), { kind: 'EtcdUnavailable' });
    await assert.rejects(source.apply(SERVICES, 'web.yaml', false, { expectRevision: 1 }), { kind: 'EtcdUnavailable' });
    coordinator.setUnreachable(false);
    assert.equal((await coordinator.configHistory()).length, 1);
    assert.deepEqual(events.recent(0).map((e) => [e.subject, e.to]), [['apply', 'refused'], ['rollback', 'refused'], ['apply', 'refused']]);
  });

  it('a config with agent settings is rejected whole: nothing is written', async () => {
    const out = await source.apply(`${FILE}${SERVICES}`, 'all.yaml', false, {});
    assert.equal(out.ok, false);
    assert.equal(await coordinator.currentConfig(), null);
    assert.equal(reconciler.lastApplyRecord?.result, 'rejected');
  });
});
