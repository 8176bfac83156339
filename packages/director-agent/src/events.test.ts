import assert from 'node:assert/strict';
import { parseConfig } from '@lbd/config';
import { isLbdEvent, type LbdEvent } from '@lbd/config';
import { EventLog, eventId, summarizeServiceChanges } from './events.js';

describe('EventLog', () => {
  it('gives each event a unique id that sorts by time: 13-digit ms, director, 6-digit sequence', () => {
    let t = 1_764_583_200_000;
    const log = new EventLog({ director: 'dir1', now: () => t });
    const a = log.record('role', 'front', 'standby', 'leader', 'elected: no leader yet');
    const b = log.record('vip', '198.18.0.10', 'released', 'held', 'vip group front led here');
    t += 5;
    const c = log.record('health', 'web 198.19.1.12:8080', 'up', 'down', 'http GET /: got 500', { latencyMs: 3.5, held: false });
    assert.equal(a.id, '1764583200000-dir1-000001');
    assert.equal(b.id, '1764583200000-dir1-000002');
    assert.equal(c.id, '1764583200005-dir1-000003');
    assert.deepEqual(c.fields, { latencyMs: '3.5', held: 'false' }, 'fields are strings');
    assert.equal(c.director, 'dir1');
    assert.equal(eventId(42, 'x', 7), '0000000000042-x-000007');
    assert.ok(isLbdEvent(c));
    assert.ok(!isLbdEvent({ ...c, kind: 'nonsense' }));
  });

  it('keeps time from running backwards, so ids stay in recording order when the wall clock is stepped back', () => {
    let t = 2_000_000;
    const log = new EventLog({ director: 'dir1', now: () => t });
    const a = log.record('config', 'config', '', 'applied', 'r1');
    t -= 60_000;
    const b = log.record('config', 'config', 'applied', 'unchanged', 'r1 again');
    assert.equal(b.timeUnixMs, a.timeUnixMs);
    assert.ok(b.id > a.id);
  });

  it('keeps the newest `limit` events, oldest first, and recent(since) selects by time', () => {
    let t = 1000;
    const log = new EventLog({ director: 'd', limit: 10, now: () => t++ });
    for (let i = 0; i < 37; i++) log.record('health', `s${i}`, 'up', 'down', `r${i}`);
    const kept = log.recent(0);
    assert.equal(kept.length, 10);
    assert.deepEqual(kept.map((e) => e.subject), Array.from({ length: 10 }, (_, i) => `s${27 + i}`));
    assert.equal(log.recorded, 37);
    // Event i was recorded at 1000 + i.
    assert.deepEqual(log.recent(1000 + 34).map((e) => e.subject), ['s34', 's35', 's36']);
    assert.deepEqual(log.recent(1000 + 37), []);
    assert.equal(log.recent(0).length, 10, 'recent never returns more than the limit');
  });

  it('tells every subscriber each event in order; unsubscribe stops it; a throwing subscriber harms nobody', () => {
    const errors: unknown[] = [];
    const log = new EventLog({ director: 'd', onSubscriberError: (e) => errors.push(e) });
    const a: string[] = [];
    const b: string[] = [];
    const offA = log.subscribe((e) => a.push(e.reason));
    log.subscribe(() => { throw new Error('broken subscriber'); });
    log.subscribe((e) => b.push(e.reason));
    log.record('sync', 'dir2 send', '', 'streaming', 'one');
    offA();
    log.record('sync', 'dir2 send', 'streaming', 'down', 'two');
    assert.deepEqual(a, ['one']);
    assert.deepEqual(b, ['one', 'two']);
    assert.equal(errors.length, 2);
    assert.equal(log.subscriberCount, 2);
    assert.equal(log.recent(0).length, 2, 'both were recorded despite the throwing subscriber');
  });

  it('refuses a director name that cannot be part of an id or an etcd key', () => {
    assert.throws(() => new EventLog({ director: '' }), /director/);
    assert.throws(() => new EventLog({ director: 'a/b' }), /director/);
  });

  it('cuts a runaway reason so one event cannot hold megabytes', () => {
    const log = new EventLog({ director: 'd' });
    const e: LbdEvent = log.record('config', 'config', '', 'rejected', 'x'.repeat(100_000));
    assert.ok(e.reason.length <= 2000);
  });
});

describe('summarizeServiceChanges', () => {
  const base = `services:
  - name: web
    vip: 198.18.0.10
    port: 80
    mode: nat
    realServers:
      - { address: 198.19.1.11, port: 8080, weight: 1 }
      - { address: 198.19.1.12, port: 8080, weight: 2 }
`;
  const services = (text: string) => parseConfig(text, 't').services;

  it('names services added, removed and changed, with real servers reweighted, added and removed', () => {
    const after = base.replace('weight: 2', 'weight: 0').replace('      - { address: 198.19.1.11, port: 8080, weight: 1 }\n', '      - { address: 198.19.1.13, port: 8080 }\n')
      + '  - { name: dns, vip: 198.18.0.53, port: 53, protocol: udp, mode: nat, realServers: [{ address: 198.19.1.53, port: 53 }] }\n';
    assert.equal(summarizeServiceChanges(services(base), services(after)),
      '+dns; ~web (+198.19.1.13:8080, 198.19.1.12:8080 weight 2 -> 0, -198.19.1.11:8080)');
    assert.equal(summarizeServiceChanges(services(after), services(base)).startsWith('-dns; ~web'), true);
    assert.equal(summarizeServiceChanges(services(base), services(base)), '');
    assert.equal(summarizeServiceChanges([], services(base)), '+web');
    assert.equal(summarizeServiceChanges(services(base), services(base.replace('mode: nat', 'mode: nat\n    scheduler: sh'))), '~web (scheduler)');
  });
});
