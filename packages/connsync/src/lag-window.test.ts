import { strict as assert } from 'node:assert';
import { LagWindow } from './lag-window.js';

describe('LagWindow', () => {
  it('reads the quantiles of the messages acknowledged within the window only', () => {
    const w = new LagWindow(10_000);
    // A slow start: ten messages of 150 ms at t = 0..9 ms.
    for (let i = 0; i < 10; i++) w.add(i, 150);
    // Then steady: 990 messages of 5..14 ms over the next 9.9 s.
    for (let i = 0; i < 990; i++) w.add(100 + i * 10, 5 + (i % 10));
    const early = w.quantiles(10_000);
    assert.equal(early.p99, 150, 'the slow start is 1% of the window while it is in it');
    const later = w.quantiles(10_050);
    assert.equal(later.p99, 14, 'and no longer counts once older than the window');
    assert.equal(later.p50, 10);
  });

  it('says 0 with nothing acknowledged in the window', () => {
    const w = new LagWindow(10_000);
    assert.deepEqual(w.quantiles(5), { p50: 0, p99: 0 });
    w.add(0, 40);
    assert.deepEqual(w.quantiles(10_000), { p50: 40, p99: 40 });
    assert.deepEqual(w.quantiles(10_001), { p50: 0, p99: 0 });
  });

  it('keeps the newest samples when more arrive within the window than it holds', () => {
    const w = new LagWindow(10_000, 4);
    for (const [at, lag] of [[1, 100], [2, 100], [3, 1], [4, 2], [5, 3], [6, 4]] as const) w.add(at, lag);
    assert.deepEqual(w.quantiles(6), { p50: 3, p99: 4 });
  });

  it('rounds to a tenth of a millisecond', () => {
    const w = new LagWindow();
    w.add(0, 12.345);
    assert.deepEqual(w.quantiles(0), { p50: 12.3, p99: 12.3 });
  });
});
