import assert from 'node:assert/strict';
import { FakeCoordinator } from '@lbd/coordinator/testing';
import type { LbdEvent } from '@lbd/config';
import type { EventQuery, EventSink } from '@lbd/operator-surfaces';
import { ClusterEventHistory, LocalEventHistory } from './event-query.js';
import { EventLog } from './events.js';

const query = (q: Partial<EventQuery> = {}): EventQuery => ({ sinceUnixMs: 0, follow: false, scope: 'cluster', limit: 100, kind: '', director: '', ...q });

function collect(): EventSink & { readonly got: LbdEvent[]; ended: boolean; failed: unknown } {
  const got: LbdEvent[] = [];
  return {
    got, ended: false, failed: null,
    event(e) { got.push(e); },
    end() { this.ended = true; },
    fail(err) { this.failed = err; },
  };
}

/** ListEvents' selection and merge, over the FakeCoordinator (no etcd). */
describe('event history', () => {
  let t: number;
  let dir1: EventLog;
  let dir2: EventLog;
  let coordinator: FakeCoordinator;
  beforeEach(() => {
    t = 1_764_583_200_000;
    dir1 = new EventLog({ director: 'dir1', now: () => t });
    dir2 = new EventLog({ director: 'dir2', now: () => t });
    coordinator = new FakeCoordinator();
    // What the cluster member does: every event of each director goes to the cluster's history too.
    dir1.subscribe((e) => coordinator.appendEvent(e));
    dir2.subscribe((e) => coordinator.appendEvent(e));
  });

  it('local: this director\'s log, the newest `limit` that match, then the end', async () => {
    dir1.record('role', 'front', '', 'standby', 'a');
    t++;
    dir1.record('config', 'config', '', 'applied', 'b');
    t++;
    dir1.record('role', 'front', 'standby', 'leader', 'c');
    const sink = collect();
    await new LocalEventHistory(dir1).list(query({ kind: 'role', limit: 1 }), sink);
    assert.deepEqual(sink.got.map((e) => e.reason), ['c']);
    assert.equal(sink.ended, true);
  });

  it('cluster: every director\'s events merged by time, each once; scope local reads this director\'s alone', async () => {
    dir1.record('role', 'front', '', 'leader', 'one');
    t++;
    dir2.record('role', 'front', '', 'standby', 'two');
    const history = new ClusterEventHistory(dir1, coordinator);
    const sink = collect();
    await history.list(query(), sink);
    assert.deepEqual(sink.got.map((e) => `${e.director} ${e.reason}`), ['dir1 one', 'dir2 two']);
    const local = collect();
    await history.list(query({ scope: 'local' }), local);
    assert.deepEqual(local.got.map((e) => e.reason), ['one']);
  });

  it('cluster, follow: new events of any director after the history, this director\'s once though etcd has a copy', async () => {
    dir1.record('config', 'config', '', 'applied', 'before');
    const sink = collect();
    const stop = await new ClusterEventHistory(dir1, coordinator).list(query({ follow: true }), sink);
    t++;
    dir1.record('config', 'config', 'applied', 'unchanged', 'mine');
    t++;
    dir2.record('role', 'front', '', 'leader', 'theirs');
    stop();
    dir2.record('role', 'front', 'leader', 'standby', 'after the stop');
    assert.deepEqual(sink.got.map((e) => e.reason), ['before', 'mine', 'theirs']);
    assert.equal(sink.ended, false);
  });

  it('cluster, etcd unreachable: the call fails and says where this director\'s own events are', async () => {
    coordinator.setUnreachable(true);
    await assert.rejects(new ClusterEventHistory(dir1, coordinator).list(query(), collect()), /lbadm events --local shows this director's/);
  });
});
