import assert from 'node:assert/strict';
import type { GroupHolding, HeldConnection } from '@lbd/connsync';
import { drillResult, measureMove, runSwitchoverDrill, type DrillDeps, type MoveSamples } from './drill.js';

const T0 = 1_800_000_000_000;

/** `connections`: key → state, bound to rs1 unless the state says `STATE@rsN`. */
function holding(director: string, connections: Record<string, string>, times: { claimed?: number; released?: number; drops?: number } = {}): GroupHolding {
  return {
    director, role: 'leader', claimedAtUnixMs: times.claimed ?? 0, releasedAtUnixMs: times.released ?? 0, readAtUnixMs: T0,
    leaseDroppedPackets: times.drops ?? 0, connections: held(connections),
  };
}

function held(connections: Record<string, string>): Map<string, HeldConnection> {
  return new Map(Object.entries(connections).map(([key, s]) => {
    const [state = '', rs = 'rs1'] = s.split('@');
    return [key, { state, binding: `${rs}>-` }];
  }));
}

const base: MoveSamples = {
  from: 'dir1', to: 'dir2', tookMs: 80, askedAtUnixMs: T0, notMeasured: '',
  before: holding('dir1', { a: 'ESTABLISHED', b: 'ESTABLISHED', u: 'ASSURED', h: 'SYN_RECV', t: 'TIME_WAIT' }),
  oldAfter: holding('dir1', { a: 'ESTABLISHED', b: 'ESTABLISHED', u: 'ASSURED', h: 'SYN_RECV', n: 'SYN_RECV', t: 'TIME_WAIT' }, { released: T0 + 40, drops: 14 }),
  newAfter: holding('dir2', { a: 'ESTABLISHED', b: 'ESTABLISHED', u: 'ASSURED' }, { claimed: T0 + 75, drops: 5 }),
  dropsBefore: new Map([['dir1', 10], ['dir2', 3]]),
};

describe('drill switchover: what a move did, from both directors', () => {
  it('a clean move: every established connection held by the new holder, the gap from release to claim, the young connections it caught', () => {
    assert.deepEqual(measureMove(base), {
      from: 'dir1', to: 'dir2', tookMs: 80, holderlessMs: 35, establishedBefore: 3, establishedMissing: 0, youngCaught: 2, droppedPackets: 6, notMeasured: '',
    });
  });

  it('packets dropped are unmeasured when a director\'s counter could not be read before, or went back (its lease tables made anew)', () => {
    const unread = measureMove({ ...base, dropsBefore: new Map([['dir1', 10], ['dir2', -1]]) });
    assert.equal(unread.droppedPackets, -1);
    assert.match(unread.notMeasured, /the kernel's lease drops of dir2 could not be read around the move/);
    const reset = measureMove({ ...base, dropsBefore: new Map([['dir1', 20], ['dir2', 3]]) });
    assert.equal(reset.droppedPackets, -1);
    // Not a reason to fail: a drop figure is what clients may have felt, not a broken connection.
    assert.equal(drillResult('web', 'dir1', 'dir2', [reset, reset]).result, 'pass');
  });

  it('an established connection the new holder lacks is missing; one that ended before the move (gone from the old holder) is not', () => {
    const m = measureMove({
      ...base,
      oldAfter: holding('dir1', { a: 'ESTABLISHED', u: 'ASSURED' }, { released: T0 + 40 }),
      newAfter: holding('dir2', { u: 'ASSURED' }, { claimed: T0 + 75 }),
    });
    // a: open on dir1 after the move, not on dir2: broken. b: gone from dir1 too: it ended, nothing was lost.
    assert.deepEqual([m.establishedBefore, m.establishedMissing], [3, 1]);
  });

  it('one that ended during the move through the old holder (TIME_WAIT or CLOSE there, its copies removed on purpose) is not missing', () => {
    const m = measureMove({
      ...base,
      oldAfter: holding('dir1', { a: 'TIME_WAIT', b: 'CLOSE', u: 'ASSURED' }, { released: T0 + 40 }),
      newAfter: holding('dir2', { u: 'ASSURED' }, { claimed: T0 + 75 }),
    });
    assert.deepEqual([m.establishedBefore, m.establishedMissing], [3, 0]);
  });

  it('a connection the new holder holds with another binding (picked up mid-stream, scheduled afresh) is missing too', () => {
    const m = measureMove({ ...base, newAfter: holding('dir2', { a: 'ESTABLISHED@rs2', b: 'ESTABLISHED', u: 'ASSURED', h: 'SYN_RECV@rs3' }, { claimed: T0 + 75 }) });
    assert.deepEqual([m.establishedMissing, m.youngCaught], [1, 2]);
  });

  it('times from before the move are an earlier move\'s: unknown, and said so', () => {
    const m = measureMove({ ...base, oldAfter: holding('dir1', {}, { released: T0 - 5000 }) });
    assert.equal(m.holderlessMs, -1);
    assert.match(m.notMeasured, /no release by dir1 recorded since the move was asked/);
  });

  it('without the connections (sync off, a peer too old) the figures are -1 with the reason, and the drill does not pass', () => {
    const m = measureMove({ ...base, before: null, notMeasured: 'connection sync is off on dir1' });
    assert.deepEqual([m.establishedBefore, m.establishedMissing, m.youngCaught, m.holderlessMs], [-1, -1, -1, 35]);
    const r = drillResult('web', 'dir1', 'dir2', [m, m]);
    assert.equal(r.result, 'fail');
    assert.match(r.summary, /not measured: connection sync is off on dir1/);
  });

  it('runs there and back, waits until the leader holds what the visited director holds before the way back, and passes', async () => {
    const h = new FakeCluster();
    const r = await runSwitchoverDrill('web', '', h.deps());
    assert.deepEqual(h.moves, ['dir1 -> dir2', 'dir2 -> dir1']);
    assert.equal(r.result, 'pass', r.summary);
    assert.deepEqual(r.moves.map((m) => [m.from, m.to, m.establishedMissing, m.holderlessMs, m.droppedPackets]), [['dir1', 'dir2', 0, 30, 5], ['dir2', 'dir1', 0, 30, 5]]);
    // The way there named no director: every director's counter was read before it.
    assert.deepEqual(h.dropReads.slice(0, 2).sort(), ['dir1', 'dir2']);
    assert.equal(r.fields.thereDroppedPackets, '5');
    // The connection made on dir2 during the visit reached dir1 (after two polls) before the group went back.
    assert.ok(h.polls >= 2, `polled ${h.polls} times`);
    assert.equal(r.fields.brokenConnections, '0');
    assert.match(r.summary, /^switchover of web: pass; dir1 -> dir2 in 80 ms: 30 ms without a holder, 0 of 2 established connections missing, 0 too young to be copied caught, 5 packets dropped by the kernels for an address not held/);
  });

  it('a way back the group made by itself first (the leader preempting after sync, quicker than the drill) is measured as that move', async () => {
    const h = new FakeCluster();
    h.preemptsBack = true;
    const r = await runSwitchoverDrill('web', '', h.deps());
    assert.deepEqual(h.moves, ['dir1 -> dir2', 'dir2 -> dir1 (preempted)']);
    assert.equal(r.result, 'pass', r.summary);
    // Both moves' times are measured. The kernels' counters after the first move were read after the second
    // too, so the first move's figure holds both moves' drops (5 each) and the second's none: the sum is right.
    assert.deepEqual(r.moves.map((m) => [m.from, m.to, m.tookMs, m.holderlessMs, m.establishedMissing, m.droppedPackets]), [['dir1', 'dir2', 80, 30, 0, 10], ['dir2', 'dir1', -1, 30, 0, 0]]);
    assert.match(r.summary, /back dir2 -> dir1 by preemption, before the drill asked: 30 ms without a holder/);
  });

  it('names the group\'s dr services among what it did not measure: their flows are in no connection table', async () => {
    const h = new FakeCluster();
    h.drServices = ['stream-dr', 'bulk-dr'];
    const r = await runSwitchoverDrill('web', '', h.deps());
    assert.equal(r.result, 'pass', r.summary);
    assert.match(r.summary, /\(not measured: the flows of dr services stream-dr, bulk-dr: no director holds a connection of theirs, and every director sends them to the real server its slot table hashes them to\)$/);
    assert.equal(r.fields.drServices, 'stream-dr,bulk-dr');
    assert.doesNotMatch((await runSwitchoverDrill('web', '', new FakeCluster().deps())).summary, /not measured/);
  });

  it('refuses a group nobody leads, or a move to its own leader, before moving anything', async () => {
    const h = new FakeCluster();
    await assert.rejects(runSwitchoverDrill('nobody', '', h.deps()), /nobody leads nobody now/);
    await assert.rejects(runSwitchoverDrill('web', 'dir1', h.deps()), /dir1 leads web already/);
    assert.deepEqual(h.moves, []);
  });
});

/** Two directors: dir1 leads `web` with two connections; dir2 copies them; a third one is made on dir2 while it leads. */
class FakeCluster {
  readonly moves: string[] = [];
  readonly dropReads: string[] = [];
  polls = 0;
  /** The leader takes the group back by itself as soon as its copy is complete (preempt: after-sync). */
  preemptsBack = false;
  /** The group's dr services. */
  drServices: string[] = [];
  /** Each kernel's lease drops: a move drops 4 packets at the old holder (sent to it after its release) and 1 at the new. */
  private readonly drops = new Map([['dir1', 100], ['dir2', 7]]);
  private clock = T0;
  private leader = 'dir1';
  private readonly tables = new Map<string, Map<string, HeldConnection>>([
    ['dir1', held({ a: 'ESTABLISHED', b: 'ESTABLISHED' })],
    ['dir2', held({ a: 'ESTABLISHED', b: 'ESTABLISHED' })],
  ]);
  private readonly claimed = new Map<string, number>();
  private readonly released = new Map<string, number>();

  private move(from: string, target: string, how: string): void {
    this.clock += 50;
    this.released.set(from, this.clock);
    this.clock += 30;
    this.claimed.set(target, this.clock);
    this.leader = target;
    this.moves.push(`${from} -> ${target}${how}`);
    this.drops.set(from, this.drops.get(from)! + 4);
    this.drops.set(target, this.drops.get(target)! + 1);
  }

  deps(): DrillDeps {
    return {
      leaderOf: async (g) => (g === 'web' ? this.leader : null),
      failover: async (_g, to) => {
        if (to === this.leader) throw new Error(`${to} already leads web`);
        const from = this.leader;
        const target = to === '' ? (from === 'dir1' ? 'dir2' : 'dir1') : to;
        this.move(from, target, '');
        // A client connects through the visited director: dir1 gets its copy only after a while.
        if (target === 'dir2') this.tables.get('dir2')!.set('c', { state: 'ESTABLISHED', binding: 'rs2>-' });
        return { from, to: target, tookMs: 80 };
      },
      holding: async (director) => {
        if (director === 'dir1' && this.leader === 'dir2' && ++this.polls === (this.preemptsBack ? 1 : 2)) {
          this.tables.get('dir1')!.set('c', { state: 'ESTABLISHED', binding: 'rs2>-' });
          // Preempting, the leader takes the group back as soon as it holds the copy: here, while the drill
          // still reads the two directors after its first move.
          if (this.preemptsBack) this.move('dir2', 'dir1', ' (preempted)');
        }
        return {
          director, role: director === this.leader ? 'leader' : 'standby', claimedAtUnixMs: this.claimed.get(director) ?? 0,
          releasedAtUnixMs: this.released.get(director) ?? 0, readAtUnixMs: this.clock, leaseDroppedPackets: this.drops.get(director)!,
          connections: new Map(this.tables.get(director)!),
        };
      },
      leaseDrops: async (director) => {
        this.dropReads.push(director);
        return this.drops.get(director)!;
      },
      directors: () => ['dir1', 'dir2'],
      holdingsUnavailable: () => null,
      drServices: (g) => (g === 'web' ? this.drServices : []),
      now: () => this.clock,
      sleep: async (ms) => { this.clock += ms; },
    };
  }
}
