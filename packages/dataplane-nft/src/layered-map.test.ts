import assert from 'node:assert/strict';
import { layered } from './layered-map.js';

describe('layered', () => {
  const base = new Map(Array.from({ length: 100 }, (_, i) => [`k${i}`, i]));

  it('reads as the base with keys set and deleted, in Map order: the base\'s keys in place, then new ones', () => {
    const m = layered(base, new Map([['k1', -1], ['new', 1000]]), ['k2', 'absent']);
    assert.equal(m.size, 100);
    assert.equal(m.get('k1'), -1);
    assert.equal(m.get('k2'), undefined);
    assert.equal(m.has('k2'), false);
    assert.equal(m.has('absent'), false);
    assert.equal(m.get('new'), 1000);
    assert.equal(m.get('k3'), 3);
    const plain = new Map(base);
    plain.set('k1', -1).set('new', 1000).delete('k2');
    assert.deepEqual([...m], [...plain]);
    assert.deepEqual([...m.keys()], [...plain.keys()]);
    assert.deepEqual([...m.values()], [...plain.values()]);
    const seen: string[] = [];
    m.forEach((v, k) => seen.push(`${k}=${v}`));
    assert.deepEqual(seen, [...plain].map(([k, v]) => `${k}=${v}`));
  });

  it('layers on layers read through; deep or large ones are flattened into a plain Map with the same content', () => {
    let m: ReadonlyMap<string, number> = base;
    const plain = new Map(base);
    for (let i = 0; i < 20; i++) {
      m = layered(m, new Map([[`k${i}`, i * 10]]), [`k${99 - i}`]);
      plain.set(`k${i}`, i * 10).delete(`k${99 - i}`);
      assert.deepEqual([...m], [...plain], `after layer ${i + 1}`);
      assert.equal(m.size, plain.size);
    }
    assert.ok(layered(base, new Map(Array.from({ length: 20 }, (_, i) => [`n${i}`, i])), []) instanceof Map, 'changes beyond an eighth of the base: a plain Map');
    assert.ok(layered(undefined, new Map([['a', 1]]), []) instanceof Map);
  });
});
