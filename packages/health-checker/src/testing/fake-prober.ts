import { abortedOutcome, endpoint } from '../attempt.js';
import type { ProbeOptions, ProbeReason, ProbeResult, ProbeTarget, Prober } from '../types.js';
import type { FakeClock } from '@lbd/clock/testing';

/**
 * What a FakeProber answers: a success or a failure (after `delayMs` of FakeClock time, default 0), or
 * 'hang': never answers until the probe's signal aborts.
 */
export type FakeOutcome =
  | { ok: true; message?: string; delayMs?: number }
  | { ok: false; reason?: ProbeReason; message?: string; delayMs?: number }
  | 'hang';

export interface FakeCall {
  target: ProbeTarget;
  /** FakeClock time the probe started. */
  at: number;
  timeoutMs: number;
  /** FakeClock time its signal aborted, if it did. */
  abortedAt: number | null;
  /** FakeClock time it answered (or was aborted), if it has. */
  settledAt: number | null;
}

/**
 * A Prober for scheduler and agent tests. The test says per endpoint (`address:port`, `[::1]:80`) what
 * probes return, either one outcome or a sequence (one per probe, the last repeating); it records every call
 * with its time, and how many probes ran at once.
 */
export class FakeProber implements Prober {
  readonly calls: FakeCall[] = [];
  inFlight = 0;
  maxInFlight = 0;
  private readonly outcomes = new Map<string, { seq: FakeOutcome[]; next: number }>();
  private fallback: FakeOutcome;

  constructor(private readonly clock: FakeClock, opts: { default?: FakeOutcome } = {}) {
    this.fallback = opts.default ?? { ok: true };
  }

  /** What probes of `address:port` return from now on. */
  set(where: string, outcome: FakeOutcome | FakeOutcome[]): void {
    this.outcomes.set(where, { seq: Array.isArray(outcome) ? outcome : [outcome], next: 0 });
  }

  setDefault(outcome: FakeOutcome): void {
    this.fallback = outcome;
  }

  /** The calls to one endpoint. */
  callsTo(where: string): FakeCall[] {
    return this.calls.filter((c) => endpoint(c.target.address, c.target.port) === where);
  }

  probe(target: ProbeTarget, opts: ProbeOptions): Promise<ProbeResult> {
    const where = endpoint(target.address, target.port);
    const call: FakeCall = { target, at: this.clock.now(), timeoutMs: opts.timeoutMs, abortedAt: null, settledAt: null };
    this.calls.push(call);
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    const outcome = this.take(where);
    return new Promise<ProbeResult>((resolve) => {
      let handle: unknown = null;
      const done = (r: ProbeResult): void => {
        if (call.settledAt !== null) return;
        call.settledAt = this.clock.now();
        this.inFlight--;
        if (handle !== null) this.clock.clearTimeout(handle);
        resolve(r);
      };
      opts.signal?.addEventListener('abort', () => {
        call.abortedAt = this.clock.now();
        const [reason, message] = abortedOutcome(target, opts.signal as AbortSignal, opts.timeoutMs);
        done({ ok: false, reason, message, durationMs: this.clock.now() - call.at });
      }, { once: true });
      if (outcome === 'hang') return;
      const result = (): ProbeResult => ({
        ok: outcome.ok,
        reason: outcome.ok ? 'ok' : (outcome.reason ?? 'refused'),
        message: outcome.message ?? (outcome.ok ? `fake ${where}: ok` : `fake ${where}: ${outcome.reason ?? 'refused'}`),
        durationMs: outcome.delayMs ?? 0,
      });
      if ((outcome.delayMs ?? 0) > 0) handle = this.clock.setTimeout(() => done(result()), outcome.delayMs ?? 0);
      else queueMicrotask(() => done(result()));
    });
  }

  private take(where: string): FakeOutcome {
    const entry = this.outcomes.get(where);
    if (entry === undefined) return this.fallback;
    const outcome = entry.seq[Math.min(entry.next, entry.seq.length - 1)] as FakeOutcome;
    entry.next++;
    return outcome;
  }
}
