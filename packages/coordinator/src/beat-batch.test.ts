import assert from 'node:assert/strict';
import { BeatBatch } from './beat-batch.js';
import { FakeClock, MemoryKv } from './testing/index.js';

describe('BeatBatch: the beats asked for in one synchronous run leave as one transaction', () => {
  const setup = async (): Promise<{ kv: MemoryKv; batch: BeatBatch; revs: string[] }> => {
    const clock = new FakeClock(0);
    const kv = new MemoryKv(clock, 250);
    for (const k of ['a', 'b', 'c']) await kv.put(k, `${k}0`);
    const revs = await Promise.all(['a', 'b', 'c'].map(async (k) => (await kv.get(k))!.rev));
    return { kv, batch: new BeatBatch(kv, clock), revs };
  };

  it('three swaps, one transaction: each lands or loses on its own revision', async () => {
    const { kv, batch, revs } = await setup();
    const [a, b, c] = await Promise.all([batch.swap('a', revs[0]!, 'a1', 100), batch.swap('b', 'stale', 'b1', 100), batch.swap('c', revs[2]!, 'c1', 100)]);
    assert.equal(kv.calls.get('swapMany'), 1);
    assert.equal(kv.calls.get('swap'), undefined);
    assert.ok(a!.ok && c!.ok && a.rev === c.rev, JSON.stringify([a, c]));
    assert.deepEqual(b, { ok: false, current: { value: 'b0', rev: revs[1] } });
    assert.deepEqual(batch.sent, { transactions: 1, beats: 3 });
    assert.equal(kv.peek('b')?.value, 'b0');
  });

  it('a key asked for twice in one run goes in a transaction of its own; a lone swap is a plain one', async () => {
    const { kv, batch, revs } = await setup();
    const [first, second] = await Promise.all([batch.swap('a', revs[0]!, 'a1', 100), batch.swap('a', revs[0]!, 'a2', 100)]);
    assert.ok(first!.ok);
    assert.equal(second!.ok, false, 'the second try on the same revision finds the first landed');
    assert.equal(kv.calls.get('swap'), 2);
    assert.deepEqual(batch.sent, { transactions: 2, beats: 2 });
  });

  it('a transaction that fails fails every beat in it', async () => {
    const { kv, batch, revs } = await setup();
    kv.setFault({ kind: 'unreachable', fail: 'at-once' });
    const results = await Promise.allSettled([batch.swap('a', revs[0]!, 'a1', 100), batch.swap('b', revs[1]!, 'b1', 100)]);
    assert.deepEqual(results.map((r) => r.status), ['rejected', 'rejected']);
  });
});
