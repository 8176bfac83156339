/**
 * The fencing timing rule, in one place (docs: README "High availability").
 *
 * Leadership of a vip group is a record in etcd (`groups/<g>/leader`) that only changes by compare-and-swap
 * on its revision. The leader *beats*: every `beatIntervalMs` it rewrites the record, conditioned on the
 * revision it wrote last. It records the time it SENT each beat that etcd then confirmed
 * (`lastConfirmedSend`, on its own monotonic clock), and acts as leader only while
 *
 *     now − lastConfirmedSend < safetyWindowMs            (or while every peer has promised not to take over)
 *
 * after which it releases its vips and local addresses, within `maxReleaseMs`.
 *
 * A standby takes over only by compare-and-swap on the revision R it last saw, and only after it has seen R
 * unchanged for `takeoverAfterMs`, measured from when it RECEIVED R. If that swap succeeds, R was the
 * leader's last confirmed beat: it was sent no later than it was committed, which is no later than the
 * standby received it. So the standby acts at least `takeoverAfterMs` after the leader's last confirmed send,
 * and the leader stopped at most `safetyWindowMs + fenceCheckMs + maxReleaseMs` after it. The rule
 *
 *     takeoverAfterMs ≥ safetyWindowMs + fenceCheckMs + maxReleaseMs + maxClockDriftMs
 *     beatIntervalMs × 2 < safetyWindowMs
 *
 * keeps the two apart; the second gives a healthy leader two beats per window. No etcd lease is involved, so
 * an etcd leader change (which extends leases) cannot break it: it only delays beats, which fences early.
 * What the rule cannot cover is a leader whose process stalls (a frozen event loop) longer than the margin;
 * the address lifetime backstop and the agent-death watchdog (dataplane-nft addresses.ts) bound that case.
 *
 * A new leader's first act is a beat too (the takeover swap, or a swap on a handed-over record), so every
 * leader, new or old, is fenced from a beat it sent itself.
 */
export interface ElectionTiming {
  readonly beatIntervalMs: number;
  readonly safetyWindowMs: number;
  readonly takeoverAfterMs: number;
  /** Bound on releasing a group's addresses once the fence fires. */
  readonly maxReleaseMs: number;
  /** How often leaders check their fence and standbys their takeover condition. */
  readonly fenceCheckMs: number;
  /** Bound on how far two directors' monotonic clocks drift apart over one takeover interval. */
  readonly maxClockDriftMs: number;
}

/** Named timing profiles: `default` for ordinary networks and loaded boxes, `fast` for quiet dedicated ones. */
export const TIMING_PROFILES = {
  default: { beatIntervalMs: 75, safetyWindowMs: 250, takeoverAfterMs: 330, maxReleaseMs: 50, fenceCheckMs: 10, maxClockDriftMs: 5 },
  // fast keeps the default's margin between fence and takeover (75 ms: release, a late timer, drift). With
  // only 35 ms, drills under a busy loop on every core measured dual ownership (a starved agent released late).
  fast: { beatIntervalMs: 25, safetyWindowMs: 75, takeoverAfterMs: 150, maxReleaseMs: 60, fenceCheckMs: 5, maxClockDriftMs: 10 },
} as const satisfies Record<string, ElectionTiming>;

export type TimingProfile = keyof typeof TIMING_PROFILES;

/** Every violation of the rule above, as messages; empty when the timing is safe. */
export function timingProblems(t: ElectionTiming): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(t)) {
    if (!(typeof v === 'number' && Number.isFinite(v) && v >= 0)) out.push(`${k} ${String(v)}: must be a number >= 0`);
  }
  if (out.length > 0) return out;
  if (!(t.beatIntervalMs > 0 && t.fenceCheckMs > 0)) out.push('beatIntervalMs and fenceCheckMs must be > 0');
  if (!(t.beatIntervalMs * 2 < t.safetyWindowMs)) {
    out.push(`safetyWindowMs ${t.safetyWindowMs}: must exceed 2 × beatIntervalMs = ${t.beatIntervalMs * 2}, or a healthy leader fences itself after one slow beat`);
  }
  const min = t.safetyWindowMs + t.fenceCheckMs + t.maxReleaseMs + t.maxClockDriftMs;
  if (!(t.takeoverAfterMs >= min)) {
    out.push(`takeoverAfterMs ${t.takeoverAfterMs}: must be >= safetyWindowMs + fenceCheckMs + maxReleaseMs + maxClockDriftMs = ${min}, or a standby could act before the leader has released`);
  }
  return out;
}

/** Throws a RangeError listing every problem. */
export function checkTiming(t: ElectionTiming): void {
  const problems = timingProblems(t);
  if (problems.length > 0) throw new RangeError(`unsafe election timing: ${problems.join('; ')}`);
}

/**
 * Worst case from the leader's death to a standby leading: the leader dies just after a beat the standby
 * receives at once; the standby swaps `takeoverAfterMs` later, found by a check at most `fenceCheckMs` late.
 * Add one etcd write and the address claim (a few ms each on a healthy cluster).
 */
export function worstCaseTakeoverMs(t: ElectionTiming): number {
  return t.takeoverAfterMs + t.fenceCheckMs;
}
