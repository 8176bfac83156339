import type { Clock, TimerHandle } from '@lbd/clock';
import type { GroupRole } from '@lbd/config';
import {
  beatDue, decide, initialState, leading, type BeatOutcome, type ElectionAction, type ElectionEvent, type ElectionState, type GroupSettings, type PromiseReply,
  type PromiseRequest, type RecordEntry, type World,
} from './decide.js';
import type { Entry, Kv, KvWatch, SwapResult } from './kv.js';
import {
  isHandoff, isLeaderRecord, parseJson, type DirectorRecord, type GroupView, type HandoffRequest, type LeaderRecord,
} from './records.js';
import { probeFreshMs, type ElectionTiming } from './timing.js';

export type { BeatOutcome, GroupSettings, PromiseReply, PromiseRequest } from './decide.js';

/** What the agent does when this director gains or loses a group: claim or release its addresses. */
export interface GroupHooks {
  /**
   * Lets the kernel serve the group for the next `forMs` ms and no longer (timing.ts): written before every
   * claim and after every confirmed beat while leading. A rejection means the kernel may stop serving at
   * the old deadline, so the leader steps down.
   */
  lease(group: string, forMs: number): Promise<void>;
  claim(group: string): Promise<void>;
  /** Ends the lease, then releases the addresses. */
  release(group: string): Promise<void>;
  /**
   * A planned switchover to `to` is about to release the group: the last chance, while still leading, to
   * get state (connection sync) to the target. Bounded by the implementation; a failure does not stop it.
   */
  beforeHandover?(group: string, to: string): Promise<void>;
}

/** How a leader reaches its peers when etcd does not answer (gRPC in the agent; in memory in tests). */
export interface PeerTransport {
  requestPromise(peerId: string, req: PromiseRequest, timeoutMs: number): Promise<PromiseReply>;
}

export interface Transition {
  readonly group: string;
  readonly from: GroupRole;
  readonly to: GroupRole;
  readonly reason: string;
}

export interface GroupElectionDeps {
  readonly self: string;
  readonly kv: Kv;
  readonly clock: Clock;
  readonly timing: ElectionTiming;
  readonly keys: { leader(g: string): string; handoff(g: string): string; probe(id: string): string };
  readonly hooks: GroupHooks;
  readonly transport: PeerTransport;
  /** This director's configured peers (ids). */
  peers(): readonly string[];
  /** The registered directors, as last seen. */
  directors(): ReadonlyMap<string, DirectorRecord>;
  /** This director's own health: an unhealthy director leads nothing and takes nothing over. */
  health(): { ok: boolean; problems: readonly string[] };
  /**
   * For preempt: after-sync, whether this director holds a live copy of the group's connections: null
   * when it does, else why not (then it waits, however long the delay has run).
   */
  syncedFor(group: string): string | null;
  onTransition(t: Transition): void;
  /** Every beat's outcome (metrics count the lost ones; nothing else keeps them). */
  onBeat?(group: string, outcome: BeatOutcome): void;
  /** This director fenced itself (released the group: it could not prove its leadership in time). */
  onFenced?(group: string): void;
  /**
   * How beats are sent (default: `kv.swap`, one transaction each). Elections passes its BeatBatch, which
   * carries the beats of every group it leads that are sent in one check as one etcd transaction.
   */
  readonly sendBeat?: (key: string, expectRev: string, value: string, timeoutMs: number) => Promise<SwapResult>;
  /**
   * Who runs the periodic check: this election's own timer (default), or the caller through `check()`
   * (Elections: one timer for all its groups, so that their beats line up).
   */
  readonly checks?: 'own-timer' | 'caller';
  /** Whether etcd takes this director's writes (default: a probe of its own; Elections shares one among its groups). */
  readonly probe?: EtcdProbe;
}

/**
 * Whether etcd takes a director's writes, for answering promise requests. A write, not a read: what the
 * leader cannot get through is a write, and etcd answers reads while its writes wait (a slow raft log on a
 * starved member); a read probe refused the leader then, and it fenced itself while etcd was slow for
 * everyone.
 *
 * A leader asks for promises every half beat while its beats go unconfirmed, and needs each answer well
 * within its kernel lease. A probe of a missing etcd takes its whole timeout (half a window), so answering
 * every request with a fresh probe made each answer that late, later still on a busy box (its deadline a
 * timer that fires late): in etcd-outage drills beside busy loops, the leader's lease ran out before the
 * first promise came (a 30 ms gap in service), or its promises lapsed and it fenced (2.7 s without a
 * holder, etcd being down for everyone). So one probe runs at a time, shared by every request, and:
 *   - a success is good for half a beat from the probe's start (as before: reachable means refuse);
 *   - a failure is good for half a window from the probe's end, and while it is, a request is answered
 *     at once and the next probe runs in the background. Promising on a failure up to that old only
 *     restrains us (a promise is never what lets anyone serve), and a leader cut off alone finds us
 *     refusing within one probe of etcd coming back for us.
 * One probe serves every group of the director (Elections): they share its etcd connection, and a leader
 * of eight slot groups whose beats are late asks for eight promises at once.
 */
export class EtcdProbe {
  private last: { startedAt: number; endedAt: number; ok: boolean } | null = null;
  private probing: Promise<boolean> | null = null;
  private readonly failed = new Set<() => void>();

  constructor(private readonly kv: Kv, private readonly clock: Clock, private readonly timing: ElectionTiming, private readonly key: string) {}

  /** Calls `fn` whenever a probe fails (each group marks etcd failing); returns what unsubscribes it. */
  onFailed(fn: () => void): () => void {
    this.failed.add(fn);
    return () => { this.failed.delete(fn); };
  }

  reachable(): Promise<boolean> {
    const now = this.clock.now();
    const t = this.timing;
    const last = this.last;
    const probe = (): Promise<boolean> => (this.probing ??= this.run().finally(() => { this.probing = null; }));
    if (last !== null && last.ok && now - last.startedAt < probeFreshMs(t)) return Promise.resolve(true);
    if (last !== null && !last.ok && now - last.endedAt < t.safetyWindowMs / 2) {
      if (now - last.startedAt >= probeFreshMs(t)) void probe();
      return Promise.resolve(false);
    }
    return probe();
  }

  private async run(): Promise<boolean> {
    const startedAt = this.clock.now();
    // Half a window: a tighter probe mistakes a busy etcd for a missing one, and vouches for a cut-off leader.
    const ok = await this.kv.reachable(Math.max(10, Math.floor(this.timing.safetyWindowMs / 2)), { write: this.key });
    this.last = { startedAt, endedAt: this.clock.now(), ok };
    if (!ok) for (const fn of [...this.failed]) fn();
    return ok;
  }
}

/**
 * One vip group's election, as described in timing.ts: the leader beats by compare-and-swap, fences itself
 * when its beats stop being confirmed (unless every peer promises it cannot take over: fail-static), and
 * standbys take over by swapping a revision they have seen unchanged for `takeoverAfterMs`. Planned
 * switchovers (handoff) release first and then name the new leader, who claims at once.
 *
 * This class is the I/O: etcd (through Kv), the timer, the hooks and the peers. Every decision is
 * decide.ts's: each thing that happens goes in as an event, and the actions that come out are carried out
 * here, in order. Transitions (a step-down, a takeover, a handover) run one at a time.
 */
export class GroupElection {
  private s: ElectionState;
  private settings: GroupSettings;
  private readonly probe: EtcdProbe;
  private readonly stopProbeListener: () => void;
  /** The beats in flight: each settles once answered (or failed) and its result decided. */
  private readonly beats = new Set<Promise<void>>();
  private timer: TimerHandle | undefined;
  private leaderWatch: KvWatch | undefined;
  private handoffWatch: KvWatch | undefined;
  private stopped = false;
  /** Started, with its checks run by the caller (`checks: 'caller'`). */
  private checking = false;
  private busy: Promise<void> = Promise.resolve();

  constructor(settings: GroupSettings, private readonly d: GroupElectionDeps) {
    this.settings = settings;
    this.s = initialState(d.clock.now());
    this.probe = d.probe ?? new EtcdProbe(d.kv, d.clock, d.timing, d.keys.probe(d.self));
    this.stopProbeListener = this.probe.onFailed(() => { if (!this.stopped) this.dispatch({ kind: 'etcd-failing' }); });
  }

  get name(): string {
    return this.settings.name;
  }

  update(settings: GroupSettings): void {
    this.settings = settings;
  }

  view(): GroupView {
    const leader = leading(this.s) ? this.d.self : (this.s.observed?.record?.director ?? null);
    return { role: this.s.role, leader, priority: this.settings.priority, lastTransition: this.s.lastTransition };
  }

  /** The decisions' state now (for views and tests). */
  state(): ElectionState {
    return this.s;
  }

  /** Time since our last confirmed beat, while leading. */
  beatAgeMs(): number | null {
    return leading(this.s) ? this.d.clock.now() - this.s.lastConfirmedSend : null;
  }

  async start(): Promise<void> {
    this.dispatch({ kind: 'etcd-back' });
    await this.refresh();
    this.leaderWatch = await this.d.kv.watchKey(this.d.keys.leader(this.name), {
      put: (e) => { this.dispatch({ kind: 'seen', rev: e.rev, record: parseJson<LeaderRecord>(e.value, isLeaderRecord) }); },
      delete: () => { this.dispatch({ kind: 'absent' }); },
      connected: () => { this.dispatch({ kind: 'etcd-back' }); void this.refresh(); },
      disconnected: () => { this.dispatch({ kind: 'etcd-failing' }); },
      error: () => { this.dispatch({ kind: 'etcd-failing' }); },
    });
    this.handoffWatch = await this.d.kv.watchKey(this.d.keys.handoff(this.name), {
      error: () => undefined,
      put: (e) => {
        const req = parseJson<HandoffRequest>(e.value, isHandoff);
        if (req) this.serialize(() => this.handOver(req));
      },
    });
    if (this.d.checks === 'caller') this.checking = true;
    else this.tick();
  }

  /** Whether the next check sends a beat of its own (Elections asks every group before it checks them). */
  beatDue(): boolean {
    return beatDue(this.s, this.d.clock.now(), this.d.timing);
  }

  /**
   * The periodic check, for a caller that runs it (`checks: 'caller'`) every fenceCheckMs. `coalesce`:
   * another group beats in this round, so ours goes along if it is half an interval old (decide.ts).
   */
  check(coalesce: boolean): void {
    if (this.stopped || !this.checking) return;
    void this.act({ kind: 'tick', coalesce });
  }

  /** Stops; `vacate` also releases and marks the group vacant so a standby takes over at once. */
  async stop(opts: { vacate: boolean }): Promise<void> {
    this.stopped = true;
    this.stopProbeListener();
    if (this.timer !== undefined) this.d.clock.clearTimeout(this.timer);
    await this.busy;
    await this.act({ kind: 'stop', vacate: opts.vacate }, true);
    await this.leaderWatch?.cancel().catch(() => { /* a watch on a lost connection has nothing left to stop */ });
    await this.handoffWatch?.cancel().catch(() => { /* a watch on a lost connection has nothing left to stop */ });
  }

  /** Leave leadership (or refuse it) because this director is unhealthy; called on a health change. */
  healthChanged(): void {
    this.serialize(() => this.act({ kind: 'health' }, true));
  }

  /** A leader asks us (a standby) to promise not to take over while etcd is unreachable. */
  async answerPromise(req: PromiseRequest): Promise<PromiseReply> {
    const first = this.dispatch({ kind: 'promise-request', req });
    const reply = first.find((a) => a.kind === 'reply');
    if (reply) return reply.reply;
    const reachable = await this.etcdReachable();
    const second = this.dispatch({ kind: 'promise-request', req, reachable });
    const r = second.find((a) => a.kind === 'reply');
    if (!r) throw new Error(`${this.d.self}: no answer decided for ${req.from}'s promise request`);
    return r.reply;
  }

  /** Whether etcd takes our writes (EtcdProbe: a failed probe marks etcd failing, through onFailed). */
  private etcdReachable(): Promise<boolean> {
    return this.probe.reachable();
  }

  private async refresh(): Promise<void> {
    try {
      const e = await this.d.kv.get(this.d.keys.leader(this.name));
      this.dispatch(e === null ? { kind: 'absent' } : { kind: 'seen', rev: e.rev, record: parseJson<LeaderRecord>(e.value, isLeaderRecord) });
    } catch {
      this.dispatch({ kind: 'etcd-failing' });
    }
  }

  private tick(): void {
    if (this.stopped) return;
    this.timer = this.d.clock.setTimeout(() => {
      void this.act({ kind: 'tick' });
      this.tick();
    }, this.d.timing.fenceCheckMs);
  }

  /** Runs `fn` after whatever transition is in progress, one at a time. */
  private serialize(fn: () => Promise<void>): void {
    // Each step reports its own failures as events (lead-failed, lease-failed, a step-down's release); what
    // escapes one must not keep the steps after it from running.
    this.busy = this.busy.then(fn).catch(() => { /* see above */ });
  }

  private world(): World {
    return {
      self: this.d.self, peers: this.d.peers(), directors: this.d.directors(), health: this.d.health(),
      synced: this.settings.preempt === 'after-sync' ? this.d.syncedFor(this.name) : null, wallNow: Date.now(),
    };
  }

  /** Decides on `event` now: the state moves on at once; the actions are returned, not carried out. */
  private dispatch(event: ElectionEvent): readonly ElectionAction[] {
    const { state, actions } = decide(this.s, { event, world: this.world() }, this.d.clock.now(), this.d.timing, this.settings);
    this.s = state;
    return actions;
  }

  /**
   * Decides on `event` and carries the actions out. `inline`: we are inside a transition already (one
   * serialized step), so transitions it starts run within it instead of queueing behind it.
   */
  private act(event: ElectionEvent, inline = false): Promise<void> {
    return this.apply(this.dispatch(event), inline);
  }

  private async apply(actions: readonly ElectionAction[], inline: boolean): Promise<void> {
    const g = this.name;
    for (const a of actions) {
      switch (a.kind) {
        case 'beat': {
          const beat: Promise<void> = this.beat(a).finally(() => { this.beats.delete(beat); });
          this.beats.add(beat);
          break;
        }
        case 'lease':
          this.d.hooks.lease(g, a.forMs).catch((err: unknown) => {
            void this.act({ kind: 'lease-failed', message: err instanceof Error ? err.message : String(err) });
          });
          break;
        case 'claim': await this.claim(a.leaseForMs); break;
        case 'askPromises': this.askPromises(a); break;
        case 'fence':
        case 'stepDown': {
          const step = { from: a.from, reason: a.reason, vacate: a.kind === 'stepDown' && a.vacate };
          if (inline) await this.stepDown(step);
          else this.serialize(() => this.stepDown(step));
          break;
        }
        case 'vacate':
        case 'handoverSwap':
          // Best effort: a vacancy or a handover's record that does not land leaves ours, and a standby takes
          // over after takeoverAfterMs as from a leader that died (we released already).
          await this.d.kv.swap(this.d.keys.leader(g), a.expectRev, JSON.stringify(a.record), a.timeoutMs).catch(() => { /* see above */ });
          break;
        case 'attempt': this.serialize(() => this.attempt(a)); break;
        case 'preempt':
          this.d.kv.put(this.d.keys.handoff(g), JSON.stringify(a.request)).catch(() => { /* asked again after another delay */ });
          break;
        case 'handover': await this.handover(a.req, a.priority); break;
        case 'handoverRelease': await this.handoverRelease(a.req, a.priority, a.from); break;
        case 'transition': this.d.onTransition({ group: g, from: a.from, to: a.to, reason: a.reason }); break;
        case 'notice': this.d.onTransition({ group: g, from: this.s.role, to: this.s.role, reason: a.reason }); break;
        case 'beatOutcome': this.d.onBeat?.(g, a.outcome); break;
        case 'fenced': this.d.onFenced?.(g); break;
        case 'probe':
        case 'reply':
          break; // answerPromise's
      }
    }
  }

  private async beat(a: Extract<ElectionAction, { kind: 'beat' }>): Promise<void> {
    let result: Extract<ElectionEvent, { kind: 'beat-result' }>['result'];
    try {
      const key = this.d.keys.leader(this.name);
      const value = JSON.stringify(a.record);
      const res = await (this.d.sendBeat ? this.d.sendBeat(key, a.expectRev, value, a.timeoutMs) : this.d.kv.swap(key, a.expectRev, value, a.timeoutMs));
      result = res.ok ? { kind: 'confirmed', rev: res.rev } : { kind: 'lost', current: entry(res.current) };
    } catch {
      result = { kind: 'failed' };
    }
    void this.act({ kind: 'beat-result', sent: a.sent, expectRev: a.expectRev, record: a.record, result });
  }

  private askPromises(a: Extract<ElectionAction, { kind: 'askPromises' }>): void {
    const { sent, request } = a;
    for (const peer of a.peers) {
      // Acted on, not only decided: a grant can renew the kernel lease at once (decide.ts, leaseFromPromises).
      void this.d.transport.requestPromise(peer, request, a.timeoutMs).then(
        (reply) => this.act({ kind: 'promise-answer', peer, sent, durationMs: request.durationMs, reply }),
        (err: unknown) => this.act({ kind: 'promise-answer', peer, sent, durationMs: request.durationMs, error: err instanceof Error ? err.message.split('\n')[0]! : String(err) }),
      );
    }
  }

  private async attempt(a: Extract<ElectionAction, { kind: 'attempt' }>): Promise<void> {
    try {
      if (this.stopped || leading(this.s)) return;
      try {
        if (!(await this.d.kv.reachable(a.probeMs, { read: this.d.keys.leader(this.name) }))) {
          await this.act({ kind: 'attempt-result', sent: this.d.clock.now(), record: a.record, reason: a.reason, result: { kind: 'unreachable' } }, true);
          return;
        }
      } catch {
        return;
      }
      const sent = this.d.clock.now();
      let result: Extract<ElectionEvent, { kind: 'attempt-result' }>['result'];
      try {
        const res = await this.d.kv.swap(this.d.keys.leader(this.name), a.expectRev, JSON.stringify(a.record), a.timeoutMs);
        result = res.ok ? { kind: 'swapped', rev: res.rev } : { kind: 'lost', current: entry(res.current) };
      } catch {
        result = { kind: 'failed' };
      }
      await this.act({ kind: 'attempt-result', sent, record: a.record, reason: a.reason, result }, true);
    } finally {
      this.dispatch({ kind: 'attempt-done' });
    }
  }

  /** Leading begins: the lease first (addresses are never announced without the kernel's leave), then the claim. */
  private async claim(leaseForMs: number): Promise<void> {
    try {
      await this.d.hooks.lease(this.name, leaseForMs);
    } catch (err) {
      await this.act({ kind: 'lead-failed', reason: `kernel lease failed: ${(err as Error).message}` }, true);
      return;
    }
    try {
      await this.d.hooks.claim(this.name);
    } catch (err) {
      await this.act({ kind: 'lead-failed', reason: `claim failed: ${(err as Error).message}` }, true);
    }
  }

  /** Planned switchover: release first, then name the new leader, who claims on seeing it. */
  private async handOver(req: HandoffRequest): Promise<void> {
    await this.d.kv.delete(this.d.keys.handoff(this.name)).catch(() => { /* a request left behind is refused or redone: we lead no more, or hand over again */ });
    await this.act({ kind: 'handoff', req }, true);
  }

  private async handover(req: HandoffRequest, priority: number): Promise<void> {
    await this.d.hooks.beforeHandover?.(this.name, req.to).catch(() => { /* best effort by contract (GroupHooks): the handover goes on */ });
    await this.act({ kind: 'handover-ready', req, priority }, true);
  }

  private async handoverRelease(req: HandoffRequest, priority: number, from: GroupRole): Promise<void> {
    try {
      await this.d.hooks.release(this.name);
      await this.settleBeat();
      await this.act({ kind: 'handover-released', req, priority }, true);
    } finally {
      await this.act({ kind: 'handover-done', req, from }, true);
    }
  }

  /** Release first (the fence's time budget is for this), then report; a vacancy swaps on the newest revision. */
  private async stepDown(a: { from: GroupRole; reason: string; vacate: boolean }): Promise<void> {
    // A release that fails leaves the kernel lease to end the serving at its deadline (timing.ts).
    await this.d.hooks.release(this.name).catch(() => { /* see above */ });
    await this.act({ kind: 'released', from: a.from, reason: a.reason }, true);
    // A beat in flight may still move our revision; the vacancy swaps on the newest one.
    await this.settleBeat();
    await this.act({ kind: 'settled', reason: a.reason, vacate: a.vacate }, true);
  }

  /** Waits (bounded by the call deadline) until no beat is in flight. */
  private async settleBeat(): Promise<void> {
    if (this.beats.size === 0) return;
    let timer: TimerHandle | undefined;
    const late = new Promise<void>((resolve) => { timer = this.d.clock.setTimeout(resolve, this.d.timing.safetyWindowMs + 50); });
    try {
      await Promise.race([Promise.all([...this.beats]), late]);
    } finally {
      this.d.clock.clearTimeout(timer);
    }
  }
}

function entry(e: Entry | null): RecordEntry | null {
  return e === null ? null : { rev: e.rev, record: parseJson<LeaderRecord>(e.value, isLeaderRecord) };
}
