import { EventEmitter } from 'node:events';
import { timeoutMessage } from './attempt.js';
import { systemClock, type Clock, type TimerHandle } from '@lbd/clock';
import type { HealthState } from '@lbd/config';
import { initialHealth, nextHealth, type FlapPolicy, type HealthRecord, type Thresholds } from './health.js';
import type { ProbeResult, ProbeTarget, Prober } from './types.js';

/**
 * HealthScheduler runs every health check of a director: one timer (on the injected Clock) for all checks,
 * probes spread evenly over each interval, bounded concurrency, each probe aborted at its timeout, and the
 * state machine (health.ts) applied to every result. Only transitions matter to the agent; every result is
 * also emitted (cheaply) for metrics.
 *
 * It does not know services or real servers: a check is a key and a target. Sharing: the agent gives
 * identical checks of the same target (two services with the same real server and the same check) the same
 * key, and the scheduler runs that check once; `checkKey()` derives such a key from everything in the spec,
 * so equal specs share and any difference (another path, interval or threshold) makes another check.
 *
 * Timing (why it is shaped like this, for thousands of checks at 1 s):
 * - a check's probes fall at a fixed phase within its interval, `hash(key) mod intervalMs` from the epoch,
 *   so a reload or an agent restart does not move or bunch them, and checks spread evenly however many are
 *   added at once; each probe adds up to `jitterMs` of random delay on top, never accumulating;
 * - the next probe is due one interval after the previous due time (fixed rate), not after the previous
 *   result, so slow servers do not drift; if a check's previous probe is still running or waiting when the
 *   next is due, that round is skipped (counted), never stacked;
 * - at most `maxConcurrent` probes run at once; a due probe that finds no free slot waits in a FIFO and is
 *   counted as late; its timeout runs from its actual start;
 * - due times and timeouts share one min-heap and one Clock timer, rather than a timer per target;
 * - a busy box is not a dead server: a deadline handled late waits one turn of the event loop for an answer
 *   that came in meanwhile, and a timeout decided long after its probe began (the loop held up) is asked again
 *   at once, that answer counting (onDeadline, finish).
 */

export interface CheckSpec {
  /** Identity: records survive `set()` under the same key. See checkKey(). */
  key: string;
  target: ProbeTarget;
  intervalMs: number;
  timeoutMs: number;
  /** Each probe starts up to this much later than its phase (uniformly random). */
  jitterMs: number;
  thresholds: Thresholds;
  flap: FlapPolicy;
  /** The state a new check starts in (before any result). */
  startState: HealthState;
}

export interface TransitionEvent {
  key: string;
  from: HealthState;
  to: HealthState;
  reason: string;
  /** The latency of the probe that caused it (its durationMs). */
  latencyMs: number;
  /** Clock time of the result. */
  at: number;
  result: ProbeResult;
  record: HealthRecord;
}

export interface ResultEvent {
  key: string;
  result: ProbeResult;
  /** The check's state after this result. */
  state: HealthState;
  at: number;
  /** Start minus due time: how late the scheduler started this probe. */
  startDelayMs: number;
}

export interface SchedulerStats {
  checks: number;
  running: number;
  waiting: number;
  started: number;
  completed: number;
  timedOut: number;
  /** Probes that could not start when due because maxConcurrent probes were running. */
  late: number;
  /** Rounds skipped because the check's previous probe was still running or waiting. */
  skipped: number;
  /** Probes asked again at once because their timeout came from a held-up event loop, not the server. */
  askedAgain: number;
  /** Delay from due time to start, over the most recent `delaySamples` probes. */
  dueToStartDelayMs: { p50: number; p99: number; max: number; samples: number };
}

export interface SetResult {
  added: string[];
  removed: string[];
  /** Keys whose records were kept (spec unchanged or updated in place). */
  kept: string[];
  /** Keys given more than once with different specs: the first was used. A bug in the caller's keys. */
  conflicts: string[];
}

export interface HealthSchedulerEvents {
  transition: [TransitionEvent];
  result: [ResultEvent];
}

export interface HealthSchedulerOptions {
  prober: Prober;
  clock?: Clock;
  /** Probes running at once (default 256). */
  maxConcurrent?: number;
  /** [0, 1) source for jitter (default Math.random); tests make it deterministic. */
  random?: () => number;
  /** Start delays kept for the percentiles (default 4096). */
  delaySamples?: number;
}

interface Running {
  controller: AbortController;
  startedAt: number;
  dueAt: number;
  /** Its deadline came late and was put off for one turn of the event loop (see onDeadline). */
  deadlinePutOff: boolean;
  /** It asks again after a timeout that a held-up event loop decided (see finish): its answer counts. */
  askedAgain: boolean;
}

interface Check {
  spec: CheckSpec;
  record: HealthRecord;
  /** The un-jittered due time of the next probe (phase + n × interval). */
  nextBase: number;
  /** Bumped to invalidate heap entries of this check (a reschedule, or removal). */
  dueToken: number;
  running: Running | null;
  /** Set while the check waits for a free slot: the due time it missed. */
  waitingDueAt: number | null;
  removed: boolean;
  /** Whether any result was applied (setInitialState only applies before the first). */
  probed: boolean;
}

/** A probe's deadline handled this much after it fell due came from a held-up event loop (see onDeadline). */
const LATE_DEADLINE_MS = 1;
/** A timeout decided later than this many timeouts after its probe began was the event loop's (see finish). */
const STALLED = 1.5;

interface Entry {
  at: number;
  /** Insertion order: equal times pop in the order they were pushed. */
  order: number;
  check: Check;
  kind: 'due' | 'deadline';
  /** due: the check's dueToken when pushed; deadline: the Running it guards. */
  token: number | Running;
}

export class HealthScheduler extends EventEmitter<HealthSchedulerEvents> {
  private readonly prober: Prober;
  private readonly clock: Clock;
  private readonly maxConcurrent: number;
  private readonly random: () => number;
  private readonly checks = new Map<string, Check>();
  private readonly heap: Entry[] = [];
  private order = 0;
  private timer: { at: number; handle: TimerHandle } | null = null;
  /** While tick() drains the heap it re-arms once at the end. */
  private ticking = false;
  private readonly waitQueue: Check[] = [];
  private running = 0;
  private counters = { started: 0, completed: 0, timedOut: 0, late: 0, skipped: 0, askedAgain: 0 };
  private readonly delays: Float64Array;
  private delayCount = 0;

  constructor(opts: HealthSchedulerOptions) {
    super();
    this.prober = opts.prober;
    this.clock = opts.clock ?? systemClock;
    this.maxConcurrent = Math.max(1, opts.maxConcurrent ?? 256);
    this.random = opts.random ?? Math.random;
    this.delays = new Float64Array(Math.max(1, opts.delaySamples ?? 4096));
  }

  /**
   * Replaces the set of checks. A key that stays keeps its record (a config reload does not reset health)
   * and its phase (unless its interval changed); new keys start in their `startState`; others are removed
   * and their running probes aborted. Throws RangeError for a spec no config could produce (a zero
   * interval, rise 0): the agent validates config first.
   */
  set(specs: readonly CheckSpec[]): SetResult {
    const now = this.clock.now();
    const byKey = new Map<string, CheckSpec>();
    const conflicts = new Set<string>();
    for (const spec of specs) {
      validateSpec(spec);
      const seen = byKey.get(spec.key);
      if (seen === undefined) byKey.set(spec.key, spec);
      else if (!sameSpec(seen, spec)) conflicts.add(spec.key);
    }
    const out: SetResult = { added: [], removed: [], kept: [], conflicts: [...conflicts] };
    for (const [key, check] of this.checks) {
      if (byKey.has(key)) continue;
      this.remove(check, 'check removed');
      out.removed.push(key);
    }
    for (const [key, spec] of byKey) {
      const check = this.checks.get(key);
      if (check === undefined) {
        const fresh: Check = {
          spec, record: initialHealth(spec.startState, now), nextBase: firstBase(key, spec.intervalMs, now),
          dueToken: 0, running: null, waitingDueAt: null, removed: false, probed: false,
        };
        this.checks.set(key, fresh);
        this.pushDue(fresh);
        out.added.push(key);
        continue;
      }
      const rescheduled = check.spec.intervalMs !== spec.intervalMs;
      check.spec = spec;
      if (rescheduled) {
        check.dueToken++;
        check.nextBase = firstBase(key, spec.intervalMs, now);
        this.pushDue(check);
      }
      out.kept.push(key);
    }
    this.arm();
    return out;
  }

  /**
   * For a restarted agent that read the kernel: the state the check is in until its first result (a server
   * the kernel has in rotation stays in, one quiescent stays out). Ignored, returning false, for an unknown
   * key or once a result has been applied (then the probes know better than the kernel).
   */
  setInitialState(key: string, state: HealthState): boolean {
    const check = this.checks.get(key);
    if (check === undefined || check.probed) return false;
    check.record = initialHealth(state, this.clock.now());
    return true;
  }

  get(key: string): HealthRecord | undefined {
    return this.checks.get(key)?.record;
  }

  /** Every check's key and current record. */
  *records(): IterableIterator<[string, HealthRecord]> {
    for (const [key, check] of this.checks) yield [key, check.record];
  }

  stats(opts: { reset?: boolean } = {}): SchedulerStats {
    const n = Math.min(this.delayCount, this.delays.length);
    const sorted = Array.from(this.delays.subarray(0, n)).sort((a, b) => a - b);
    const pct = (p: number): number => (n === 0 ? 0 : (sorted[Math.min(n - 1, Math.ceil((p / 100) * n) - 1)] ?? 0));
    const out: SchedulerStats = {
      checks: this.checks.size,
      running: this.running,
      waiting: this.waitQueue.filter((c) => c.waitingDueAt !== null).length,
      ...this.counters,
      dueToStartDelayMs: { p50: pct(50), p99: pct(99), max: sorted[n - 1] ?? 0, samples: n },
    };
    if (opts.reset) {
      this.counters = { started: 0, completed: 0, timedOut: 0, late: 0, skipped: 0, askedAgain: 0 };
      this.delayCount = 0;
    }
    return out;
  }

  /** Stops every check: clears the timer, aborts running probes, forgets all records. Listeners stay. */
  stop(): void {
    for (const check of this.checks.values()) this.remove(check, 'health checks stopped');
    this.checks.clear();
    this.heap.length = 0;
    this.waitQueue.length = 0;
    if (this.timer) this.clock.clearTimeout(this.timer.handle);
    this.timer = null;
  }

  private remove(check: Check, why: string): void {
    check.removed = true;
    check.dueToken++;
    check.waitingDueAt = null; // its waitQueue slot is skipped
    if (check.running) {
      check.running.controller.abort(new DOMException(why, 'AbortError'));
      check.running = null;
      this.running--;
    }
    this.checks.delete(check.spec.key);
  }

  private pushDue(check: Check): void {
    const jitter = check.spec.jitterMs > 0 ? Math.floor(this.random() * check.spec.jitterMs) : 0;
    this.push({ at: check.nextBase + jitter, order: this.order++, check, kind: 'due', token: check.dueToken });
  }

  /** Keeps the one Clock timer set for the earliest entry. */
  private arm(): void {
    if (this.ticking) return;
    const first = this.heap[0];
    if (first === undefined) {
      if (this.timer) this.clock.clearTimeout(this.timer.handle);
      this.timer = null;
      return;
    }
    if (this.timer && this.timer.at === first.at) return;
    if (this.timer) this.clock.clearTimeout(this.timer.handle);
    const at = first.at;
    this.timer = { at, handle: this.clock.setTimeout(() => this.tick(), Math.max(0, at - this.clock.now())) };
  }

  private tick(): void {
    this.timer = null;
    const now = this.clock.now();
    this.ticking = true;
    try {
      for (let e = this.heap[0]; e !== undefined && e.at <= now; e = this.heap[0]) {
        this.pop();
        if (e.kind === 'due') this.onDue(e, now);
        else this.onDeadline(e, now);
      }
    } finally {
      this.ticking = false;
      this.arm();
    }
  }

  private onDue(e: Entry, now: number): void {
    const check = e.check;
    if (check.removed || e.token !== check.dueToken) return;
    // The next round first: fixed rate, whatever happens to this one.
    check.nextBase += check.spec.intervalMs;
    this.pushDue(check);
    if (check.running || check.waitingDueAt !== null) {
      this.counters.skipped++;
      return;
    }
    if (this.running < this.maxConcurrent) {
      this.start(check, e.at, now);
      return;
    }
    this.counters.late++;
    check.waitingDueAt = e.at;
    this.waitQueue.push(check);
  }

  private start(check: Check, dueAt: number, now: number, askedAgain = false): void {
    const run: Running = { controller: new AbortController(), startedAt: now, dueAt, deadlinePutOff: false, askedAgain };
    check.running = run;
    this.running++;
    this.counters.started++;
    this.delays[this.delayCount++ % this.delays.length] = now - dueAt;
    this.push({ at: now + check.spec.timeoutMs, order: this.order++, check, kind: 'deadline', token: run });
    const { target, timeoutMs } = check.spec;
    let pending: Promise<ProbeResult>;
    try {
      pending = this.prober.probe(target, { timeoutMs, signal: run.controller.signal });
    } catch (err) {
      pending = Promise.reject(err);
    }
    pending.then(
      (result) => this.finish(check, run, result),
      (err: unknown) =>
        this.finish(check, run, {
          ok: false, reason: 'error', message: `prober failed: ${err instanceof Error ? err.message : String(err)}`, durationMs: 0,
        }),
    );
  }

  private onDeadline(e: Entry, now: number): void {
    const check = e.check;
    const run = e.token as Running;
    if (check.running !== run) return; // finished in time, or removed
    // A deadline handled late means the event loop was held up (a busy box, a long garbage collection), and
    // node runs the timers that fell due before it reads its sockets: an answer that came in meanwhile is still
    // unread. The verdict is put off once, to a timer that runs after that read (its answer then wins).
    if (now - e.at >= LATE_DEADLINE_MS && !run.deadlinePutOff) {
      run.deadlinePutOff = true;
      this.push({ at: now + 1, order: this.order++, check, kind: 'deadline', token: run });
      return;
    }
    this.counters.timedOut++;
    const { target, timeoutMs } = check.spec;
    const message = timeoutMessage(target, timeoutMs);
    // A TimeoutError tells the prober (and its result, which we no longer wait for) that this was the timeout.
    run.controller.abort(new DOMException(message, 'TimeoutError'));
    this.finish(check, run, { ok: false, reason: 'timeout', message, durationMs: timeoutMs });
  }

  private finish(check: Check, run: Running, result: ProbeResult): void {
    if (check.running !== run) return; // a late answer after the timeout, or the check was removed
    check.running = null;
    this.running--;
    this.counters.completed++;
    const now = this.clock.now();
    // A timeout decided long after the probe began (over STALLED × its timeout) was the event loop's, held up (a
    // busy box, a long garbage collection), not the real server's: the probe had less time than it was given,
    // its request may have gone out late, its answer been read late. It is asked again at once, in the slot it
    // frees, and that answer counts whatever it is (as @lbd/clock's askAgainIfStalled): a server that is down is
    // found one probe later, never missed, and a busy director does not take healthy servers out.
    if (result.reason === 'timeout' && !run.askedAgain && now - run.startedAt > STALLED * check.spec.timeoutMs) {
      this.counters.askedAgain++;
      this.start(check, now, now, true);
      this.arm();
      return;
    }
    const { record, transition } = nextHealth(check.record, result, check.spec.thresholds, check.spec.flap, now);
    check.record = record;
    check.probed = true;
    this.startWaiting(now);
    // State first, then listeners: a listener that throws cannot leave the scheduler half-updated.
    if (this.listenerCount('result') > 0) {
      this.emit('result', { key: check.spec.key, result, state: record.state, at: now, startDelayMs: run.startedAt - run.dueAt });
    }
    if (transition) {
      this.emit('transition', {
        key: check.spec.key, from: transition.from, to: transition.to, reason: transition.reason,
        latencyMs: result.durationMs, at: now, result, record,
      });
    }
  }

  private startWaiting(now: number): void {
    while (this.running < this.maxConcurrent && this.waitQueue.length > 0) {
      const check = this.waitQueue.shift() as Check;
      const dueAt = check.waitingDueAt;
      if (dueAt === null || check.removed) continue;
      check.waitingDueAt = null;
      this.start(check, dueAt, now);
    }
    this.arm(); // start() pushed deadlines
  }

  // A binary min-heap on (at, order).
  private push(e: Entry): void {
    const h = this.heap;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const parent = h[p] as Entry;
      if (!before(e, parent)) break;
      h[i] = parent;
      i = p;
    }
    h[i] = e;
  }

  private pop(): Entry | undefined {
    const h = this.heap;
    const top = h[0];
    const last = h.pop();
    if (top === undefined || last === undefined || h.length === 0) return top;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= h.length) break;
      const r = l + 1;
      const c = r < h.length && before(h[r] as Entry, h[l] as Entry) ? r : l;
      if (!before(h[c] as Entry, last)) break;
      h[i] = h[c] as Entry;
      i = c;
    }
    h[i] = last;
    return top;
  }
}

function before(a: Entry, b: Entry): boolean {
  return a.at < b.at || (a.at === b.at && a.order < b.order);
}

/** The first phase-aligned due time at or after `now`: `hash(key) mod interval` past a multiple of the interval. */
function firstBase(key: string, intervalMs: number, now: number): number {
  const phase = hash32(key) % intervalMs;
  const start = Math.floor(now / intervalMs) * intervalMs + phase;
  return start >= now ? start : start + intervalMs;
}

/** FNV-1a with a murmur3 finalizer: similar keys (addresses a digit apart) land far apart. */
function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

function validateSpec(spec: CheckSpec): void {
  const bad = (field: string, rule: string): never => {
    throw new RangeError(`health check ${JSON.stringify(spec.key)}: ${field} ${rule}`);
  };
  if (!(spec.intervalMs > 0) || !Number.isFinite(spec.intervalMs)) bad('intervalMs', `${spec.intervalMs} must be a positive number`);
  if (!(spec.timeoutMs > 0) || !Number.isFinite(spec.timeoutMs)) bad('timeoutMs', `${spec.timeoutMs} must be a positive number`);
  if (!(spec.jitterMs >= 0)) bad('jitterMs', `${spec.jitterMs} must be 0 or more`);
  if (!Number.isInteger(spec.thresholds.rise) || spec.thresholds.rise < 1) bad('rise', `${spec.thresholds.rise} must be a whole number ≥ 1`);
  if (!Number.isInteger(spec.thresholds.fall) || spec.thresholds.fall < 1) bad('fall', `${spec.thresholds.fall} must be a whole number ≥ 1`);
}

function sameSpec(a: CheckSpec, b: CheckSpec): boolean {
  return canonical(a) === canonical(b);
}

/** JSON with sorted object keys, so equal specs compare equal however they were built. */
function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, val: unknown) =>
    val !== null && typeof val === 'object' && !Array.isArray(val)
      ? Object.fromEntries(Object.entries(val as Record<string, unknown>).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)))
      : val,
  );
}

/**
 * A key for a check from everything that defines it (target, timings, thresholds, flap policy, start state):
 * the agent gives this to `set()`, so identical checks of one target configured by several services run
 * once, and any difference makes a separate check. Readable at the front for logs: 'http 198.19.1.12:8080 5f3a09c1'.
 */
export function checkKey(spec: Omit<CheckSpec, 'key'>): string {
  const t = spec.target;
  const where = t.kind === 'icmp' || t.kind === 'exec' ? t.address : t.address.includes(':') ? `[${t.address}]:${t.port}` : `${t.address}:${t.port}`;
  return `${t.kind} ${where} ${hash32(canonical(spec)).toString(16).padStart(8, '0')}`;
}
