import assert from 'node:assert/strict';
import { drillLabel, drillPassed, drillProblems, drillRecord, formatDrill, leaderFigures, measureLoad, summary, type DrillResult, type RequestRecord } from './drill.js';
import type { DirectorName } from './cluster-topology.js';
import type { ClusterStatusView } from './ha-lab.js';

/** The drill's judgement and its result as the lab stores it in the agents' event log (RecordDrill). */
describe('drillRecord', () => {
  const none = { packets: 0, firstMs: null, lastMs: null };
  const ok: DrillResult = {
    scenario: 'box-death', pauseMs: null, thawedAtMs: null, busyCores: 0, failedAt: Date.UTC(2026, 11, 1, 10, 0, 0), injectMs: 3, oldLeader: 'dir1', newLeader: 'dir2', moved: true,
    worstCaseTakeoverMs: 340, noServiceMs: 352, restoredAfterMs: 355, outageEndMs: 355, recovered: true, requests: 900, failedRequests: 60,
    failedStartsMs: [], inFlightAtFailure: 1, errors: { timeout: 60 }, streams: 10, brokenConnections: 0, streamErrors: [],
    drStreams: 10, brokenDrStreams: 0, drStreamErrors: [],
    forwarded: { dir1: none, dir2: { packets: 2400, firstMs: 351.2, lastMs: 1830.4 } }, arpSent: { dir1: none, dir2: { packets: 9, firstMs: 345.1, lastMs: 1750 } },
    dualForwarding: 0, dualForwardingMs: 0, dualAnswering: 0, dualAnsweringMs: 0, capturedPackets: 3000, unattributedPackets: 0,
    leaderChanges: 1, flapped: false,
    dualHolding: 0, dualHoldingMs: 0, dualHoldingIntervals: [], holdIntervals: { dir1: [], dir2: [] },
    releasedAtMs: null, claimedAtMs: 340.5, releaseToClaimMs: 340.5, skewedDualSamples: 0, holderChanges: [], holderSamples: 100,
    transitionsChanged: true, steadyAfterMs: 0,
  };

  it('a drill that recovered with one director forwarding and answering at a time passes; the summary is the reason, the figures are fields', () => {
    const r = drillRecord(ok);
    assert.deepEqual([r.scenario, r.result, r.reason], ['box-death', 'pass', summary(ok)]);
    assert.deepEqual([r.fields.oldLeader, r.fields.newLeader, r.fields.noServiceMs, r.fields.brokenConnections, r.fields.dualForwarding, r.fields.dualHolding, r.fields.failedAt],
      ['dir1', 'dir2', '352', '0', '0', '0', '2026-12-01T10:00:00.000Z']);
    assert.ok(Object.values(r.fields).every((v) => typeof v === 'string'));
  });

  const failing: [string, Partial<DrillResult>, RegExp, string][] = [
    ['dual forwarding', { dualForwarding: 12, dualForwardingMs: 2480.5 }, /both directors forwarded for the vip: dir1 still 12 packets over 2480\.5 ms after dir2's first/, 'dual-forwarding'],
    ['dual ARP answering', { dualAnswering: 3, dualAnsweringMs: 1000 }, /both directors answered ARP for the vip: dir1 still 3 ARP packets/, 'dual-answering'],
    ['service not back', { recovered: false }, /service did not come back/, 'no-service'],
    ['service back too late', { restoredAfterMs: 1341, outageEndMs: 1341 }, /service back after 1341 ms, beyond the worst-case takeover 340 ms \+ 1000 ms/, 'service-late'],
    ['a broken dr stream', { brokenDrStreams: 1, drStreamErrors: ['ECONNRESET after 40 lines'] }, /1 of 10 streams through the dr vip broke \(the first: ECONNRESET after 40 lines\)/, 'dr-streams'],
    ['a flap', { leaderChanges: 3, flapped: true }, /the leader changed 3 times/, 'flap'],
    ['leader changes unknown', { leaderChanges: null }, /leader changes unknown/, 'leader-unknown'],
  ];
  for (const [what, change, reason, code] of failing) {
    it(`fails on ${what}`, () => {
      const r = { ...ok, ...change };
      assert.equal(drillPassed(r), false);
      assert.match(drillProblems(r).join('; '), reason);
      assert.equal(drillRecord(r).result, 'fail');
      assert.equal(drillRecord(r).fields.failedOn, code);
      assert.match(drillRecord(r).reason, reason);
    });
  }

  it('a late first success without any failed request is no outage (a starved client), not a late service', () => {
    assert.equal(drillPassed({ ...ok, failedRequests: 0, restoredAfterMs: 4076, noServiceMs: 80 }), true);
  });

  it('keeps every field within the event log\'s 256 characters, whatever failed', () => {
    const worst = { ...ok, recovered: false, dualForwarding: 123_456, dualForwardingMs: 12_345.6, dualAnswering: 99_999, dualAnsweringMs: 12_345.6, leaderChanges: 9, flapped: true };
    const r = drillRecord(worst);
    assert.equal(r.fields.failedOn, 'dual-forwarding,dual-answering,no-service,flap');
    for (const [k, v] of Object.entries(r.fields)) assert.ok(v.length <= 256, `${k}: ${v.length} characters`);
    assert.ok(r.reason.length <= 2000, `reason: ${r.reason.length} characters`);
  });

  it('does not judge address holding: a frozen director may keep the address while its kernel neither forwards nor answers', () => {
    assert.deepEqual(drillProblems({ ...ok, dualHolding: 1, dualHoldingMs: 3000 }), []);
  });

  it('judges service back on the outage the failure caused, not on a later 54 ms hiccup', () => {
    assert.deepEqual(drillProblems({ ...ok, scenario: 'pause-standby', pauseMs: 1000, noServiceMs: 54, restoredAfterMs: 3712, outageEndMs: null }), []);
  });

  it('labels pause drills with their pause, and tables them apart in scenario order', () => {
    const p1 = { ...ok, scenario: 'pause-leader', pauseMs: 1000 } as const;
    const p10 = { ...ok, scenario: 'pause-leader', pauseMs: 10_000, dualForwarding: 5, dualForwardingMs: 9000 } as const;
    assert.deepEqual([drillLabel(p1), drillLabel(p10), drillLabel({ scenario: 'pause-standby', pauseMs: 1500 })], ['pause-leader 1 s', 'pause-leader 10 s', 'pause-standby 1500 ms']);
    const rows = formatDrill([p10, p1, ok]).trimEnd().split('\n');
    assert.deepEqual(rows.map((l) => l.split(/\s{2,}/)[0]), ['drill', 'box-death', 'pause-leader 1 s', 'pause-leader 10 s']);
    assert.match(rows[3]!, /\b0\/1\b.*\b5\s+9000\.0\b/);
  });
});

describe('leaderFigures', () => {
  const failedAt = 1_000_000;
  const view = (term: number, leader: DirectorName, sinceUnixMs: number): ClusterStatusView => ({
    clustered: true, self: 'dir1', etcdReachable: true, worstCaseTakeoverMs: 340, timingProfile: 'default', configRevision: 1, directors: [],
    groups: [{ name: 'default', leader, term, sinceUnixMs, reason: '', role: 'standby', preempt: 'after-sync', preemptDelayMs: 5000 }],
  });
  const of = (...vs: ClusterStatusView[]): Map<DirectorName, ClusterStatusView> => new Map(vs.map((v, i) => [(['dir1', 'dir2'] as const)[i]!, v]));
  // The last number: from when the preempt delay counts (the other's claim, or the old leader's thaw).
  const cases: [string, Map<DirectorName, ClusterStatusView>, DirectorName, number | null, { leaderChanges: number | null; flapped: boolean }][] = [
    ['no change', of(view(7, 'dir1', 0)), 'dir1', null, { leaderChanges: 0, flapped: false }],
    ['one takeover', of(view(8, 'dir2', failedAt + 340)), 'dir2', 340, { leaderChanges: 1, flapped: false }],
    ['back after the preempt delay: scheduled', of(view(9, 'dir1', failedAt + 340 + 5200)), 'dir1', 340, { leaderChanges: 2, flapped: false }],
    ['back before the preempt delay: a flap', of(view(9, 'dir1', failedAt + 1400)), 'dir1', 340, { leaderChanges: 2, flapped: true }],
    ['back 2.3 s after a 10 s pause: a flap, though 12 s after the claim', of(view(9, 'dir1', failedAt + 12_300)), 'dir1', 10_000, { leaderChanges: 2, flapped: true }],
    ['three changes: a flap', of(view(10, 'dir2', failedAt + 9000)), 'dir2', 340, { leaderChanges: 3, flapped: true }],
    ['the highest term any director reports', of(view(7, 'dir1', 0), view(8, 'dir2', failedAt + 340)), 'dir2', 340, { leaderChanges: 1, flapped: false }],
    ['no status after: unknown', new Map(), 'dir1', null, { leaderChanges: null, flapped: false }],
  ];
  for (const [what, after, newLeader, claimedAtMs, want] of cases) {
    it(what, () => {
      assert.deepEqual(leaderFigures(of(view(7, 'dir1', 0)), after, 'default', 'dir1', newLeader, failedAt, claimedAtMs), want);
    });
  }
});

/** What the drill's load says of the service: lost service is where requests started and failed. */
describe('measureLoad', () => {
  const t0 = 1_000_000;
  /** A request every 5 ms from `from` to `to` (ms after t0), ok or failed. */
  const run = (from: number, to: number, ok: boolean): RequestRecord[] => {
    const out: RequestRecord[] = [];
    for (let s = from; s < to; s += 5) out.push([t0 + s, ok ? 3 : 1000, ok, ok ? '' : 'timeout']);
    return out;
  };

  it('an outage is the stretch whose requests failed, measured from the failure', () => {
    const m = measureLoad([...run(0, 500, true), ...run(500, 800, false), ...run(800, 2000, true)], t0 + 500, 5, 1310);
    assert.equal(m.noServiceMs, 305);
    assert.equal(m.outageEndMs, 300);
    assert.equal(m.failedRequests, 60);
    assert.ok(m.recovered);
  });

  it('a stretch in which the client started nothing is its own stall, not lost service', () => {
    // The outage, then the client stalls for 500 ms (nothing started) well within the bound.
    const m = measureLoad([...run(0, 500, true), ...run(500, 800, false), ...run(800, 1200, true), ...run(1700, 2500, true)], t0 + 500, 5, 1310);
    assert.equal(m.noServiceMs, 305);
    assert.equal(m.outageEndMs, 300, 'the stall after service was back is not the failure\'s outage');
  });

  it('a later stretch of failed requests within the bound is still the failure\'s', () => {
    const m = measureLoad([...run(0, 500, true), ...run(500, 800, false), ...run(800, 1200, true), ...run(1200, 1500, false), ...run(1500, 2500, true)], t0 + 500, 5, 1310);
    assert.equal(m.outageEndMs, 1000);
  });
});
