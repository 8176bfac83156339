import assert from 'node:assert/strict';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { startEtcd, type RunningEtcd } from '@lbd/testkit';
import { EtcdCoordinator } from './coordinator.js';
import { Elections } from './elections.js';
import { EtcdKv } from './kv.js';
import { keys } from './records.js';
import type { PeerTransport, PromiseReply, PromiseRequest, Transition } from './group-election.js';
import type { PreemptPolicy } from '@lbd/config';
import { TIMING_PROFILES } from './timing.js';

/**
 * Coordinators against a real etcd on loopback: what the etcd client does when etcd goes away. Each director
 * reaches etcd through its own TCP proxy, so a test can cut one director from etcd (a black hole: packets
 * vanish, nothing is reset) while the other still reaches it, or pause etcd itself; peers talk through an
 * in-memory transport that can be cut too. Address ownership is a map checked on every claim: two holders at
 * once is a violation, whatever the test is about. The election's own rules, and cases where the point is
 * that nothing happens (a peer cut, preemption never, after-sync waiting), are group-election.test.ts's
 * scenarios on a fake clock. Nothing here sleeps to show that nothing happened: it waits for more beats.
 */

const timing = TIMING_PROFILES.default;

/** A TCP proxy that can black-hole its traffic (sockets stay open, bytes stop flowing both ways). */
class CutProxy {
  private readonly sockets = new Set<Socket>();
  private holed = false;
  private server: Server | undefined;
  port = 0;
  constructor(private readonly target: { host: string; port: number }) {}

  async start(): Promise<void> {
    this.server = createServer((client) => {
      const upstream = createConnection(this.target);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.on('data', (b) => { if (!this.holed) upstream.write(b); });
      upstream.on('data', (b) => { if (!this.holed) client.write(b); });
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    const a = this.server.address();
    this.port = typeof a === 'object' && a ? a.port : 0;
  }

  cut(): void { this.holed = true; }
  restore(): void {
    // Bytes dropped while cut leave the HTTP/2 streams corrupt: a restored link is a fresh connection.
    this.holed = false;
    for (const s of this.sockets) s.destroy();
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

class MemoryTransport implements PeerTransport {
  readonly nodes = new Map<string, Elections>();
  readonly cut = new Set<string>();
  async requestPromise(peerId: string, req: PromiseRequest, timeoutMs: number): Promise<PromiseReply> {
    const peer = this.nodes.get(peerId);
    if (!peer || this.cut.has(peerId) || this.cut.has(req.from)) {
      await new Promise((r) => setTimeout(r, timeoutMs));
      throw new Error('peer unreachable');
    }
    return peer.answerPromise(req);
  }
}

function waitFor(pred: () => boolean, ms: number, what: string): Promise<number> {
  const start = Date.now();
  return new Promise((resolve, reject) => {
    const tick = (): void => {
      if (pred()) return resolve(Date.now() - start);
      if (Date.now() - start > ms) return reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
      setTimeout(tick, 2);
    };
    tick();
  });
}

describe('Coordinator: fenced election per vip group (real etcd on loopback)', function () {
  this.timeout(60_000);
  let etcd: RunningEtcd;
  let prefixN = 0;
  let prefix = '';
  const transport = new MemoryTransport();
  /** One director: its elections (what the agent's election thread runs) and its coordinator (the rest). */
  type Director = { c: EtcdCoordinator; e: Elections; proxy: CutProxy };
  const running: Director[] = [];
  const holders = new Map<string, Set<string>>();
  /** group → director → where its kernel lease ends (performance.now). */
  const leases = new Map<string, Map<string, number>>();
  const violations: string[] = [];
  const transitions: Array<Transition & { id: string }> = [];
  const health = new Map<string, { ok: boolean; problems: string[] }>();
  /** director → beats etcd confirmed; director → kernel lease writes. */
  const beats = new Map<string, number>();
  /** group → beats etcd confirmed (whoever led it). */
  const beatsOf = new Map<string, number>();
  const leaseWrites = new Map<string, number>();

  const held = (group = 'g'): string[] => [...(holders.get(group) ?? [])];

  /** Waits until `id` has had `n` more beats confirmed: what shows that nothing else happened meanwhile. */
  async function moreBeats(id: string, n: number): Promise<void> {
    const want = (beats.get(id) ?? 0) + n;
    await waitFor(() => (beats.get(id) ?? 0) >= want, n * timing.beatIntervalMs * 10, `${n} more confirmed beats of ${id}`);
  }

  async function director(
    id: string, priority: number,
    opts: { preempt?: PreemptPolicy; preemptDelayMs?: number; peers?: string[]; syncedFor?: (g: string) => string | null; groups?: readonly string[] } = {},
  ): Promise<Director> {
    const url = new URL(etcd.endpoints[0]!);
    const proxy = new CutProxy({ host: url.hostname, port: Number(url.port) });
    await proxy.start();
    health.set(id, { ok: true, problems: [] });
    const endpoints = [`http://127.0.0.1:${proxy.port}`];
    const c = new EtcdCoordinator({ id, endpoints, prefix, timing });
    const e = new Elections({
      id, endpoints, prefix, timing, peers: opts.peers ?? ['a', 'b'].filter((p) => p !== id),
      peerAddress: `${id}:7411`, version: 'test', transport,
      hooks: {
        // The kernel lease, modelled on this process's monotonic clock (every director here shares it): a
        // lease written while another director's still runs is the dual ownership the kernel would allow.
        lease: async (g, forMs) => {
          leaseWrites.set(id, (leaseWrites.get(id) ?? 0) + 1);
          const now = performance.now();
          for (const [other, until] of leases.get(g) ?? []) {
            if (other !== id && until > now && forMs > 0) violations.push(`${id} leased ${g} while ${other}'s lease ran ${Math.round(until - now)} ms more`);
          }
          const m = leases.get(g) ?? new Map<string, number>();
          m.set(id, now + forMs);
          leases.set(g, m);
        },
        claim: async (g) => {
          // Holding addresses is not serving them: an old leader whose kernel lease ended may still hold its
          // addresses a moment (its release is tidying up), so only the leases are checked for overlap.
          const set = holders.get(g) ?? new Set<string>();
          set.add(id);
          holders.set(g, set);
        },
        release: async (g) => {
          leases.get(g)?.delete(id);
          holders.get(g)?.delete(id);
        },
      },
      health: () => health.get(id)!,
      ...(opts.syncedFor ? { syncedFor: opts.syncedFor } : {}),
      onTransition: (t) => transitions.push({ ...t, id }),
      onBeat: (g, outcome) => {
        if (outcome !== 'confirmed') return;
        beats.set(id, (beats.get(id) ?? 0) + 1);
        beatsOf.set(g, (beatsOf.get(g) ?? 0) + 1);
      },
    });
    transport.nodes.set(id, e);
    await e.start();
    await e.setGroups((opts.groups ?? ['g']).map((name) => ({ name, priority, preempt: opts.preempt ?? 'never', preemptDelayMs: opts.preemptDelayMs ?? 0 })));
    const d = { c, e, proxy };
    running.push(d);
    return d;
  }

  /** a (priority 150) leads, b (100) stands by and has seen a few beats. */
  async function aLeadsBStandsBy(): Promise<Director> {
    const a = await director('a', 150);
    await waitFor(() => held()[0] === 'a', 3000, 'a to lead');
    const b = await director('b', 100);
    await waitFor(() => b.e.views()['g']?.leader === 'a', 3000, 'b to see a leading');
    await moreBeats('a', 3);
    return a;
  }

  before(async () => { etcd = await startEtcd(); });
  beforeEach(() => {
    prefix = `/lbd-test-${++prefixN}`;
    holders.clear();
    leases.clear();
    violations.length = 0;
    transitions.length = 0;
    transport.cut.clear();
    beats.clear();
    beatsOf.clear();
    leaseWrites.clear();
  });
  afterEach(async () => {
    await etcd.resume();
    for (const { c, e, proxy } of running.splice(0)) {
      proxy.restore();
      await e.close({ vacate: false });
      await c.close();
      await proxy.stop();
    }
    transport.nodes.clear();
  });
  after(async () => { await etcd?.stop(); });

  it('the higher priority leads; a planned failover moves the group within milliseconds, never to two holders', async () => {
    const b = await director('b', 100);
    const a = await director('a', 150);
    await waitFor(() => held().length === 1, 3000, 'a leader');
    const first = held()[0];
    const other = first === 'a' ? a : b;
    const res = await (first === 'a' ? a : b).c.failover('g');
    assert.equal(res.to, first === 'a' ? 'b' : 'a');
    await waitFor(() => held().length === 1 && held()[0] === res.to, 2000, 'the new leader to claim');
    assert.ok(res.tookMs < 1000, `switchover took ${res.tookMs} ms`);
    const status = await other.c.status(['g']);
    assert.equal(status.groups[0]!.record?.director, res.to);
    assert.deepEqual(violations, []);
  });

  it('a director whose registration vanished from etcd (its lease kept alive) writes it again', async () => {
    // What an etcd partition can leave behind: the registration expired while etcd could not hear us, a new
    // lease was granted, and its put missed the deadline. Deleting the key by hand leaves the same state.
    await director('a', 150);
    const kv = new EtcdKv(etcd.endpoints, 2000);
    const key = keys(prefix).director('a');
    const listed = async (want: boolean, what: string): Promise<void> => {
      for (let i = 0; i < 300; i++) {
        if (((await kv.get(key)) !== null) === want) return;
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error(`timed out waiting for ${what}`);
    };
    try {
      await waitFor(() => held()[0] === 'a', 3000, 'a to lead');
      await moreBeats('a', 3);
      await listed(true, 'a to register');
      // Steady: no transition will publish the record again by chance.
      await kv.delete(key);
      await listed(true, 'a to register again');
      const record = JSON.parse((await kv.get(key))!.value) as { id: string; priorities: Record<string, number> };
      assert.deepEqual([record.id, record.priorities], ['a', { g: 150 }]);
    } finally {
      kv.close();
    }
  });

  it('a leader cut from etcd (but not from its peer) releases within its window; the standby takes over; never two', async () => {
    const a = await aLeadsBStandsBy();
    a.proxy.cut();
    const released = await waitFor(() => !held().includes('a'), 3000, 'a to release');
    const tookOver = await waitFor(() => held()[0] === 'b', 3000, 'b to take over');
    // No bound on when a releases: the kernel lease (modelled in the lease hook) ends on time whatever a
    // does, and `violations` fails the test if b's lease ever began while a's still ran.
    const t = transitions.find((x) => x.id === 'a' && x.to === 'standby');
    assert.match(t?.reason ?? '', /fenced: no etcd confirmation/);
    assert.match(t?.reason ?? '', /not every peer vouches \(b: b reaches etcd/);
    assert.deepEqual(violations, []);
    console.log(`      (cut → a released after ${released} ms, b leading ${tookOver} ms after that)`);
  });

  it('the whole etcd frozen: the leader keeps the group (fail-static, its peer vouches), nothing moves, all is well after', async () => {
    await aLeadsBStandsBy();
    await etcd.pause();
    await waitFor(() => transitions.some((t) => t.id === 'a' && t.to === 'fail-static'), 3000, 'a to go fail-static');
    // Kept on its peer's promises: a renews its kernel lease from them, again and again, while etcd is frozen.
    const leased = leaseWrites.get('a') ?? 0;
    await waitFor(() => (leaseWrites.get('a') ?? 0) >= leased + 10, 5000, 'a to renew its lease 10 times on promises');
    assert.deepEqual(held(), ['a']);
    assert.equal(beats.get('b') ?? 0, 0);
    assert.match(transitions.find((t) => t.to === 'fail-static')!.reason, /peers b cannot reach it either/);
    await etcd.resume();
    await waitFor(() => transitions.some((t) => t.id === 'a' && t.to === 'leader' && /again/.test(t.reason)), 5000, 'a to lead on etcd again')
      .catch((err: Error) => { throw new Error(`${err.message}; transitions: ${JSON.stringify(transitions)}`); });
    await moreBeats('a', 10);
    assert.deepEqual(held(), ['a']);
    assert.ok(!transitions.some((t) => t.id === 'b' && t.to === 'leader'), 'b never led');
    assert.deepEqual(violations, []);
  });

  it('a dead leader (frozen: no beats, no release) is replaced after takeoverAfterMs by a standby, and only then', async () => {
    const a = await aLeadsBStandsBy();
    // Box death: a's links go down, so it holds nothing any more, and it sends nothing.
    a.proxy.cut();
    transport.cut.add('a');
    holders.get('g')!.delete('a');
    const dead = Date.now();
    await waitFor(() => held()[0] === 'b', 3000, 'b to take over');
    const took = Date.now() - dead;
    assert.ok(took >= timing.takeoverAfterMs - timing.beatIntervalMs, `b took over after ${took} ms`);
    console.log(`      (box death → b leading after ${took} ms; worst case ${timing.takeoverAfterMs + timing.fenceCheckMs} ms + etcd)`);
  });

  it('an unhealthy leader resigns at once and the standby takes the vacant group without waiting', async () => {
    await director('a', 150);
    await waitFor(() => held()[0] === 'a', 3000, 'a to lead');
    const b = await director('b', 100);
    await waitFor(() => b.e.views()['g']?.leader === 'a', 3000, 'b to see a leading');
    health.set('a', { ok: false, problems: ['interface eth0 down'] });
    running[0]!.e.healthChanged();
    await waitFor(() => held()[0] === 'b', 2000, 'b to lead');
    // Elected on the vacancy a left, not after waiting out a silent leader.
    assert.match(transitions.find((t) => t.id === 'b' && t.to === 'leader')?.reason ?? '', /^elected: vacant: a resigned: unhealthy: interface eth0 down/);
    const st = await b.c.status(['g']);
    assert.equal(st.directors.find((d) => d.id === 'a')?.healthy, false);
    assert.match(transitions.find((t) => t.id === 'a' && t.to === 'unhealthy')?.reason ?? '', /interface eth0 down/);
    assert.deepEqual(violations, []);
  });

  it('preemption after-delay: takes the group back through the handoff key, not before the delay', async () => {
    await director('b', 100);
    await waitFor(() => held()[0] === 'b', 3000, 'b to lead');
    const joined = Date.now();
    await director('a', 150, { preempt: 'after-delay', preemptDelayMs: 500 });
    await waitFor(() => held()[0] === 'a', 3000, 'a to preempt');
    assert.ok(Date.now() - joined >= 500, `not before the delay: a led ${Date.now() - joined} ms after it started`);
    assert.match(transitions.find((t) => t.id === 'a' && t.to === 'leader')?.reason ?? '', /preempt: priority 150 > 100/);
    assert.deepEqual(violations, []);
  });

  it('swapMany: each swap lands or loses on its own compare, in one transaction: those that land share one revision', async () => {
    const kv = new EtcdKv(etcd.endpoints, 2000);
    try {
      await kv.put(`${prefix}/x`, 'x0');
      await kv.put(`${prefix}/y`, 'y0');
      const x = (await kv.get(`${prefix}/x`))!;
      const y = (await kv.get(`${prefix}/y`))!;
      const rs = await kv.swapMany([
        { key: `${prefix}/x`, expectRev: x.rev, value: 'x1' },
        { key: `${prefix}/y`, expectRev: String(BigInt(y.rev) - 1n), value: 'y1' },
        { key: `${prefix}/z`, expectRev: '1', value: 'z1' },
      ]);
      assert.equal(rs[0]!.ok, true);
      assert.deepEqual(rs[1], { ok: false, current: { value: 'y0', rev: y.rev } });
      assert.deepEqual(rs[2], { ok: false, current: null });
      const landed = rs[0]!.ok ? rs[0]!.rev : '';
      assert.deepEqual(await kv.get(`${prefix}/x`), { value: 'x1', rev: landed });
      const both = await kv.swapMany([
        { key: `${prefix}/x`, expectRev: landed, value: 'x2' },
        { key: `${prefix}/y`, expectRev: y.rev, value: 'y2' },
      ]);
      // One transaction, one revision; not necessarily landed + 1: the etcd is the file's, and a lease from
      // an earlier test expiring in between takes a revision of its own.
      assert.ok(both[0]!.ok && both[1]!.ok && both[0]!.rev === both[1]!.rev && BigInt(both[0]!.rev) > BigInt(landed), JSON.stringify(both));
      const rev = both[0]!.ok ? both[0]!.rev : '';
      assert.deepEqual([await kv.get(`${prefix}/x`), await kv.get(`${prefix}/y`)], [{ value: 'x2', rev }, { value: 'y2', rev }]);
      await assert.rejects(kv.swapMany([{ key: `${prefix}/x`, expectRev: '1', value: '' }, { key: `${prefix}/x`, expectRev: '1', value: '' }]), /twice in one transaction/);
    } finally {
      kv.close();
    }
  });

  it('status: etcd is reachable though the event loop stalled past the probe\'s bound (a busy box is not a lost etcd)', async () => {
    const kv = new EtcdKv(etcd.endpoints, 2000);
    const c = new EtcdCoordinator({ id: 'stall', endpoints: etcd.endpoints, prefix, timing });
    // A stall as a saturated core or a paused process makes one, right after the ask: whether or not the
    // request went out, no answer can be read before the stall ends, when the probe's timers are due too.
    const stall = (): void => {
      const until = Date.now() + 800;
      while (Date.now() < until) { /* stalled */ }
    };
    try {
      await kv.put(`${prefix}/probe`, 'p');
      // One probe bounded at 50 ms loses to the stall: its timers fire before its answer is read.
      const single = kv.reachable(50, { read: `${prefix}/probe` });
      stall();
      assert.equal(await single, false, 'one probe across a stall: the stall, not etcd, decides');
      // The status asks again when its "no" came that late (its bound is 500 ms; the stall 800).
      const status = c.status([]);
      stall();
      assert.equal((await status).etcd.reachable, true, 'the status across a stall');
    } finally {
      kv.close();
      await c.close();
    }
  });

  it('eight groups led by one director: one etcd write per beat interval carries all their beats', async () => {
    const groups = ['s0', 's1', 's2', 's3', 's4', 's5', 's6', 's7'];
    const a = await director('a', 150, { groups });
    await director('b', 100, { groups });
    await waitFor(() => groups.every((g) => held(g)[0] === 'a'), 5000, 'a to lead every group');
    await moreBeats('a', 8 * 3);
    const kv = new EtcdKv(etcd.endpoints, 2000);
    try {
      const revision = async (): Promise<bigint> => BigInt((await kv.range(`${prefix}/`, `${prefix}0`, { deadline: Date.now() + 2000, limit: 1 })).revision);
      const writesBefore = a.e.beatWrites();
      const revBefore = await revision();
      const want = new Map(groups.map((g) => [g, (beatsOf.get(g) ?? 0) + 20]));
      await waitFor(() => groups.every((g) => (beatsOf.get(g) ?? 0) >= want.get(g)!), 20 * timing.beatIntervalMs * 10, '20 more confirmed beats of every group');
      const revEnd = await revision();
      const w = a.e.beatWrites();
      const transactions = w.transactions - writesBefore.transactions;
      const sent = w.beats - writesBefore.beats;
      assert.ok(sent / transactions >= 6, `${sent} beats in ${transactions} transactions; want about 8 per transaction`);
      // What etcd saw: the revisions in which leader records changed (each a raft round and an fsync).
      const beatRevisions = new Set<string>();
      let replayed = false;
      const watch = await kv.watchPrefixAfter(`${prefix}/groups/`, String(revBefore), {
        put: (e) => {
          if (e.key.endsWith('/leader') && BigInt(e.rev) <= revEnd) beatRevisions.add(e.rev);
          if (e.key === `${prefix}/groups/sentinel`) replayed = true;
        },
      });
      await kv.put(`${prefix}/groups/sentinel`, 'the window is over');
      await waitFor(() => replayed, 5000, 'the watch to replay the window up to the sentinel');
      await watch.cancel();
      assert.ok(beatRevisions.size <= transactions, `${beatRevisions.size} etcd revisions changed leader records; ${transactions} beat transactions were sent`);
      assert.ok(beatRevisions.size * 6 <= sent, `${beatRevisions.size} etcd revisions for ${sent} beats; want about one per 8`);
      assert.deepEqual(violations, []);
    } finally {
      kv.close();
    }
  });

  it('config: writes swap on the revision, a concurrent write loses cleanly, history and rollback', async () => {
    const a = await director('a', 100);
    const c = a.c;
    assert.equal(await c.currentConfig(), null);
    assert.deepEqual(await c.writeConfig({ text: 'services: []\n', author: 't', at: 1, comment: 'first' }, 0), { ok: true, revision: 1 });
    const [x, y] = await Promise.all([
      c.writeConfig({ text: 'x', author: 't', at: 2, comment: '' }, 1),
      c.writeConfig({ text: 'y', author: 't', at: 2, comment: '' }, 1),
    ]);
    assert.equal([x, y].filter((r) => r.ok).length, 1);
    const lost = [x, y].find((r) => !r.ok);
    assert.deepEqual(lost, { ok: false, reason: 'conflict', current: 2 });
    const hist = await c.configHistory();
    assert.deepEqual(hist.map((h) => h.revision), [1, 2]);
    const old = await c.configAt(1);
    assert.equal((await c.writeConfig({ ...old!, comment: 'rollback to 1' }, 2)).ok, true);
    assert.equal((await c.currentConfig())?.text, 'services: []\n');
  });
});
