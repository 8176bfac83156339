/**
 * The fencing timing rule, in one place. A leader holds an etcd lease of `ttlMs`; the client renews it every
 * `keepaliveIntervalMs` (etcd3 renews at ttl/3). The leader records the time it *sent* each renewal that
 * etcd then confirmed (`lastSuccessfulKeepalive`, on its own clock; the send time is conservative: etcd
 * extends the lease when it processes the renewal, which is later). It stops leading (aborts `leading`)
 * once `now − lastSuccessfulKeepalive > safetyWindowMs`.
 *
 * etcd deletes the election key, and so lets another director win, no earlier than
 * `lastSuccessfulKeepalive + ttlMs` measured on etcd's clock; an etcd leader change only extends leases.
 * Clocks run at slightly different rates: `maxClockDriftMs` bounds how far the two clocks can drift apart
 * over one ttl. The rule
 *
 *     keepaliveIntervalMs < safetyWindowMs < ttlMs − maxClockDriftMs − keepaliveIntervalMs
 *
 * keeps the leader's fence strictly before any takeover, with at least one keepalive interval left over for
 * the leader to release what it holds (vips, local addresses) and for a late fence timer; the lower bound
 * keeps a healthy leader from fencing between two renewals.
 *
 * Worst-case takeover after the leader dies (box death): its last renewal was no later than the death, so
 * etcd expires the lease at most `ttlMs` (+ drift) after it, and the standby, watching the key, wins at once.
 * Priorities and preemption are the next step of issue 4; this bound is for equal priorities.
 */
export interface FenceTiming {
  /** Lease TTL; etcd grants whole seconds and at least 2 s with default timers (TOOLCHAIN.md). */
  readonly ttlMs: number;
  readonly safetyWindowMs: number;
  readonly maxClockDriftMs: number;
  /** Default ttlMs / 3: what etcd3 uses. */
  readonly keepaliveIntervalMs?: number;
}

export const MIN_TTL_MS = 2000;

export function keepaliveIntervalOf(t: FenceTiming): number {
  return t.keepaliveIntervalMs ?? t.ttlMs / 3;
}

/** Every violation of the rule above, as messages; empty when the timing is safe. */
export function timingProblems(t: FenceTiming): string[] {
  const out: string[] = [];
  const ka = keepaliveIntervalOf(t);
  if (!Number.isInteger(t.ttlMs / 1000) || t.ttlMs < MIN_TTL_MS) out.push(`ttlMs ${t.ttlMs}: must be a whole number of seconds, at least ${MIN_TTL_MS}`);
  if (!(t.maxClockDriftMs >= 0)) out.push(`maxClockDriftMs ${t.maxClockDriftMs}: must be >= 0`);
  if (!(t.safetyWindowMs > ka)) out.push(`safetyWindowMs ${t.safetyWindowMs}: must exceed the keepalive interval ${ka} ms, or a healthy leader fences itself`);
  const max = t.ttlMs - t.maxClockDriftMs - ka;
  if (!(t.safetyWindowMs < max)) out.push(`safetyWindowMs ${t.safetyWindowMs}: must be < ttlMs − maxClockDriftMs − keepaliveIntervalMs = ${max}`);
  return out;
}

/** Throws a RangeError listing every problem. */
export function checkTiming(t: FenceTiming): void {
  const problems = timingProblems(t);
  if (problems.length > 0) throw new RangeError(`unsafe election timing: ${problems.join('; ')}`);
}

/** Worst case from the leader's death to a standby leading (equal priorities; see the rule above). */
export function worstCaseTakeoverMs(t: FenceTiming): number {
  return t.ttlMs + t.maxClockDriftMs;
}
