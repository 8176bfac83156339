import assert from 'node:assert/strict';
import { GroupElection, type PeerTransport, type PromiseReply, type PromiseRequest, type Transition } from './group-election.js';
import type { PreemptPolicy } from '@lbd/config';
import { keys, type DirectorRecord } from './records.js';
import { FakeClock, MemoryKv, ProcessClock } from './testing/index.js';
import { TIMING_PROFILES, type ElectionTiming } from './timing.js';

/**
 * Scenarios: two or three directors' GroupElections in one process, over one MemoryKv (each director on its
 * own link, which can fail) and one FakeClock. The kernel lease is modelled from the `lease` hook (it runs
 * until now + forMs on the fake clock; a release ends it), and the harness checks at every fake millisecond,
 * and at every lease write, that no two directors hold a running lease for the group: the one thing the
 * election must never allow, whatever the scenario is about. To show that something does not happen, a
 * scenario waits for something that must come after it (more confirmed beats), never for a fixed time.
 */

const T = TIMING_PROFILES.default;
const G = 'g';
const K = keys('/t');

interface Node {
  readonly id: string;
  readonly priority: number;
  readonly kv: MemoryKv;
  readonly clock: ProcessClock;
  readonly election: GroupElection;
  health: { ok: boolean; problems: string[] };
  synced: string | null;
  frozen: boolean;
  confirmed: number;
  /** Beats that failed (no answer within their deadline). */
  failed: number;
}

class Harness implements PeerTransport {
  /** `timing` is not checked here: a test may pass an unsafe one to see the invariant check fire. */
  constructor(private readonly t: ElectionTiming = T) {}
  readonly clock = new FakeClock(0);
  readonly store = new MemoryKv(this.clock, 250);
  readonly nodes = new Map<string, Node>();
  /** Directors cut from their peers (promise requests to or from them go unanswered). */
  readonly cut = new Set<string>();
  /** director → where its kernel lease ends (fake clock); deleted on release. */
  readonly leases = new Map<string, number>();
  readonly holders = new Set<string>();
  readonly violations: string[] = [];
  readonly transitions: Array<Transition & { id: string; at: number }> = [];
  readonly leaseWrites: Array<{ id: string; at: number; forMs: number }> = [];
  /** How late every promise request is answered (a busy peer). */
  replyDelayMs = 0;

  async add(id: string, priority: number, o: { preempt?: PreemptPolicy; preemptDelayMs?: number; peers?: string[]; synced?: string | null } = {}): Promise<Node> {
    const clock = new ProcessClock(this.clock);
    const kv = this.store.connect(Math.max(this.t.safetyWindowMs, 200));
    const peers = o.peers ?? ['a', 'b'].filter((p) => p !== id);
    let node: Node | undefined;
    const election = new GroupElection({ name: G, priority, preempt: o.preempt ?? 'never', preemptDelayMs: o.preemptDelayMs ?? 0 }, {
      self: id, kv, clock, timing: this.t, keys: K, transport: this, peers: () => peers,
      directors: () => this.directors(), health: () => node!.health, syncedFor: () => node!.synced,
      onTransition: (t) => this.transitions.push({ ...t, id, at: this.clock.now() }),
      onBeat: (_g, outcome) => {
        if (outcome === 'confirmed') node!.confirmed++;
        if (outcome === 'failed') node!.failed++;
      },
      hooks: {
        lease: async (_g, forMs) => {
          const now = this.clock.now();
          this.leaseWrites.push({ id, at: now, forMs });
          for (const [other, until] of this.leases) {
            if (other !== id && until > now && forMs > 0) this.violations.push(`${now}: ${id} leased ${G} for ${forMs} ms while ${other}'s lease ran ${until - now} ms more`);
          }
          this.leases.set(id, now + forMs);
        },
        claim: async () => { this.holders.add(id); },
        release: async () => { this.leases.delete(id); this.holders.delete(id); },
        beforeHandover: async () => undefined,
      },
    });
    node = { id, priority, kv, clock, election, health: { ok: true, problems: [] }, synced: o.synced ?? null, frozen: false, confirmed: 0, failed: 0 };
    this.nodes.set(id, node);
    await election.start();
    return node;
  }

  directors(): ReadonlyMap<string, DirectorRecord> {
    return new Map([...this.nodes.values()].map((n) => [n.id, {
      id: n.id, version: 't', peerAddress: '', priorities: { [G]: n.priority }, healthy: n.health.ok, problems: n.health.problems, groups: {}, updatedAt: 0,
    }]));
  }

  async requestPromise(peerId: string, req: PromiseRequest, timeoutMs: number): Promise<PromiseReply> {
    const peer = this.nodes.get(peerId);
    if (!peer || peer.frozen || this.cut.has(peerId) || this.cut.has(req.from)) {
      await new Promise((r) => this.clock.setTimeout(() => r(undefined), timeoutMs));
      throw new Error('peer unreachable');
    }
    // A busy peer: its main thread gets to the request late, and its reply crosses back late.
    if (this.replyDelayMs > 0) await new Promise((r) => this.clock.setTimeout(() => r(undefined), this.replyDelayMs));
    return peer.election.answerPromise(req);
  }

  /** Directors whose kernel lease runs now. */
  leased(): string[] {
    const now = this.clock.now();
    return [...this.leases].filter(([, until]) => until > now).map(([id]) => id).sort();
  }

  held(): string[] {
    return [...this.holders].sort();
  }

  node(id: string): Node {
    return this.nodes.get(id)!;
  }

  /** Advances one fake millisecond at a time, checking the lease invariant at each. */
  async run(ms: number): Promise<void> {
    for (let i = 0; i < ms; i++) {
      await this.clock.advance(1);
      const leased = this.leased();
      if (leased.length > 1) this.violations.push(`${this.clock.now()}: ${leased.join(' and ')} hold running kernel leases for ${G}`);
    }
  }

  /** Runs until `pred` holds (checked every fake millisecond); fails after `maxMs`. Returns the fake ms it took. */
  async until(pred: () => boolean, maxMs: number, what: string): Promise<number> {
    const start = this.clock.now();
    while (!pred()) {
      if (this.clock.now() - start >= maxMs) {
        throw new Error(`no ${what} within ${maxMs} fake ms; transitions: ${JSON.stringify(this.transitions.map((t) => `${t.at} ${t.id} ${t.from}→${t.to}: ${t.reason}`))}`);
      }
      await this.run(1);
    }
    return this.clock.now() - start;
  }

  /** Runs until `id` has had `n` more beats confirmed: what shows that nothing else happened meanwhile. */
  async beats(id: string, n: number): Promise<void> {
    const node = this.node(id);
    const want = node.confirmed + n;
    await this.until(() => node.confirmed >= want, n * T.beatIntervalMs * 4, `${n} more confirmed beats of ${id}`);
  }

  freeze(id: string): void {
    const n = this.node(id);
    n.frozen = true;
    n.clock.freeze();
    n.kv.setFault({ kind: 'held' });
  }

  thaw(id: string): void {
    const n = this.node(id);
    n.frozen = false;
    n.kv.setFault(null);
    n.clock.thaw();
  }

  transitionsOf(id: string): Array<Transition & { at: number }> {
    return this.transitions.filter((t) => t.id === id);
  }

  async close(): Promise<void> {
    for (const n of this.nodes.values()) {
      n.kv.setFault(null);
      n.clock.thaw();
      n.frozen = false;
    }
    this.store.setStoreFault(null);
    const stopping = Promise.all([...this.nodes.values()].map((n) => n.election.stop({ vacate: false })));
    // Stops wait for transitions in progress, which may wait on the fake clock.
    for (let i = 0; i < 100 && !(await Promise.race([stopping.then(() => true), this.clock.flush().then(() => false)])); i++) await this.clock.advance(10);
    await stopping;
  }
}

describe('GroupElection scenarios (MemoryKv, FakeClock: no etcd, no sleeps)', () => {
  let h: Harness;
  beforeEach(() => { h = new Harness(); });
  afterEach(async () => {
    await h.close();
    assert.deepEqual(h.violations, [], 'never two running kernel leases at one instant');
  });

  /** a (150) leads, b (100) stands by and has seen a few beats. */
  async function aLeadsBStandsBy(): Promise<void> {
    await h.add('a', 150);
    await h.add('b', 100);
    await h.until(() => h.held().join() === 'a', 1000, 'a leading');
    await h.beats('a', 3);
    assert.deepEqual(h.leased(), ['a']);
  }

  it('the better candidate is elected; the other waits its rank delay and stands by', async () => {
    await h.add('b', 100);
    await h.add('a', 150);
    const took = await h.until(() => h.held().length > 0, 1000, 'a leader');
    assert.deepEqual(h.held(), ['a']);
    assert.ok(took <= T.fenceCheckMs, `elected after ${took} ms`);
    assert.match(h.transitionsOf('a')[0]!.reason, /^elected: no leader yet/);
    await h.beats('a', 10);
    assert.deepEqual(h.transitionsOf('b'), []);
    assert.equal(h.node('b').election.view().leader, 'a');
  });

  it('a leader cut from etcd (not from its peer) fences within its window; the standby takes over after takeoverAfterMs', async () => {
    await aLeadsBStandsBy();
    const lastSend = h.node('a').election.state().lastConfirmedSend;
    h.node('a').kv.setFault({ kind: 'unreachable' });
    const cutAt = h.clock.now();
    await h.until(() => !h.held().includes('a'), 1000, 'a to release');
    const released = h.clock.now();
    assert.ok(released - lastSend <= T.safetyWindowMs + T.fenceCheckMs, `released ${released - lastSend} ms after its last confirmed send`);
    const fence = h.transitionsOf('a').find((t) => t.to === 'standby');
    assert.match(fence?.reason ?? '', /^fenced: no etcd confirmation for \d+ ms, not every peer vouches \(b: b reaches etcd: the leader is the one cut off\)$/);
    await h.until(() => h.held().join() === 'b', 1000, 'b to take over');
    const took = h.clock.now() - lastSend;
    assert.ok(took >= T.takeoverAfterMs, `b took over ${took} ms after a's last confirmed send`);
    assert.match(h.transitionsOf('b').find((t) => t.to === 'leader')?.reason ?? '', /^took over: no beat from a for \d+ ms$/);
    // a comes back: it sees b's record and stays standby.
    h.node('a').kv.setFault(null);
    await h.beats('b', 10);
    assert.deepEqual(h.held(), ['b']);
    assert.equal(h.node('a').election.view().leader, 'b');
    assert.equal(h.transitionsOf('a').filter((t) => t.to === 'leader').length, 1, 'a led once (before the cut)');
    console.log(`      (cut → a released after ${released - cutAt} ms, b leading ${h.transitionsOf('b').at(-1)!.at - released} ms after that)`);
  });

  it('the whole etcd frozen: the leader goes fail-static on its peer\'s promise and keeps its lease; all well after', async () => {
    await aLeadsBStandsBy();
    h.store.setStoreFault({ kind: 'unreachable' });
    await h.until(() => h.node('a').election.view().role === 'fail-static', 1000, 'a fail-static');
    assert.match(h.transitionsOf('a').at(-1)!.reason, /^etcd unreachable for \d+ ms; peers b cannot reach it either, keeping the vips$/);
    // Two seconds of frozen etcd: a's lease runs at every instant (the promises carry it), b never leads.
    for (let i = 0; i < 2000; i += 10) {
      await h.run(10);
      assert.deepEqual(h.leased(), ['a'], `a's lease at ${h.clock.now()}`);
    }
    h.store.setStoreFault(null);
    await h.until(() => h.node('a').election.view().role === 'leader', 1000, 'a leading on etcd again');
    assert.equal(h.transitionsOf('a').at(-1)!.reason, 'etcd confirms beats again');
    await h.beats('a', 10);
    assert.deepEqual(h.held(), ['a']);
    assert.deepEqual(h.transitionsOf('b'), [], 'b never led');
  });

  it('the whole etcd frozen, the peer answering 50 ms late (a busy box): a\'s lease still runs at every instant', async () => {
    // The first promise of an episode comes a probe's timeout after the ask, and with 50 ms more it came after
    // the lease it had to carry ran out; a lease renewed only on the next tick, and only once a promise
    // gained a beat, let it run out (seen in etcd-outage drills beside busy loops: a 30 ms gap in service).
    await aLeadsBStandsBy();
    h.replyDelayMs = 50;
    h.store.setStoreFault({ kind: 'unreachable' });
    for (let i = 0; i < 2000; i += 5) {
      await h.run(5);
      assert.deepEqual(h.leased(), ['a'], `a's lease at ${h.clock.now()}`);
    }
    assert.equal(h.node('a').election.view().role, 'fail-static');
    h.store.setStoreFault(null);
    await h.until(() => h.node('a').election.view().role === 'leader', 1000, 'a leading on etcd again');
    assert.deepEqual(h.transitionsOf('b'), [], 'b never led');
  });

  it('etcd fails just after the peer\'s probe succeeded (its first refusal predates the outage): a waits for a fresh look, goes fail-static, nothing moves', async () => {
    // An etcd outage does not reach every client at once (members stop one by one). Here a is cut first, b
    // refuses a's first request on a probe that etcd still answered, then etcd is gone for b too. b is busy
    // (its replies come 50 ms late), so its promises come after the window: a fenced on the old refusal,
    // and with etcd gone nobody could take over (2.9 s without service in an etcd-outage drill beside a
    // busy core). A refusal decides the fence only once a later request, sent after b's probe had to be
    // fresh again, was refused too.
    await aLeadsBStandsBy();
    h.replyDelayMs = 50;
    h.node('a').kv.setFault({ kind: 'unreachable' });
    await h.until(() => /reaches etcd/.test(h.node('a').election.state().peerAnswers.get('b') ?? ''), 1000, 'b to refuse a');
    h.store.setStoreFault({ kind: 'unreachable' });
    await h.until(() => h.node('a').election.view().role === 'fail-static', 1000, 'a fail-static');
    assert.match(h.transitionsOf('a').at(-1)!.reason, /^etcd unreachable for \d+ ms; peers b cannot reach it either, keeping the vips$/);
    for (let i = 0; i < 1000; i += 10) {
      await h.run(10);
      assert.deepEqual(h.leased(), ['a'], `a's lease at ${h.clock.now()}`);
    }
    h.store.setStoreFault(null);
    h.node('a').kv.setFault(null);
    await h.until(() => h.node('a').election.view().role === 'leader', 1000, 'a leading on etcd again');
    await h.beats('a', 10);
    assert.deepEqual(h.held(), ['a']);
    assert.deepEqual(h.transitionsOf('b'), [], 'b never led');
  });

  it('a frozen leader (no timers, no answers) loses its kernel lease on time; the standby takes over only after it ended', async () => {
    await aLeadsBStandsBy();
    const lastSend = h.node('a').election.state().lastConfirmedSend;
    h.freeze('a');
    await h.until(() => h.held().includes('b'), 2000, 'b to take over');
    const aLeaseEnd = lastSend + T.safetyWindowMs + T.fenceCheckMs + T.maxReleaseMs;
    const bLeased = h.leaseWrites.find((w) => w.id === 'b')!.at;
    assert.ok(bLeased >= aLeaseEnd, `b leased at ${bLeased}, a's lease ran to ${aLeaseEnd}`);
    assert.deepEqual(h.held(), ['a', 'b'], 'a, frozen, still has its addresses: the kernel no longer serves them');
    assert.deepEqual(h.leased(), ['b']);
    // a thaws a second later: its held answers and timers run late; it lets go without leasing again.
    await h.run(1000);
    h.thaw('a');
    await h.until(() => !h.held().includes('a'), 100, 'a to release');
    assert.match(h.transitionsOf('a').at(-1)!.reason, /^(fenced: no etcd confirmation|superseded: b holds the record now)/);
    await h.beats('b', 10);
    assert.deepEqual(h.held(), ['b']);
  });

  it('a leader cut from its peer only keeps the group: nothing moves', async () => {
    await aLeadsBStandsBy();
    h.cut.add('a');
    await h.beats('a', 30);
    assert.deepEqual(h.held(), ['a']);
    assert.deepEqual(h.transitionsOf('a').map((t) => t.to), ['leader']);
    assert.deepEqual(h.transitionsOf('b'), []);
  });

  it('a beat that lands but whose answer is lost: the try beside it finds it landed and confirms from its send; nothing moves', async () => {
    await aLeadsBStandsBy();
    h.node('a').kv.loseAnswers(1);
    const lease = h.node('a').election.state().leaseUntil;
    // The second try of the same beat (a beat interval later) swaps on the same revision, finds the first
    // one's record there and renews the lease from the first try's send, well within the window.
    await h.until(() => h.node('a').election.state().leaseUntil > lease + T.beatIntervalMs, 1000, 'a\'s lease renewed past the lost answer');
    await h.beats('a', 10);
    assert.deepEqual(h.transitionsOf('a').map((t) => t.to), ['leader']);
    assert.deepEqual(h.held(), ['a']);
    assert.deepEqual(h.transitionsOf('b'), []);
  });

  it('a beat whose packet is lost (it lands after its deadline) on a slow link: the try beside it lands first; nothing moves', async () => {
    await aLeadsBStandsBy();
    const node = h.node('a');
    const fails = node.failed;
    // Every call of a's takes 60 ms, and one beat 220 ms. One try at a time, the retry would go out at the
    // lost one's deadline (150 ms) and land 60 ms later: past the window. Beside it, a beat interval in, it
    // lands at 135 ms.
    node.kv.setFault({ kind: 'slow', ms: 60 });
    node.kv.delayWrites(1, 220);
    await h.until(() => node.failed > fails, 1000, 'the delayed beat to fail at its deadline');
    await h.beats('a', 10);
    node.kv.setFault(null);
    assert.deepEqual(h.transitionsOf('a').map((t) => t.to), ['leader']);
    assert.deepEqual(h.held(), ['a']);
    assert.deepEqual(h.transitionsOf('b'), []);
  });

  it('a slow etcd (beats land after their deadline): the peer sees them landing and promises; nothing moves', async () => {
    await aLeadsBStandsBy();
    h.store.setStoreFault({ kind: 'slow', ms: 2 * T.beatIntervalMs + 30 });
    await h.until(() => h.node('a').election.view().role === 'fail-static', 2000, 'a fail-static');
    await h.run(1500);
    assert.deepEqual(h.leased(), ['a']);
    assert.deepEqual(h.transitionsOf('b'), []);
    h.store.setStoreFault(null);
    await h.until(() => h.node('a').election.view().role === 'leader', 1000, 'a leading on etcd again');
    await h.beats('a', 5);
    assert.deepEqual(h.held(), ['a']);
  });

  it('etcd takes no writes but answers reads: the peer\'s probe is a write, so it promises; the leader keeps the group', async () => {
    await aLeadsBStandsBy();
    h.store.setStoreFault({ kind: 'writes-stalled' });
    await h.until(() => h.node('a').election.view().role === 'fail-static', 2000, 'a fail-static');
    h.store.setStoreFault(null);
    await h.until(() => h.node('a').election.view().role === 'leader', 1000, 'a leading on etcd again');
    await h.beats('a', 5);
    assert.deepEqual(h.transitionsOf('a').map((t) => t.to), ['leader', 'fail-static', 'leader']);
    assert.deepEqual(h.held(), ['a']);
    assert.deepEqual(h.transitionsOf('b'), []);
  });

  it('an unhealthy leader resigns at once; the standby is elected on the vacancy without waiting', async () => {
    await aLeadsBStandsBy();
    h.node('a').health = { ok: false, problems: ['interface eth0 down'] };
    h.node('a').election.healthChanged();
    const took = await h.until(() => h.held().join() === 'b', 1000, 'b leading');
    assert.ok(took < T.takeoverAfterMs / 2, `b leading ${took} ms after a resigned`);
    assert.match(h.transitionsOf('b').at(-1)!.reason, /^elected: vacant: a resigned: unhealthy: interface eth0 down/);
    assert.deepEqual(h.transitionsOf('a').at(-1), { group: G, from: 'leader', to: 'unhealthy', reason: 'unhealthy: interface eth0 down', id: 'a', at: h.transitionsOf('a').at(-1)!.at });
  });

  it('planned handover: the leader releases, names the target at beat 0, the target claims at once', async () => {
    await aLeadsBStandsBy();
    const asked = h.clock.now();
    await h.store.put(K.handoff(G), JSON.stringify({ to: 'b', reason: 'lbadm failover', at: 1 }));
    await h.until(() => h.held().join() === 'b', 1000, 'b leading');
    assert.ok(h.clock.now() - asked <= 2 * T.fenceCheckMs, `switchover took ${h.clock.now() - asked} fake ms`);
    assert.equal(h.transitionsOf('a').at(-1)!.reason, 'handed over to b: lbadm failover');
    assert.equal(h.transitionsOf('b').at(-1)!.reason, 'took over: handed over by a: lbadm failover');
    await h.beats('b', 10);
    assert.deepEqual(h.held(), ['b']);
    assert.equal(h.store.peek(K.handoff(G)), null, 'the request is consumed');
  });

  it('a handover target that dies before its first beat: the old leader takes the group back after 3 × takeoverAfterMs', async () => {
    await aLeadsBStandsBy();
    h.freeze('b');
    h.cut.add('b');
    await h.store.put(K.handoff(G), JSON.stringify({ to: 'b', reason: 'lbadm failover', at: 1 }));
    await h.until(() => h.transitionsOf('a').at(-1)?.to === 'standby', 100, 'a to hand over');
    const handed = h.transitionsOf('a').at(-1)!.at;
    await h.until(() => h.held().join() === 'a', 3 * T.takeoverAfterMs + 100, 'a to take the group back');
    assert.ok(h.clock.now() - handed >= 3 * T.takeoverAfterMs, `took back after ${h.clock.now() - handed} ms`);
    assert.match(h.transitionsOf('a').at(-1)!.reason, /^took over: no beat from b for \d+ ms$/);
  });

  it('the invariant check works: with takeoverAfterMs below the kernel lease, a frozen leader\'s lease overlaps its successor\'s', async () => {
    const unsafe = new Harness({ ...T, takeoverAfterMs: T.safetyWindowMs - 50 });
    await unsafe.add('a', 150);
    await unsafe.add('b', 100);
    await unsafe.until(() => unsafe.held().join() === 'a', 1000, 'a leading');
    await unsafe.beats('a', 3);
    unsafe.freeze('a');
    await unsafe.until(() => unsafe.held().includes('b'), 2000, 'b to take over');
    await unsafe.close();
    assert.ok(unsafe.violations.some((v) => /b leased g for \d+ ms while a's lease ran \d+ ms more/.test(v)), JSON.stringify(unsafe.violations));
    assert.ok(unsafe.violations.some((v) => /a and b hold running kernel leases/.test(v)), JSON.stringify(unsafe.violations));
  });

  describe('preemption', () => {
    it('after-delay: the better director takes the group back once the delay has run, by handover', async () => {
      await h.add('b', 100);
      await h.until(() => h.held().join() === 'b', 1000, 'b leading');
      const joined = h.clock.now();
      await h.add('a', 150, { preempt: 'after-delay', preemptDelayMs: 500 });
      await h.until(() => h.held().join() === 'a', 2000, 'a to preempt');
      assert.ok(h.clock.now() - joined >= 500, `preempted ${h.clock.now() - joined} ms after joining`);
      assert.match(h.transitionsOf('a').at(-1)!.reason, /^took over: handed over by b: preempt: priority 150 > 100 of b \(after-delay\)$/);
    });

    it('after-sync: waits past the delay while its copy of the connections is incomplete, says why once', async () => {
      await h.add('b', 100);
      await h.until(() => h.held().join() === 'b', 1000, 'b leading');
      const a = await h.add('a', 150, { preempt: 'after-sync', preemptDelayMs: 200, synced: 'snapshot from b in progress' });
      await h.until(() => h.transitionsOf('a').length > 0, 1000, 'the wait explained');
      assert.equal(h.transitionsOf('a')[0]!.reason, 'preempt waits: snapshot from b in progress');
      await h.beats('b', 20);
      assert.deepEqual(h.held(), ['b']);
      assert.equal(h.transitionsOf('a').length, 1, 'explained once');
      a.synced = null;
      await h.until(() => h.held().join() === 'a', 1000, 'a to preempt');
      assert.match(h.transitionsOf('a').at(-1)!.reason, /preempt: priority 150 > 100 of b \(after-sync, connections synced\)$/);
    });

    it('never: a returning better director stays standby', async () => {
      await h.add('b', 100);
      await h.until(() => h.held().join() === 'b', 1000, 'b leading');
      await h.add('a', 150, { preempt: 'never' });
      await h.beats('b', 30);
      assert.deepEqual(h.held(), ['b']);
      assert.deepEqual(h.transitionsOf('a'), []);
    });
  });

  it('three directors: the leader dies; of the two standbys the better one takes over, the other follows it', async () => {
    await h.add('a', 150, { peers: ['b', 'c'] });
    await h.add('b', 100, { peers: ['a', 'c'] });
    await h.add('c', 120, { peers: ['a', 'b'] });
    await h.until(() => h.held().join() === 'a', 1000, 'a leading');
    await h.beats('a', 3);
    h.freeze('a');
    h.cut.add('a');
    await h.until(() => h.leased().length === 1 && h.leased()[0] !== 'a', 2000, 'a new leader');
    assert.deepEqual(h.leased(), ['c']);
    await h.beats('c', 10);
    assert.deepEqual(h.transitionsOf('b'), []);
    assert.equal(h.node('b').election.view().leader, 'c');
  });
});
