import assert from 'node:assert/strict';
import type { RealServer, Scheduler } from '@lbd/config';
import { buildSlotTable, MAX_WEIGHTED_CYCLE, reduceWeights, smoothWeightedSequence } from './schedule.js';

const rs = (weights: number[]): RealServer[] => weights.map((weight, i) => ({ address: `198.19.1.${11 + i}`, port: 8080, weight, healthCheck: null }));

function counts(slots: readonly number[], n: number): number[] {
  const c = new Array<number>(n).fill(0);
  for (const s of slots) c[s]!++;
  return c;
}

describe('slot tables', () => {
  const cases: Array<{ scheduler: Scheduler; weights: number[]; selector: string; length: number; perServer: number[] }> = [
    { scheduler: 'rr', weights: [1, 1, 1], selector: 'numgen', length: 3, perServer: [1, 1, 1] },
    { scheduler: 'rr', weights: [5, 0, 1], selector: 'numgen', length: 2, perServer: [1, 0, 1] },
    { scheduler: 'wrr', weights: [1, 2, 3], selector: 'numgen', length: 6, perServer: [1, 2, 3] },
    { scheduler: 'wrr', weights: [100, 200, 300], selector: 'numgen', length: 6, perServer: [1, 2, 3] },
    { scheduler: 'wrr', weights: [0, 4, 0], selector: 'numgen', length: 1, perServer: [0, 1, 0] },
    { scheduler: 'sh', weights: [1, 3], selector: 'srchash', length: 4, perServer: [1, 3] },
    { scheduler: 'wrr', weights: [0, 0], selector: 'numgen', length: 0, perServer: [0, 0] },
  ];
  for (const c of cases) {
    it(`${c.scheduler} ${c.weights.join(':')} → ${c.selector} mod ${c.length}`, () => {
      const t = buildSlotTable({ scheduler: c.scheduler, realServers: rs(c.weights) });
      assert.equal(t.selector, c.selector);
      assert.equal(t.length, c.length);
      assert.equal(t.slots.length, c.length);
      assert.deepEqual(counts(t.slots, c.weights.length), c.perServer);
    });
  }

  it('interleaves servers rather than sending each a burst (smooth wrr)', () => {
    assert.deepEqual(smoothWeightedSequence([5, 1, 1]), [0, 0, 1, 0, 2, 0, 0]);
    assert.deepEqual(smoothWeightedSequence([1, 2, 3]), [2, 1, 0, 2, 1, 2]);
  });

  it('scales weight sums above the cycle cap, keeping every non-zero weight at least 1', () => {
    const r = reduceWeights([65535, 1, 30000]);
    assert.ok(r.reduce((a, b) => a + b, 0) <= MAX_WEIGHTED_CYCLE + 2);
    assert.equal(r[1], 1);
    assert.ok(Math.abs(r[0]! / r[2]! - 65535 / 30000) < 0.01);
    assert.deepEqual(reduceWeights([0, 0]), [0, 0]);
    assert.deepEqual(reduceWeights([4, 6, 0]), [2, 3, 0]);
  });

  it('mh gives a Maglev table of a prime size that never changes with weights', () => {
    const a = buildSlotTable({ scheduler: 'mh', realServers: rs([1, 1, 1]) });
    const b = buildSlotTable({ scheduler: 'mh', realServers: rs([1, 0, 1]) });
    assert.equal(a.selector, 'flowhash');
    assert.equal(a.length, 3203);
    assert.equal(b.length, 3203);
    assert.equal(counts(b.slots, 3)[1], 0);
  });
});
