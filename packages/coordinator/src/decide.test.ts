import assert from 'node:assert/strict';
import { decide, initialState, leaseForMs, type ElectionAction, type ElectionEvent, type ElectionState, type GroupSettings, type World } from './decide.js';
import type { DirectorRecord, LeaderRecord } from './records.js';
import { TIMING_PROFILES, checkTiming, kernelLeaseMs, type ElectionTiming } from './timing.js';

/**
 * The election's decisions, table by table: a state and an event in, the next state and the actions out.
 * Pure: no etcd, no clock, no timer; `now` is a number (ms on the director's monotonic clock). The default
 * profile: beats every 75 ms, window 250, takeover 300, fence check 10, release 20 (kernel lease 280 ms past
 * a confirmed send), slack 10, drift 5.
 */

/**
 * The decision tables' times (1000, 1075, 1250, ...) are written for this timing: the default profile as it
 * was when they were (75 / 250 / 300 ms), kept fixed so that tuning a profile does not rewrite the tables.
 */
const T: ElectionTiming = { ...TIMING_PROFILES.default, beatIntervalMs: 75, safetyWindowMs: 250, takeoverAfterMs: 300 };
checkTiming(T);
const G: GroupSettings = { name: 'g', priority: 150, preempt: 'never', preemptDelayMs: 0 };
const WALL = 1_700_000_000_000;

function world(w: Partial<World> = {}): World {
  return { self: 'a', peers: ['b'], directors: new Map(), health: { ok: true, problems: [] }, synced: null, wallNow: WALL, ...w };
}

function rec(r: Partial<LeaderRecord> = {}): LeaderRecord {
  return { director: 'a', term: 3, beat: 10, peers: ['b'], priority: 150, since: 1, reason: 'elected: no leader yet', ...r };
}

function dir(id: string, priority: number | undefined, healthy = true): [string, DirectorRecord] {
  return [id, { id, version: 't', peerAddress: '', priorities: priority === undefined ? {} : { g: priority }, healthy, problems: [], groups: {}, updatedAt: 0 }];
}

/** a leads g: its last beat (beat 10, rev 50) was sent at 1000 and confirmed. */
function leader(s: Partial<ElectionState> = {}): ElectionState {
  return {
    ...initialState(0), role: 'leader', mine: { rev: '50', record: rec() }, observed: { rev: '50', record: rec(), at: 1001 },
    lastConfirmedSend: 1000, leaseUntil: 1000 + kernelLeaseMs(T), confirmedBeat: 10, lastBeatAt: 1000, ...s,
  };
}

/** a stands by; b leads (priority 100, a among its peers), its revision 70 received at 1000. */
function standby(r: Partial<LeaderRecord> = {}, s: Partial<ElectionState> = {}): ElectionState {
  return { ...initialState(0), observed: { rev: '70', record: rec({ director: 'b', priority: 100, peers: ['a'], ...r }), at: 1000 }, ...s };
}

function run(s: ElectionState, event: ElectionEvent, now: number, w: Partial<World> = {}, g: Partial<GroupSettings> = {}) {
  return decide(s, { event, world: world(w) }, now, T, { ...G, ...g });
}

const tick: ElectionEvent = { kind: 'tick' };
const kinds = (actions: readonly ElectionAction[]): string[] => actions.map((a) => a.kind);

describe('decide: the election as a pure step', () => {
  describe('fence (leader ticks; last confirmed send at 1000)', () => {
    const refused = 'b reaches etcd: the leader is the one cut off';
    const cases: Array<{ name: string; s?: Partial<ElectionState>; now: number; w?: Partial<World>; actions: ElectionAction[]; role: string }> = [
      { name: 'fresh: nothing to do', now: 1050, actions: [], role: 'leader' },
      {
        name: 'a beat interval on: beats on its revision, deadline two beats', now: 1075, role: 'leader',
        actions: [{ kind: 'beat', expectRev: '50', record: rec({ beat: 11 }), sent: 1075, timeoutMs: 150 }],
      },
      { name: 'a beat in flight, sent less than a beat interval ago: no second try yet', s: { beatsInFlight: 1, lastBeatAt: 1075, lastPromiseAsk: 1120 }, now: 1140, actions: [], role: 'leader' },
      {
        name: 'a beat in flight a beat interval: a second try beside it, on the same revision, with the same number', now: 1150, role: 'leader',
        s: { beatsInFlight: 1, lastBeatAt: 1075, sending: { rev: '50', beat: 11, firstSent: 1075 }, lastPromiseAsk: 1140 },
        actions: [{ kind: 'beat', expectRev: '50', record: rec({ beat: 11 }), sent: 1150, timeoutMs: 150 }],
      },
      { name: 'three beats in flight: no fourth', s: { beatsInFlight: 3, lastBeatAt: 1000, lastPromiseAsk: 1140 }, now: 1150, actions: [], role: 'leader' },
      {
        name: 'a beat overdue (age > beat + check): asks its peers for one window', s: { beatsInFlight: 1, lastBeatAt: 1075 }, now: 1086, role: 'leader',
        actions: [{ kind: 'askPromises', peers: ['b'], request: { from: 'a', group: 'g', term: 3, beat: 10, durationMs: 250 }, sent: 1086, timeoutMs: 500 }],
      },
      {
        name: 'the window closed without a confirmation: asks for two windows', s: { beatsInFlight: 1, lastBeatAt: 1200, lastPromiseAsk: 1200 }, now: 1250, role: 'leader',
        actions: [{ kind: 'askPromises', peers: ['b'], request: { from: 'a', group: 'g', term: 3, beat: 10, durationMs: 500 }, sent: 1250, timeoutMs: 500 }],
      },
      { name: 'asked half a beat ago: not again', s: { beatsInFlight: 1, lastBeatAt: 1075, lastPromiseAsk: 1086 }, now: 1120, actions: [], role: 'leader' },
      { name: 'one ms short of the window: holds', s: { beatsInFlight: 1, lastBeatAt: 1200, lastPromiseAsk: 1240 }, now: 1249, actions: [], role: 'leader' },
      {
        name: 'window closed, the peer\'s answer still out: waits for it (the kernel lease ends on time regardless)', s: { beatsInFlight: 1, lastBeatAt: 1200, lastPromiseAsk: 1240 },
        now: 1260, role: 'leader', actions: [],
      },
      {
        name: 'the peer answered only before this episode: still waits', s: { beatsInFlight: 1, lastBeatAt: 1250, lastPromiseAsk: 1290, answeredAt: new Map([['b', 1084]]) },
        now: 1300, role: 'leader', actions: [],
      },
      {
        name: 'no reply within four windows: fences', s: { beatsInFlight: 1, lastBeatAt: 1200, lastPromiseAsk: 1980 }, now: 2000, role: 'standby',
        actions: [{ kind: 'fenced' }, { kind: 'fence', from: 'leader', reason: 'fenced: no etcd confirmation for 1000 ms, not every peer vouches (b: not asked yet)' }],
      },
      {
        name: 'window closed, peer refused (and again on a fresh look): fences with its reason', now: 1250, role: 'standby',
        s: { beatsInFlight: 1, lastBeatAt: 1200, lastPromiseAsk: 1240, peerAnswers: new Map([['b', refused]]), answeredAt: new Map([['b', 1130]]), refusals: new Map([['b', { firstAt: 1088, confirmed: true }]]) },
        actions: [{ kind: 'fenced' }, { kind: 'fence', from: 'leader', reason: 'fenced: no etcd confirmation for 250 ms, not every peer vouches (b: b reaches etcd: the leader is the one cut off)' }],
      },
      {
        // Its refusal may describe etcd from just before it failed for everyone (checkFence).
        name: 'window closed, peer refused once: waits for its next answer', now: 1250, role: 'leader',
        s: { beatsInFlight: 1, lastBeatAt: 1200, lastPromiseAsk: 1240, peerAnswers: new Map([['b', refused]]), answeredAt: new Map([['b', 1130]]), refusals: new Map([['b', { firstAt: 1130, confirmed: false }]]) },
        actions: [],
      },
      {
        name: 'peer refused once, no confirmation within four windows: fences', now: 2000, role: 'standby',
        s: { beatsInFlight: 1, lastBeatAt: 1950, lastPromiseAsk: 1990, peerAnswers: new Map([['b', refused]]), answeredAt: new Map([['b', 1130]]), refusals: new Map([['b', { firstAt: 1130, confirmed: false }]]) },
        actions: [{ kind: 'fenced' }, { kind: 'fence', from: 'leader', reason: `fenced: no etcd confirmation for 1000 ms, not every peer vouches (b: ${refused})` }],
      },
      {
        name: 'no peers: fences', w: { peers: [] }, s: { beatsInFlight: 1, lastBeatAt: 1200, lastPromiseAsk: 1240 }, now: 1250, role: 'standby',
        actions: [{ kind: 'fenced' }, { kind: 'fence', from: 'leader', reason: 'fenced: no etcd confirmation for 250 ms, no peers to vouch' }],
      },
      {
        name: 'a promise that ran out is no promise', now: 1250, role: 'standby', s: { beatsInFlight: 1, lastBeatAt: 1200, lastPromiseAsk: 1240, coverage: new Map([['b', 1250]]), answeredAt: new Map([['b', 1100]]), grantedLast: new Set(['b']) },
        actions: [{ kind: 'fenced' }, { kind: 'fence', from: 'leader', reason: 'fenced: no etcd confirmation for 250 ms, not every peer vouches (b: not asked yet)' }],
      },
      {
        name: 'window closed, every peer promised: fail-static, the lease carried by the promises', now: 1250, role: 'fail-static',
        s: { beatsInFlight: 1, lastBeatAt: 1200, lastPromiseAsk: 1240, coverage: new Map([['b', 1600]]) },
        actions: [
          { kind: 'lease', forMs: 1600 - T.maxLeaseSlackMs - T.maxClockDriftMs - 1250 },
          { kind: 'transition', from: 'leader', to: 'fail-static', reason: 'etcd unreachable for 250 ms; peers b cannot reach it either, keeping the vips' },
        ],
      },
      {
        name: 'fail-static already, lease written less than a beat ago: nothing', now: 1300, role: 'fail-static',
        s: { role: 'fail-static', beatsInFlight: 1, lastBeatAt: 1250, lastPromiseAsk: 1280, coverage: new Map([['b', 1600]]), leaseUntil: 1585 },
        actions: [],
      },
      {
        // Two windows from b's last promise's end is 1600 + 500: b's answer to a later ask may still come.
        name: 'fail-static, b\'s promise ran out, its last reply a promise: waits for the next (lease already ended with it)', now: 1700, role: 'fail-static',
        s: { role: 'fail-static', beatsInFlight: 1, lastBeatAt: 1650, lastPromiseAsk: 1690, coverage: new Map([['b', 1600]]), answeredAt: new Map([['b', 1400]]), grantedLast: new Set(['b']), leaseUntil: 1585 },
        actions: [],
      },
      {
        name: 'fail-static, b\'s promise ran out two windows ago: fences', now: 2100, role: 'standby',
        s: { role: 'fail-static', beatsInFlight: 1, lastBeatAt: 2060, lastPromiseAsk: 2090, coverage: new Map([['b', 1600]]), answeredAt: new Map([['b', 1400]]), grantedLast: new Set(['b']), leaseUntil: 1585, peerAnswers: new Map([['b', 'b cannot reach etcd either']]) },
        actions: [{ kind: 'fenced' }, { kind: 'fence', from: 'fail-static', reason: 'fenced: no etcd confirmation for 1100 ms, not every peer vouches (b: b cannot reach etcd either)' }],
      },
      {
        name: 'fail-static, b\'s promise ran out and its last reply refused: fences at once', now: 1700, role: 'standby',
        s: { role: 'fail-static', beatsInFlight: 1, lastBeatAt: 1650, lastPromiseAsk: 1690, coverage: new Map([['b', 1600]]), answeredAt: new Map([['b', 1650]]), grantedLast: new Set(), leaseUntil: 1585, peerAnswers: new Map([['b', refused]]), refusals: new Map([['b', { firstAt: 1650, confirmed: true }]]) },
        actions: [{ kind: 'fenced' }, { kind: 'fence', from: 'fail-static', reason: 'fenced: no etcd confirmation for 700 ms, not every peer vouches (b: b reaches etcd: the leader is the one cut off)' }],
      },
      { name: 'handing over: no fence, no beat', s: { handingOver: true }, now: 2000, actions: [], role: 'leader' },
    ];
    for (const c of cases) {
      it(c.name, () => {
        const { state, actions } = run(leader(c.s), tick, c.now, c.w);
        assert.deepEqual(actions, c.actions);
        assert.equal(state.role, c.role);
      });
    }

    it('a beat moves the state: in flight, sent now', () => {
      const { state } = run(leader(), tick, 1075);
      assert.equal(state.beatsInFlight, 1);
      assert.equal(state.lastBeatAt, 1075);
      assert.deepEqual(state.sending, { rev: '50', beat: 11, firstSent: 1075 });
    });
  });

  describe('coalesce (another group of this director beats in this check; last beat sent at 1000)', () => {
    const coalesced: ElectionEvent = { kind: 'tick', coalesce: true };
    const cases: Array<{ name: string; s?: Partial<ElectionState>; now: number; beats: boolean }> = [
      { name: 'half an interval since our last beat: ours goes along', now: 1038, beats: true },
      { name: 'less than half an interval: ours waits for its own time', now: 1037, beats: false },
      { name: 'a beat in flight: no early try beside it', s: { beatsInFlight: 1 }, now: 1050, beats: false },
      { name: 'handing over: no beat', s: { handingOver: true }, now: 1050, beats: false },
    ];
    for (const c of cases) {
      it(c.name, () => {
        const { actions } = run(leader(c.s), coalesced, c.now);
        assert.equal(actions.some((a) => a.kind === 'beat'), c.beats, kinds(actions).join());
      });
    }

    it('without coalesce the same check sends nothing; a standby never beats', () => {
      assert.deepEqual(run(leader(), tick, 1050).actions, []);
      assert.ok(!run(standby(), coalesced, 1050).actions.some((a) => a.kind === 'beat'));
    });

    it('an early beat is leased from its own send like any other: earlier, never longer', () => {
      const sent = run(leader(), coalesced, 1040);
      const beat = sent.actions.find((a) => a.kind === 'beat');
      assert.ok(beat?.kind === 'beat');
      const { state, actions } = run(sent.state, { kind: 'beat-result', sent: 1040, expectRev: '50', record: beat.record, result: { kind: 'confirmed', rev: '51' } }, 1045);
      assert.equal(state.lastConfirmedSend, 1040);
      assert.deepEqual(actions.filter((a) => a.kind === 'lease'), [{ kind: 'lease', forMs: 1040 + kernelLeaseMs(T) - 1045 }]);
    });
  });

  describe('lease length', () => {
    const k = kernelLeaseMs(T);
    const slack = T.maxLeaseSlackMs + T.maxClockDriftMs;
    const cases: Array<{ name: string; peers: string[]; coverage: Array<[string, number]>; now: number; forMs: number }> = [
      { name: 'from the last confirmed send: window + check + release', peers: ['b'], coverage: [], now: 1100, forMs: 1000 + k - 1100 },
      { name: 'every peer promised: the earliest promise, less slack and drift', peers: ['b', 'c'], coverage: [['b', 1600], ['c', 1500]], now: 1100, forMs: 1500 - slack - 1100 },
      { name: 'one peer of two promised: the beat lease', peers: ['b', 'c'], coverage: [['b', 1600]], now: 1100, forMs: 1000 + k - 1100 },
      { name: 'promises that ran out: the beat lease', peers: ['b'], coverage: [['b', 1100]], now: 1100, forMs: 1000 + k - 1100 },
      { name: 'promises shorter than the beat lease: the beat lease', peers: ['b'], coverage: [['b', 1200]], now: 1100, forMs: 1000 + k - 1100 },
      { name: 'no peers: the beat lease', peers: [], coverage: [], now: 1100, forMs: 1000 + k - 1100 },
      { name: 'past the beat lease, no promise: nothing left (<= 0)', peers: ['b'], coverage: [], now: 1300, forMs: 1000 + k - 1300 },
    ];
    for (const c of cases) {
      it(c.name, () => {
        assert.equal(leaseForMs(leader({ coverage: new Map(c.coverage) }), c.peers, c.now, T), c.forMs);
      });
    }

    it('a confirmed beat renews the lease from its send, not from its answer', () => {
      const s = leader({ beatsInFlight: 1, lastBeatAt: 1075 });
      const { state, actions } = run(s, { kind: 'beat-result', sent: 1075, expectRev: '50', record: rec({ beat: 11 }), result: { kind: 'confirmed', rev: '51' } }, 1140);
      assert.deepEqual(actions, [{ kind: 'beatOutcome', outcome: 'confirmed' }, { kind: 'lease', forMs: 1075 + k - 1140 }]);
      assert.equal(state.leaseUntil, 1075 + k);
      assert.equal(state.lastConfirmedSend, 1075);
      assert.deepEqual(state.mine, { rev: '51', record: rec({ beat: 11 }) });
      assert.equal(state.beatsInFlight, 0);
    });

    it('an older beat confirmed after a newer one does not move the lease back', () => {
      const s = leader({ lastConfirmedSend: 1150, leaseUntil: 1150 + k });
      const { state, actions } = run(s, { kind: 'beat-result', sent: 1075, expectRev: '49', record: rec({ beat: 9 }), result: { kind: 'confirmed', rev: '51' } }, 1160);
      assert.deepEqual(actions, [{ kind: 'beatOutcome', outcome: 'confirmed' }]);
      assert.equal(state.leaseUntil, 1150 + k);
      assert.deepEqual(state.mine, leader().mine, 'our revision moved on meanwhile: not adopted');
    });

    it('a claim leases from the takeover swap\'s send', () => {
      const r = rec({ term: 4, beat: 11 });
      const { state, actions } = run(standby({}, { attempting: true }), { kind: 'attempt-result', sent: 1300, record: r, reason: 'took over: x', result: { kind: 'swapped', rev: '71' } }, 1310);
      assert.deepEqual(actions, [{ kind: 'transition', from: 'standby', to: 'leader', reason: 'took over: x' }, { kind: 'claim', leaseForMs: 1300 + k - 1310 }]);
      assert.equal(state.role, 'leader');
      assert.deepEqual(state.mine, { rev: '71', record: r });
      assert.equal(state.lastConfirmedSend, 1300);
      assert.equal(state.attempting, true, 'until attempt-done');
    });

    it('a swap that lands while we promised a fail-static leader to stay away: not leading yet', () => {
      const r = rec({ term: 4, beat: 11 });
      const { state, actions } = run(standby({}, { promisedUntil: 1400 }), { kind: 'attempt-result', sent: 1300, record: r, reason: 'took over: x', result: { kind: 'swapped', rev: '71' } }, 1310);
      assert.deepEqual(actions, []);
      assert.equal(state.role, 'standby');
      assert.deepEqual(state.observed, { rev: '71', record: r, at: 1310 });
    });

    it('a swap that left the window no room for a beat: not leading on it; the record names us, so the next tick resumes with a fresh swap', () => {
      const r = rec({ term: 4, beat: 11 });
      const late1 = T.safetyWindowMs - T.beatIntervalMs;
      const barely = run(standby({}, { attempting: true }), { kind: 'attempt-result', sent: 1300, record: r, reason: 'took over: x', result: { kind: 'swapped', rev: '71' } }, 1300 + late1 - 1);
      assert.equal(barely.state.role, 'leader', 'room for one more beat: leads');
      const late = run(standby({}, { attempting: true }), { kind: 'attempt-result', sent: 1300, record: r, reason: 'took over: x', result: { kind: 'swapped', rev: '71' } }, 1300 + late1);
      assert.deepEqual(late.actions, []);
      assert.equal(late.state.role, 'standby');
      assert.deepEqual(late.state.observed, { rev: '71', record: r, at: 1300 + late1 });
      const done = run(late.state, { kind: 'attempt-done' }, 1300 + late1 + 1);
      const next = run(done.state, { kind: 'tick' }, 1300 + late1 + 5);
      assert.deepEqual(kinds(next.actions), ['attempt']);
      assert.match(JSON.stringify(next.actions[0]), /resumed: named leader in etcd/);
    });

    it('the first confirmed beat after etcd came back ends fail-static', () => {
      const s = leader({ role: 'fail-static', lastConfirmedSend: 1000, etcd: { failing: true, failingSince: 1100, backAt: 0, recoveredAt: -Infinity } });
      const { state, actions } = run(s, { kind: 'beat-result', sent: 1500, expectRev: '50', record: rec({ beat: 11 }), result: { kind: 'confirmed', rev: '51' } }, 1510);
      assert.deepEqual(kinds(actions), ['beatOutcome', 'lease', 'transition']);
      assert.deepEqual(actions[2], { kind: 'transition', from: 'fail-static', to: 'leader', reason: 'etcd confirms beats again' });
      assert.equal(state.etcd.failing, false);
      assert.equal(state.etcd.recoveredAt, 1510);
    });

    it('a late answer that leaves the window no room for another beat does not end fail-static (no flip back and forth)', () => {
      const s = leader({ role: 'fail-static', lastConfirmedSend: 1000, etcd: { failing: true, failingSince: 1100, backAt: 0, recoveredAt: -Infinity } });
      const sentAt = 1500;
      const late = run(s, { kind: 'beat-result', sent: sentAt, expectRev: '50', record: rec({ beat: 11 }), result: { kind: 'confirmed', rev: '51' } }, sentAt + T.safetyWindowMs - T.beatIntervalMs);
      assert.deepEqual(kinds(late.actions), ['beatOutcome', 'lease']);
      assert.equal(late.state.role, 'fail-static');
      assert.equal(late.state.lastConfirmedSend, sentAt, 'the lease still runs from that send');
      const next = run(late.state, { kind: 'beat-result', sent: sentAt + T.safetyWindowMs, expectRev: '51', record: rec({ beat: 12 }), result: { kind: 'confirmed', rev: '52' } }, sentAt + 2 * T.safetyWindowMs - T.beatIntervalMs - 1);
      assert.deepEqual(next.actions.at(-1), { kind: 'transition', from: 'fail-static', to: 'leader', reason: 'etcd confirms beats again' });
    });
  });

  describe('beat outcomes', () => {
    const sent = { kind: 'beat-result', sent: 1075, expectRev: '50', record: rec({ beat: 11 }) } as const;
    it('lost to a revision of ours that is not one of its tries: adopted, still leading, confirms nothing', () => {
      const { state, actions } = run(leader({ beatsInFlight: 1 }), { ...sent, result: { kind: 'lost', current: { rev: '52', record: rec({ beat: 12 }) } } }, 1100);
      assert.deepEqual(actions, [{ kind: 'beatOutcome', outcome: 'confirmed' }]);
      assert.deepEqual(state.mine, { rev: '52', record: rec({ beat: 12 }) });
      assert.equal(state.role, 'leader');
      assert.equal(state.lastConfirmedSend, 1000, 'an adopted revision confirms nothing');
    });
    it('lost to another try of the same beat (the first, late on a lost packet): confirmed from the first try\'s send', () => {
      // Tries of beat 11 on revision 50 went at 1075 and 1150; the second's swap finds the first landed.
      const s = leader({ beatsInFlight: 2, lastBeatAt: 1150, sending: { rev: '50', beat: 11, firstSent: 1075 } });
      const { state, actions } = run(s, { ...sent, sent: 1150, result: { kind: 'lost', current: { rev: '51', record: rec({ beat: 11 }) } } }, 1240);
      const k = kernelLeaseMs(T);
      assert.deepEqual(actions, [{ kind: 'beatOutcome', outcome: 'confirmed' }, { kind: 'lease', forMs: 1075 + k - 1240 }]);
      assert.deepEqual(state.mine, { rev: '51', record: rec({ beat: 11 }) });
      assert.equal(state.lastConfirmedSend, 1075);
      assert.equal(state.confirmedBeat, 11);
      assert.equal(state.beatsInFlight, 1);
      // The first try's own answer, when it comes, moves nothing back.
      const late = run(state, { ...sent, result: { kind: 'confirmed', rev: '51' } }, 1250);
      assert.deepEqual(late.actions, [{ kind: 'beatOutcome', outcome: 'confirmed' }]);
      assert.deepEqual(late.state.mine, { rev: '51', record: rec({ beat: 11 }) });
      assert.equal(late.state.beatsInFlight, 0);
    });
    it('the next beat after a landed try swaps on its revision with the next number', () => {
      const s = leader({ mine: { rev: '51', record: rec({ beat: 11 }) }, lastConfirmedSend: 1075, lastBeatAt: 1150, lastPromiseAsk: 1220, sending: { rev: '50', beat: 11, firstSent: 1075 } });
      const { state, actions } = run(s, tick, 1225);
      assert.deepEqual(actions, [{ kind: 'beat', expectRev: '51', record: rec({ beat: 12 }), sent: 1225, timeoutMs: 150 }]);
      assert.deepEqual(state.sending, { rev: '51', beat: 12, firstSent: 1225 });
    });
    it('lost to another director: superseded, steps down without vacating', () => {
      const { state, actions } = run(leader(), { ...sent, result: { kind: 'lost', current: { rev: '60', record: rec({ director: 'c', term: 4 }) } } }, 1100);
      assert.deepEqual(actions, [{ kind: 'beatOutcome', outcome: 'superseded' }, { kind: 'stepDown', from: 'leader', reason: 'superseded: c holds the record now', vacate: false }]);
      assert.equal(state.role, 'standby');
    });
    it('no answer: failed, etcd failing from now', () => {
      const { state, actions } = run(leader({ beatsInFlight: 1 }), { ...sent, result: { kind: 'failed' } }, 1225);
      assert.deepEqual(actions, [{ kind: 'beatOutcome', outcome: 'failed' }]);
      assert.deepEqual(state.etcd, { failing: true, failingSince: 1225, backAt: 0, recoveredAt: -Infinity });
      assert.equal(state.beatsInFlight, 0);
    });
  });

  describe('promises (a standby answers a leader cut from etcd)', () => {
    const req = { from: 'b', group: 'g', term: 3, beat: 10, durationMs: 500 };
    const seesB = (beat: number, term = 3): ElectionState => standby({ beat, term });
    const cases: Array<{ name: string; s: ElectionState; reachable?: boolean; now?: number; reply: ElectionAction | null; promisedUntil: number }> = [
      { name: 'leading itself: refuses', s: leader(), reply: { kind: 'reply', reply: { granted: false, etcdReachable: true, reason: 'a leads g itself' } }, promisedUntil: 0 },
      {
        name: 'two beats landed since its last confirmed one: etcd is slow, not gone', s: seesB(12),
        reply: { kind: 'reply', reply: { granted: true, etcdReachable: true, reason: 'a sees b\'s beats landing: etcd is slow, not gone' } }, promisedUntil: 2500,
      },
      { name: 'one beat landed (a cut-off leader\'s last one may): asks etcd first', s: seesB(11), reply: { kind: 'probe' }, promisedUntil: 0 },
      { name: 'beats of another term: asks etcd first', s: seesB(14, 2), reply: { kind: 'probe' }, promisedUntil: 0 },
      {
        name: 'etcd unreachable for us too: promises', s: seesB(10), reachable: false,
        reply: { kind: 'reply', reply: { granted: true, etcdReachable: false, reason: 'a cannot reach etcd either' } }, promisedUntil: 2500,
      },
      {
        name: 'we reach etcd: the leader is the one cut off', s: seesB(10), reachable: true,
        reply: { kind: 'reply', reply: { granted: false, etcdReachable: true, reason: 'a reaches etcd: the leader is the one cut off' } }, promisedUntil: 0,
      },
      {
        name: 'we reach etcd again after failing for a beat or more: etcd failed for everyone, promises',
        s: standby({ beat: 10 }, { etcd: { failing: true, failingSince: 2000 - T.beatIntervalMs, backAt: 0, recoveredAt: -Infinity } }), reachable: true,
        reply: { kind: 'reply', reply: { granted: true, etcdReachable: true, reason: 'a is just back on etcd after it failed for everyone' } }, promisedUntil: 2500,
      },
      {
        name: 'one slow call is no outage: refuses',
        s: standby({ beat: 10 }, { etcd: { failing: true, failingSince: 2000 - T.beatIntervalMs + 1, backAt: 0, recoveredAt: -Infinity } }), reachable: true,
        reply: { kind: 'reply', reply: { granted: false, etcdReachable: true, reason: 'a reaches etcd: the leader is the one cut off' } }, promisedUntil: 0,
      },
      {
        name: 'back for 400 ms: the promise still ends within 3 takeovers of our return',
        s: standby({ beat: 10 }, { etcd: { failing: false, failingSince: 0, backAt: 1600, recoveredAt: 1600 } }), reachable: true,
        reply: { kind: 'reply', reply: { granted: true, etcdReachable: true, reason: 'a is just back on etcd after it failed for everyone' } }, promisedUntil: 2500,
      },
      {
        name: 'back for 401 ms: it would not; refuses',
        s: standby({ beat: 10 }, { etcd: { failing: false, failingSince: 0, backAt: 1599, recoveredAt: 1599 } }), reachable: true,
        reply: { kind: 'reply', reply: { granted: false, etcdReachable: true, reason: 'a reaches etcd: the leader is the one cut off' } }, promisedUntil: 0,
      },
      {
        name: 'a longer promise already given stands', s: standby({ beat: 10 }, { promisedUntil: 3000 }), reachable: false,
        reply: { kind: 'reply', reply: { granted: true, etcdReachable: false, reason: 'a cannot reach etcd either' } }, promisedUntil: 3000,
      },
    ];
    for (const c of cases) {
      it(c.name, () => {
        const e: ElectionEvent = c.reachable === undefined ? { kind: 'promise-request', req } : { kind: 'promise-request', req, reachable: c.reachable };
        const { state, actions } = run(c.s, e, c.now ?? 2000);
        assert.deepEqual(actions, c.reply === null ? [] : [c.reply]);
        assert.equal(state.promisedUntil, c.promisedUntil);
      });
    }

    it('a granted answer covers the peer from when we asked; a refusal or an error is kept for the fence', () => {
      let s = leader();
      s = run(s, { kind: 'promise-answer', peer: 'b', sent: 1090, durationMs: 500, reply: { granted: true, etcdReachable: false, reason: 'x' } }, 1120).state;
      assert.equal(s.coverage.get('b'), 1590);
      s = run(s, { kind: 'promise-answer', peer: 'c', sent: 1090, durationMs: 500, error: 'peer unreachable' }, 1340).state;
      assert.equal(s.peerAnswers.get('c'), 'no answer: peer unreachable');
      s = run(s, { kind: 'promise-answer', peer: 'b', sent: 1000, durationMs: 500, reply: { granted: true, etcdReachable: false, reason: 'y' } }, 1350).state;
      assert.equal(s.coverage.get('b'), 1590, 'an older promise never shortens a newer one');
    });

    it('a refusal decides the fence once a later one answers an ask sent a probe\'s freshness after it came', () => {
      // T: beats every 75 ms, so a probe's success stands 37.5 ms; this episode began at 1085.
      const no = { granted: false, etcdReachable: true, reason: 'b reaches etcd: the leader is the one cut off' };
      const yes = { granted: true, etcdReachable: false, reason: 'b cannot reach etcd either' };
      const answer = (s: ElectionState, sent: number, at: number, reply: typeof no): ElectionState =>
        run(s, { kind: 'promise-answer', peer: 'b', sent, durationMs: 250, reply }, at).state;
      let s = answer(leader(), 1086, 1090, no);
      assert.deepEqual(s.refusals.get('b'), { firstAt: 1090, confirmed: false }, 'the first refusal of the episode');
      s = answer(s, 1116, 1118, no);
      assert.deepEqual(s.refusals.get('b'), { firstAt: 1090, confirmed: false }, 'asked 26 ms after it came: the same probe may have answered');
      s = answer(s, 1128, 1130, no);
      assert.deepEqual(s.refusals.get('b'), { firstAt: 1090, confirmed: true }, 'asked 38 ms after: a probe of its own');
      s = answer(s, 1146, 1270, yes);
      assert.equal(s.refusals.has('b'), false, 'a promise ends the run');
      s = answer(s, 1280, 1282, no);
      assert.deepEqual(s.refusals.get('b'), { firstAt: 1282, confirmed: true }, 'a refusal after a promise of this episode is news from after the failure');
      // A later episode (a beat confirmed at 1400): the old run does not confirm a new refusal.
      s = { ...s, lastConfirmedSend: 1400, grantedLast: new Set() };
      s = answer(s, 1486, 1490, no);
      assert.deepEqual(s.refusals.get('b'), { firstAt: 1490, confirmed: false });
      s = run(s, { kind: 'promise-answer', peer: 'b', sent: 1530, durationMs: 250, error: 'peer unreachable' }, 2030).state;
      assert.deepEqual(s.refusals.get('b'), { firstAt: 1490, confirmed: false }, 'no answer changes nothing');
    });

    it('a promise renews the kernel lease at once when the lease written ends within a beat, else once it gains a beat', () => {
      // Lease written to 1280 (1000 + kernel lease); b's promise from 1090 for a window: carried to 1340 - slack - drift.
      const answer: ElectionEvent = { kind: 'promise-answer', peer: 'b', sent: 1090, durationMs: 250, reply: { granted: true, etcdReachable: false, reason: 'x' } };
      assert.deepEqual(run(leader(), answer, 1120).actions, [], 'the lease has more than a beat left, and the promise gains less than a beat');
      const late = run(leader(), answer, 1220);
      assert.deepEqual(late.actions, [{ kind: 'lease', forMs: 1340 - T.maxLeaseSlackMs - T.maxClockDriftMs - 1220 }]);
      assert.equal(late.state.leaseUntil, 1325);
      assert.deepEqual(run(leader(), { ...answer, reply: { granted: false, etcdReachable: true, reason: 'b reaches etcd' } }, 1220).actions, [], 'a refusal renews nothing');
    });

    it('a promise holds back our own takeover until it ends', () => {
      const s = standby({ beat: 10 }, { promisedUntil: 1500 });
      assert.deepEqual(run(s, tick, 1499).actions, []);
      assert.deepEqual(kinds(run(s, tick, 1500).actions), ['attempt']);
    });
  });

  describe('takeover (standby ticks; b\'s revision received at 1000)', () => {
    const cases: Array<{ name: string; s: ElectionState; now: number; w?: Partial<World>; reason: string | null; expectRev?: string | null }> = [
      { name: 'silent for takeoverAfterMs less 1: waits', s: standby(), now: 1299, reason: null },
      { name: 'silent for takeoverAfterMs: takes over', s: standby(), now: 1300, reason: 'took over: no beat from b for 300 ms' },
      { name: 'handed-over record (beat 0): waits 3× for the target\'s first beat', s: standby({ beat: 0 }), now: 1899, reason: null },
      { name: 'handed-over record (beat 0): then takes over', s: standby({ beat: 0 }), now: 1900, reason: 'took over: no beat from b for 900 ms' },
      {
        name: 'a healthy better candidate: waits two beats more', s: standby(), now: 1449, w: { directors: new Map([dir('c', 200)]) }, reason: null,
      },
      {
        name: 'a healthy better candidate: then takes over', s: standby(), now: 1450, w: { directors: new Map([dir('c', 200)]) }, reason: 'took over: no beat from b for 450 ms',
      },
      { name: 'an unhealthy better candidate does not count', s: standby(), now: 1300, w: { directors: new Map([dir('c', 200, false)]) }, reason: 'took over: no beat from b for 300 ms' },
      { name: 'an equal candidate with a smaller id ranks first', s: standby(), now: 1300, w: { self: 'b2', directors: new Map([dir('b1', 150)]) }, reason: null },
      { name: 'an equal candidate with a larger id ranks after', s: standby({ peers: ['b2'] }), now: 1300, w: { self: 'b2', directors: new Map([dir('b3', 150)]) }, reason: 'took over: no beat from b for 300 ms' },
      { name: 'the leader itself and directors outside the group do not count', s: standby(), now: 1300, w: { directors: new Map([dir('b', 200), dir('d', undefined)]) }, reason: 'took over: no beat from b for 300 ms' },
      { name: 'not among the leader\'s peers: never', s: standby({ peers: ['c'] }), now: 5000, reason: null },
      { name: 'etcd came back at 1200: counted from then', s: standby({}, { etcd: { failing: false, failingSince: 0, backAt: 1200, recoveredAt: 1200 } }), now: 1499, reason: null },
      { name: 'attempt under way: nothing', s: standby({}, { attempting: true }), now: 5000, reason: null },
      { name: 'unhealthy (role): nothing', s: standby({}, { role: 'unhealthy' }), now: 5000, reason: null },
      { name: 'unhealthy (just now): no attempt', s: standby(), now: 5000, w: { health: { ok: false, problems: ['eth0 down'] } }, reason: null },
      { name: 'no record seen yet: nothing', s: initialState(0), now: 5000, reason: null },
      { name: 'no record in etcd: elected, creating it', s: { ...initialState(0), observed: { rev: '0', record: null, at: 1000 } }, now: 1000, reason: 'elected: no leader yet', expectRev: null },
      { name: 'vacant: elected at once', s: standby({ director: null, reason: 'b resigned: agent stopping' }), now: 1000, reason: 'elected: vacant: b resigned: agent stopping', expectRev: '70' },
      { name: 'vacant, a better candidate: waits two beats', s: standby({ director: null }), now: 1000, w: { directors: new Map([dir('c', 200)]) }, reason: null },
      { name: 'named in etcd, handed over (beat 0): takes over at once', s: standby({ director: 'a', beat: 0, reason: 'handed over by b: lbadm failover' }), now: 1000, reason: 'took over: handed over by b: lbadm failover' },
      { name: 'named in etcd (restarted): resumes', s: standby({ director: 'a', beat: 7 }), now: 1000, reason: 'resumed: named leader in etcd' },
    ];
    for (const c of cases) {
      it(c.name, () => {
        const { state, actions } = run(c.s, tick, c.now, c.w);
        if (c.reason === null) {
          assert.deepEqual(actions.filter((a) => a.kind === 'attempt'), []);
          return;
        }
        const a = actions.find((x) => x.kind === 'attempt');
        assert.ok(a, `an attempt: ${JSON.stringify(actions)}`);
        assert.equal(a.reason, c.reason);
        assert.equal(a.expectRev, c.expectRev === undefined ? '70' : c.expectRev);
        assert.equal(a.probeMs, Math.floor(T.safetyWindowMs / 3));
        assert.equal(state.attempting, true);
      });
    }

    it('the takeover record: next term, next beat, our peers and priority', () => {
      const { actions } = run(standby(), tick, 1300, { peers: ['b', 'c'] });
      const a = actions[0];
      assert.ok(a?.kind === 'attempt');
      assert.deepEqual(a.record, { director: 'a', term: 4, beat: 11, peers: ['b', 'c'], priority: 150, since: WALL, reason: 'no beat from b for 300 ms' });
    });

    it('resuming keeps the term and the start of it', () => {
      const { actions } = run(standby({ director: 'a', beat: 7, since: 42 }), tick, 1000);
      const a = actions[0];
      assert.ok(a?.kind === 'attempt');
      assert.deepEqual({ term: a.record.term, beat: a.record.beat, since: a.record.since }, { term: 3, beat: 8, since: 42 });
    });

    it('a lost attempt sees what is there now; an unanswered one marks etcd failing', () => {
      const r = rec({ term: 4 });
      const lost = run(standby(), { kind: 'attempt-result', sent: 1300, record: r, reason: 'x', result: { kind: 'lost', current: { rev: '72', record: rec({ director: 'c' }) } } }, 1310).state;
      assert.deepEqual(lost.observed, { rev: '72', record: rec({ director: 'c' }), at: 1310 });
      const failed = run(standby(), { kind: 'attempt-result', sent: 1300, record: r, reason: 'x', result: { kind: 'unreachable' } }, 1310).state;
      assert.equal(failed.etcd.failing, true);
      assert.equal(run(failed, { kind: 'attempt-done' }, 1311).state.attempting, false);
    });

    it('a revision seen again is not news: staleness runs from its first receipt', () => {
      const s = run(standby(), { kind: 'seen', rev: '70', record: rec({ director: 'b' }) }, 1200).state;
      assert.equal(s.observed?.at, 1000);
    });
  });

  describe('preemption (a: priority 150, standby; b leads at 100)', () => {
    type Step = { now: number; synced?: string | null; actions: ElectionAction[] };
    const preempt = (reason: string): ElectionAction => ({ kind: 'preempt', request: { to: 'a', reason, at: WALL } });
    const cases: Array<{ name: string; g: Partial<GroupSettings>; r?: Partial<LeaderRecord>; health?: boolean; steps: Step[] }> = [
      { name: 'never: stays standby', g: { preempt: 'never' }, steps: [{ now: 1000, actions: [] }, { now: 1290, actions: [] }] },
      {
        name: 'after-delay: asks once the delay has run, and again a delay later', g: { preempt: 'after-delay', preemptDelayMs: 100 },
        steps: [
          { now: 1000, actions: [] }, { now: 1099, actions: [] },
          { now: 1100, actions: [preempt('preempt: priority 150 > 100 of b (after-delay)')] },
          { now: 1150, actions: [] },
          { now: 1200, actions: [preempt('preempt: priority 150 > 100 of b (after-delay)')] },
        ],
      },
      { name: 'after-delay: a leader of equal priority is left alone', g: { preempt: 'after-delay' }, r: { priority: 150 }, steps: [{ now: 1000, actions: [] }, { now: 1100, actions: [] }] },
      { name: 'after-delay: unhealthy, never', g: { preempt: 'after-delay' }, health: false, steps: [{ now: 1000, actions: [] }] },
      {
        name: 'after-sync: waits past the delay while the copy is incomplete, saying why once per reason', g: { preempt: 'after-sync', preemptDelayMs: 50 },
        steps: [
          { now: 1000, synced: 'snapshot in progress', actions: [] },
          { now: 1050, synced: 'snapshot in progress', actions: [{ kind: 'notice', reason: 'preempt waits: snapshot in progress' }] },
          { now: 1060, synced: 'snapshot in progress', actions: [] },
          { now: 1070, synced: 'stream lagging 3 s', actions: [{ kind: 'notice', reason: 'preempt waits: stream lagging 3 s' }] },
          { now: 1080, synced: null, actions: [preempt('preempt: priority 150 > 100 of b (after-sync, connections synced)')] },
        ],
      },
    ];
    for (const c of cases) {
      it(c.name, () => {
        let s = standby({ ...c.r });
        for (const step of c.steps) {
          const w: Partial<World> = { synced: step.synced ?? null, ...(c.health === false ? { health: { ok: false, problems: ['x'] } } : {}) };
          const d = run(s, tick, step.now, w, c.g);
          assert.deepEqual(d.actions.filter((a) => a.kind !== 'attempt'), step.actions, `at ${step.now}`);
          s = d.state;
        }
      });
    }
  });

  describe('health, handover, stop', () => {
    it('an unhealthy leader steps down and vacates; the release reports it unhealthy', () => {
      const w = { health: { ok: false, problems: ['eth0 down'] } };
      const d = run(leader(), { kind: 'health' }, 2000, w);
      assert.deepEqual(d.actions, [{ kind: 'stepDown', from: 'leader', reason: 'unhealthy: eth0 down', vacate: true }]);
      const r = run(d.state, { kind: 'released', from: 'leader', reason: 'unhealthy: eth0 down' }, 2001, w);
      assert.deepEqual(r.actions, [{ kind: 'transition', from: 'leader', to: 'unhealthy', reason: 'unhealthy: eth0 down' }]);
      assert.equal(r.state.role, 'unhealthy');
      const v = run(r.state, { kind: 'settled', reason: 'unhealthy: eth0 down', vacate: true }, 2002, w);
      assert.deepEqual(v.actions, [{ kind: 'vacate', expectRev: '50', record: rec({ director: null, beat: 11, reason: 'a resigned: unhealthy: eth0 down' }), timeoutMs: T.safetyWindowMs }]);
      assert.equal(v.state.mine, null);
    });

    it('a standby turns unhealthy and back', () => {
      const sick = run(standby(), { kind: 'health' }, 2000, { health: { ok: false, problems: ['eth0 down'] } });
      assert.deepEqual(sick.actions, [{ kind: 'transition', from: 'standby', to: 'unhealthy', reason: 'unhealthy: eth0 down' }]);
      const well = run(sick.state, { kind: 'health' }, 2100);
      assert.deepEqual(well.actions, [{ kind: 'transition', from: 'unhealthy', to: 'standby', reason: 'healthy again' }]);
    });

    it('a handoff to a healthy registered peer: ready, release, then the record names it at beat 0', () => {
      const req = { to: 'b', reason: 'lbadm failover', at: 1 };
      const w = { peers: ['b', 'c'], directors: new Map([dir('b', 120)]) };
      const h = run(leader(), { kind: 'handoff', req }, 2000, w);
      assert.deepEqual(h.actions, [{ kind: 'handover', req, priority: 120 }]);
      const ready = run(h.state, { kind: 'handover-ready', req, priority: 120 }, 2010, w);
      assert.deepEqual(ready.actions, [{ kind: 'handoverRelease', req, priority: 120, from: 'leader' }]);
      assert.equal(ready.state.handingOver, true);
      assert.deepEqual(run(ready.state, tick, 3000, w).actions, [], 'no fence, no beat while handing over');
      const rel = run(ready.state, { kind: 'handover-released', req, priority: 120 }, 2020, w);
      assert.deepEqual(rel.actions, [{
        kind: 'handoverSwap', expectRev: '50', timeoutMs: T.safetyWindowMs,
        record: { director: 'b', term: 4, beat: 0, peers: ['c', 'a'], priority: 120, since: WALL, reason: 'handed over by a: lbadm failover' },
      }]);
      const done = run(rel.state, { kind: 'handover-done', req, from: 'leader' }, 2030, w);
      assert.deepEqual(done.actions, [{ kind: 'transition', from: 'leader', to: 'standby', reason: 'handed over to b: lbadm failover' }]);
      assert.deepEqual({ role: done.state.role, mine: done.state.mine, handingOver: done.state.handingOver }, { role: 'standby', mine: null, handingOver: false });
    });

    it('a handoff to an unhealthy, unregistered or foreign director is refused and said so', () => {
      const req = { to: 'b', reason: 'lbadm failover', at: 1 };
      for (const directors of [new Map(), new Map([dir('b', 120, false)]), new Map([dir('b', undefined)])]) {
        const { actions, state } = run(leader(), { kind: 'handoff', req }, 2000, { directors });
        assert.deepEqual(actions, [{ kind: 'transition', from: 'leader', to: 'leader', reason: 'refused handoff to b: not a healthy registered peer serving g' }]);
        assert.equal(state.lastTransition?.reason, 'refused handoff to b: not a healthy registered peer serving g');
      }
      assert.deepEqual(run(leader(), { kind: 'handoff', req }, 2000, { peers: ['c'], directors: new Map([dir('b', 120)]) }).actions.length, 1, 'not a peer');
      assert.deepEqual(run(standby(), { kind: 'handoff', req }, 2000, { directors: new Map([dir('b', 120)]) }).actions, [], 'not leading: nothing');
    });

    it('fenced while waiting for beforeHandover: nothing left to hand over', () => {
      const req = { to: 'b', reason: 'x', at: 1 };
      assert.deepEqual(run(standby(), { kind: 'handover-ready', req, priority: 1 }, 2000).actions, []);
    });

    it('a failed lease renewal steps down at once; not while handing over', () => {
      const d = run(leader(), { kind: 'lease-failed', message: 'nft: EPERM' }, 2000);
      assert.deepEqual(d.actions, [{ kind: 'stepDown', from: 'leader', reason: 'kernel lease failed: nft: EPERM', vacate: true }]);
      assert.deepEqual(run(leader({ handingOver: true }), { kind: 'lease-failed', message: 'x' }, 2000).actions, []);
    });

    it('stopping with vacate resigns a leader; a standby just stops', () => {
      assert.deepEqual(run(leader(), { kind: 'stop', vacate: true }, 2000).actions, [{ kind: 'stepDown', from: 'leader', reason: 'agent stopping', vacate: true }]);
      assert.deepEqual(run(leader(), { kind: 'stop', vacate: false }, 2000).actions, []);
      assert.deepEqual(run(standby(), { kind: 'stop', vacate: true }, 2000).actions, []);
    });
  });

  it('never changes the state it was given', () => {
    const s = leader({ coverage: new Map([['b', 1600]]), peerAnswers: new Map([['b', 'x']]) });
    const before = JSON.stringify({ ...s, coverage: [...s.coverage], peerAnswers: [...s.peerAnswers] });
    for (const [e, now] of [[tick, 1260], [{ kind: 'promise-answer', peer: 'b', sent: 1200, durationMs: 500, reply: { granted: true, etcdReachable: false, reason: 'y' } }, 1210]] as const) {
      run(s, e, now);
    }
    assert.equal(JSON.stringify({ ...s, coverage: [...s.coverage], peerAnswers: [...s.peerAnswers] }), before);
  });
});
