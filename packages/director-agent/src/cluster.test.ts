import assert from 'node:assert/strict';
import { ConfigError } from '@lbd/config';
import { DataPlaneError } from '@lbd/dataplane';
import type { LbdEvent } from '@lbd/config';
import { AgentError } from '@lbd/operator-surfaces';
import { LoopbackCluster, frontConfig } from '@lbd/testkit';
import { startClusterPair, stopClusterPair, type PairMember } from './testing/cluster-pair.js';
import { TIMING_PROFILES, worstCaseTakeoverMs } from '@lbd/coordinator';

/**
 * Two clustered agents in this process against a real etcd on loopback, with fake data planes and fake
 * address owners: the agent's side of a cluster (config from etcd, claims on the election's word, health
 * resignations, applies that swap on the revision) without namespaces. The kernel side is exercised by
 * test/src/ha.privileged.test.ts.
 */

const CLUSTER_CONFIG = frontConfig();
/**
 * A bound on waiting for a move's sign (the other director holds the group), not a speed the test asserts:
 * these moves need no takeover wait, but a box the full suite keeps busy can delay etcd and both agents by
 * seconds. Whether a move was "at once" is what its recorded reason says (vacant, resigned), not its time.
 */
const MOVE_BOUND_MS = 15_000;

function waitFor(pred: () => boolean, ms: number, what: string): Promise<void> {
  const start = Date.now();
  return new Promise((resolve, reject) => {
    const tick = (): void => {
      if (pred()) return resolve();
      if (Date.now() - start > ms) return reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
      setTimeout(tick, 5);
    };
    tick();
  });
}

type Member = PairMember;

describe('clustered lbd-agents (real etcd on loopback, fake kernel)', function () {
  this.timeout(30_000);
  let cluster: LoopbackCluster;
  const members: Member[] = [];

  const holder = (): string[] => members.filter((m) => m.owner.held.size > 0).map((m) => m.id);

  /** `of`'s problems as `from` sees them: the registration record follows a resignation by a moment. */
  async function publishedProblems(from: Member, of: string): Promise<string[] | undefined> {
    let problems: string[] | undefined;
    for (let i = 0; i < 100 && problems?.length !== 1; i++) {
      problems = (await from.agent.admin.clusterStatus()).directors!.find((d) => d.id === of)?.problems;
      if (problems?.length !== 1) await new Promise((r) => setTimeout(r, 10));
    }
    return problems;
  }

  before(async () => {
    cluster = await LoopbackCluster.open('lbd-cluster');
  });
  beforeEach(async () => {
    await startClusterPair(await cluster.writePairConfigs({ track: true }), {}, members);
  });
  afterEach(() => stopClusterPair(members));
  after(() => cluster?.close());

  it('an apply through one director reaches both; the leader alone holds the group\'s vips, local addresses and gateway', async () => {
    const [a, b] = members as [Member, Member];
    assert.equal(a.agent.revision, 0, 'nothing applied before the cluster has a config');
    const out = await a.agent.admin.applyText(CLUSTER_CONFIG, 'cluster.yaml', false, { author: 'test@host' });
    assert.ok(out.ok);
    assert.equal(out.clusterRevision, 1);
    await waitFor(() => a.agent.revision === 1 && b.agent.revision === 1, 5000, 'both directors to run revision 1');
    assert.equal(b.dp.applied.services.length, 1);
    await waitFor(() => holder().length === 1, 5000, 'a leader to claim');
    const leader = members.find((m) => m.owner.held.size > 0)!;
    assert.deepEqual(leader.owner.held.get('front')?.map((x) => `${x.address}%${x.ifname}`), [
      '198.18.0.10%eth0', '198.19.1.100%eth1', '198.19.1.101%eth1', '198.19.1.250%eth1',
    ]);
    const st = await b.agent.admin.clusterStatus();
    assert.equal(st.clustered, true);
    assert.deepEqual(st.directors!.map((d) => d.id), ['dir1', 'dir2']);
    assert.equal(st.groups![0]?.leader, leader.id);
    assert.equal(st.worstCaseTakeoverMs, worstCaseTakeoverMs(TIMING_PROFILES.default));
    // The kernel guards every floating address on both directors and serves them only on the leader.
    const standby = members.find((m) => m !== leader)!;
    for (const m of members) assert.deepEqual([...m.owner.guarded.keys()], ['front'], `${m.id} guards the group`);
    // The sign that the kernel would serve: a lease with time left (a confirmed beat renews it).
    await waitFor(() => leader.owner.leased('front'), 5000, 'the leader to hold a kernel lease');
    assert.ok(!standby.owner.leases.has('front'), 'the standby has none');
    const leaderCalls = leader.owner.calls.map((c) => c.op);
    assert.ok(leaderCalls.indexOf('lease') < leaderCalls.indexOf('claim'), `leased before claiming: ${leaderCalls.join(', ')}`);
    // Read from the leader: its own lease is local, where a peer's comes by a ping a loaded box may not answer
    // within the status's 300 ms (shown as -1, unknown).
    const rows = (await leader.agent.admin.clusterStatus()).directors!.map((d) => [d.id, d.groups![0]?.kernelLeaseLeftMs ?? -2]);
    // At most 280 ms past a confirmed beat; a leader that etcd did not answer for a window (a loaded box) runs
    // fail-static on its peer's promise, of two safety windows.
    const longest = Math.max(280, 2 * st.safetyWindowMs!);
    for (const [id, left] of rows) {
      if (id === leader.id) assert.ok(Number(left) >= 0 && Number(left) <= longest, `the leader's lease is shown (${String(left)} ms, at most ${longest})`);
      else assert.equal(left, -1, 'the standby holds no lease');
    }
    const hist = await a.agent.admin.configHistory();
    assert.deepEqual(hist.versions!.map((v) => [v.revision, v.author, v.serviceCount]), [[1, 'test@host', 1]]);
  });

  it('a cluster config with agent settings, or a stale revision, is refused and writes nothing', async () => {
    const [a] = members as [Member, Member];
    const bad = await a.agent.admin.applyText(`agent: { adminSocket: /run/x.sock }\n${CLUSTER_CONFIG}`, 'bad.yaml', false);
    assert.equal(bad.ok, false);
    assert.ok(!bad.ok && bad.error instanceof ConfigError);
    assert.match(!bad.ok ? bad.error.message : '', /agent: is per director and cannot be part of the cluster config/);
    assert.deepEqual((await a.agent.admin.configHistory()).versions!, []);
    assert.ok((await a.agent.admin.applyText(CLUSTER_CONFIG, 'c.yaml', false)).ok);
    await assert.rejects(a.agent.admin.applyText(CLUSTER_CONFIG, 'c.yaml', false, { expectRevision: 0 }),
      (err: unknown) => err instanceof AgentError && err.kind === 'Conflict' && /at revision 1, not 0/.test(err.message));
    assert.equal((await a.agent.admin.configHistory()).versions!.length, 1);
  });

  it('a leader whose vip interface goes down, or whose data plane fails, resigns; the other takes over at once', async () => {
    await members[0]!.agent.admin.applyText(CLUSTER_CONFIG, 'c.yaml', false);
    await waitFor(() => holder().length === 1, 5000, 'a leader');
    const first = members.find((m) => m.owner.held.size > 0)!;
    const second = members.find((m) => m !== first)!;
    first.owner.setLink('eth0', false);
    await waitFor(() => holder()[0] === second.id, MOVE_BOUND_MS, 'the other director to lead');
    const problems = await publishedProblems(second, first.id);
    assert.deepEqual(problems, ['interface eth0 is down']);
    first.owner.setLink('eth0', true);

    // Now the data plane of the new leader refuses the next apply: it resigns too.
    second.dp.failNextApply = new DataPlaneError('InvalidRuleset', 'apply', { detail: 'test' });
    await first.agent.admin.applyText(CLUSTER_CONFIG.replace('port: 8080', 'port: 8081'), 'c2.yaml', false);
    await waitFor(() => holder()[0] === first.id, MOVE_BOUND_MS, 'the first director to lead again');
  });

  it('a leader whose track check fails resigns, and says why', async () => {
    await members[0]!.agent.admin.applyText(CLUSTER_CONFIG, 'c.yaml', false);
    await waitFor(() => holder().length === 1, 5000, 'a leader');
    const first = members.find((m) => m.owner.held.size > 0)!;
    const second = members.find((m) => m !== first)!;
    await first.failTrack();
    await waitFor(() => holder()[0] === second.id, MOVE_BOUND_MS, 'the other director to lead');
    const problems = await publishedProblems(second, first.id);
    assert.match(problems?.[0] ?? '', /^track check uplink: exec .*: exit 1 \(1 failure\)$/);
  });

  it('a failover and an apply leave a trail: role and vip events with reasons on both, the caller\'s admin event, one cluster history in etcd', async () => {
    const [a, b] = members as [Member, Member];
    await a.agent.admin.applyText(CLUSTER_CONFIG, 'c.yaml', false, { author: 'alice@ops1', caller: { role: 'write', name: 'unix-socket' } });
    await waitFor(() => holder().length === 1, 5000, 'a leader');
    const first = members.find((m) => m.owner.held.size > 0)!;
    const second = members.find((m) => m !== first)!;
    // A failover goes only to a director registered healthy in the group: wait for the sign that both are.
    let registered = false;
    for (const end = Date.now() + 15_000; !registered && Date.now() < end;) {
      const st = await b.agent.admin.clusterStatus();
      registered = st.directors!.filter((d) => d.healthy && d.priorities!.front !== undefined).length === 2;
      if (!registered) await new Promise((r) => setTimeout(r, 10));
    }
    assert.ok(registered, 'both directors registered healthy in the group within 15 s');
    const since = Date.now();
    const moved = await b.agent.admin.failover('front', '', 'bob@ops2', { role: 'write', name: 'ops-bob' });
    assert.deepEqual([moved.from, moved.to], [first.id, second.id]);
    await waitFor(() => holder()[0] === second.id, MOVE_BOUND_MS, 'the other director to hold the vips');

    const newest = (m: Member, kind: string, subject: string) => m.agent.events.recent(since).filter((e) => e.kind === kind && e.subject === subject).at(-1);
    await waitFor(() => newest(first, 'vip', '198.18.0.10')?.to === 'released', MOVE_BOUND_MS, 'the old leader\'s vip event');
    const gone = newest(first, 'role', 'front')!;
    assert.deepEqual([gone.from, gone.to], ['leader', 'standby']);
    assert.match(gone.reason, new RegExp(`^handed over to ${second.id}: lbadm failover`), 'why am I backup: handed over by a failover');
    assert.match(newest(first, 'vip', '198.18.0.10')!.reason, new RegExp(`^vip group front released: handed over to ${second.id}`));
    const won = newest(second, 'role', 'front')!;
    assert.deepEqual([won.from, won.to], ['standby', 'leader']);
    assert.match(won.reason, new RegExp(`handed over by ${first.id}`));
    assert.equal(newest(second, 'vip', '198.19.1.250')?.to, 'held', 'the gateway too');
    const admin = newest(b, 'admin', 'failover')!;
    assert.deepEqual([admin.to, admin.fields.author, admin.fields.caller, admin.fields.from, admin.fields.to], ['done', 'bob@ops2', 'ops-bob', first.id, second.id]);
    assert.match(admin.reason, new RegExp(`^bob@ops2 \\(ops-bob\\) moved vip group front from ${first.id} to ${second.id} in \\d+ ms$`));

    // The cluster scope: every director's events from etcd, one timeline, each event once.
    const listed: LbdEvent[] = [];
    let ended = false;
    await waitFor(() => a.agent.events.recent(0).length > 0, 10, 'events');
    const read = async (): Promise<void> => {
      listed.length = 0;
      ended = false;
      await a.agent.admin.listEvents({ sinceUnixMs: 0, follow: false, scope: 'cluster', limit: 1000, kind: '', director: '' }, {
        event: (e) => listed.push(e), end: () => { ended = true; }, fail: (err) => { throw err; },
      });
    };
    for (let i = 0; i < 100; i++) {
      await read();
      if (listed.some((e) => e.director === 'dir2' && e.kind === 'role') && listed.some((e) => e.director === 'dir1' && e.kind === 'role')) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(ended);
    assert.deepEqual([...new Set(listed.map((e) => e.director))].sort(), ['dir1', 'dir2']);
    assert.equal(new Set(listed.map((e) => e.id)).size, listed.length, 'no event twice');
    assert.deepEqual(listed.map((e) => e.timeUnixMs), [...listed.map((e) => e.timeUnixMs)].sort((x, y) => x - y), 'oldest first');
    const configs = listed.filter((e) => e.kind === 'config' && e.to === 'applied');
    // Each director, applying the revision from etcd, names its author and what the writer said of it (the file).
    assert.deepEqual(configs.map((e) => [e.director, e.fields.author, e.fields.revision, e.fields.changes, e.fields.comment]).sort(),
      [['dir1', 'alice@ops1', '1', '+web', 'c.yaml'], ['dir2', 'alice@ops1', '1', '+web', 'c.yaml']]);
    const wrote = listed.find((e) => e.kind === 'admin' && e.subject === 'apply')!;
    assert.deepEqual([wrote.director, wrote.to, wrote.fields.author, wrote.fields.caller], ['dir1', 'done', 'alice@ops1', 'unix-socket']);
    const dir2Only: LbdEvent[] = [];
    await a.agent.admin.listEvents({ sinceUnixMs: 0, follow: false, scope: 'cluster', limit: 1000, kind: 'role', director: 'dir2' }, {
      event: (e) => dir2Only.push(e), end: () => undefined, fail: () => undefined,
    });
    assert.ok(dir2Only.length > 0 && dir2Only.every((e) => e.director === 'dir2' && e.kind === 'role'));
  });

  it('following the cluster history shows another director\'s new events, each once', async () => {
    const [a, b] = members as [Member, Member];
    await a.agent.admin.applyText(CLUSTER_CONFIG, 'c.yaml', false);
    await waitFor(() => a.agent.revision === 1 && b.agent.revision === 1, 5000, 'both on revision 1');
    const got: LbdEvent[] = [];
    const stop = await a.agent.admin.listEvents({ sinceUnixMs: Date.now() + 3_600_000, follow: true, scope: 'cluster', limit: 1000, kind: 'drill', director: '' }, {
      event: (e) => got.push(e), end: () => undefined, fail: (err) => { throw err; },
    });
    b.agent.admin.recordDrill({ scenario: 'switchover', result: 'pass', reason: 'from dir2', fields: {} }, { role: 'write', name: 'lab' });
    a.agent.admin.recordDrill({ scenario: 'kill-agent', result: 'fail', reason: 'from dir1', fields: {} }, { role: 'write', name: 'lab' });
    await waitFor(() => got.length === 2, 5000, 'both drills, dir1\'s from its own log and dir2\'s through etcd');
    await new Promise((r) => setTimeout(r, 300)); // dir1's own event reaches etcd too: it must not come twice
    stop();
    assert.deepEqual(got.map((e) => `${e.director} ${e.reason}`).sort(), ['dir1 from dir1', 'dir2 from dir2']);
  });

  it('stopping the leader hands its group over at once', async () => {
    await members[0]!.agent.admin.applyText(CLUSTER_CONFIG, 'c.yaml', false);
    await waitFor(() => holder().length === 1, 5000, 'a leader');
    const first = members.find((m) => m.owner.held.size > 0)!;
    await first.agent.stop('test');
    await waitFor(() => holder().length === 1 && holder()[0] !== first.id, MOVE_BOUND_MS, 'the other director to lead');
    const other = members.find((m) => m !== first)!;
    // Elected on the vacancy, not after a takeover wait.
    assert.match((await other.agent.admin.clusterStatus()).groups![0]?.reason ?? '', new RegExp(`^vacant: ${first.id} resigned: agent stopping`));
    assert.ok(first.owner.calls.some((c) => c.op === 'close' && c.releaseAll));
  });
});

describe('clustered lbd-agents on etcd with mutual TLS (real etcd on loopback with --client-cert-auth, fake kernel)', function () {
  this.timeout(30_000);
  let cluster: LoopbackCluster;
  const members: PairMember[] = [];

  before(async () => { cluster = await LoopbackCluster.open('lbd-etcd-tls', { etcdTls: true }); });
  afterEach(() => stopClusterPair(members));
  after(() => cluster?.close());

  it('each director reaches etcd with its client certificate (main thread, election thread, event history): an apply reaches both, one leads', async () => {
    assert.match(cluster.endpoint, /^https:/);
    await startClusterPair(await cluster.writePairConfigs(), {}, members);
    const [a, b] = members as [PairMember, PairMember];
    const out = await a.agent.admin.applyText(CLUSTER_CONFIG, 'cluster.yaml', false, { author: 'test@host' });
    assert.ok(out.ok);
    await waitFor(() => a.agent.revision === 1 && b.agent.revision === 1, 5000, 'both directors to run revision 1');
    await waitFor(() => members.filter((m) => m.owner.held.size > 0).length === 1, 5000, 'a leader to claim');
    const st = await b.agent.admin.clusterStatus();
    assert.deepEqual([st.etcdReachable, st.directors!.map((d) => d.id)], [true, ['dir1', 'dir2']]);
    assert.ok(st.etcdEndpoints!.every((e) => e.startsWith('https://')));
  });
});
