import assert from 'node:assert/strict';
import { FakeClock, MemoryKv } from './index.js';

/** The fake etcd itself: what the election scenarios rely on it for. */
describe('MemoryKv', () => {
  let clock: FakeClock;
  let kv: MemoryKv;
  beforeEach(() => {
    clock = new FakeClock(0);
    kv = new MemoryKv(clock, 100);
  });

  it('revisions: one per write transaction; entries carry their mod revision', async () => {
    assert.deepEqual(await kv.swap('k', null, 'v1', undefined, { key: 'h', value: 'x' }), { ok: true, rev: '1' });
    await kv.put('j', 'w');
    await kv.delete('nothing'); // deleting nothing writes nothing
    assert.equal(kv.revision, 2);
    assert.deepEqual(await kv.get('k'), { value: 'v1', rev: '1' });
    assert.deepEqual(await kv.list(''), [{ key: 'h', value: 'x', rev: '1' }, { key: 'j', value: 'w', rev: '2' }, { key: 'k', value: 'v1', rev: '1' }]);
  });

  it('compare-and-swap: on the mod revision; a lost swap returns what is there', async () => {
    await kv.put('k', 'v1');
    assert.deepEqual(await kv.swap('k', null, 'x'), { ok: false, current: { value: 'v1', rev: '1' } });
    assert.deepEqual(await kv.swap('k', '7', 'x'), { ok: false, current: { value: 'v1', rev: '1' } });
    assert.deepEqual(await kv.swap('k', '1', 'v2'), { ok: true, rev: '2' });
    assert.deepEqual(await kv.swap('gone', '1', 'x'), { ok: false, current: null });
  });

  it('watches: puts and deletes in order, per key or prefix; cancel stops them', async () => {
    const seen: string[] = [];
    const other = kv.connect();
    const w = await other.watchPrefix('p/', { put: (e) => seen.push(`put ${e.key}=${e.value}@${e.rev}`), delete: (e) => seen.push(`del ${e.key}@${e.rev}`) });
    await kv.put('p/a', '1');
    await kv.put('q', 'no');
    await kv.delete('p/a');
    await kv.swap('p/b', null, '2');
    await w.cancel();
    await kv.put('p/c', '3');
    assert.deepEqual(seen, ['put p/a=1@1', 'del p/a@3', 'put p/b=2@4']);
  });

  const faults = [
    { name: 'unreachable at the deadline', fault: { kind: 'unreachable' } as const, failsAt: 100, lands: false },
    { name: 'unreachable at once', fault: { kind: 'unreachable', fail: 'at-once' } as const, failsAt: 0, lands: false },
    { name: 'slower than the deadline (lands anyway, later)', fault: { kind: 'slow', ms: 150 } as const, failsAt: 100, lands: true },
  ];
  for (const f of faults) {
    it(`faults: ${f.name}`, async () => {
      const c = kv.connect();
      c.setFault(f.fault);
      let failedAt: number | null = null;
      void c.put('k', 'v').catch(() => { failedAt = clock.now(); });
      await clock.advance(f.failsAt === 0 ? 0 : f.failsAt - 1);
      if (f.failsAt > 0) assert.equal(failedAt, null, 'not before the deadline');
      await clock.advance(1);
      assert.equal(failedAt, f.failsAt);
      await clock.advance(100);
      assert.equal(kv.peek('k')?.value, f.lands ? 'v' : undefined);
      const r = c.reachable(50, { read: 'k' });
      await clock.advance(50);
      assert.equal(await r, false, 'reachable: false');
    });
  }

  it('faults: slow, within the deadline: lands and answers after the delay; reachable', async () => {
    const c = kv.connect();
    c.setFault({ kind: 'slow', ms: 30 });
    let doneAt: number | null = null;
    void c.put('k', 'v').then(() => { doneAt = clock.now(); });
    await clock.advance(29);
    assert.equal(kv.peek('k'), null);
    await clock.advance(1);
    assert.equal(doneAt, 30);
    const r = c.reachable(50, { read: 'k' });
    await clock.advance(30);
    assert.equal(await r, true);
  });

  it('faults: a lost answer: the write lands, the caller hears nothing and fails at its deadline', async () => {
    kv.loseAnswers(1);
    let failedAt: number | null = null;
    void kv.put('k', 'v').catch(() => { failedAt = clock.now(); });
    await clock.flush();
    assert.equal(kv.peek('k')?.value, 'v');
    await clock.advance(100);
    assert.equal(failedAt, 100);
    await kv.put('k', 'w'); // one only
  });

  it('a link that heals: its watches report connected, then every missed event in order', async () => {
    const c = kv.connect();
    const seen: string[] = [];
    await c.watchKey('k', { put: (e) => seen.push(e.value), connected: () => seen.push('connected') });
    c.setFault({ kind: 'unreachable' });
    await kv.put('k', '1');
    await kv.put('k', '2');
    assert.deepEqual(seen, []);
    c.setFault(null);
    assert.deepEqual(seen, ['connected', '1', '2']);
  });

  it('held (a frozen process): calls land, answers and events wait for the thaw', async () => {
    const c = kv.connect();
    const seen: string[] = [];
    await c.watchKey('k', { put: (e) => seen.push(`event ${e.value}`), connected: () => seen.push('connected') });
    c.setFault({ kind: 'held' });
    void c.put('k', 'mine').then(() => seen.push('answer'));
    await clock.advance(1000);
    assert.equal(kv.peek('k')?.value, 'mine');
    assert.deepEqual(seen, []);
    c.setFault(null);
    await clock.flush();
    assert.deepEqual(seen.sort(), ['answer', 'event mine']);
  });

  it('a store fault is every client\'s: a frozen etcd', async () => {
    const c = kv.connect();
    kv.setStoreFault({ kind: 'unreachable', fail: 'at-once' });
    await assert.rejects(c.get('k'));
    await assert.rejects(kv.get('k'));
    kv.setStoreFault(null);
    assert.equal(await c.get('k'), null);
  });

  it('leases: kept alive while the client reaches the store; lost (keys gone) when it cannot', async () => {
    const c = kv.connect();
    const lease = c.lease(1);
    let lost = false;
    lease.onLost(() => { lost = true; });
    await lease.put('d/a', 'me');
    await clock.advance(5000);
    assert.equal(kv.peek('d/a')?.value, 'me');
    c.setFault({ kind: 'unreachable' });
    await clock.advance(1500);
    assert.equal(kv.peek('d/a'), null);
    assert.equal(lost, true);
    const l2 = kv.lease(5);
    await l2.put('d/b', 'x');
    await l2.revoke();
    assert.equal(kv.peek('d/b'), null);
  });
});
