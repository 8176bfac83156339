import assert from 'node:assert/strict';
import { Elections } from './elections.js';
import type { PeerTransport, PromiseReply, PromiseRequest, Transition } from './group-election.js';
import { keys } from './records.js';
import { FakeClock, MemoryKv, ProcessClock } from './testing/index.js';
import { TIMING_PROFILES } from './timing.js';

/**
 * Elections of many groups per director (the ECMP tier's slots), over MemoryKv on a FakeClock: the beats
 * of every group a director leads travel as one transaction, each group's swap still lands or fails on its
 * own, and the one rule of the election holds per group at every fake millisecond: never two running
 * kernel leases.
 */

const T = TIMING_PROFILES.default;
const PREFIX = '/t';
const GROUPS = ['s0', 's1', 's2', 's3', 's4', 's5', 's6', 's7'];

interface Director {
  readonly id: string;
  readonly kv: MemoryKv;
  readonly clock: ProcessClock;
  readonly elections: Elections;
  /** group → beats etcd confirmed. */
  readonly confirmed: Map<string, number>;
  frozen: boolean;
}

class Cluster implements PeerTransport {
  readonly clock = new FakeClock(0);
  readonly store = new MemoryKv(this.clock, 250);
  readonly directors = new Map<string, Director>();
  /** group → director → where its kernel lease ends (fake ms); deleted on release. */
  readonly leases = new Map<string, Map<string, number>>();
  readonly violations: string[] = [];
  readonly transitions: Array<Transition & { id: string; at: number }> = [];

  async add(id: string, priority: number): Promise<Director> {
    const clock = new ProcessClock(this.clock);
    const kv = this.store.connect(Math.max(T.safetyWindowMs, 200));
    const confirmed = new Map<string, number>();
    const elections = new Elections({
      id, endpoints: [], prefix: PREFIX, timing: T, peers: ['a', 'b'].filter((p) => p !== id), peerAddress: `${id}:7411`, version: 't',
      transport: this, clock, kv, health: () => ({ ok: true, problems: [] }),
      onTransition: (t) => this.transitions.push({ ...t, id, at: this.clock.now() }),
      onBeat: (g, outcome) => { if (outcome === 'confirmed') confirmed.set(g, (confirmed.get(g) ?? 0) + 1); },
      hooks: {
        lease: async (g, forMs) => {
          const now = this.clock.now();
          const m = this.leases.get(g) ?? new Map<string, number>();
          for (const [other, until] of m) {
            if (other !== id && until > now && forMs > 0) this.violations.push(`${now}: ${id} leased ${g} for ${forMs} ms while ${other}'s lease ran ${until - now} ms more`);
          }
          m.set(id, now + forMs);
          this.leases.set(g, m);
        },
        claim: async () => undefined,
        release: async (g) => { this.leases.get(g)?.delete(id); },
      },
    });
    const d: Director = { id, kv, clock, elections, confirmed, frozen: false };
    this.directors.set(id, d);
    await elections.start();
    await elections.setGroups(GROUPS.map((name) => ({ name, priority, preempt: 'never' as const, preemptDelayMs: 0 })));
    return d;
  }

  async requestPromise(peerId: string, req: PromiseRequest, timeoutMs: number): Promise<PromiseReply> {
    const peer = this.directors.get(peerId);
    if (!peer || peer.frozen) {
      await new Promise((r) => this.clock.setTimeout(() => r(undefined), timeoutMs));
      throw new Error('peer unreachable');
    }
    return peer.elections.answerPromise(req);
  }

  /** Who leads each group, as its own view says (groups led by nobody left out). */
  leaders(): Map<string, string> {
    const out = new Map<string, string>();
    for (const d of this.directors.values()) {
      for (const [g, v] of Object.entries(d.elections.views())) if (v.role === 'leader' || v.role === 'fail-static') out.set(g, d.id);
    }
    return out;
  }

  /** Advances one fake millisecond at a time, checking at each that no group has two running kernel leases. */
  async run(ms: number): Promise<void> {
    for (let i = 0; i < ms; i++) {
      await this.clock.advance(1);
      const now = this.clock.now();
      for (const [g, m] of this.leases) {
        const running = [...m].filter(([, until]) => until > now).map(([id]) => id);
        if (running.length > 1) this.violations.push(`${now}: ${running.join(' and ')} hold running kernel leases for ${g}`);
      }
    }
  }

  async until(pred: () => boolean, maxMs: number, what: string): Promise<void> {
    const start = this.clock.now();
    while (!pred()) {
      if (this.clock.now() - start >= maxMs) {
        throw new Error(`no ${what} within ${maxMs} fake ms; transitions: ${JSON.stringify(this.transitions.map((t) => `${t.at} ${t.id} ${t.group} ${t.from}→${t.to}: ${t.reason}`))}`);
      }
      await this.run(1);
    }
  }

  /** Runs until every group `id` leads has had `n` more confirmed beats. */
  async beats(id: string, n: number): Promise<void> {
    const d = this.directors.get(id)!;
    const want = new Map(GROUPS.map((g) => [g, (d.confirmed.get(g) ?? 0) + n]));
    await this.until(() => GROUPS.every((g) => (d.confirmed.get(g) ?? 0) >= want.get(g)!), n * T.beatIntervalMs * 4, `${n} more confirmed beats of every group of ${id}`);
  }

  freeze(id: string): void {
    const d = this.directors.get(id)!;
    d.frozen = true;
    d.clock.freeze();
    d.kv.setFault({ kind: 'held' });
  }

  async close(): Promise<void> {
    for (const d of this.directors.values()) {
      d.kv.setFault(null);
      d.clock.thaw();
      d.frozen = false;
    }
    const closing = Promise.all([...this.directors.values()].map((d) => d.elections.close({ vacate: false })));
    for (let i = 0; i < 100 && !(await Promise.race([closing.then(() => true), this.clock.flush().then(() => false)])); i++) await this.clock.advance(10);
    await closing;
  }
}

describe('Elections of many groups (MemoryKv, FakeClock): one transaction carries every group\'s beat', () => {
  let c: Cluster;
  beforeEach(() => { c = new Cluster(); });
  afterEach(async () => {
    await c.close();
    assert.deepEqual(c.violations, [], 'never two running kernel leases for one group at one instant');
  });

  async function aLeadsAll(): Promise<void> {
    await c.add('a', 150);
    await c.add('b', 100);
    await c.until(() => GROUPS.every((g) => c.leaders().get(g) === 'a'), 2000, 'a leading every group');
    await c.beats('a', 3);
  }

  it('eight groups led by one director beat in one etcd write per interval, each group confirmed', async () => {
    await aLeadsAll();
    const a = c.directors.get('a')!;
    const before = a.elections.beatWrites();
    const revBefore = c.store.revision;
    const started = c.clock.now();
    await c.beats('a', 20);
    const after = a.elections.beatWrites();
    const transactions = after.transactions - before.transactions;
    const beats = after.beats - before.beats;
    const intervals = (c.clock.now() - started) / T.beatIntervalMs;
    assert.ok(beats >= GROUPS.length * 20, `${beats} beats sent for 8 × 20 confirmed`);
    // Lined up: one transaction carries all eight (a few rounds may not be full while one settles).
    assert.ok(transactions <= intervals + 2, `${transactions} transactions in ${intervals.toFixed(1)} beat intervals`);
    assert.ok(beats / transactions >= 7, `${(beats / transactions).toFixed(2)} beats per transaction; want about 8`);
    // And one etcd revision each: what costs etcd a raft round and an fsync.
    assert.ok(c.store.revision - revBefore <= transactions + 2, `${c.store.revision - revBefore} revisions for ${transactions} beat transactions`);
    assert.equal(c.transitions.filter((t) => t.id === 'a' && t.to !== 'leader').length, 0, 'a stayed leader of every group');
  });

  it('groups that became leaders at different times line up within one interval', async () => {
    const a = await c.add('a', 150);
    await c.until(() => GROUPS.every((g) => c.leaders().get(g) === 'a'), 2000, 'a leading every group');
    await c.beats('a', 2);
    // Take one group away and back: it leads again on a beat phase of its own.
    await a.elections.setGroups(GROUPS.filter((g) => g !== 's3').map((name) => ({ name, priority: 150, preempt: 'never' as const, preemptDelayMs: 0 })));
    await c.run(T.beatIntervalMs / 3);
    await a.elections.setGroups(GROUPS.map((name) => ({ name, priority: 150, preempt: 'never' as const, preemptDelayMs: 0 })));
    await c.until(() => c.leaders().get('s3') === 'a', 2000, 's3 led by a again');
    await c.beats('a', 2);
    const before = a.elections.beatWrites();
    await c.beats('a', 10);
    const after = a.elections.beatWrites();
    const perTxn = (after.beats - before.beats) / (after.transactions - before.transactions);
    assert.ok(perTxn >= 7, `${perTxn.toFixed(2)} beats per transaction after s3 rejoined; want about 8`);
  });

  it('a group whose record another director swapped loses only its own beat; the others in its transaction land', async () => {
    await aLeadsAll();
    const a = c.directors.get('a')!;
    // Another writer moves s5's record (a director x, not running here): a's next beat for s5 finds the
    // revision moved and steps down from s5 alone.
    const k = keys(PREFIX).leader('s5');
    const cur = c.store.peek(k)!;
    const theirs = { ...JSON.parse(cur.value), director: 'x', term: 99, beat: 1 };
    const res = await c.store.swap(k, cur.rev, JSON.stringify(theirs));
    assert.ok(res.ok);
    await c.until(() => c.transitions.some((t) => t.id === 'a' && t.group === 's5' && t.from === 'leader'), 1000, 'a stepping down from s5');
    const others = GROUPS.filter((g) => g !== 's5');
    const want = new Map(others.map((g) => [g, (a.confirmed.get(g) ?? 0) + 5]));
    await c.until(() => others.every((g) => (a.confirmed.get(g) ?? 0) >= want.get(g)!), 5 * T.beatIntervalMs * 4, '5 more beats of the other groups');
    assert.deepEqual(c.transitions.filter((t) => t.id === 'a' && t.group !== 's5' && t.from === 'leader'), [], 'a left no other group');
  });

  it('a frozen director\'s every group: its kernel leases end before the standby takes any over', async () => {
    await aLeadsAll();
    c.freeze('a');
    await c.until(() => GROUPS.every((g) => c.leaders().get(g) === 'b'), 3000, 'b leading every group');
    // The invariant (afterEach) was checked at every fake millisecond of the takeovers.
    const b = c.directors.get('b')!;
    await c.beats('b', 3);
    const before = b.elections.beatWrites();
    await c.beats('b', 5);
    const after = b.elections.beatWrites();
    assert.ok((after.beats - before.beats) / (after.transactions - before.transactions) >= 7, 'b\'s beats line up too');
  });
});
