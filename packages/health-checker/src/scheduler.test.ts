import assert from 'node:assert/strict';
import { DEFAULT_FLAP_POLICY } from './health.js';
import { HealthScheduler, checkKey, type CheckSpec, type ResultEvent, type TransitionEvent } from './scheduler.js';
import { createServer, type AddressInfo } from 'node:net';
import { TcpProber } from './probers/tcp.js';
import { FakeClock, FakeProber, holdUpEventLoop } from './testing/index.js';
import type { ProbeOptions, ProbeTarget, Prober } from './types.js';

/**
 * The scheduler in simulated time: FakeClock drives its one timer, FakeProber answers probes (instantly,
 * after a delay of fake time, or never) and records when each started. No real time passes.
 */

const INTERVAL = 1_000;

function spec(i: number, over: Partial<CheckSpec> = {}): CheckSpec {
  const address = `198.19.${Math.floor(i / 250)}.${(i % 250) + 1}`;
  return {
    key: `tcp ${address}:8080`,
    target: { kind: 'tcp', address, port: 8080 },
    intervalMs: INTERVAL,
    timeoutMs: 500,
    jitterMs: 0,
    thresholds: { rise: 2, fall: 3 },
    flap: DEFAULT_FLAP_POLICY,
    startState: 'up',
    ...over,
  };
}

function where(s: CheckSpec): string {
  return `${s.target.address}:${s.target.port}`;
}

interface Harness {
  clock: FakeClock;
  prober: FakeProber;
  scheduler: HealthScheduler;
  transitions: TransitionEvent[];
  results: ResultEvent[];
}

function harness(opts: { maxConcurrent?: number; random?: () => number } = {}): Harness {
  const clock = new FakeClock();
  const prober = new FakeProber(clock);
  const scheduler = new HealthScheduler({ prober, clock, ...opts });
  const transitions: TransitionEvent[] = [];
  const results: ResultEvent[] = [];
  scheduler.on('transition', (e) => transitions.push(e));
  scheduler.on('result', (e) => results.push(e));
  return { clock, prober, scheduler, transitions, results };
}

describe('HealthScheduler', () => {
  let h: Harness;
  afterEach(() => {
    h.scheduler.stop();
    assert.equal(h.clock.pending, 0, 'stop() leaves no timer behind');
  });

  it('spreads 1000 checks at a 1 s interval evenly over the interval: each once per second, no burst', async () => {
    h = harness();
    const specs = Array.from({ length: 1000 }, (_, i) => spec(i));
    const t0 = h.clock.now();
    h.scheduler.set(specs);
    await h.clock.advance(3 * INTERVAL);
    // Every check probed exactly 3 times, exactly one interval apart (fixed rate, fixed phase).
    const byTarget = new Map<string, number[]>();
    for (const c of h.prober.calls) {
      const k = `${c.target.address}:${c.target.port}`;
      byTarget.set(k, [...(byTarget.get(k) ?? []), c.at]);
    }
    assert.equal(byTarget.size, 1000);
    for (const [k, times] of byTarget) {
      assert.equal(times.length, 3, k);
      assert.deepEqual([times[1]! - times[0]!, times[2]! - times[1]!], [INTERVAL, INTERVAL], k);
      assert.ok(times[0]! >= t0 && times[0]! < t0 + INTERVAL, `${k}: first probe within the first interval`);
    }
    // Evenly: 1000 probes per second in 100 buckets of 10 ms is 10 per bucket on average. Hash phases are
    // uniform, not a grid, so allow up to 25 (a burst would put hundreds in one bucket) and no empty
    // stretch of 50 ms.
    const buckets = new Array<number>(100).fill(0);
    for (const c of h.prober.calls) buckets[Math.floor(((c.at - t0) % INTERVAL) / 10)]! += 1;
    const perSecond = buckets.map((b) => b / 3);
    assert.ok(Math.max(...perSecond) <= 25, `busiest 10 ms: ${Math.max(...perSecond)} probes`);
    for (let i = 0; i < 100; i += 5) {
      assert.ok(perSecond.slice(i, i + 5).reduce((a, b) => a + b) > 0, `no probe in ${i * 10}-${i * 10 + 50} ms`);
    }
    // Never more than a few at the same millisecond.
    const sameMs = new Map<number, number>();
    for (const c of h.prober.calls) sameMs.set(c.at, (sameMs.get(c.at) ?? 0) + 1);
    assert.ok(Math.max(...sameMs.values()) <= 6, `most probes in one ms: ${Math.max(...sameMs.values())}`);
    const stats = h.scheduler.stats();
    assert.equal(stats.started, 3000);
    assert.equal(stats.late, 0);
    assert.equal(stats.dueToStartDelayMs.p99, 0);
  });

  it('keeps phases across a reload and an agent restart (the phase comes from the key), so neither bunches probes', async () => {
    h = harness();
    const specs = Array.from({ length: 50 }, (_, i) => spec(i));
    h.scheduler.set(specs);
    await h.clock.advance(INTERVAL);
    const phase = (at: number): number => at % INTERVAL;
    const before = new Map(h.prober.calls.map((c) => [c.target.address, phase(c.at)]));
    // A reload that adds checks keeps the others' phases.
    h.scheduler.set([...specs, ...Array.from({ length: 50 }, (_, i) => spec(100 + i))]);
    await h.clock.advance(INTERVAL + 333);
    for (const c of h.prober.calls.slice(before.size)) {
      if (before.has(c.target.address)) assert.equal(phase(c.at), before.get(c.target.address), c.target.address);
    }
    // A new scheduler (a restarted agent), started at another moment, probes at the same phases.
    const clock2 = new FakeClock(h.clock.now() + 12_345);
    const prober2 = new FakeProber(clock2);
    const restarted = new HealthScheduler({ prober: prober2, clock: clock2 });
    restarted.set(specs);
    await clock2.advance(INTERVAL);
    restarted.stop();
    assert.equal(prober2.calls.length, 50);
    for (const c of prober2.calls) assert.equal(phase(c.at), before.get(c.target.address), c.target.address);
  });

  it('adds jitter per probe (up to jitterMs later than the phase, never accumulating)', async () => {
    let n = 0;
    const draws = [0.5, 0.0, 0.99];
    h = harness({ random: () => draws[n++ % draws.length]! });
    h.scheduler.set([spec(0, { jitterMs: 100 })]);
    await h.clock.advance(4 * INTERVAL);
    const times = h.prober.calls.map((c) => c.at);
    const base = times[0]! - 50; // the first draw was 0.5 × 100
    assert.deepEqual(times.slice(0, 4).map((t) => t - base), [50, INTERVAL + 0, 2 * INTERVAL + 99, 3 * INTERVAL + 50]);
  });

  it('deduplicates checks given the same key (one probe per interval) and reports same-key conflicts', async () => {
    h = harness();
    const a = spec(0);
    // Two services with the same real server and the same check: the agent gives both the same key.
    const out = h.scheduler.set([a, { ...a }, spec(1)]);
    assert.deepEqual(out.added.sort(), [a.key, spec(1).key].sort());
    assert.deepEqual(out.conflicts, []);
    await h.clock.advance(2 * INTERVAL);
    assert.equal(h.prober.callsTo(where(a)).length, 2);
    // The same key with a different spec is a bug in the caller's keys: the first spec wins, and it is reported.
    const again = h.scheduler.set([a, { ...a, timeoutMs: 900 }]);
    assert.deepEqual(again.conflicts, [a.key]);
    assert.deepEqual(again.removed, [spec(1).key]);
  });

  it('checkKey: equal specs share a key; any difference in target, timing or thresholds does not', () => {
    const { key: _k, ...base } = spec(0);
    const same = checkKey({ ...base, target: { port: 8080, address: base.target.address, kind: 'tcp' } });
    assert.equal(checkKey(base), same);
    assert.match(checkKey(base), /^tcp 198\.19\.0\.1:8080 [0-9a-f]{8}$/);
    const variants = [
      { ...base, intervalMs: 2000 },
      { ...base, timeoutMs: 400 },
      { ...base, thresholds: { rise: 3, fall: 3 } },
      { ...base, target: { ...base.target, port: 8081 } },
      { ...base, target: { ...base.target, kind: 'http' as const, path: '/healthz' } },
      { ...base, startState: 'down' as const },
    ];
    const keys = new Set([checkKey(base), ...variants.map(checkKey)]);
    assert.equal(keys.size, variants.length + 1);
    assert.match(checkKey({ ...base, target: { kind: 'tcp', address: 'fd00::12', port: 80 } }), /^tcp \[fd00::12\]:80 /);
  });

  it('runs the state machine: fall failures → a transition event with the reason, the probe latency and the time', async () => {
    h = harness();
    const s = spec(0);
    h.prober.set(where(s), { ok: false, reason: 'refused', message: `tcp connect to ${where(s)}: refused`, delayMs: 2 });
    h.scheduler.set([s]);
    await h.clock.advance(3 * INTERVAL);
    assert.equal(h.results.length, 3);
    assert.equal(h.transitions.length, 1);
    const [t] = h.transitions;
    const third = h.prober.calls[2]!;
    assert.deepEqual(
      { key: t!.key, from: t!.from, to: t!.to, reason: t!.reason, latencyMs: t!.latencyMs, at: t!.at },
      { key: s.key, from: 'up', to: 'down', reason: 'tcp connect to 198.19.0.1:8080: refused (3 failures)', latencyMs: 2, at: third.at + 2 },
    );
    assert.equal(h.scheduler.get(s.key)?.state, 'down');
    // Recovery: rise successes bring it back.
    h.prober.set(where(s), { ok: true, message: 'tcp connect to 198.19.0.1:8080: connected' });
    await h.clock.advance(2 * INTERVAL);
    assert.deepEqual(h.transitions.map((e) => `${e.from}>${e.to}: ${e.reason}`), [
      'up>down: tcp connect to 198.19.0.1:8080: refused (3 failures)',
      'down>up: tcp connect to 198.19.0.1:8080: connected (2 successes)',
    ]);
    assert.deepEqual(h.results.map((r) => r.state), ['up', 'up', 'down', 'down', 'up']);
  });

  it('a reload keeps the records of checks whose key stays; removed keys are forgotten; re-added keys start over', async () => {
    h = harness();
    const a = spec(0);
    const b = spec(1);
    h.prober.set(where(a), { ok: false });
    h.scheduler.set([a, b]);
    await h.clock.advance(3 * INTERVAL);
    assert.equal(h.scheduler.get(a.key)?.state, 'down');
    const kept = h.scheduler.get(a.key);
    // Reload: a stays (with new thresholds), b goes.
    const out = h.scheduler.set([{ ...a, thresholds: { rise: 5, fall: 3 } }]);
    assert.deepEqual(out, { added: [], removed: [b.key], kept: [a.key], conflicts: [] });
    assert.equal(h.scheduler.get(a.key), kept, 'same record object: nothing reset');
    assert.equal(h.scheduler.get(b.key), undefined);
    assert.deepEqual([...h.scheduler.records()].map(([k]) => k), [a.key]);
    const callsBefore = h.prober.callsTo(where(b)).length;
    await h.clock.advance(2 * INTERVAL);
    assert.equal(h.prober.callsTo(where(b)).length, callsBefore, 'a removed check is not probed');
    // The new rise (5) applies to the kept record: 4 successes are not enough.
    h.prober.set(where(a), { ok: true });
    await h.clock.advance(4 * INTERVAL);
    assert.equal(h.scheduler.get(a.key)?.state, 'down');
    await h.clock.advance(INTERVAL);
    assert.equal(h.scheduler.get(a.key)?.state, 'up');
    // Removing and re-adding starts from startState.
    h.scheduler.set([]);
    h.scheduler.set([{ ...a, startState: 'down' }]);
    assert.equal(h.scheduler.get(a.key)?.state, 'down');
    assert.equal(h.scheduler.get(a.key)?.successes, 0);
  });

  it('a reload that changes a kept check\'s interval moves it to the new interval at once', async () => {
    h = harness();
    const a = spec(0);
    h.scheduler.set([a]);
    await h.clock.advance(2 * INTERVAL);
    h.scheduler.set([{ ...a, intervalMs: 250, timeoutMs: 100 }]);
    const n = h.prober.calls.length;
    await h.clock.advance(1000);
    assert.equal(h.prober.calls.length - n, 4);
    assert.equal(h.prober.calls.at(-1)!.timeoutMs, 100);
  });

  it('setInitialState: a restarted agent\'s kernel view holds until the first result, never after', async () => {
    h = harness();
    const a = spec(0, { startState: 'down' });
    h.scheduler.set([a]);
    assert.equal(h.scheduler.setInitialState(a.key, 'up'), true);
    assert.equal(h.scheduler.get(a.key)?.state, 'up');
    assert.equal(h.scheduler.setInitialState('no such key', 'up'), false);
    await h.clock.advance(INTERVAL); // one success: stays up, no transition (no flap on restart)
    assert.deepEqual(h.transitions, []);
    assert.equal(h.scheduler.setInitialState(a.key, 'down'), false);
    assert.equal(h.scheduler.get(a.key)?.state, 'up');
  });

  it('bounds concurrency: never more than maxConcurrent probes; the others wait, are counted late, and all run', async () => {
    h = harness({ maxConcurrent: 4 });
    const specs = Array.from({ length: 100 }, (_, i) => spec(i));
    // Each probe takes 30 ms: 100 of them need 3000 probe-ms per second and 4 slots give 4000, so slots are
    // busy most of the time and probes due close together must wait, but every one runs within its interval.
    h.prober.setDefault({ ok: true, delayMs: 30 });
    h.scheduler.set(specs);
    await h.clock.advance(3 * INTERVAL);
    assert.equal(h.prober.maxInFlight, 4, 'the bound is reached and never passed');
    const stats = h.scheduler.stats();
    assert.ok(stats.late > 0, 'some probes waited for a slot');
    assert.ok(stats.dueToStartDelayMs.p99 > 0 && stats.dueToStartDelayMs.p99 < INTERVAL, `p99 start delay ${stats.dueToStartDelayMs.p99} ms`);
    assert.equal(stats.skipped, 0);
    for (const s of specs) assert.equal(h.prober.callsTo(where(s)).length, 3, where(s));
    // The percentiles and counters reset on request.
    h.scheduler.stats({ reset: true });
    assert.deepEqual(h.scheduler.stats().dueToStartDelayMs, { p50: 0, p99: 0, max: 0, samples: 0 });
  });

  it('skips a round (never stacks probes) when the check\'s previous probe is still waiting for a slot', async () => {
    h = harness({ maxConcurrent: 1 });
    const a = spec(0, { timeoutMs: 900 });
    const b = spec(1, { timeoutMs: 900 });
    h.prober.setDefault('hang');
    h.scheduler.set([a, b]);
    await h.clock.advance(5 * INTERVAL);
    const stats = h.scheduler.stats();
    assert.ok(stats.skipped > 0, `skipped ${stats.skipped}`);
    assert.equal(h.prober.maxInFlight, 1);
    assert.ok(stats.running + stats.waiting <= 2);
  });

  describe('a held-up event loop (a busy box) is not a dead server', () => {
    /** Runs until the check's first probe has started, then holds the loop up for `ms` (no timer runs meanwhile). */
    async function startedThenHeldUp(s: CheckSpec, ms: number): Promise<void> {
      while (h.prober.callsTo(where(s)).length === 0) await h.clock.advance(10);
      h.clock.holdUp(ms);
    }

    it('a timeout decided late by a held-up loop is asked again at once; its answer counts (up stays up)', async () => {
      h = harness();
      const s = spec(0, { timeoutMs: 500, thresholds: { rise: 1, fall: 1 } });
      h.prober.set(where(s), ['hang', { ok: true }]);
      h.scheduler.set([s]);
      await startedThenHeldUp(s, 2000);
      await h.clock.advance(10);
      const calls = h.prober.callsTo(where(s));
      assert.equal(calls.length, 2, 'asked again');
      assert.equal(calls[1]!.at, calls[0]!.abortedAt, 'at once, when the first was given up');
      assert.deepEqual(h.results.map((r) => r.result.reason), ['ok'], 'only the second answer counts');
      assert.deepEqual(h.transitions, []);
      assert.equal(h.scheduler.stats().askedAgain, 1);
    });

    it('the answer asked again counts even when the loop is held up again: a dead server is found one probe later', async () => {
      h = harness();
      const s = spec(0, { timeoutMs: 500, thresholds: { rise: 1, fall: 1 } });
      h.prober.set(where(s), 'hang');
      h.scheduler.set([s]);
      await startedThenHeldUp(s, 2000);
      await h.clock.advance(1);
      h.clock.holdUp(2000);
      await h.clock.advance(10);
      assert.equal(h.prober.callsTo(where(s)).length, 2);
      assert.deepEqual(h.transitions.map((t) => [t.from, t.to]), [['up', 'down']]);
      assert.equal(h.scheduler.stats().askedAgain, 1);
    });

    it('a loop held up for less than half a timeout past the deadline: the timeout counts as it is', async () => {
      h = harness();
      const s = spec(0, { timeoutMs: 500, thresholds: { rise: 1, fall: 1 } });
      h.prober.set(where(s), 'hang');
      h.scheduler.set([s]);
      await startedThenHeldUp(s, 700);
      await h.clock.advance(10);
      assert.equal(h.prober.callsTo(where(s)).length, 1);
      assert.deepEqual(h.transitions.map((t) => [t.from, t.to]), [['up', 'down']]);
      assert.equal(h.scheduler.stats().askedAgain, 0);
    });
  });

  it('aborts a probe at its timeout: the signal fires, the result is a timeout, and late answers are ignored', async () => {
    h = harness();
    const s = spec(0, { timeoutMs: 500, thresholds: { rise: 1, fall: 2 } });
    h.prober.set(where(s), 'hang');
    h.scheduler.set([s]);
    await h.clock.advance(2 * INTERVAL);
    const calls = h.prober.callsTo(where(s));
    assert.equal(calls.length, 2);
    for (const c of calls) assert.equal(c.abortedAt, c.at + 500, 'aborted exactly at the timeout');
    assert.deepEqual(h.results.map((r) => [r.result.reason, r.result.message, r.result.durationMs]), [
      ['timeout', 'tcp connect to 198.19.0.1:8080: timeout after 500 ms', 500],
      ['timeout', 'tcp connect to 198.19.0.1:8080: timeout after 500 ms', 500],
    ]);
    assert.equal(h.transitions[0]?.reason, 'tcp connect to 198.19.0.1:8080: timeout after 500 ms (2 failures)');
    assert.equal(h.transitions[0]?.latencyMs, 500);
    assert.equal(h.scheduler.stats().timedOut, 2);
    // A probe that answers after its timeout (a prober that ignores its signal) changes nothing.
    const slow = spec(1, { timeoutMs: 100 });
    h.prober.set(where(slow), { ok: false, delayMs: 300 });
    h.scheduler.set([s, slow]);
    const before = h.results.length;
    await h.clock.advance(INTERVAL);
    const slowResults = h.results.slice(before).filter((r) => r.key === slow.key);
    assert.deepEqual(slowResults.map((r) => r.result.reason), ['timeout']);
  });

  it('removing a check aborts its running probe (not as a timeout) and frees its slot', async () => {
    h = harness({ maxConcurrent: 1 });
    const a = spec(0);
    h.prober.set(where(a), 'hang');
    h.scheduler.set([a]);
    await h.clock.advance(h.clock.nextTimerAt()! - h.clock.now()); // to the first probe
    const call = h.prober.callsTo(where(a))[0]!;
    assert.equal(call.abortedAt, null);
    h.scheduler.set([spec(1)]);
    assert.equal(call.abortedAt, h.clock.now());
    await h.clock.advance(INTERVAL);
    assert.equal(h.prober.callsTo(where(spec(1))).length, 1, 'the slot was freed');
    assert.equal(h.results.filter((r) => r.key === a.key).length, 0, 'no result for a removed check');
  });

  it('stop() clears the timer, aborts running probes and forgets every check', async () => {
    h = harness();
    h.prober.setDefault('hang');
    h.scheduler.set(Array.from({ length: 20 }, (_, i) => spec(i)));
    await h.clock.advance(INTERVAL);
    assert.ok(h.clock.pending > 0);
    h.scheduler.stop();
    assert.equal(h.clock.pending, 0);
    assert.ok(h.prober.calls.every((c) => c.abortedAt !== null));
    assert.equal(h.scheduler.stats().checks, 0);
    assert.equal(h.scheduler.stats().running, 0);
    await h.clock.advance(10 * INTERVAL);
    assert.equal(h.prober.calls.length, 20);
  });

  it('a prober that throws or rejects yields reason error, never a stopped scheduler', async () => {
    const clock = new FakeClock();
    let n = 0;
    const scheduler = new HealthScheduler({
      clock,
      prober: {
        probe() {
          n++;
          if (n === 1) throw new Error('boom');
          return Promise.reject(new Error('bang'));
        },
      },
    });
    const results: string[] = [];
    scheduler.on('result', (e) => results.push(`${e.result.reason}: ${e.result.message}`));
    scheduler.set([spec(0)]);
    await clock.advance(2 * INTERVAL);
    scheduler.stop();
    assert.deepEqual(results, ['error: prober failed: boom', 'error: prober failed: bang']);
    h = harness(); // for afterEach
  });

  it('rejects specs no validated config could produce', () => {
    h = harness();
    assert.throws(() => h.scheduler.set([spec(0, { intervalMs: 0 })]), /intervalMs 0 must be a positive number/);
    assert.throws(() => h.scheduler.set([spec(0, { thresholds: { rise: 0, fall: 1 } })]), /rise 0 must be a whole number/);
  });
});

describe('HealthScheduler on the real clock, with a real tcp probe', () => {
  it('a probe whose exchange a held-up loop cut short (busy past its timeout) is asked again: the server stays up', async () => {
    // The server answers `ping` with `pong` 20 ms later, well within the 500 ms timeout.
    const server = createServer((s) => {
      s.on('error', () => {});
      s.once('data', () => setTimeout(() => s.end('pong'), 20));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const tcp = new TcpProber({ connector: 'node' });
    // The first probe is held up (a busy box, a long garbage collection) as it starts, beyond its timeout: its
    // exchange with the server only begins when the timeout is already due.
    let heldUp = false;
    const prober: Prober = {
      probe(target: ProbeTarget, opts: ProbeOptions) {
        const p = tcp.probe(target, opts);
        if (!heldUp) {
          heldUp = true;
          holdUpEventLoop(1000);
        }
        return p;
      },
    };
    const scheduler = new HealthScheduler({ prober });
    const results: ResultEvent[] = [];
    const transitions: TransitionEvent[] = [];
    const first = new Promise<void>((resolve) => scheduler.on('result', (e: ResultEvent) => { results.push(e); resolve(); }));
    scheduler.on('transition', (e: TransitionEvent) => transitions.push(e));
    try {
      scheduler.set([{
        key: 'tcp held-up', target: { kind: 'tcp', address: '127.0.0.1', port: (server.address() as AddressInfo).port, send: 'ping', expect: 'pong' },
        intervalMs: 1000, timeoutMs: 500, jitterMs: 0, thresholds: { rise: 1, fall: 1 }, flap: DEFAULT_FLAP_POLICY, startState: 'up',
      }]);
      await first;
      assert.deepEqual(results.map((r) => [r.result.reason, r.state]), [['ok', 'up']], results[0]?.result.message);
      assert.deepEqual(transitions, []);
      assert.equal(scheduler.stats().askedAgain, 1);
    } finally {
      scheduler.stop();
      tcp.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('FakeClock', () => {
  it('runs due timers in time order, also those set while advancing, and not those beyond', async () => {
    const clock = new FakeClock(0);
    const log: string[] = [];
    clock.setTimeout(() => log.push(`b@${clock.now()}`), 20);
    clock.setTimeout(() => {
      log.push(`a@${clock.now()}`);
      clock.setTimeout(() => log.push(`c@${clock.now()}`), 5);
      clock.setTimeout(() => log.push(`late@${clock.now()}`), 500);
    }, 10);
    const cleared = clock.setTimeout(() => log.push('cleared'), 1);
    clock.clearTimeout(cleared);
    await clock.advance(100);
    assert.deepEqual(log, ['a@10', 'c@15', 'b@20']);
    assert.equal(clock.now(), 100);
    assert.equal(clock.pending, 1);
    assert.equal(clock.nextTimerAt(), 510);
  });

  it('lets promise callbacks started by a timer run at that timer\'s time', async () => {
    const clock = new FakeClock(0);
    const seen: number[] = [];
    clock.setTimeout(() => {
      void Promise.resolve().then(() => Promise.resolve()).then(() => seen.push(clock.now()));
    }, 10);
    clock.setTimeout(() => seen.push(clock.now()), 20);
    await clock.advance(50);
    assert.deepEqual(seen, [10, 20]);
  });
});
