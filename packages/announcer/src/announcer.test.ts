import assert from 'node:assert/strict';
import { AnnouncerError, planRoutes, routeProblems, type Route } from './announcer.js';
import { FakeAnnouncer } from './testing/index.js';

const r = (prefix: string, nextHop: string, pathId: number): Route => ({ prefix, nextHop, pathId });

describe('routes', () => {
  it('planRoutes adds what is new and withdraws what is gone; an unchanged set plans nothing', () => {
    const a = r('198.18.0.10', '198.18.5.1', 1);
    const b = r('198.18.0.10', '198.18.5.2', 2);
    const c = r('fd00::10', 'fd00:5::1', 1);
    assert.deepEqual(planRoutes([a, b], [b, c]), { add: [c], withdraw: [a] });
    assert.deepEqual(planRoutes([a, b], [b, a, a]), { add: [], withdraw: [] });
    assert.deepEqual(planRoutes([], []), { add: [], withdraw: [] });
  });

  it('routeProblems names the route, the field, the rule and the fix', () => {
    assert.deepEqual(routeProblems([r('198.18.0.10', '198.18.5.1', 1), r('fd00::10', 'fd00:5::1', 1)]), []);
    const problems = routeProblems([
      r('198.18.0.010', '198.18.5.1', 1),
      r('198.18.0.10', 'fd00:5::1', 2),
      r('198.18.0.10', '198.18.5.1', 0),
      r('198.18.0.11', '198.18.5.1', 3),
      r('198.18.0.11', '198.18.5.2', 3),
      r('FD00::10', 'fd00:5::1', 1),
    ]);
    assert.equal(problems.length, 5, problems.join('\n'));
    assert.match(problems[0]!, /route 0 .*prefix "198.18.0.010" is not a canonical IPv4 or IPv6 address/);
    assert.match(problems[1]!, /route 1 .*an IPv4 vip needs an IPv4 next hop/);
    assert.match(problems[2]!, /route 2 .*pathId 0 must be an integer from 1 to 4294967295/);
    assert.match(problems[3]!, /route 4 .*pathId 3 is already the path via 198.18.5.1: each path of a prefix needs its own id/);
    assert.match(problems[4]!, /route 5 .*prefix "FD00::10" is not a canonical/);
  });
});

describe('FakeAnnouncer', () => {
  it('records each change, refuses bad routes whole, and fails the next call when told to', async () => {
    const f = new FakeAnnouncer();
    const a = r('198.18.0.10', '198.18.5.1', 1);
    await f.announce([a]);
    await f.announce([a]);
    assert.deepEqual(f.changes, [{ add: [a], withdraw: [] }]);
    await assert.rejects(f.announce([a, r('198.18.0.10', 'fd00::1', 2)]), (e: unknown) => e instanceof AnnouncerError && e.kind === 'InvalidRoute');
    assert.deepEqual(f.announced(), [a], 'a refused change applies nothing');
    f.failNext('gobgpd gone');
    await assert.rejects(f.withdrawAll(), (e: unknown) => e instanceof AnnouncerError && e.kind === 'SpeakerUnavailable');
    assert.deepEqual(f.announced(), [a]);
    await f.withdrawAll();
    assert.deepEqual(f.announced(), []);
  });
});
