import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import { startEtcd, waitFor as poll, type RunningEtcd } from '@lbd/testkit';
import type { StoredEvent } from '@lbd/config';
import { EventStore } from './event-store.js';

/** The cluster event history against a real etcd on loopback. */

function ev(director: string, ms: number, seq: number, subject = 'front'): StoredEvent {
  return {
    id: `${String(ms).padStart(13, '0')}-${director}-${String(seq).padStart(6, '0')}`, timeUnixMs: ms, director, kind: 'role', subject,
    from: 'standby', to: 'leader', reason: `test ${seq}`, fields: { n: String(seq) },
  };
}

/** Polls `pred` every 5 ms for at most `ms`. */
const waitFor = (pred: () => boolean, ms: number, what: string): Promise<true> => poll(what, ms, async () => pred(), 5);

describe('EventStore: the cluster event history (real etcd on loopback)', function () {
  this.timeout(30_000);
  let etcd: RunningEtcd;
  let n = 0;
  let prefix = '';
  const open: EventStore[] = [];

  const store = (director: string, opts: { keep?: number; endpoints?: string[]; log?: { warn(m: string): void; info(m: string): void } } = {}): EventStore => {
    const s = new EventStore({ endpoints: opts.endpoints ?? etcd.endpoints, prefix, director, ...opts });
    open.push(s);
    return s;
  };

  before(async () => { etcd = await startEtcd(); });
  beforeEach(() => { prefix = `/lbd-events-${++n}`; });
  afterEach(async () => { await Promise.all(open.splice(0).map((s) => s.close(100))); });
  after(async () => { await etcd?.stop(); });

  it('appends without waiting, lists two directors merged by time, and filters by since', async () => {
    const a = store('dir1');
    const b = store('dir2');
    const t0 = Date.UTC(2026, 11, 1, 10, 0, 0);
    for (let i = 1; i <= 5; i++) a.append(ev('dir1', t0 + i * 10, i));
    for (let i = 1; i <= 5; i++) b.append(ev('dir2', t0 + i * 10 + 5, i));
    await waitFor(() => a.stats().written === 5 && b.stats().written === 5, 5000, 'both written');
    const reader = store('reader');
    const all = await reader.list(0, 100);
    assert.deepEqual(all.events.map((e) => `${e.director}:${e.reason}`), [
      'dir1:test 1', 'dir2:test 1', 'dir1:test 2', 'dir2:test 2', 'dir1:test 3', 'dir2:test 3', 'dir1:test 4', 'dir2:test 4', 'dir1:test 5', 'dir2:test 5',
    ]);
    const since = await reader.list(t0 + 35, 100);
    assert.deepEqual(since.events.map((e) => e.timeUnixMs - t0), [35, 40, 45, 50, 55], "at or after since");
    // limit: the newest, still oldest first.
    const last3 = await reader.list(0, 3);
    assert.deepEqual(last3.events.map((e) => e.timeUnixMs - t0), [45, 50, 55]);
  });

  it('trims its own events to `keep` and leaves the other director\'s alone', async () => {
    const a = store('dir1', { keep: 50 });
    const b = store('dir2', { keep: 50 });
    const t0 = Date.UTC(2026, 11, 1, 11, 0, 0);
    for (let i = 1; i <= 30; i++) b.append(ev('dir2', t0 + i, i));
    for (let i = 1; i <= 260; i++) a.append(ev('dir1', t0 + i, i));
    await waitFor(() => a.stats().written === 260 && b.stats().written === 30, 10_000, 'all written');
    // Trims run every 100 writes: append past the next one so that the last writes are trimmed too.
    for (let i = 261; i <= 360; i++) a.append(ev('dir1', t0 + i, i));
    await waitFor(() => a.stats().written === 360 && a.stats().queued === 0, 10_000, 'the rest written');
    await new Promise((r) => setTimeout(r, 300)); // the trim after the last batch
    const { events } = await store('reader').list(0, 10_000);
    const mine = events.filter((e) => e.director === 'dir1');
    // At most one trim interval plus one batch beyond keep.
    assert.ok(mine.length >= 50 && mine.length <= 50 + 100 + 64, `dir1 keeps about 50, has ${mine.length}`);
    assert.equal(a.stats().trimmed, 360 - mine.length, 'what is gone was trimmed, not lost');
    assert.equal(mine[mine.length - 1]!.reason, 'test 360', 'the newest stay');
    assert.equal(mine[0]!.reason, `test ${360 - mine.length + 1}`, 'the oldest go, in order');
    assert.equal(events.filter((e) => e.director === 'dir2').length, 30, 'another director\'s history is not trimmed by dir1');
  });

  it('watch from a list\'s revision sees every later append of any director, none twice', async () => {
    const a = store('dir1');
    const b = store('dir2');
    const t0 = Date.UTC(2026, 11, 1, 12, 0, 0);
    a.append(ev('dir1', t0, 1));
    await waitFor(() => a.stats().written === 1, 5000, 'first written');
    const reader = store('reader');
    const listed = await reader.list(0, 100);
    assert.equal(listed.events.length, 1);
    const seen: string[] = [];
    const errors: Error[] = [];
    const stop = await reader.watch(listed.revision, (e) => seen.push(`${e.director}:${e.reason}`), (err) => errors.push(err));
    a.append(ev('dir1', t0 + 1, 2));
    b.append(ev('dir2', t0 + 2, 1));
    await waitFor(() => seen.length === 2, 5000, 'two watched events');
    await stop();
    assert.deepEqual(seen.sort(), ['dir1:test 2', 'dir2:test 1']);
    assert.deepEqual(errors, []);
  });

  it('never blocks on an unreachable etcd: bounded queue, failures counted, the outage logged once', async () => {
    // A port that accepts and says nothing: every call runs into its deadline.
    const silent: Server = createServer(() => undefined);
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const port = (silent.address() as { port: number }).port;
    const warnings: string[] = [];
    const s = new EventStore({
      endpoints: [`http://127.0.0.1:${port}`], prefix, director: 'dir1', maxQueued: 10, callTimeoutMs: 100,
      log: { warn: (m) => warnings.push(m), info: () => undefined },
    });
    try {
      const t0 = Date.now();
      const started = performance.now();
      for (let i = 1; i <= 25; i++) s.append(ev('dir1', t0 + i, i));
      assert.ok(performance.now() - started < 50, 'append returns at once');
      await waitFor(() => s.stats().failures >= 2, 5000, 'two failed attempts');
      const st = s.stats();
      assert.equal(st.queued, 10, 'the queue is bounded');
      assert.equal(st.dropped, 15, 'the oldest were dropped and counted');
      assert.equal(st.failing, true);
      assert.equal(warnings.length, 1, `one warning for the outage, not one per attempt: ${warnings.join(' | ')}`);
    } finally {
      await s.close(50);
      silent.close();
    }
  });
});
