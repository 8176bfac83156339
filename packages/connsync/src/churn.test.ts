import assert from 'node:assert/strict';
import { ChurnTable, FoldingQueue } from './churn.js';

describe('ChurnTable and FoldingQueue: string-keyed tables for entries that come and go', () => {
  it('a ChurnTable gets, sets, deletes and counts as a Map does, in insertion order', () => {
    const t = new ChurnTable<number>();
    for (const [k, v] of [['tcp b', 1], ['tcp a', 2], ['udp c', 3]] as const) t.set(k, v);
    t.set('tcp b', 4); // replaced in place: no new entry
    assert.equal(t.size, 3);
    assert.deepEqual([...t], [['tcp b', 4], ['tcp a', 2], ['udp c', 3]]);
    assert.deepEqual(t.values(), [4, 2, 3]);
    assert.equal(t.delete('tcp a'), true);
    assert.equal(t.delete('tcp a'), false);
    assert.deepEqual([t.has('tcp a'), t.get('tcp a'), t.has('udp c'), t.get('udp c'), t.size], [false, undefined, true, 3, 2]);
    // Keys an ordinary object would take from its prototype are ordinary keys here.
    for (const k of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
      assert.equal(t.has(k), false, k);
      t.set(k, 9);
      assert.equal(t.get(k), 9, k);
    }
    assert.equal(t.size, 6);
    // add sets only a key not there yet, and says whether it did.
    assert.deepEqual([t.add('udp c', 7), t.get('udp c'), t.add('tcp d', 8), t.get('tcp d'), t.size], [false, 3, true, 8, 7]);
    assert.deepEqual(t.values(), [4, 3, 9, 9, 9, 9, 8]);
    t.clear();
    assert.deepEqual([t.size, [...t]], [0, []]);
  });

  it('a ChurnTable skips, as a Map, what is deleted during a loop before its turn; deleting the current one is fine', () => {
    const t = new ChurnTable<string>();
    for (let i = 0; i < 10; i++) t.set(`k${i}`, `v${i}`);
    const seen: string[] = [];
    for (const [k] of t) {
      seen.push(k);
      t.delete(k);
      if (k === 'k2') t.delete('k5');
    }
    assert.deepEqual(seen, ['k0', 'k1', 'k2', 'k3', 'k4', 'k6', 'k7', 'k8', 'k9']);
    assert.equal(t.size, 0);
  });

  it('a FoldingQueue takes oldest first; a key put again keeps its place with the folded value', () => {
    const q = new FoldingQueue<{ v: string; first: string }>();
    const fold = (queued: { first: string }, x: { v: string }): { v: string; first: string } => ({ v: x.v, first: queued.first });
    q.put('a', { v: 'a1', first: 'a1' }, fold);
    q.put('b', { v: 'b1', first: 'b1' }, fold);
    q.put('a', { v: 'a2', first: 'a2' }, fold);
    q.put('c', { v: 'c1', first: 'c1' }, fold);
    assert.equal(q.size, 3);
    assert.deepEqual(q.take(2), [{ v: 'a2', first: 'a1' }, { v: 'b1', first: 'b1' }]);
    q.put('a', { v: 'a3', first: 'a3' }, fold); // taken before: queued anew, at the end
    assert.deepEqual(q.take(10), [{ v: 'c1', first: 'c1' }, { v: 'a3', first: 'a3' }]);
    assert.deepEqual([q.size, q.take(5)], [0, []]);
    q.put('d', { v: 'd1', first: 'd1' }, fold);
    q.clear();
    assert.deepEqual([q.size, q.take(5)], [0, []]);
  });

  it('a FoldingQueue lets a key go when its fold says null; put back, it is queued once, with its new value', () => {
    const q = new FoldingQueue<string>();
    const fold = (queued: string, x: string): string | null => (x === 'gone' ? null : `${queued}+${x}`);
    assert.equal(q.put('a', 'a1', fold), true);
    assert.equal(q.put('b', 'b1', fold), true);
    assert.equal(q.put('a', 'gone', fold), false);
    assert.equal(q.size, 1);
    assert.equal(q.put('a', 'a2', fold), true);
    assert.equal(q.put('c', 'c1', fold), true);
    assert.equal(q.size, 3);
    // 'a' comes back in its first place (changes of different keys are independent); its second place is empty.
    assert.deepEqual(q.take(10), ['a2', 'b1', 'c1']);
    assert.deepEqual([q.size, q.take(10)], [0, []]);
    q.put('d', 'd1', fold);
    q.put('d', 'gone', fold);
    assert.deepEqual([q.size, q.take(10)], [0, []]);
  });

  it('a FoldingQueue stays in order through many puts and takes (its order list is compacted as it goes)', () => {
    const q = new FoldingQueue<number>();
    let next = 0;
    let expected = 0;
    for (let round = 0; round < 200; round++) {
      for (let i = 0; i < 37; i++, next++) q.put(`k${next}`, next, (_, v) => v);
      for (const v of q.take(29)) assert.equal(v, expected++);
    }
    for (const v of q.take(Infinity)) assert.equal(v, expected++);
    assert.deepEqual([expected, q.size], [next, 0]);
  });
});
