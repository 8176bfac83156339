import type { GroupRole, PreemptPolicy } from '@lbd/config';
import type { DirectorRecord, HandoffRequest, LeaderRecord } from './records.js';
import { kernelLeaseMs, probeFreshMs, type ElectionTiming } from './timing.js';

/**
 * One vip group's election decisions, as a pure step (STYLE.md section 10): `decide(state, observation, now,
 * timing, settings)` returns the next state and the actions to take, as data. It reads no clock, makes no
 * call and sets no timer; GroupElection (group-election.ts) does the I/O (etcd through Kv, the kernel lease,
 * claims, peers, timers), feeds what happened back in as events, and carries out the actions. The rule it
 * keeps is timing.ts's; every number here is on this director's own monotonic clock (`now`).
 *
 * What it decides: the leader's beats, its kernel lease (from confirmed beats, or from its peers' promises
 * while fail-static), its fence, when to ask for promises and whether to grant one, a standby's takeover
 * (after `takeoverAfterMs` of an unchanged revision, three times that for a handed-over record, later for
 * lower ranks), preemption (never, after-delay, after-sync), a planned handover's record, and every role
 * change with its reason. What it does not: retries, deadlines of calls, or what the agent claims.
 */

export interface GroupSettings {
  readonly name: string;
  readonly priority: number;
  readonly preempt: PreemptPolicy;
  readonly preemptDelayMs: number;
}

export interface PromiseRequest {
  readonly from: string;
  readonly group: string;
  readonly term: number;
  /** The asking leader's last beat that etcd confirmed to it. */
  readonly beat: number;
  readonly durationMs: number;
}

export interface PromiseReply {
  readonly granted: boolean;
  readonly etcdReachable: boolean;
  readonly reason: string;
}

/** confirmed: etcd took it; failed: no answer (etcd slow or unreachable); superseded: another director holds the record. */
export type BeatOutcome = 'confirmed' | 'failed' | 'superseded';

/** A revision of the group's leader record as this director received it. */
export interface SeenRecord {
  /** Mod revision; '0' when there is no record. */
  readonly rev: string;
  /** null: no record, or one that does not parse. */
  readonly record: LeaderRecord | null;
  /** When this revision was first received (our clock). */
  readonly at: number;
}

export interface ElectionState {
  readonly role: GroupRole;
  /** The leader record as last received. */
  readonly observed: SeenRecord | null;
  /** Our own revision and record while leading (or handing over, or stepping down: they swap on it). */
  readonly mine: { readonly rev: string; readonly record: LeaderRecord } | null;
  /** When we sent the last beat etcd confirmed. */
  readonly lastConfirmedSend: number;
  /** Where the kernel lease we last wrote ends. */
  readonly leaseUntil: number;
  /** The beat number of our last confirmed beat (adopted revisions do not count). */
  readonly confirmedBeat: number;
  /** Beats sent and not answered yet (they all swap on `mine.rev` or an older revision). */
  readonly beatsInFlight: number;
  /**
   * The beat being sent on our revision `rev`: its number (every beat sent on that revision carries it: at
   * most one of them can land) and when the first of them was sent. A later beat on the same revision is a
   * second try beside the first, not instead of it.
   */
  readonly sending: { readonly rev: string; readonly beat: number; readonly firstSent: number } | null;
  readonly lastBeatAt: number;
  /** peer id → until when it promised not to take over (our clock: from when we asked). */
  readonly coverage: ReadonlyMap<string, number>;
  /** Each peer's last answer to a promise request, for the fence's reason. */
  readonly peerAnswers: ReadonlyMap<string, string>;
  /** When each peer's last answer (a promise, a refusal or an error) came. */
  readonly answeredAt: ReadonlyMap<string, number>;
  /** The peers whose last reply was a promise (a refusal takes a peer out; an error leaves it as it was). */
  readonly grantedLast: ReadonlySet<string>;
  /**
   * Each peer's current run of refusals (a promise ends it): when its first refusal came, and whether a later
   * one answered a request sent a probe's freshness after that, so the peer looked at etcd again (checkFence).
   */
  readonly refusals: ReadonlyMap<string, { readonly firstAt: number; readonly confirmed: boolean }>;
  readonly lastPromiseAsk: number;
  /** Until when we promised a leader not to take over. */
  readonly promisedUntil: number;
  /** Our contact with etcd; staleness is never counted across an outage. */
  readonly etcd: {
    readonly failing: boolean;
    readonly failingSince: number;
    /** When our etcd contact last came back (or the election started). */
    readonly backAt: number;
    /** When our etcd calls last started working again after failing for a beat or more. */
    readonly recoveredAt: number;
  };
  readonly vacantSince: number | null;
  readonly preemptSince: number | null;
  /** Why an after-sync preemption waits, as last reported (reported again only when it changes). */
  readonly preemptWaitReason: string | null;
  /** A takeover (or resumption) attempt is under way. */
  readonly attempting: boolean;
  readonly handingOver: boolean;
  /** Wall-clock time and reason of the last transition (for views). */
  readonly lastTransition: { readonly at: number; readonly reason: string } | null;
}

/** What the decisions need to know of the world around the election, read when the event happened. */
export interface World {
  readonly self: string;
  /** This director's configured peers. */
  readonly peers: readonly string[];
  /** The registered directors, as last seen. */
  readonly directors: ReadonlyMap<string, DirectorRecord>;
  /** This director's health: an unhealthy director leads nothing and takes nothing over. */
  readonly health: { readonly ok: boolean; readonly problems: readonly string[] };
  /** For preempt: after-sync, null when this director holds a live copy of the group's connections, else why not. */
  readonly synced: string | null;
  /** Wall-clock ms, for display only (a record's `since`, a handoff's `at`, a transition's time). */
  readonly wallNow: number;
}

/** An entry of the leader record as an etcd answer carried it. */
export interface RecordEntry {
  readonly rev: string;
  readonly record: LeaderRecord | null;
}

/** What happened: the timer, something etcd or a peer said, or how an action went. */
export type ElectionEvent =
  /**
   * The periodic check (every fenceCheckMs): fence, beat, takeover, preemption. `coalesce`: another group
   * of this director beats in this check (Elections), so a beat at least half an interval old goes now too,
   * in the same etcd transaction: the groups' beats line up and stay lined up (one write per interval for
   * all of them, not one per group). An early beat only renews sooner; it never lets a lease run longer.
   */
  | { readonly kind: 'tick'; readonly coalesce?: boolean }
  /** A revision of the leader record: from the watch, a read, or a swap's answer. */
  | { readonly kind: 'seen'; readonly rev: string; readonly record: LeaderRecord | null }
  /** The leader record is gone (or was never there). */
  | { readonly kind: 'absent' }
  | { readonly kind: 'etcd-failing' }
  | { readonly kind: 'etcd-back' }
  /** This director's health changed (World.health says how). */
  | { readonly kind: 'health' }
  | {
    readonly kind: 'beat-result'; readonly sent: number; readonly expectRev: string; readonly record: LeaderRecord;
    readonly result: { readonly kind: 'confirmed'; readonly rev: string } | { readonly kind: 'lost'; readonly current: RecordEntry | null } | { readonly kind: 'failed' };
  }
  | {
    readonly kind: 'attempt-result'; readonly sent: number; readonly record: LeaderRecord; readonly reason: string;
    readonly result: { readonly kind: 'swapped'; readonly rev: string } | { readonly kind: 'lost'; readonly current: RecordEntry | null }
      | { readonly kind: 'unreachable' } | { readonly kind: 'failed' };
  }
  /** The attempt is over (whatever became of it, including a claim that failed and its step-down). */
  | { readonly kind: 'attempt-done' }
  /** Leading began, but the kernel lease or the claim failed. */
  | { readonly kind: 'lead-failed'; readonly reason: string }
  /** A renewal of the kernel lease failed: the kernel may stop serving at the old deadline. */
  | { readonly kind: 'lease-failed'; readonly message: string }
  | { readonly kind: 'promise-answer'; readonly peer: string; readonly sent: number; readonly durationMs: number; readonly reply: PromiseReply }
  | { readonly kind: 'promise-answer'; readonly peer: string; readonly sent: number; readonly durationMs: number; readonly error: string }
  /** A leader asks us to promise; `reachable` is our etcd probe's answer, once made (see action 'probe'). */
  | { readonly kind: 'promise-request'; readonly req: PromiseRequest; readonly reachable?: boolean }
  /** A planned switchover was requested (lbadm failover, or a preempting peer). */
  | { readonly kind: 'handoff'; readonly req: HandoffRequest }
  /** The rest of the agent is ready for the handover (beforeHandover returned): release now, if still leading. */
  | { readonly kind: 'handover-ready'; readonly req: HandoffRequest; readonly priority: number }
  /** Released, and no beat in flight: name the target. */
  | { readonly kind: 'handover-released'; readonly req: HandoffRequest; readonly priority: number }
  | { readonly kind: 'handover-done'; readonly req: HandoffRequest; readonly from: GroupRole }
  /** A step-down's release is done: report it. */
  | { readonly kind: 'released'; readonly from: GroupRole; readonly reason: string }
  /** A step-down's release is done and no beat is in flight: give up our revision (vacate it if asked). */
  | { readonly kind: 'settled'; readonly reason: string; readonly vacate: boolean }
  /** The election stops (vacate: resign and leave the group vacant). */
  | { readonly kind: 'stop'; readonly vacate: boolean };

export interface Observation {
  readonly event: ElectionEvent;
  readonly world: World;
}

/** What to do, in order. */
export type ElectionAction =
  /** Swap the record from `expectRev` to `record` (deadline `timeoutMs`); report 'beat-result'. */
  | { readonly kind: 'beat'; readonly expectRev: string; readonly record: LeaderRecord; readonly sent: number; readonly timeoutMs: number }
  /** Let the kernel serve the group for `forMs` more (a renewal; report a failure as 'lease-failed'). */
  | { readonly kind: 'lease'; readonly forMs: number }
  /** Leading begins: lease for `leaseForMs`, then claim the addresses (a failure: 'lead-failed'). */
  | { readonly kind: 'claim'; readonly leaseForMs: number }
  /** Ask each peer for a promise (deadline `timeoutMs`); report every answer as 'promise-answer'. */
  | { readonly kind: 'askPromises'; readonly peers: readonly string[]; readonly request: PromiseRequest; readonly sent: number; readonly timeoutMs: number }
  /** The fence: the leader could not prove its leadership in time; release, keep the record (others take over). */
  | { readonly kind: 'fence'; readonly from: GroupRole; readonly reason: string }
  /** Leave leadership: release, report 'released', wait for the beats in flight, report 'settled'. */
  | { readonly kind: 'stepDown'; readonly from: GroupRole; readonly reason: string; readonly vacate: boolean }
  /** Write the vacancy: swap our revision to a record naming nobody. */
  | { readonly kind: 'vacate'; readonly expectRev: string; readonly record: LeaderRecord; readonly timeoutMs: number }
  /**
   * Take over, be elected or resume: check that etcd answers (deadline `probeMs`), then swap `expectRev`
   * (null: the key must not exist) to `record`; report 'attempt-result', then 'attempt-done'.
   */
  | { readonly kind: 'attempt'; readonly expectRev: string | null; readonly record: LeaderRecord; readonly reason: string; readonly probeMs: number; readonly timeoutMs: number }
  /** Ask the leader to hand the group over to us (put the handoff request). */
  | { readonly kind: 'preempt'; readonly request: HandoffRequest }
  /** Hand over to `req.to`: beforeHandover, then report 'handover-ready'. */
  | { readonly kind: 'handover'; readonly req: HandoffRequest; readonly priority: number }
  /** Release for the handover, wait for the beats in flight, report 'handover-released'. */
  | { readonly kind: 'handoverRelease'; readonly req: HandoffRequest; readonly priority: number; readonly from: GroupRole }
  /** Name the target: swap our revision to `record`. */
  | { readonly kind: 'handoverSwap'; readonly expectRev: string; readonly record: LeaderRecord; readonly timeoutMs: number }
  /** A role change (from === to: a decision worth showing, such as a refused handoff). */
  | { readonly kind: 'transition'; readonly from: GroupRole; readonly to: GroupRole; readonly reason: string }
  /** Worth reporting, not a transition (an after-sync preemption that waits). */
  | { readonly kind: 'notice'; readonly reason: string }
  | { readonly kind: 'beatOutcome'; readonly outcome: BeatOutcome }
  /** The leader has fenced itself (for metrics; a 'fence' action follows). */
  | { readonly kind: 'fenced' }
  /** Probe etcd (answer again with `reachable`) before answering the promise request. */
  | { readonly kind: 'probe' }
  | { readonly kind: 'reply'; readonly reply: PromiseReply };

export interface Decision {
  readonly state: ElectionState;
  readonly actions: readonly ElectionAction[];
}

/** How long past its last confirmed send a leader waits for a promise reply still out, in safety windows. */
const PROMISE_WAIT_WINDOWS = 4;

/**
 * Beats a leader keeps in flight at once. A beat not answered within a beat interval gets a second try
 * beside it, not after it: etcd3 sends each call to a member picked at random, so the second try usually
 * travels on another connection and reaches the raft leader while the first waits out a lost packet's
 * retransmission (200 ms at least: most of a window) or a member that stopped answering.
 */
const MAX_BEATS_IN_FLIGHT = 3;

export function initialState(now: number): ElectionState {
  return {
    role: 'standby', observed: null, mine: null, lastConfirmedSend: 0, leaseUntil: 0, confirmedBeat: 0, beatsInFlight: 0, sending: null, lastBeatAt: 0,
    coverage: new Map(), peerAnswers: new Map(), answeredAt: new Map(), grantedLast: new Set(), refusals: new Map(), lastPromiseAsk: 0, promisedUntil: 0,
    etcd: { failing: false, failingSince: 0, backAt: now, recoveredAt: Number.NEGATIVE_INFINITY },
    vacantSince: null, preemptSince: null, preemptWaitReason: null, attempting: false, handingOver: false, lastTransition: null,
  };
}

export function leading(s: ElectionState): boolean {
  return s.role === 'leader' || s.role === 'fail-static';
}

/** Whether a check now sends a beat: leading, a beat interval since the last one, room for another in flight. */
export function beatDue(s: ElectionState, now: number, t: ElectionTiming): boolean {
  return leading(s) && !s.handingOver && s.beatsInFlight < MAX_BEATS_IN_FLIGHT && now - s.lastBeatAt >= t.beatIntervalMs;
}

/**
 * Whether a beat may go early, beside another group's due one: none in flight (an early beat is never a
 * second try) and half an interval since the last, so lined-up groups beat at most twice as often as alone
 * for one interval, then once per interval together.
 */
function beatJoinable(s: ElectionState, now: number, t: ElectionTiming): boolean {
  return leading(s) && !s.handingOver && s.beatsInFlight === 0 && now - s.lastBeatAt >= t.beatIntervalMs / 2;
}

/** The next state and the actions, for one event. Never mutates `state`. */
export function decide(state: ElectionState, obs: Observation, now: number, timing: ElectionTiming, settings: GroupSettings): Decision {
  const d = new Step(state, obs.world, now, timing, settings);
  d.on(obs.event);
  return { state: d.s, actions: d.actions };
}

/**
 * How long the kernel may serve the group from `now`: until the lease's end after our last confirmed send,
 * or, while every peer's promise still runs (fail-static), until the earliest promise ends less the slack
 * and drift the rule allows for (timing.ts).
 */
export function leaseForMs(s: ElectionState, peers: readonly string[], now: number, t: ElectionTiming): number {
  let until = s.lastConfirmedSend + kernelLeaseMs(t);
  if (covered(s, peers, now)) {
    until = Math.max(until, Math.min(...peers.map((p) => s.coverage.get(p) ?? 0)) - t.maxLeaseSlackMs - t.maxClockDriftMs);
  }
  return until - now;
}

function covered(s: ElectionState, peers: readonly string[], now: number): boolean {
  return peers.length > 0 && peers.every((p) => (s.coverage.get(p) ?? 0) > now);
}

type Draft = { -readonly [K in keyof ElectionState]: ElectionState[K] };

/** One decision: a draft of the next state and the actions so far. */
class Step {
  s: Draft;
  readonly actions: ElectionAction[] = [];

  constructor(prev: ElectionState, private readonly w: World, private readonly now: number, private readonly t: ElectionTiming, private readonly g: GroupSettings) {
    this.s = { ...prev };
  }

  on(e: ElectionEvent): void {
    switch (e.kind) {
      case 'tick': return this.tick(e.coalesce === true);
      case 'seen': return this.see(e.rev, e.record);
      case 'absent': this.s.observed = { rev: '0', record: null, at: this.now }; return;
      case 'etcd-failing': return this.markFailing();
      case 'etcd-back': return this.etcdBack();
      case 'health': return this.health();
      case 'beat-result': return this.beatResult(e);
      case 'attempt-result': return this.attemptResult(e);
      case 'attempt-done': this.s.attempting = false; return;
      case 'lead-failed': return this.stepDown(e.reason, true);
      case 'lease-failed':
        if (!leading(this.s) || this.s.handingOver) return;
        return this.stepDown(`kernel lease failed: ${e.message}`, true, 'leader');
      case 'promise-answer': return this.promiseAnswer(e);
      case 'promise-request': return this.promiseRequest(e.req, e.reachable);
      case 'handoff': return this.handoff(e.req);
      case 'handover-ready':
        // Beats went on meanwhile; a leader fenced in the wait has nothing left to hand over.
        if (!leading(this.s) || this.s.mine === null) return;
        this.s.handingOver = true;
        this.actions.push({ kind: 'handoverRelease', req: e.req, priority: e.priority, from: this.s.role });
        return;
      case 'handover-released': return this.handoverReleased(e.req, e.priority);
      case 'handover-done':
        this.s.handingOver = false;
        this.s.mine = null;
        this.s.role = 'standby';
        this.note(e.from, 'standby', `handed over to ${e.req.to}: ${e.req.reason}`);
        return;
      case 'released': {
        const ok = this.w.health.ok;
        this.note(e.from, ok ? 'standby' : 'unhealthy', e.reason);
        if (!ok) this.s.role = 'unhealthy';
        return;
      }
      case 'settled': {
        const mine = this.s.mine;
        this.s.mine = null;
        if (e.vacate && mine !== null) {
          const vacant: LeaderRecord = { ...mine.record, director: null, beat: mine.record.beat + 1, reason: `${this.w.self} resigned: ${e.reason}` };
          this.actions.push({ kind: 'vacate', expectRev: mine.rev, record: vacant, timeoutMs: this.t.safetyWindowMs });
        }
        return;
      }
      case 'stop':
        if (e.vacate && leading(this.s)) this.stepDown('agent stopping', true);
        return;
    }
  }

  private tick(coalesce: boolean): void {
    const now = this.now;
    const s = this.s;
    if (leading(s)) {
      if (s.handingOver) return;
      this.checkFence();
      if (beatDue(this.s, now, this.t) || (coalesce && beatJoinable(this.s, now, this.t))) this.beat();
      return;
    }
    if (s.attempting || s.role === 'unhealthy') return;
    const obs = s.observed;
    if (obs === null) return;
    const rec = obs.record;
    const self = this.w.self;
    if (rec !== null && rec.director === self) {
      // Named leader (handed over to us, or we restarted): the first beat decides, and fences from its send.
      // Not while we have promised a fail-static leader to stay away.
      if (now >= s.promisedUntil) this.attempt(obs.rev, rec, rec.beat === 0 ? 'took over' : 'resumed', rec.beat === 0 ? rec.reason : 'named leader in etcd');
      return;
    }
    if (rec === null || rec.director === null) {
      s.vacantSince ??= now;
      if (now - s.vacantSince >= this.rankDelay(null) && now >= s.promisedUntil) {
        this.attempt(obs.rev === '0' ? null : obs.rev, rec, 'elected', rec === null ? 'no leader yet' : `vacant: ${rec.reason}`);
      }
      return;
    }
    s.vacantSince = null;
    this.considerPreempt(rec);
    if (!rec.peers.includes(self)) return; // only the leader's peers may take over from it
    const since = Math.max(obs.at, s.etcd.backAt);
    // A handed-over record (beat 0) waits for its target's first beat three times as long: the target is
    // alive and claiming, and the old leader racing it back would undo the switchover.
    const wait = this.t.takeoverAfterMs * (rec.beat === 0 ? 3 : 1) + this.rankDelay(rec.director);
    if (now - since >= wait && now >= s.promisedUntil) {
      this.attempt(obs.rev, rec, 'took over', `no beat from ${rec.director} for ${Math.round(now - since)} ms`);
    }
  }

  /** Lower-priority candidates wait a little longer, so the best one usually wins the swap. */
  private rankDelay(leader: string | null): number {
    const mine = this.g.priority;
    let better = 0;
    for (const [id, r] of this.w.directors) {
      if (id === this.w.self || id === leader || !r.healthy) continue;
      const p = r.priorities[this.g.name];
      if (p !== undefined && (p > mine || (p === mine && id < this.w.self))) better++;
    }
    return better * this.t.beatIntervalMs * 2;
  }

  private attempt(expectRev: string | null, prev: LeaderRecord | null, verb: string, why: string): void {
    if (!this.w.health.ok) return;
    this.s.attempting = true;
    const resumed = prev !== null && prev.director === this.w.self;
    const record: LeaderRecord = {
      director: this.w.self, term: resumed ? prev.term : (prev?.term ?? 0) + 1, beat: (prev?.beat ?? 0) + 1,
      peers: [...this.w.peers], priority: this.g.priority, since: resumed ? prev.since : this.w.wallNow, reason: why,
    };
    // The probe: a swap sent to an etcd that does not answer can still land when it comes back; asking
    // first keeps a standby that lost etcd from leaving such a swap behind (a needless failover later).
    this.actions.push({
      kind: 'attempt', expectRev, record, reason: `${verb}: ${why}`,
      probeMs: Math.max(10, Math.floor(this.t.safetyWindowMs / 3)), timeoutMs: this.t.safetyWindowMs,
    });
  }

  private attemptResult(e: Extract<ElectionEvent, { kind: 'attempt-result' }>): void {
    const r = e.result;
    if (r.kind === 'unreachable' || r.kind === 'failed') return this.markFailing();
    if (r.kind === 'lost') {
      if (r.current) this.see(r.current.rev, r.current.record);
      return;
    }
    this.see(r.rev, e.record);
    // The swap landed after we promised a fail-static leader to stay away: lead only once that promise
    // has run out (the named-leader branch of tick() resumes then, with a fresh beat).
    if (this.now < this.s.promisedUntil) return;
    // The swap left the window no room for a beat (etcd slow, or this thread starved): leading now would
    // start at or past our own fence, with little or no lease to serve under, and fence at the next check
    // unless the first beat came back at once (seen with `fast` on a cold start: a swap of 86 ms, then
    // "fenced: no etcd confirmation for 124 ms" 38 ms after leading). The record names us, so the
    // named-leader branch of tick() resumes at once with a fresh swap, whose send the lease is counted from.
    if (this.now - e.sent >= this.t.safetyWindowMs - this.t.beatIntervalMs) return;
    const s = this.s;
    s.mine = { rev: r.rev, record: e.record };
    s.lastConfirmedSend = e.sent;
    s.leaseUntil = e.sent + kernelLeaseMs(this.t);
    s.confirmedBeat = e.record.beat;
    s.lastBeatAt = e.sent;
    s.coverage = new Map();
    s.preemptSince = null;
    this.setRole('leader', e.reason);
    // The lease first: addresses are never announced without the kernel's leave to serve them.
    this.actions.push({ kind: 'claim', leaseForMs: leaseForMs(this.s, this.w.peers, this.now, this.t) });
  }

  private beat(): void {
    const s = this.s;
    const mine = s.mine;
    if (mine === null) return;
    // Every beat on one revision carries one number: only one of them can land (each swaps on that
    // revision), so a peer that sees two numbers past a leader's last confirmed one knows that leader
    // learned of a landing after it asked (see promiseRequest).
    if (s.sending?.rev !== mine.rev) s.sending = { rev: mine.rev, beat: mine.record.beat + 1, firstSent: this.now };
    s.beatsInFlight += 1;
    s.lastBeatAt = this.now;
    const next: LeaderRecord = { ...mine.record, beat: s.sending.beat, peers: [...this.w.peers], priority: this.g.priority };
    // Two beat intervals: a beat stuck on a dead etcd member fails and opens that member's breaker, so the
    // tries after it go to members that answer while the window still has room for them.
    this.actions.push({ kind: 'beat', expectRev: mine.rev, record: next, sent: this.now, timeoutMs: this.t.beatIntervalMs * 2 });
  }

  private beatResult(e: Extract<ElectionEvent, { kind: 'beat-result' }>): void {
    const s = this.s;
    s.beatsInFlight = Math.max(0, s.beatsInFlight - 1);
    const r = e.result;
    if (r.kind === 'failed') {
      this.actions.push({ kind: 'beatOutcome', outcome: 'failed' });
      return this.markFailing();
    }
    if (r.kind === 'confirmed') {
      // The newest revision is ours even while we step down or hand over: they swap on it next.
      if (s.mine?.rev === e.expectRev) s.mine = { rev: r.rev, record: e.record };
      this.actions.push({ kind: 'beatOutcome', outcome: 'confirmed' });
      return this.confirmed(e.sent, e.record.beat);
    }
    const cur = r.current?.record ?? null;
    if (r.current && cur && cur.director === this.w.self && cur.term === e.record.term) {
      // Another try of ours landed first (or one that timed out here landed there): ours still, adopt its
      // revision. When it is one of the tries on the revision this one swapped on, it was sent no earlier
      // than the first of them: etcd confirmed a beat from then.
      this.actions.push({ kind: 'beatOutcome', outcome: 'confirmed' });
      if (s.mine?.rev === e.expectRev) s.mine = { rev: r.current.rev, record: cur };
      const tried = s.sending;
      if (tried !== null && tried.rev === e.expectRev && tried.beat === cur.beat) this.confirmed(tried.firstSent, cur.beat);
      return;
    }
    this.actions.push({ kind: 'beatOutcome', outcome: 'superseded' });
    if (!leading(s) || s.handingOver) return;
    this.stepDown(`superseded: ${cur?.director ?? 'nobody'} holds the record now`, false);
  }

  /** Etcd confirmed a beat of ours sent at `sent`: the lease runs from there. */
  private confirmed(sent: number, beat: number): void {
    const s = this.s;
    if (!leading(s) || s.handingOver) return;
    if (sent > s.lastConfirmedSend) {
      s.lastConfirmedSend = sent;
      this.renewLease();
    }
    s.confirmedBeat = Math.max(s.confirmedBeat, beat);
    if (s.etcd.failing) this.etcdBack();
    // Only a confirmation that leaves the window room for one more beat ends fail-static: a late answer to
    // a beat sent long ago would otherwise flip the role to leader and, at the next check, back (seen: three
    // such pairs within 45 ms in the lab, and with a bound of one window, pairs 1 ms apart under load).
    if (s.role === 'fail-static' && this.now - s.lastConfirmedSend < this.t.safetyWindowMs - this.t.beatIntervalMs) this.setRole('leader', 'etcd confirms beats again');
  }

  /**
   * Once every peer has promised, the promises carry the kernel lease (before the window closes, so the
   * kernel never stops a leader that is about to go fail-static). Written again when that gains a beat, or
   * when the lease written would end within a beat: the first promises of an episode extend it by less
   * than a beat, and waiting for a later one let the lease run out on a busy box before that came.
   */
  private leaseFromPromises(): void {
    const s = this.s;
    if (!leading(s) || s.handingOver || !covered(s, this.w.peers, this.now)) return;
    const until = this.now + leaseForMs(s, this.w.peers, this.now, this.t);
    const ending = s.leaseUntil - this.now < this.t.beatIntervalMs;
    if (until > s.leaseUntil + (ending ? this.t.fenceCheckMs : this.t.beatIntervalMs)) this.renewLease();
  }

  private renewLease(): void {
    const forMs = leaseForMs(this.s, this.w.peers, this.now, this.t);
    this.s.leaseUntil = this.now + forMs;
    this.actions.push({ kind: 'lease', forMs });
  }

  private checkFence(): void {
    const now = this.now;
    const s = this.s;
    const t = this.t;
    const age = now - s.lastConfirmedSend;
    // Ask as soon as one beat is overdue: a peer needs a round trip and an etcd probe to answer, and
    // its promise must arrive before the window closes.
    if (age > t.beatIntervalMs + t.fenceCheckMs) this.askPromises();
    const peers = this.w.peers;
    const all = covered(s, peers, now);
    this.leaseFromPromises();
    if (age < t.safetyWindowMs) return;
    if (all) {
      if (s.role !== 'fail-static') this.setRole('fail-static', `etcd unreachable for ${Math.round(age)} ms; peers ${peers.join(', ')} cannot reach it either, keeping the vips`);
      return;
    }
    // A peer asked in this episode has not replied yet: a peer must probe etcd before it can promise, and
    // its reply crosses the peer link twice (through the peer's main thread), so under load it can come
    // after the window. Wait for it, at most PROMISE_WAIT_WINDOWS windows: the kernel lease ends on time
    // whatever the agent does, and a promise that comes late is still good (the peer granted it while not
    // leading, and takes nothing over while it runs), so the lease is written again and fail-static holds.
    // A peer that refuses (it reaches etcd: we are the one cut off) replies quickly, but its first refusal
    // may describe etcd from just before it failed: members stop one by one, and a probe's success stands
    // for half a beat. Then the peer's next answers are promises, each a probe's timeout later, and fencing
    // on the old refusal left a group nobody could take over until etcd came back (2.9 s without service in
    // an etcd-outage drill beside a busy core). So a refusal decides only once confirmed (promiseAnswer):
    // a delay of a round trip and half a beat, within the window when the peer is quick.
    const episode = this.episodeStart();
    const awaited = peers.filter((p) => (s.answeredAt.get(p) ?? Number.NEGATIVE_INFINITY) < episode || (!s.grantedLast.has(p) && !(s.refusals.get(p)?.confirmed ?? false)));
    if (awaited.length > 0 && age < PROMISE_WAIT_WINDOWS * t.safetyWindowMs) return;
    const missing = peers.filter((p) => !((s.coverage.get(p) ?? 0) > now));
    // Fail-static, and a peer's promise ran out while its next answer is still out (we ask every half beat;
    // a busy peer answers late): wait for that answer, at most an ask's timeout past the promise's end. The
    // kernel lease ended with the promise, so nothing is served meanwhile, and a late grant renews it: a gap
    // of tens of ms where fencing meant, etcd being down for everyone, no holder until etcd came back (2.7 s
    // in an etcd-outage drill beside busy loops). A peer whose last reply refused is not waited for.
    if (s.role === 'fail-static' && missing.length > 0 && missing.every((p) => s.grantedLast.has(p) && now - (s.coverage.get(p) ?? 0) < 2 * t.safetyWindowMs)) return;
    const why = peers.length === 0 ? 'no peers to vouch' : `not every peer vouches (${missing.map((p) => `${p}: ${s.peerAnswers.get(p) ?? 'not asked yet'}`).join('; ')})`;
    const from = s.role;
    s.role = 'standby'; // stop beating at once; the release follows immediately
    this.actions.push({ kind: 'fenced' }, { kind: 'fence', from, reason: `fenced: no etcd confirmation for ${Math.round(age)} ms, ${why}` });
  }

  /** When this episode of unconfirmed beats began: one beat overdue, when the first promise request goes. */
  private episodeStart(): number {
    return this.s.lastConfirmedSend + this.t.beatIntervalMs + this.t.fenceCheckMs;
  }

  private askPromises(): void {
    if (this.now - this.s.lastPromiseAsk < this.t.beatIntervalMs / 2) return;
    this.s.lastPromiseAsk = this.now;
    // Within the window one window is enough, counted from this ask: it carries the lease past the window's
    // end, and the asks that follow (every half beat) renew it. Most such asks come from a beat that etcd
    // answered a few ms late, and a peer that sees the beats landing grants them; a longer promise would
    // then hold that peer's takeover past the standby rule's own bound if the leader died just after (seen
    // in box-death drills with `fast`: 150 ms promises granted about once a second on a quiet lab, one
    // takeover in eight delayed by up to 60 ms). Once the window has closed etcd is likely gone: two
    // windows, so a promise outlives a couple of late answers from a busy peer, and delays a takeover
    // (when etcd failed for everyone, then only for us) by no more than that.
    const age = this.now - this.s.lastConfirmedSend;
    const durationMs = this.t.safetyWindowMs * (age < this.t.safetyWindowMs ? 1 : 2);
    const request: PromiseRequest = { from: this.w.self, group: this.g.name, term: this.s.mine?.record.term ?? 0, beat: this.s.confirmedBeat, durationMs };
    // A reply may take longer than a window on a busy peer (see checkFence): give it two.
    this.actions.push({ kind: 'askPromises', peers: [...this.w.peers], request, sent: this.now, timeoutMs: 2 * this.t.safetyWindowMs });
  }

  private promiseAnswer(e: Extract<ElectionEvent, { kind: 'promise-answer' }>): void {
    const answers = new Map(this.s.peerAnswers);
    if ('error' in e) {
      answers.set(e.peer, `no answer: ${e.error}`);
    } else {
      answers.set(e.peer, e.reply.reason);
      this.noteRefusal(e.peer, e.sent, e.reply.granted);
      if (e.reply.granted) this.s.coverage = new Map(this.s.coverage).set(e.peer, Math.max(this.s.coverage.get(e.peer) ?? 0, e.sent + e.durationMs));
      const granted = new Set(this.s.grantedLast);
      if (e.reply.granted) granted.add(e.peer);
      else granted.delete(e.peer);
      this.s.grantedLast = granted;
    }
    this.s.peerAnswers = answers;
    // Only a reply is an answer to wait for: a request that timed out on a busy peer link is asked again.
    if (!('error' in e)) this.s.answeredAt = new Map(this.s.answeredAt).set(e.peer, this.now);
    // The lease now, not at the next tick: a busy box's next tick can come after the lease ran out.
    this.leaseFromPromises();
  }

  /**
   * A refusal is confirmed when it answers a request sent a probe's freshness after the peer's first refusal
   * (of this episode) came: the probe behind that answer began after the first refusal was sent, so it saw
   * etcd anew. A refusal right after a promise in this episode is confirmed at once: the peer saw etcd fail
   * (or our beats land) and now sees it working, which is news from after the failure.
   */
  private noteRefusal(peer: string, sent: number, granted: boolean): void {
    const refusals = new Map(this.s.refusals);
    if (granted) {
      refusals.delete(peer);
    } else {
      const episode = this.episodeStart();
      const run = refusals.get(peer);
      if (run !== undefined && run.firstAt >= episode) {
        refusals.set(peer, { firstAt: run.firstAt, confirmed: run.confirmed || sent >= run.firstAt + probeFreshMs(this.t) });
      } else {
        const afterPromise = this.s.grantedLast.has(peer) && (this.s.answeredAt.get(peer) ?? Number.NEGATIVE_INFINITY) >= episode;
        refusals.set(peer, { firstAt: this.now, confirmed: afterPromise });
      }
    }
    this.s.refusals = refusals;
  }

  /** A leader asks us (a standby) to promise not to take over while etcd is unreachable. */
  private promiseRequest(req: PromiseRequest, reachable: boolean | undefined): void {
    const s = this.s;
    const self = this.w.self;
    const reply = (r: PromiseReply): void => { this.actions.push({ kind: 'reply', reply: r }); };
    const promise = (): void => { s.promisedUntil = Math.max(s.promisedUntil, this.now + req.durationMs); };
    if (reachable === undefined) {
      if (leading(s)) return reply({ granted: false, etcdReachable: !s.etcd.failing, reason: `${self} leads ${this.g.name} itself` });
      const rec = s.observed?.record;
      if (rec?.director === req.from && rec.term === req.term && rec.beat >= req.beat + 2) {
        // Two beats have landed since its last confirmed one: its writes get through, etcd is slow to answer
        // it, not gone. A failover would meet the same etcd; promising keeps the group where it is (and our
        // takeover waits for our promise, so it is safe). A leader cut off from etcd swaps every beat on its
        // last confirmed revision, so at most one of them lands unconfirmed: it never looks like this.
        promise();
        return reply({ granted: true, etcdReachable: !s.etcd.failing, reason: `${self} sees ${req.from}'s beats landing: etcd is slow, not gone` });
      }
      this.actions.push({ kind: 'probe' });
      return;
    }
    if (reachable) {
      if (s.etcd.failing) this.etcdBack();
      // Just back on etcd ourselves: etcd as a whole was away (an outage, or its raft leader died and the
      // others were electing), so the leader is probably not cut off alone; its client may just need a
      // few hundred ms more to get a beat through. Keep vouching for a grace of three takeover intervals
      // after our own return; our takeover waits for our promises, so this is safe, and it only delays a
      // takeover when etcd failed for everyone (a leader cut from etcd alone finds us refusing at once).
      if (this.now + req.durationMs <= this.s.etcd.recoveredAt + 3 * this.t.takeoverAfterMs) {
        promise();
        return reply({ granted: true, etcdReachable: true, reason: `${self} is just back on etcd after it failed for everyone` });
      }
      return reply({ granted: false, etcdReachable: true, reason: `${self} reaches etcd: the leader is the one cut off` });
    }
    this.markFailing();
    promise();
    return reply({ granted: true, etcdReachable: false, reason: `${self} cannot reach etcd either` });
  }

  private considerPreempt(rec: LeaderRecord): void {
    const g = this.g;
    const s = this.s;
    if (g.preempt === 'never' || rec.priority >= g.priority || !this.w.health.ok) {
      s.preemptSince = null;
      return;
    }
    s.preemptSince ??= this.now;
    if (this.now - s.preemptSince < g.preemptDelayMs) return;
    let synced = '';
    if (g.preempt === 'after-sync') {
      const notYet = this.w.synced;
      if (notYet !== null) {
        if (notYet !== s.preemptWaitReason) this.actions.push({ kind: 'notice', reason: `preempt waits: ${notYet}` });
        s.preemptWaitReason = notYet;
        return;
      }
      synced = ', connections synced';
    }
    s.preemptWaitReason = null;
    s.preemptSince = this.now; // ask again after another delay if the leader does not answer
    const request: HandoffRequest = { to: this.w.self, reason: `preempt: priority ${g.priority} > ${rec.priority} of ${rec.director ?? '?'} (${g.preempt}${synced})`, at: this.w.wallNow };
    this.actions.push({ kind: 'preempt', request });
  }

  /** Planned switchover: release first, then name the new leader, who claims on seeing it. */
  private handoff(req: HandoffRequest): void {
    const s = this.s;
    if (!leading(s) || s.mine === null || req.to === this.w.self) return;
    const target = this.w.directors.get(req.to);
    const priority = target?.priorities[this.g.name];
    if (!target?.healthy || priority === undefined || !this.w.peers.includes(req.to)) {
      this.note(s.role, s.role, `refused handoff to ${req.to}: not a healthy registered peer serving ${this.g.name}`);
      return;
    }
    this.actions.push({ kind: 'handover', req, priority });
  }

  private handoverReleased(req: HandoffRequest, priority: number): void {
    const mine = this.s.mine;
    if (mine === null) return;
    // Until the target's first beat writes its own peers, the directors that may take over from it (if it
    // never beats) are ours and us: with none listed, a target that died here would strand the group.
    const peers = [...this.w.peers.filter((p) => p !== req.to), this.w.self];
    const next: LeaderRecord = {
      director: req.to, term: mine.record.term + 1, beat: 0, peers, priority, since: this.w.wallNow, reason: `handed over by ${this.w.self}: ${req.reason}`,
    };
    this.actions.push({ kind: 'handoverSwap', expectRev: mine.rev, record: next, timeoutMs: this.t.safetyWindowMs });
  }

  /** Leave leadership (or refuse it) because this director is unhealthy. */
  private health(): void {
    const h = this.w.health;
    const s = this.s;
    if (!h.ok && leading(s)) return this.stepDown(`unhealthy: ${h.problems.join(', ')}`, true);
    if (!h.ok && s.role === 'standby') this.setRole('unhealthy', `unhealthy: ${h.problems.join(', ')}`);
    if (h.ok && s.role === 'unhealthy') this.setRole('standby', 'healthy again');
  }

  /** Stop beating now; the release (and the transition's report) follows in the stepDown action. */
  private stepDown(reason: string, vacate: boolean, from?: GroupRole): void {
    const f = from ?? (this.s.role === 'standby' ? 'leader' : this.s.role);
    this.s.role = 'standby';
    this.actions.push({ kind: 'stepDown', from: f, reason, vacate });
  }

  private see(rev: string, record: LeaderRecord | null): void {
    if (this.s.observed?.rev === rev) return;
    if (this.s.etcd.failing) this.etcdBack();
    this.s.observed = { rev, record, at: this.now };
  }

  private markFailing(): void {
    const e = this.s.etcd;
    if (!e.failing) this.s.etcd = { ...e, failing: true, failingSince: this.now };
  }

  private etcdBack(): void {
    const e = this.s.etcd;
    // A failure that lasted a beat or more: etcd was away for us too, not one slow call.
    const recoveredAt = e.failing && this.now - e.failingSince >= this.t.beatIntervalMs ? this.now : e.recoveredAt;
    this.s.etcd = { ...e, failing: false, backAt: this.now, recoveredAt };
  }

  private setRole(to: GroupRole, reason: string): void {
    const from = this.s.role;
    this.s.role = to;
    this.note(from, to, reason);
  }

  private note(from: GroupRole, to: GroupRole, reason: string): void {
    this.s.lastTransition = { at: this.w.wallNow, reason };
    this.actions.push({ kind: 'transition', from, to, reason });
  }
}
