import assert from 'node:assert/strict';
import { buildMaglevTable, maglevTableSize, nextPrime, type MaglevRealServer } from './maglev.js';

function shares(table: Int32Array, n: number): number[] {
  const counts = new Array<number>(n).fill(0);
  for (const i of table) counts[i]!++;
  return counts.map((c) => c / table.length);
}

function servers(weights: number[]): MaglevRealServer[] {
  return weights.map((weight, i) => ({ name: `198.19.1.${10 + i}#8080`, weight }));
}

describe('maglev', () => {
  it('sizes the table as a prime of at least 100 x the real servers, constant up to 32', () => {
    for (const n of [1, 3, 10, 32]) assert.equal(maglevTableSize(n), 3203);
    assert.equal(maglevTableSize(33), nextPrime(6400));
    assert.ok(maglevTableSize(200) >= 20000);
    assert.equal(nextPrime(3200), 3203);
  });

  const weightCases: Array<{ name: string; weights: number[] }> = [
    { name: 'three equal', weights: [1, 1, 1] },
    { name: 'ten equal', weights: new Array(10).fill(1) },
    { name: '1:2:3', weights: [1, 2, 3] },
    { name: '1:2:3:4', weights: [1, 2, 3, 4] },
    { name: '100:1', weights: [100, 1] },
    { name: 'one quiescent', weights: [5, 0, 5] },
    { name: '32 mixed', weights: Array.from({ length: 32 }, (_, i) => 1 + (i % 4)) },
  ];
  for (const c of weightCases) {
    it(`gives each real server its weight share within 1% (${c.name})`, () => {
      const table = buildMaglevTable(servers(c.weights), maglevTableSize(c.weights.length));
      const total = c.weights.reduce((a, b) => a + b, 0);
      shares(table, c.weights.length).forEach((share, i) => {
        assert.ok(Math.abs(share - c.weights[i]! / total) <= 0.01, `server ${i}: share ${share.toFixed(4)} vs weight share ${(c.weights[i]! / total).toFixed(4)}`);
      });
    });
  }

  for (const n of [2, 3, 5, 10, 20, 32]) {
    it(`moves at most 1/N + 3% of slots when one of ${n} real servers is removed`, () => {
      const all = servers(new Array(n).fill(1));
      const size = maglevTableSize(n);
      const before = Array.from(buildMaglevTable(all, size), (i) => all[i]!.name);
      for (let gone = 0; gone < n; gone++) {
        const rest = all.filter((_, i) => i !== gone);
        const after = Array.from(buildMaglevTable(rest, size), (i) => rest[i]!.name);
        const moved = before.filter((name, slot) => name !== after[slot]).length / size;
        assert.ok(moved <= 1 / n + 0.03, `removing ${gone}: moved ${(moved * 100).toFixed(2)}% > ${(100 / n + 3).toFixed(2)}%`);
        // Only the removed server's slots may be given away... plus Maglev's small reshuffle.
        assert.ok(moved >= 1 / n - 0.01);
      }
    });
  }

  it('does not depend on the order real servers are listed in', () => {
    const list = servers([1, 2, 3, 4]);
    const size = maglevTableSize(4);
    const a = Array.from(buildMaglevTable(list, size), (i) => list[i]!.name);
    const reversed = [...list].reverse();
    const b = Array.from(buildMaglevTable(reversed, size), (i) => reversed[i]!.name);
    assert.deepEqual(a, b);
  });

  it('leaves every slot empty when no real server has weight', () => {
    assert.ok(buildMaglevTable(servers([0, 0]), 7).every((i) => i === -1));
  });
});
