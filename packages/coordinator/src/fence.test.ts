import assert from 'node:assert/strict';
import { Fence } from './fence.js';
import { FakeClock } from './testing/index.js';
import { timingProblems, worstCaseTakeoverMs } from './timing.js';

describe('Fence (fake clock)', () => {
  it('fences exactly safetyWindowMs after the last confirmed send, never later', async () => {
    const clock = new FakeClock();
    const t0 = clock.now();
    let fencedAt: number | undefined;
    const fence = new Fence(clock, 1000, t0, () => { fencedAt = clock.now(); });
    await clock.advance(600);
    fence.sent();
    await clock.advance(50);
    fence.confirmed(); // proof from t0+600
    await clock.advance(900); // t0+1550 < t0+1600
    assert.equal(fencedAt, undefined);
    fence.sent(); // never answered
    await clock.advance(100);
    assert.equal(fencedAt, t0 + 1600);
  });

  it('a late answer proves only its send time', async () => {
    const clock = new FakeClock();
    const t0 = clock.now();
    let fencedAt: number | undefined;
    const fence = new Fence(clock, 1000, t0, () => { fencedAt = clock.now(); });
    fence.sent();
    await clock.advance(900);
    fence.confirmed(); // sent at t0: no extension
    await clock.advance(200);
    assert.equal(fencedAt, t0 + 1000);
  });
});

describe('timing rule', () => {
  const cases: Array<[string, { ttlMs: number; safetyWindowMs: number; maxClockDriftMs: number }, boolean]> = [
    ['default', { ttlMs: 2000, safetyWindowMs: 1000, maxClockDriftMs: 100 }, true],
    ['window too close to ttl', { ttlMs: 2000, safetyWindowMs: 1300, maxClockDriftMs: 100 }, false],
    ['window below keepalive interval', { ttlMs: 3000, safetyWindowMs: 900, maxClockDriftMs: 100 }, false],
    ['ttl 1 s', { ttlMs: 1000, safetyWindowMs: 400, maxClockDriftMs: 0 }, false],
  ];
  for (const [name, t, ok] of cases) it(`${name}: ${ok ? 'safe' : 'rejected'}`, () => assert.equal(timingProblems(t).length === 0, ok));
  it('worst-case takeover is ttl + drift', () => assert.equal(worstCaseTakeoverMs({ ttlMs: 2000, safetyWindowMs: 1000, maxClockDriftMs: 100 }), 2100));
});
