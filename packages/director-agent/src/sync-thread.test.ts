import assert from 'node:assert/strict';
import type { GroupState } from '@lbd/connsync';
import { DataPlaneError } from '@lbd/dataplane';
import type { Logger } from '@lbd/log';
import type { SyncHostOptions } from './sync-host.js';
import { crossableLogFields, syncThread } from './sync-thread.js';

/**
 * The sync thread's plumbing, without a kernel: nothing here starts following conntrack (start() would), so the
 * worker's table is made and never used. What crosses the thread boundary is checked: calls and their answers,
 * the worker's questions about a group's state, its log lines, and what happens once the thread has ended.
 * The HA and connection-sync tests run lbd-agent, which runs sync in this thread, against the kernel.
 */
describe('syncThread: connection sync in a worker thread of its own', function () {
  this.timeout(20_000);
  const options: SyncHostOptions = {
    self: 'dir1', peers: [{ id: 'dir2', address: '127.0.0.1', port: 1 }], security: { kind: 'insecure' }, listen: { address: '127.0.0.1', port: 0 },
  };

  it('answers calls, asks the main thread for a group\'s state, sends its log lines there; once closed, calls are refused', async () => {
    const lines: string[] = [];
    const keep = (level: string) => (msg: string): void => { lines.push(`${level} ${msg}`); };
    const log: Logger = { debug: keep('debug'), info: keep('info'), warn: keep('warn'), error: keep('error') };
    const asked: string[] = [];
    const groupState = async (group: string): Promise<GroupState> => {
      asked.push(group);
      if (group === 'broken') throw new Error('no such group here');
      return { role: 'leader', claimedAtUnixMs: 5, releasedAtUnixMs: 0, leaseDroppedPackets: 7 };
    };
    const host = syncThread({ ctnlHelper: 'perl' })(options, { log, groupState });
    try {
      await host.setConfig([], null);
      host.setMarks(new Map([['a', 1]]));
      const r = await host.report(['g1']);
      assert.deepEqual(r.notCaughtUp, { g1: 'no connection-sync stream from the leader' });
      assert.deepEqual({ connections: r.status.source.connections, leading: r.status.leading, senders: r.status.senders, receivers: r.status.receivers },
        { connections: 0, leading: [], senders: [], receivers: [] });

      // Counters only: the worker reads no table, it asks the main thread for the group's state.
      const h = await host.holding('g1', true);
      assert.deepEqual({ ...h, readAtUnixMs: 0 }, {
        director: 'dir1', role: 'leader', claimedAtUnixMs: 5, releasedAtUnixMs: 0, leaseDroppedPackets: 7, readAtUnixMs: 0, connections: new Map(),
      });
      await assert.rejects(host.holding('broken', true), { message: 'no such group here' });
      assert.deepEqual(asked, ['g1', 'broken']);
      assert.equal(await host.drain('dir2', 10), false, 'nothing is sent to dir2 while nothing is led');
      assert.ok(lines.includes('info connection sync talks ctnetlink'), `the worker's log line reached the main thread: ${JSON.stringify(lines)}`);
    } finally {
      await host.close();
    }
    await assert.rejects(host.report([]), /^Error: the connection-sync thread exited \(\d+\)$/);
    assert.ok(!lines.some((l) => l.startsWith('error')), `a close is not an error: ${JSON.stringify(lines)}`);
  });

  it('a log line\'s fields cross as the main logger writes them: an Error with its kind, a function as text', () => {
    const err = new DataPlaneError('CommandMissing', 'watch', { detail: 'perl not found: install perl-base' });
    const fields = crossableLogFields({ error: err, plain: new Error('no such group here'), fn: () => 1, peers: ['dir2'], n: 3 });
    assert.deepEqual(structuredClone(fields), {
      error: { kind: 'CommandMissing', message: err.message }, plain: 'no such group here', fn: '() => 1', peers: ['dir2'], n: 3,
    });
  });

  it('a thread that ends on its own is started again and told what the last one was; calls fail until then', async () => {
    const lines: string[] = [];
    const keep = (level: string) => (msg: string): void => { lines.push(`${level} ${msg}`); };
    const log: Logger = { debug: keep('debug'), info: keep('info'), warn: keep('warn'), error: keep('error') };
    const groupState = async (): Promise<GroupState> => ({ role: 'leader', claimedAtUnixMs: 0, releasedAtUnixMs: 0, leaseDroppedPackets: -1 });
    const host = syncThread({ ctnlHelper: 'perl', workerUrl: new URL('./sync-worker.fixture.js', import.meta.url) })(
      { ...options, peers: [] }, { log, groupState });
    try {
      await host.setConfig([], null);
      await host.setLeading(new Set(['g1']));
      // The fixture ends the thread as an exception nothing caught would.
      await assert.rejects(host.report(['end-the-thread']), /^Error: the connection-sync thread exited \(3\)$/);
      assert.ok(lines.includes('error the connection-sync thread ended; starting it again'), JSON.stringify(lines));
      // Asked in the same turn as the failure, before any timer (the restart's) can run.
      await assert.rejects(host.report([]), /^Error: the connection-sync thread exited \(3\)$/);
      for (let i = 0; i < 400 && !lines.includes('info the connection-sync thread started again'); i++) await new Promise((r) => setTimeout(r, 50));
      assert.ok(lines.includes('info the connection-sync thread started again'), `no restart within 20 s: ${JSON.stringify(lines)}`);
      const r = await host.report(['g1']);
      assert.deepEqual(r.status.leading, ['g1'], 'the new thread was told the groups led');
    } finally {
      await host.close();
    }
  });
});
