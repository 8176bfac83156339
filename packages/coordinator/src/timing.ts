/**
 * The fencing timing rule, in one place (docs: README "High availability").
 *
 * Leadership of a vip group is a record in etcd (`groups/<g>/leader`) that only changes by compare-and-swap
 * on its revision. The leader *beats*: every `beatIntervalMs` it rewrites the record, conditioned on the
 * revision it wrote last. It records the time it SENT each beat that etcd then confirmed
 * (`lastConfirmedSend`, on its own monotonic clock). A beat not answered within a beat interval gets a second
 * try beside it (decide.ts MAX_BEATS_IN_FLIGHT), on the same revision: at most one of them lands, and when a
 * try finds another one landed, the leader counts the confirmation from the first try's send (no later than
 * the one that landed).
 *
 * Safety rests on the kernel, not on the agent running on time. From each confirmed beat the leader writes
 * a *kernel lease* (dataplane-nft lease.ts): nftables set elements with a timeout, without which the kernel
 * neither forwards the group's traffic nor answers ARP/ND for its addresses. The lease it writes ends at
 *
 *     lastConfirmedSend + kernelLeaseMs            kernelLeaseMs = safetyWindowMs + fenceCheckMs + maxReleaseMs
 *
 * (or, fail-static, where every peer's promise ends: see below). The kernel enforces that deadline with no
 * process involved, late by at most `maxLeaseSlackMs`: the time from reading the clock to the kernel taking
 * the write (one line to a long-lived `nft -i`), plus one jiffy of the kernel's timeout check (4 ms at
 * HZ=250). A frozen, starved or dead agent therefore stops serving by then.
 *
 * The agent's own fence is the tidy path, not the safe one: while it runs on time it sees
 * `now − lastConfirmedSend ≥ safetyWindowMs`, checks that at most `fenceCheckMs` late, and releases its vips
 * within `maxReleaseMs`, so it lets go before the kernel's deadline. When the kernel's deadline came first,
 * the agent was late, and says so ("lease expired in the kernel: agent late by N ms").
 *
 * A standby takes over only by compare-and-swap on the revision R it last saw, and only after it has seen R
 * unchanged for `takeoverAfterMs`, measured from when it RECEIVED R. If that swap succeeds, no beat
 * of the leader's landed after R (it would have changed the revision), so every beat it had confirmed was
 * committed no later than R, and sent before that; R was committed before the standby received it. So the standby acts at least `takeoverAfterMs` after the leader's last confirmed send,
 * and the leader's kernel stopped serving at most `kernelLeaseMs + maxLeaseSlackMs` after it. The rule
 *
 *     takeoverAfterMs ≥ safetyWindowMs + fenceCheckMs + maxReleaseMs + maxLeaseSlackMs + maxClockDriftMs
 *     beatIntervalMs × 2 < safetyWindowMs
 *
 * keeps the two apart; the second gives a healthy leader two beats per window. No etcd lease is involved, so
 * an etcd leader change (which extends leases) cannot break it: it only delays beats, which fences early.
 *
 * What it assumes of clocks: each director measures only intervals, on CLOCK_MONOTONIC (performance.now in
 * the agent, jiffies in the kernel's timeouts: both count the same time on one box, wall-clock steps change
 * neither), and two directors' monotonic clocks drift apart by at most `maxClockDriftMs` over one takeover
 * interval. Nothing compares one box's clock reading with another's.
 *
 * Fail-static: a leader whose beats stop being confirmed asks its peers to promise not to take over for a
 * while; each promise runs from when the peer received the request, which is after the leader sent it, so
 * the leader's lease may run to the earliest promise's end counted from its own send, less the slack and
 * the drift.
 *
 * A new leader's first act is a beat too (the takeover swap, or a swap on a handed-over record), so every
 * leader, new or old, is leased from a beat it sent itself, and it writes that lease before it claims.
 */
export interface ElectionTiming {
  readonly beatIntervalMs: number;
  readonly safetyWindowMs: number;
  readonly takeoverAfterMs: number;
  /** How long the agent's own release may take once its fence fires, before the kernel's deadline ends the lease. */
  readonly maxReleaseMs: number;
  /** How often leaders check their fence and standbys their takeover condition. */
  readonly fenceCheckMs: number;
  /** Bound on how far two directors' monotonic clocks drift apart over one takeover interval. */
  readonly maxClockDriftMs: number;
  /** Bound on how late the kernel ends a lease: the write's latency from the clock read, plus one jiffy. */
  readonly maxLeaseSlackMs: number;
}

/**
 * Named timing profiles: `default` for ordinary networks and loaded boxes, `fast` for quiet dedicated ones.
 * The margin between the fence and a takeover covers the agent's tidy release and the lease write, not a
 * starved agent: a starved agent's lease runs out in the kernel on time without it (lease.ts in
 * @lbd/dataplane-nft), which is what lets `fast` keep its margin short.
 *
 * `default` was 75 / 250 / 300 ms. Box death measured 249-336 ms without service in the lab (a standby
 * acts takeoverAfterMs after the last beat it received, plus its check, the swap and the claim), so the
 * 350 ms target held with no room. 60 / 200 / 250 ms gave p99 271 ms (quiet and loaded alike), but under
 * a saturating load etcd, sharing the lab's two cores, stalled for about 205 ms for both directors a few
 * times in ten minutes: each a fail-static episode (no move) that the 250 ms window had absorbed, and one
 * failed the etcd-member-loss test. 60 / 230 / 280 ms keeps room on both sides (docs/measurements/ha-history.md,
 * "Box death after the next two changes").
 *
 * `relaxed` (150 / 500 / 560 ms) is for directors that lead many groups on a small box, as the ECMP tier's
 * slots make them. A director's beats for all its groups are one etcd transaction (beat-batch.ts), so what
 * grows with the groups is small (measured in the ECMP lab, 3 directors x 8 slots at rest: 0.71 of the two
 * cores under `default`, 0.44 under `relaxed`); but on the lab's two cores, shared with etcd, the router
 * and the drills' traffic, `default` leaders still fenced at the start of a drill (beats unconfirmed for
 * 230 ms), and `relaxed` did not. A slot's established connections survive a takeover through sync, so
 * what `relaxed` costs is new connections of the slot's share for up to 575 ms more than `default`'s worst
 * case.
 */
export const TIMING_PROFILES = {
  default: { beatIntervalMs: 60, safetyWindowMs: 230, takeoverAfterMs: 280, maxReleaseMs: 20, fenceCheckMs: 10, maxClockDriftMs: 5, maxLeaseSlackMs: 10 },
  fast: { beatIntervalMs: 25, safetyWindowMs: 75, takeoverAfterMs: 110, maxReleaseMs: 10, fenceCheckMs: 5, maxClockDriftMs: 5, maxLeaseSlackMs: 10 },
  relaxed: { beatIntervalMs: 150, safetyWindowMs: 500, takeoverAfterMs: 560, maxReleaseMs: 20, fenceCheckMs: 15, maxClockDriftMs: 5, maxLeaseSlackMs: 10 },
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
  const min = kernelLeaseMs(t) + t.maxLeaseSlackMs + t.maxClockDriftMs;
  if (!(t.takeoverAfterMs >= min)) {
    out.push(`takeoverAfterMs ${t.takeoverAfterMs}: must be >= safetyWindowMs + fenceCheckMs + maxReleaseMs + maxLeaseSlackMs + maxClockDriftMs = ${min}, or a standby could serve while the old leader's kernel lease still runs`);
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

/** How long past its last confirmed send a leader's kernel lease runs (the rule above). */
export function kernelLeaseMs(t: ElectionTiming): number {
  return t.safetyWindowMs + t.fenceCheckMs + t.maxReleaseMs;
}

/**
 * How long a director's successful etcd probe stands for further promise requests (EtcdProbe): half a beat,
 * so a burst of requests costs one probe. A refusal it gives describes etcd as it was up to this long before.
 */
export function probeFreshMs(t: ElectionTiming): number {
  return t.beatIntervalMs / 2;
}
