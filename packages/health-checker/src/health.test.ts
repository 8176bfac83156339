import assert from 'node:assert/strict';
import type { HealthState } from '@lbd/config';
import {
  DEFAULT_FLAP_POLICY, formatDuration, initialHealth, nextHealth, slowStartWeight,
  type FlapPolicy, type HealthRecord, type Thresholds,
} from './health.js';
import type { ProbeResult } from './types.js';

/**
 * The state machine, table-driven: each case is a start state, thresholds, a flap policy and a series of
 * probe results at given times (simulated time: the machine is pure, the time is an argument); the
 * expectation is every transition (time, direction, exact reason) and the final record's key fields.
 * The reasons are the product (logs, `lbadm health`, the dashboard), so a changed word is a changed test.
 */

const OK: ProbeResult = { ok: true, reason: 'ok', message: 'http GET /: got 200', durationMs: 3 };
const FAIL: ProbeResult = { ok: false, reason: 'status', message: 'http GET /: got 500, want 200-399', durationMs: 4 };

/** 'S' a success, 'F' a failure, each one second after the previous unless a time is given. */
type Step = 'S' | 'F' | [at: number, r: 'S' | 'F'];

interface Case {
  name: string;
  start: HealthState;
  t?: Thresholds;
  flap?: Partial<FlapPolicy>;
  steps: Step[];
  /** [time, 'up>down' | 'down>up', reason] */
  want: Array<[number, string, string]>;
  final?: Partial<HealthRecord>;
}

const T = 1_000; // steps are 1 s apart by default

const cases: Case[] = [
  {
    name: 'fall: 3 consecutive failures take an up server down, with the failing probe as the reason',
    start: 'up', t: { rise: 2, fall: 3 },
    steps: ['F', 'F', 'F'],
    want: [[3 * T, 'up>down', 'http GET /: got 500, want 200-399 (3 failures)']],
    final: { state: 'down', failures: 3, successes: 0, since: 3 * T, holdDownUntil: null },
  },
  {
    name: 'fall: a success between failures starts the count again',
    start: 'up', t: { rise: 2, fall: 3 },
    steps: ['F', 'F', 'S', 'F', 'F'],
    want: [],
    final: { state: 'up', failures: 2, successes: 0 },
  },
  {
    name: 'fall: further failures of a down server change nothing',
    start: 'up', t: { rise: 2, fall: 2 },
    steps: ['F', 'F', 'F', 'F'],
    want: [[2 * T, 'up>down', 'http GET /: got 500, want 200-399 (2 failures)']],
    final: { state: 'down', failures: 4, since: 2 * T },
  },
  {
    name: 'rise: 2 consecutive successes bring a down server up',
    start: 'down', t: { rise: 2, fall: 3 },
    steps: ['S', 'S'],
    want: [[2 * T, 'down>up', 'http GET /: got 200 (2 successes)']],
    final: { state: 'up', successes: 2, since: 2 * T },
  },
  {
    name: 'rise: a failure between successes starts the count again',
    start: 'down', t: { rise: 3, fall: 3 },
    steps: ['S', 'S', 'F', 'S', 'S'],
    want: [],
    final: { state: 'down', successes: 2, failures: 0 },
  },
  {
    name: 'rise 1 and fall 1 follow every result',
    start: 'up', t: { rise: 1, fall: 1 }, flap: { maxTransitions: 0 },
    steps: ['F', 'S', 'F'],
    want: [
      [1 * T, 'up>down', 'http GET /: got 500, want 200-399 (1 failure)'],
      [2 * T, 'down>up', 'http GET /: got 200 (1 success)'],
      [3 * T, 'up>down', 'http GET /: got 500, want 200-399 (1 failure)'],
    ],
  },
  {
    name: 'start state up: stays up on successes, the first failures below fall change nothing',
    start: 'up', t: { rise: 2, fall: 3 },
    steps: ['S', 'F', 'F'],
    want: [],
    final: { state: 'up', since: 0 },
  },
  {
    name: 'start state down: a down server needs rise successes even on its first probes',
    start: 'down', t: { rise: 3, fall: 1 },
    steps: ['S', 'S', 'S'],
    want: [[3 * T, 'down>up', 'http GET /: got 200 (3 successes)']],
  },
  {
    name: 'hold-down: the 4th state change within 60 s that goes down holds the server down 5 s',
    start: 'down', t: { rise: 1, fall: 1 },
    steps: ['S', 'F', 'S', 'F', 'S', 'S', 'S', 'S'],
    want: [
      [1 * T, 'down>up', 'http GET /: got 200 (1 success)'],
      [2 * T, 'up>down', 'http GET /: got 500, want 200-399 (1 failure)'],
      [3 * T, 'down>up', 'http GET /: got 200 (1 success)'],
      [4 * T, 'up>down', 'http GET /: got 500, want 200-399 (1 failure); held down 5 s: 4 state changes in 60 s'],
      // successes at 5, 6, 7 and 8 s are ignored while held down (until 9 s)
    ],
    final: { state: 'down', holdDownUntil: 9 * T, holdDowns: 1, successes: 0 },
  },
  {
    name: 'hold-down expiry: after the hold-down the server still needs rise successes',
    start: 'down', t: { rise: 2, fall: 1 },
    steps: ['S', 'S', 'F', 'S', 'S', 'F', [9_000, 'S'], [10_000, 'S'], [10_999, 'S'], [11_000, 'S'], [12_000, 'S']],
    want: [
      [2 * T, 'down>up', 'http GET /: got 200 (2 successes)'],
      [3 * T, 'up>down', 'http GET /: got 500, want 200-399 (1 failure)'],
      [5 * T, 'down>up', 'http GET /: got 200 (2 successes)'],
      [6 * T, 'up>down', 'http GET /: got 500, want 200-399 (1 failure); held down 5 s: 4 state changes in 60 s'],
      // held until 11 s: the successes at 9, 10 and 10.999 s do not count; 11 and 12 s do.
      [12 * T, 'down>up', 'http GET /: got 200 (2 successes)'],
    ],
    final: { state: 'up', holdDownUntil: null, holdDowns: 1, since: 12 * T },
  },
  {
    name: 'doubling: each further hold-down within the window doubles (5 s, 10 s, 20 s)',
    start: 'down', t: { rise: 1, fall: 1 },
    steps: ['S', 'F', 'S', 'F', [9_000, 'S'], [10_000, 'F'], [20_000, 'S'], [21_000, 'F']],
    want: [
      [1 * T, 'down>up', 'http GET /: got 200 (1 success)'],
      [2 * T, 'up>down', 'http GET /: got 500, want 200-399 (1 failure)'],
      [3 * T, 'down>up', 'http GET /: got 200 (1 success)'],
      [4 * T, 'up>down', 'http GET /: got 500, want 200-399 (1 failure); held down 5 s: 4 state changes in 60 s'],
      [9 * T, 'down>up', 'http GET /: got 200 (1 success)'],
      [10 * T, 'up>down', 'http GET /: got 500, want 200-399 (1 failure); held down 10 s: 6 state changes in 60 s'],
      [20 * T, 'down>up', 'http GET /: got 200 (1 success)'],
      [21 * T, 'up>down', 'http GET /: got 500, want 200-399 (1 failure); held down 20 s: 8 state changes in 60 s'],
    ],
    final: { holdDownUntil: 41 * T, holdDowns: 3 },
  },
  {
    name: 'doubling stops at maxHoldDownMs',
    start: 'down', t: { rise: 1, fall: 1 }, flap: { maxTransitions: 2, holdDownMs: 5_000, maxHoldDownMs: 8_000 },
    steps: ['S', 'F', [7_000, 'S'], [8_000, 'F'], [16_000, 'S'], [17_000, 'F']],
    want: [
      [1 * T, 'down>up', 'http GET /: got 200 (1 success)'],
      [2 * T, 'up>down', 'http GET /: got 500, want 200-399 (1 failure); held down 5 s: 2 state changes in 60 s'],
      [7 * T, 'down>up', 'http GET /: got 200 (1 success)'],
      [8 * T, 'up>down', 'http GET /: got 500, want 200-399 (1 failure); held down 8 s: 4 state changes in 60 s'],
      [16 * T, 'down>up', 'http GET /: got 200 (1 success)'],
      [17 * T, 'up>down', 'http GET /: got 500, want 200-399 (1 failure); held down 8 s: 6 state changes in 60 s'],
    ],
    final: { holdDownUntil: 25 * T, holdDowns: 3 },
  },
  {
    name: 'a whole window without a state change forgets the doubling and the old changes',
    start: 'down', t: { rise: 1, fall: 1 }, flap: { windowMs: 10_000, maxTransitions: 2 },
    steps: ['S', 'F', [7_000, 'S'], [30_000, 'F'], [40_000, 'S'], [41_000, 'F']],
    want: [
      [1 * T, 'down>up', 'http GET /: got 200 (1 success)'],
      [2 * T, 'up>down', 'http GET /: got 500, want 200-399 (1 failure); held down 5 s: 2 state changes in 10 s'],
      [7 * T, 'down>up', 'http GET /: got 200 (1 success)'],
      // 23 s without a change: a single change in the window, no hold-down
      [30 * T, 'up>down', 'http GET /: got 500, want 200-399 (1 failure)'],
      [40 * T, 'down>up', 'http GET /: got 200 (1 success)'],
      // held again, but the doubling starts over at 5 s
      [41 * T, 'up>down', 'http GET /: got 500, want 200-399 (1 failure); held down 5 s: 2 state changes in 10 s'],
    ],
    final: { holdDowns: 1, transitions: [40 * T, 41 * T] },
  },
  {
    name: 'state changes spread wider than the window never hold down',
    start: 'up', t: { rise: 1, fall: 1 }, flap: { windowMs: 10_000, maxTransitions: 2 },
    steps: [[0, 'F'], [20_000, 'S'], [40_000, 'F'], [60_000, 'S'], [80_000, 'F']],
    want: [
      [0, 'up>down', 'http GET /: got 500, want 200-399 (1 failure)'],
      [20_000, 'down>up', 'http GET /: got 200 (1 success)'],
      [40_000, 'up>down', 'http GET /: got 500, want 200-399 (1 failure)'],
      [60_000, 'down>up', 'http GET /: got 200 (1 success)'],
      [80_000, 'up>down', 'http GET /: got 500, want 200-399 (1 failure)'],
    ],
    final: { holdDowns: 0, holdDownUntil: null, transitions: [80_000] },
  },
  {
    name: 'maxTransitions 0 turns damping off',
    start: 'down', t: { rise: 1, fall: 1 }, flap: { maxTransitions: 0 },
    steps: ['S', 'F', 'S', 'F', 'S', 'F', 'S'],
    want: [
      [1 * T, 'down>up', 'http GET /: got 200 (1 success)'],
      [2 * T, 'up>down', 'http GET /: got 500, want 200-399 (1 failure)'],
      [3 * T, 'down>up', 'http GET /: got 200 (1 success)'],
      [4 * T, 'up>down', 'http GET /: got 500, want 200-399 (1 failure)'],
      [5 * T, 'down>up', 'http GET /: got 200 (1 success)'],
      [6 * T, 'up>down', 'http GET /: got 500, want 200-399 (1 failure)'],
      [7 * T, 'down>up', 'http GET /: got 200 (1 success)'],
    ],
    final: { state: 'up', holdDowns: 0 },
  },
];

describe('health state machine (nextHealth)', () => {
  for (const c of cases) {
    it(c.name, () => {
      const t = c.t ?? { rise: 2, fall: 3 };
      const flap = { ...DEFAULT_FLAP_POLICY, ...c.flap };
      let record = initialHealth(c.start, 0);
      let now = 0;
      const got: Array<[number, string, string]> = [];
      for (const step of c.steps) {
        const [at, r] = typeof step === 'string' ? [now + T, step] : step;
        now = at;
        const result = r === 'S' ? OK : FAIL;
        const next = nextHealth(record, result, t, flap, now);
        if (next.transition) got.push([now, `${next.transition.from}>${next.transition.to}`, next.transition.reason]);
        // The record's state always agrees with the transitions.
        assert.equal(next.record.state, next.transition ? next.transition.to : record.state);
        assert.equal(next.record.lastResult, result);
        record = next.record;
      }
      assert.deepEqual(got, c.want);
      if (c.final) {
        const picked = Object.fromEntries(Object.keys(c.final).map((k) => [k, record[k as keyof HealthRecord]]));
        assert.deepEqual(picked, c.final);
      }
    });
  }

  it('does not change the record it was given (callers may keep the old one)', () => {
    const prev = initialHealth('up', 0);
    const frozen = structuredClone(prev);
    nextHealth(prev, FAIL, { rise: 1, fall: 1 }, DEFAULT_FLAP_POLICY, 1000);
    assert.deepEqual(prev, frozen);
  });

  it('initialHealth: the start state, no counts, no history', () => {
    for (const state of ['up', 'down'] as const) {
      assert.deepEqual(initialHealth(state, 42), {
        state, successes: 0, failures: 0, transitions: [], holdDownUntil: null, holdDowns: 0, since: 42,
      });
    }
  });

  it('DEFAULT_FLAP_POLICY: 4 changes in 60 s hold down 5 s, doubling up to 300 s', () => {
    assert.deepEqual({ ...DEFAULT_FLAP_POLICY }, { windowMs: 60_000, maxTransitions: 4, holdDownMs: 5_000, maxHoldDownMs: 300_000 });
  });

  it('formatDuration', () => {
    const table: Array<[number, string]> = [[500, '500 ms'], [1000, '1 s'], [2500, '2.5 s'], [60_000, '60 s'], [90_000, '90 s'], [120_000, '2 min'], [300_000, '5 min']];
    for (const [ms, want] of table) assert.equal(formatDuration(ms), want, `${ms}`);
  });
});

describe('slowStartWeight', () => {
  // [weight, upSince, slowStartMs, now, want]
  const table: Array<[string, number, number, number, number, number]> = [
    ['at the moment it came up: 1, never 0', 10, 1_000, 10_000, 1_000, 1],
    ['a quarter of the way: 1 + 9 × 0.25 rounded down', 10, 0, 10_000, 2_500, 3],
    ['half way', 10, 0, 10_000, 5_000, 5],
    ['just before the end', 10, 0, 10_000, 9_999, 9],
    ['at the end: the full weight', 10, 0, 10_000, 10_000, 10],
    ['long after', 10, 0, 10_000, 1e9, 10],
    ['a clock read before upSince: 1', 10, 5_000, 10_000, 4_000, 1],
    ['weight 1 is 1 throughout', 1, 0, 10_000, 5_000, 1],
    ['slow start off (0): the full weight at once', 100, 0, 0, 0, 100],
    ['configured weight 0 (quiescent by the operator\'s choice) stays 0', 0, 0, 10_000, 5_000, 0],
    ['large weights ramp linearly', 65_535, 0, 60_000, 30_000, 32_768],
  ];
  for (const [name, weight, since, slow, now, want] of table) {
    it(name, () => assert.equal(slowStartWeight(weight, since, slow, now), want));
  }

  it('never decreases while ramping and ends at the weight', () => {
    let last = 0;
    for (let now = 0; now <= 10_000; now += 137) {
      const w = slowStartWeight(7, 0, 10_000, now);
      assert.ok(w >= last && w >= 1 && w <= 7, `${now}: ${w}`);
      last = w;
    }
    assert.equal(slowStartWeight(7, 0, 10_000, 10_000), 7);
  });
});
