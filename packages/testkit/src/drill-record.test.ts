import assert from 'node:assert/strict';
import { drillPassed, drillRecord, summary, type DrillResult } from './drill.js';

/** The drill's result as the lab stores it in the agents' event log (RecordDrill). */
describe('drillRecord', () => {
  const ok: DrillResult = {
    mode: 'box-death', failedAt: Date.UTC(2026, 11, 1, 10, 0, 0), injectMs: 3, oldLeader: 'dir1', newLeader: 'dir2', moved: true,
    worstCaseTakeoverMs: 340, noServiceMs: 352, restoredAfterMs: 355, recovered: true, requests: 900, failedRequests: 60,
    failedStartsMs: [], inFlightAtFailure: 1, errors: { timeout: 60 }, streams: 10, brokenConnections: 0, streamErrors: [],
    dualOwnership: 0, dualOwnershipMs: 0, dualIntervals: [], firstDualMs: null, holdIntervals: { dir1: [], dir2: [] },
    releasedAtMs: null, claimedAtMs: 340.5, releaseToClaimMs: 340.5, skewedDualSamples: 0, holderChanges: [], holderSamples: 100,
    transitionsChanged: true, steadyAfterMs: 0,
  };

  it('a drill that recovered with one holder at a time passes; the summary is the reason, the figures are fields', () => {
    const r = drillRecord(ok);
    assert.deepEqual([r.mode, r.result, r.reason], ['box-death', 'pass', summary(ok)]);
    assert.deepEqual([r.fields.oldLeader, r.fields.newLeader, r.fields.noServiceMs, r.fields.brokenConnections, r.fields.dualOwnership, r.fields.failedAt],
      ['dir1', 'dir2', '352', '0', '0', '2026-12-01T10:00:00.000Z']);
    assert.ok(Object.values(r.fields).every((v) => typeof v === 'string'));
  });

  it('two holders at once, or service not back, fail', () => {
    assert.equal(drillRecord({ ...ok, dualOwnership: 1, dualOwnershipMs: 0.2 }).result, 'fail');
    assert.equal(drillRecord({ ...ok, recovered: false }).result, 'fail');
    assert.equal(drillPassed(ok), true);
  });
});
