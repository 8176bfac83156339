import assert from 'node:assert/strict';
import { UdpFlowChecker, type UdpFlowReport, type UdpFlowTiming } from './udp-flow-check.js';

const TIMING: UdpFlowTiming = { intervalMs: 50, timeoutMs: 100, maxRetries: 3 };

/** What the network does with one send: the answering server and its delay, or null (lost). */
type Network = (seq: number, sentAtMs: number) => { server: string; delayMs: number } | null;

/**
 * Runs one flow against `network` on simulated time as runUdpFlows does: until `endMs`, then stop() and up
 * to two timeouts for the outstanding seq, then finish. Answers and ticks are processed in time order, as
 * the client's timers and socket would.
 */
function simulate(network: Network, endMs: number, timing = TIMING): { report: UdpFlowReport; sends: [number, number][] } {
  const c = new UdpFlowChecker(40000, timing);
  const sends: [number, number][] = [];
  let answers: { atMs: number; seq: number; server: string }[] = [];
  let wakeAtMs = 0;
  let stopped = false;
  const drainEndMs = endMs + 2 * timing.timeoutMs;
  for (;;) {
    const next = answers.reduce((m, a) => Math.min(m, a.atMs), Number.POSITIVE_INFINITY);
    const now = Math.min(next, wakeAtMs);
    if (!stopped && now > endMs) {
      stopped = true;
      c.stop();
    }
    if (stopped && (c.idle || now > drainEndMs)) {
      return { report: c.finish(c.idle ? endMs : drainEndMs), sends };
    }
    if (next <= wakeAtMs) {
      const a = answers.find((x) => x.atMs === next)!;
      answers = answers.filter((x) => x !== a);
      if (!c.answer(a.seq, a.server, now)) continue;
    }
    const step = c.tick(now);
    wakeAtMs = step.wakeAtMs;
    if (step.send !== undefined) {
      sends.push([step.send, now]);
      const r = network(step.send, now);
      if (r) answers.push({ atMs: now + r.delayMs, seq: step.send, server: r.server });
    }
  }
}

const always = (server: string, delayMs = 5): Network => () => ({ server, delayMs });

describe('UdpFlowChecker', () => {
  it('a flow answered every time is intact, one seq per interval', () => {
    const { report, sends } = simulate(always('rs1'), 1000);
    assert.deepEqual(report, { sourcePort: 40000, server: 'rs1', answered: 21, retries: 0, maxGapMs: 50, error: null });
    assert.deepEqual(sends.slice(0, 3), [[0, 0], [1, 50], [2, 100]]);
  });

  it('waits for the answer before the next seq (one request in flight)', () => {
    const { report, sends } = simulate(always('rs1', 80), 399);
    assert.deepEqual(sends, [[0, 0], [1, 80], [2, 160], [3, 240], [4, 320]]);
    assert.equal(report.maxGapMs, 80);
  });

  it('an outage shorter than the retries is survived: re-sent, same seq, a gap, intact', () => {
    const outage: Network = (_seq, at) => (at >= 200 && at < 450 ? null : { server: 'rs1', delayMs: 5 });
    const { report, sends } = simulate(outage, 1000);
    assert.equal(report.error, null);
    assert.equal(report.retries, 3);
    assert.deepEqual(sends.filter(([seq]) => seq === 4).map(([, at]) => at), [200, 300, 400, 500]);
    assert.equal(report.maxGapMs, 505 - 155);
  });

  it('a flow that moves to another server is broken, naming both', () => {
    const moved: Network = (_seq, at) => ({ server: at < 500 ? 'rs1' : 'rs2', delayMs: 5 });
    const { report } = simulate(moved, 1000);
    assert.equal(report.server, 'rs1');
    assert.equal(report.error, 'server changed from rs1 to rs2 at seq 10');
  });

  it('a late duplicate from another server counts as a move too', () => {
    // seq 0's first answer is slow (from rs1), its re-send is answered at once by rs2.
    const c = new UdpFlowChecker(40000, TIMING);
    assert.equal(c.tick(0).send, 0);
    assert.equal(c.tick(100).send, 0);
    assert.equal(c.answer(0, 'rs2', 101), true);
    assert.equal(c.answer(0, 'rs1', 150), false);
    assert.equal(c.finish(160).error, 'server changed from rs2 to rs1 at seq 0');
  });

  it('a seq never answered is lost; the flow goes on with the next', () => {
    const lose3: Network = (seq) => (seq === 3 ? null : { server: 'rs1', delayMs: 5 });
    const { report, sends } = simulate(lose3, 1000);
    assert.equal(report.error, 'seq 3 never answered (3 retries over 400 ms)');
    assert.equal(sends.filter(([seq]) => seq === 3).length, 4);
    assert.ok(sends.some(([seq]) => seq === 4));
    assert.equal(report.answered, sends.filter(([seq]) => seq !== 3).length);
  });

  it('names the last send error of a lost seq', () => {
    const c = new UdpFlowChecker(40000, { ...TIMING, maxRetries: 0 });
    c.tick(0);
    c.sendFailed('ENETUNREACH');
    c.tick(100);
    assert.equal(c.finish(100).error, 'no answer at all (seq 0 never answered (0 retries over 100 ms; last send error ENETUNREACH))');
  });

  it('no answer at all is broken and settles the flow', () => {
    const { report } = simulate(() => null, 2000);
    assert.equal(report.answered, 0);
    assert.match(report.error ?? '', /^no answer at all \(seq 0 never answered \(3 retries over 400 ms\)\)$/);
  });

  it('a seq still unanswered at the end is lost', () => {
    // Sent at 900, re-sent through the drain (two timeouts after the end) and still unanswered.
    const stuck: Network = (_seq, at) => (at >= 900 ? null : { server: 'rs1', delayMs: 5 });
    const { report } = simulate(stuck, 1000);
    assert.equal(report.error, 'seq 18 not answered by the end (3 retries over 300 ms)');
  });

  it('after stop() no new seq goes out, but the outstanding one is still re-sent', () => {
    const c = new UdpFlowChecker(40000, TIMING);
    assert.equal(c.tick(0).send, 0);
    c.stop();
    assert.equal(c.idle, false);
    assert.deepEqual(c.tick(100), { send: 0, wakeAtMs: 200 });
    assert.equal(c.answer(0, 'rs1', 120), true);
    assert.equal(c.idle, true);
    assert.deepEqual(c.tick(200), { wakeAtMs: Number.POSITIVE_INFINITY });
    assert.deepEqual(c.finish(300), { sourcePort: 40000, server: 'rs1', answered: 1, retries: 1, maxGapMs: 0, error: null });
  });

  it('a fatal failure stops the flow and settles it', () => {
    const c = new UdpFlowChecker(40000, TIMING);
    assert.equal(c.settled, false);
    c.fail('bind: EADDRINUSE', { fatal: true });
    assert.equal(c.settled, true);
    assert.equal(c.tick(0).send, undefined);
    assert.equal(c.finish(10).error, 'no answer at all (bind: EADDRINUSE)');
    assert.equal(c.finish(20).error, 'no answer at all (bind: EADDRINUSE)');
  });
});
