import assert from 'node:assert/strict';
import { parseConfig, type Config } from '@lbd/config';
import { FakeClock } from '@lbd/health-checker/testing';
import { silentLogger } from '@lbd/log';
import { EventLog } from './events.js';
import { LimitWatch } from './limit-watch.js';

const CONFIG = parseConfig(`
services:
  - name: web
    vip: 198.18.0.10
    port: 80
    mode: nat
    connectionLimit: 5000
    realServers: [{ address: 198.19.1.11 }]
  - name: api
    vip: 198.18.0.10
    port: 443
    mode: nat
    realServers: [{ address: 198.19.1.11 }]
`, 'limit-watch');

describe('LimitWatch: the limit event when a connection limit bites, and when it stops', () => {
  /** The kernel's count for web; undefined: its limit has dropped nothing yet (limit_stats has no element). */
  let drops: number | undefined;
  let observed = 0;
  let config: Config = CONFIG;
  const read = async (): Promise<ReadonlyMap<string, number>> => {
    observed++;
    return new Map(drops === undefined ? [] : [['198.18.0.10:80/tcp', drops]]);
  };
  let clock: FakeClock;
  let events: EventLog;
  let watch: LimitWatch;

  beforeEach(() => {
    drops = undefined;
    observed = 0;
    config = CONFIG;
    clock = new FakeClock();
    events = new EventLog({ director: 'dir1', now: () => clock.now() });
    watch = new LimitWatch({ drops: read, config: () => config, events, clock, log: silentLogger, intervalMs: 5_000, quietMs: 60_000 });
    watch.start();
  });
  afterEach(() => watch.stop());

  const limitEvents = (): Array<[string, string, string, string]> =>
    events.recent(0).filter((e) => e.kind === 'limit').map((e) => [e.subject, e.from, e.to, e.fields.dropped ?? '']);

  it('records reached when drops grow (not for the baseline the first reading takes), and under after a quiet minute, with what was dropped', async () => {
    drops = 120; // dropped before the watch began (or before a restart): the baseline, not an event
    await clock.advance(5_000);
    assert.deepEqual(limitEvents(), []);
    drops = 150;
    await clock.advance(5_000);
    assert.deepEqual(limitEvents(), [['198.18.0.10:80/tcp', 'under', 'reached', '30']]);
    assert.match(events.recent(0).at(-1)!.reason, /^web holds its connection limit of 5000: new connections are dropped \(30 packets in the last 5 s\)$/);
    drops = 400;
    await clock.advance(5_000);
    assert.equal(limitEvents().length, 1, 'still reached: no second event');
    await clock.advance(55_000);
    assert.equal(limitEvents().length, 1, 'under a minute without a drop: still reached');
    await clock.advance(5_000);
    assert.deepEqual(limitEvents().at(-1), ['198.18.0.10:80/tcp', 'reached', 'under', '280']);
    drops = 401;
    await clock.advance(5_000);
    assert.deepEqual(limitEvents().at(-1), ['198.18.0.10:80/tcp', 'under', 'reached', '1']);
  });

  it('the first drops after a quiet start (no counter yet) are the limit reached', async () => {
    await clock.advance(10_000);
    assert.deepEqual(limitEvents(), []);
    drops = 12;
    await clock.advance(5_000);
    assert.deepEqual(limitEvents(), [['198.18.0.10:80/tcp', 'under', 'reached', '12']]);
  });

  it('a counter that went back (the table was rebuilt) is a new baseline, not a drop', async () => {
    drops = 500;
    await clock.advance(5_000);
    drops = 3;
    await clock.advance(5_000);
    assert.deepEqual(limitEvents(), []);
  });

  it('reads nothing from the kernel while no service has a limit', async () => {
    config = { ...CONFIG, services: CONFIG.services.filter((s) => s.connectionLimit === null) };
    await clock.advance(30_000);
    assert.equal(observed, 0);
    config = CONFIG;
    await clock.advance(5_000);
    assert.equal(observed, 1);
  });
});
