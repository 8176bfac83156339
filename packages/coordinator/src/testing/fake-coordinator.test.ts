import assert from 'node:assert/strict';
import type { StoredEvent } from '@lbd/config';
import { FakeCoordinator } from './index.js';

const event = (director: string, timeUnixMs: number, seq: number): StoredEvent => ({
  id: `${String(timeUnixMs).padStart(13, '0')}-${director}-${String(seq).padStart(6, '0')}`, timeUnixMs, director,
  kind: 'config', subject: 'config', from: '', to: 'applied', reason: 'test', fields: {},
});

/** The fake coordinator itself: what tests of the agent rely on it for. */
describe('FakeCoordinator', () => {
  it('cluster config: compare-and-swap on the revision, history, and a watch that sees every write', async () => {
    const c = new FakeCoordinator();
    const seen: Array<number | null> = [];
    const stop = await c.watchConfig((cfg) => seen.push(cfg?.revision ?? null));
    assert.equal(await c.currentConfig(), null);
    assert.deepEqual(await c.writeConfig({ text: 'a', author: 't', at: 1, comment: '' }, 0), { ok: true, revision: 1 });
    assert.deepEqual(await c.writeConfig({ text: 'b', author: 't', at: 2, comment: '' }, 0), { ok: false, reason: 'conflict', current: 1 });
    assert.deepEqual(await c.writeConfig({ text: 'b', author: 't', at: 2, comment: '' }, 1), { ok: true, revision: 2 });
    assert.deepEqual((await c.configHistory()).map((h) => h.text), ['a', 'b']);
    assert.equal((await c.configAt(1))?.text, 'a');
    assert.equal(await c.configAt(3), null);
    await stop();
    assert.deepEqual(seen.filter((r) => r !== null), [1, 2]);
  });

  it('events: the newest `limit` since a time, oldest first; a watch from the listed revision misses nothing', async () => {
    const c = new FakeCoordinator();
    c.appendEvent(event('dir1', 10, 1));
    c.appendEvent(event('dir2', 20, 1));
    c.appendEvent(event('dir1', 30, 2));
    const listed = await c.listEvents(15, 10);
    assert.deepEqual(listed.events.map((e) => e.timeUnixMs), [20, 30]);
    assert.deepEqual((await c.listEvents(0, 1)).events.map((e) => e.timeUnixMs), [30]);
    c.appendEvent(event('dir2', 40, 2));
    const got: number[] = [];
    const stop = await c.watchEvents(listed.revision, (e) => got.push(e.timeUnixMs), () => undefined);
    c.appendEvent(event('dir1', 50, 3));
    await stop();
    c.appendEvent(event('dir1', 60, 4));
    assert.deepEqual(got, [40, 50]);
  });

  it('faults: unreachable fails config and event calls until cleared; failovers answer what the test sets', async () => {
    const c = new FakeCoordinator({ self: 'dir2' });
    c.setUnreachable(true);
    await assert.rejects(c.currentConfig());
    await assert.rejects(c.listEvents(0, 10), /unreachable/);
    assert.equal((await c.status(['g'])).etcd.reachable, false);
    c.setUnreachable(false);
    assert.equal(await c.currentConfig(), null);
    await assert.rejects(c.failover('g'), /no leader/);
    c.onFailover = (group, to) => ({ from: 'dir1', to: to ?? 'dir2', tookMs: 1 });
    assert.deepEqual(await c.failover('g', 'dir3'), { from: 'dir1', to: 'dir3', tookMs: 1 });
    assert.deepEqual(c.failovers, [{ group: 'g', to: undefined }, { group: 'g', to: 'dir3' }]);
    assert.deepEqual((await c.status(['g'])).groups, [{ name: 'g', record: null }]);
  });
});
