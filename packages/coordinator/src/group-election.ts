import type { Clock, TimerHandle } from '@lbd/clock';
import type { Kv, KvWatch } from './kv.js';
import {
  isHandoff, isLeaderRecord, parseJson, type DirectorRecord, type GroupRole, type GroupView, type HandoffRequest, type LeaderRecord,
  type PreemptPolicy,
} from './records.js';
import { kernelLeaseMs, type ElectionTiming } from './timing.js';

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

/** How a leader reaches its peers when etcd does not answer (gRPC in the agent; in memory in tests). */
export interface PeerTransport {
  requestPromise(peerId: string, req: PromiseRequest, timeoutMs: number): Promise<PromiseReply>;
}

export interface GroupSettings {
  readonly name: string;
  readonly priority: number;
  readonly preempt: PreemptPolicy;
  readonly preemptDelayMs: number;
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
  readonly keys: { leader(g: string): string; handoff(g: string): string };
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
}

/** confirmed: etcd took it; failed: no answer (etcd slow or unreachable); superseded: another director holds the record. */
export type BeatOutcome = 'confirmed' | 'failed' | 'superseded';

interface Observed {
  readonly rev: string;
  readonly record: LeaderRecord | null;
  /** When this revision was first received, on our clock. */
  readonly at: number;
}

/**
 * One vip group's election, as described in timing.ts: the leader beats by compare-and-swap, fences itself
 * when its beats stop being confirmed (unless every peer promises it cannot take over: fail-static), and
 * standbys take over by swapping a revision they have seen unchanged for `takeoverAfterMs`. Planned
 * switchovers (handoff) release first and then name the new leader, who claims at once.
 */
export class GroupElection {
  private role: GroupRole = 'standby';
  private settings: GroupSettings;
  private observed: Observed | null = null;
  /** Our own revision while leading (or resuming). */
  private myRev: string | null = null;
  private myRecord: LeaderRecord | null = null;
  private lastConfirmedSend = 0;
  /** Where the kernel lease we last wrote ends (our clock). */
  private leaseUntil = 0;
  /** The beat number of our last confirmed beat (adopted revisions do not count). */
  private confirmedBeat = 0;
  private beatInFlight = false;
  private lastBeatAt = 0;
  /** peer id → time (our clock) until which it promised not to take over. */
  private readonly coverage = new Map<string, number>();
  private lastPromiseAsk = 0;
  /** Each peer's last answer to a promise request, for the fence's reason. */
  private readonly peerAnswers = new Map<string, string>();
  private lastProbe: { at: number; ok: boolean } | null = null;
  /** Until when we promised a leader not to take over (our clock). */
  private promisedUntil = 0;
  /** When our etcd contact last came back after failing; staleness is never counted across an outage. */
  private etcdBackAt = 0;
  private etcdFailing = false;
  /** When our etcd calls last started working again after failing (not merely connected). */
  private recoveredAt = Number.NEGATIVE_INFINITY;
  private failingSince = 0;
  private vacantSince: number | null = null;
  private preemptSince: number | null = null;
  /** Why an after-sync preemption waits, as last logged (logged again only when it changes). */
  private preemptWaitReason: string | null = null;
  private attempting = false;
  private handingOver = false;
  private transitions: { at: number; reason: string } | null = null;
  private timer: TimerHandle | undefined;
  private leaderWatch: KvWatch | undefined;
  private handoffWatch: KvWatch | undefined;
  private stopped = false;
  private busy: Promise<void> = Promise.resolve();

  constructor(settings: GroupSettings, private readonly d: GroupElectionDeps) {
    this.settings = settings;
  }

  get name(): string {
    return this.settings.name;
  }

  update(settings: GroupSettings): void {
    this.settings = settings;
  }

  view(): GroupView {
    const leader = this.role === 'leader' || this.role === 'fail-static' ? this.d.self : (this.observed?.record?.director ?? null);
    return { role: this.role, leader, priority: this.settings.priority, lastTransition: this.transitions };
  }

  /** Time since our last confirmed beat, while leading. */
  beatAgeMs(): number | null {
    return this.role === 'leader' || this.role === 'fail-static' ? this.d.clock.now() - this.lastConfirmedSend : null;
  }

  async start(): Promise<void> {
    this.etcdBackAt = this.d.clock.now();
    await this.refresh();
    this.leaderWatch = await this.d.kv.watchKey(this.d.keys.leader(this.name), {
      put: (e) => this.see(e.rev, e.value),
      delete: () => { this.observed = { rev: '0', record: null, at: this.d.clock.now() }; },
      connected: () => { this.etcdBack(); void this.refresh(); },
      disconnected: () => { this.markFailing(); },
      error: () => { this.markFailing(); },
    });
    this.handoffWatch = await this.d.kv.watchKey(this.d.keys.handoff(this.name), {
      error: () => undefined,
      put: (e) => {
        const req = parseJson<HandoffRequest>(e.value, isHandoff);
        if (req) this.serialize(() => this.handOver(req));
      },
    });
    this.tick();
  }

  /** Stops; `vacate` also releases and marks the group vacant so a standby takes over at once. */
  async stop(opts: { vacate: boolean }): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) this.d.clock.clearTimeout(this.timer);
    await this.busy;
    if (opts.vacate && (this.role === 'leader' || this.role === 'fail-static')) await this.stepDown('agent stopping', { vacate: true });
    await this.leaderWatch?.cancel().catch(() => undefined);
    await this.handoffWatch?.cancel().catch(() => undefined);
  }

  /** Leave leadership (or refuse it) because this director is unhealthy; called on a health change. */
  healthChanged(): void {
    this.serialize(async () => {
      const h = this.d.health();
      if (!h.ok && (this.role === 'leader' || this.role === 'fail-static')) {
        await this.stepDown(`unhealthy: ${h.problems.join(', ')}`, { vacate: true });
      }
      if (!h.ok && this.role === 'standby') this.setRole('unhealthy', `unhealthy: ${h.problems.join(', ')}`);
      if (h.ok && this.role === 'unhealthy') this.setRole('standby', 'healthy again');
    });
  }

  /** A leader asks us (a standby) to promise not to take over while etcd is unreachable. */
  async answerPromise(req: PromiseRequest): Promise<PromiseReply> {
    if (this.role === 'leader' || this.role === 'fail-static') {
      return { granted: false, etcdReachable: !this.etcdFailing, reason: `${this.d.self} leads ${this.name} itself` };
    }
    const rec = this.observed?.record;
    if (rec?.director === req.from && rec.term === req.term && rec.beat >= req.beat + 2) {
      // Two beats have landed since its last confirmed one: its writes get through, etcd is slow to answer
      // it, not gone. A failover would meet the same etcd; promising keeps the group where it is (and our
      // takeover waits for our promise, so it is safe). A leader cut off from etcd has at most one beat in
      // flight, so at most one lands unconfirmed: it never looks like this.
      this.promisedUntil = Math.max(this.promisedUntil, this.d.clock.now() + req.durationMs);
      return { granted: true, etcdReachable: !this.etcdFailing, reason: `${this.d.self} sees ${req.from}'s beats landing: etcd is slow, not gone` };
    }
    const reachable = await this.etcdReachable();
    if (reachable) {
      if (this.etcdFailing) this.etcdBack();
      // Just back on etcd ourselves: etcd as a whole was away (an outage, or its raft leader died and the
      // others were electing), so the leader is probably not cut off alone; its client may just need a
      // few hundred ms more to get a beat through. Keep vouching for a grace of three takeover intervals
      // after our own return; our takeover waits for our promises, so this is safe, and it only delays a
      // takeover when etcd failed for everyone (a leader cut from etcd alone finds us refusing at once).
      const now = this.d.clock.now();
      if (now + req.durationMs <= this.recoveredAt + 3 * this.d.timing.takeoverAfterMs) {
        this.promisedUntil = Math.max(this.promisedUntil, now + req.durationMs);
        return { granted: true, etcdReachable: true, reason: `${this.d.self} is just back on etcd after it failed for everyone` };
      }
      return { granted: false, etcdReachable: true, reason: `${this.d.self} reaches etcd: the leader is the one cut off` };
    }
    this.markFailing();
    this.promisedUntil = Math.max(this.promisedUntil, this.d.clock.now() + req.durationMs);
    return { granted: true, etcdReachable: false, reason: `${this.d.self} cannot reach etcd either` };
  }

  /**
   * Whether etcd answers us, probed at most every half beat (promise requests come several per window and
   * must be answered within it).
   */
  private async etcdReachable(): Promise<boolean> {
    const now = this.d.clock.now();
    const t = this.d.timing;
    if (this.lastProbe !== null && now - this.lastProbe.at < t.beatIntervalMs / 2) return this.lastProbe.ok;
    // Half a window: a leader asks a beat after its last confirmation and needs the answer within the
    // window; a tighter probe mistakes a busy etcd for a missing one, and vouches for a cut-off leader.
    const ok = await this.d.kv.reachable(Math.max(10, Math.floor(t.safetyWindowMs / 2)));
    this.lastProbe = { at: now, ok };
    if (!ok) this.markFailing();
    return ok;
  }

  private see(rev: string, value: string): void {
    if (this.observed?.rev === rev) return;
    if (this.etcdFailing) this.etcdBack();
    this.observed = { rev, record: parseJson<LeaderRecord>(value, isLeaderRecord), at: this.d.clock.now() };
  }

  private markFailing(): void {
    if (!this.etcdFailing) this.failingSince = this.d.clock.now();
    this.etcdFailing = true;
  }

  private etcdBack(): void {
    const now = this.d.clock.now();
    // A failure that lasted a beat or more: etcd was away for us too, not one slow call.
    if (this.etcdFailing && now - this.failingSince >= this.d.timing.beatIntervalMs) this.recoveredAt = now;
    this.etcdFailing = false;
    this.etcdBackAt = now;
  }

  private async refresh(): Promise<void> {
    try {
      const e = await this.d.kv.get(this.d.keys.leader(this.name));
      if (e === null) this.observed = { rev: '0', record: null, at: this.d.clock.now() };
      else this.see(e.rev, e.value);
    } catch {
      this.markFailing();
    }
  }

  private tick(): void {
    if (this.stopped) return;
    this.timer = this.d.clock.setTimeout(() => {
      this.step();
      this.tick();
    }, this.d.timing.fenceCheckMs);
  }

  /** Runs `fn` after whatever transition is in progress, one at a time. */
  private serialize(fn: () => Promise<void>): void {
    this.busy = this.busy.then(fn).catch(() => undefined);
  }

  private leading(): boolean {
    return this.role === 'leader' || this.role === 'fail-static';
  }

  private step(): void {
    const now = this.d.clock.now();
    if (this.leading()) {
      if (this.handingOver) return;
      this.checkFence(now);
      if (this.leading() && !this.beatInFlight && now - this.lastBeatAt >= this.d.timing.beatIntervalMs) void this.beat();
      return;
    }
    if (this.attempting || this.role === 'unhealthy') return;
    const obs = this.observed;
    if (obs === null) return;
    const rec = obs.record;
    if (rec !== null && rec.director === this.d.self) {
      // Named leader (handed over to us, or we restarted): the first beat decides, and fences from its send.
      // Not while we have promised a fail-static leader to stay away.
      if (now >= this.promisedUntil) this.attempt(obs.rev, rec, rec.beat === 0 ? 'took over' : 'resumed', rec.beat === 0 ? rec.reason : 'named leader in etcd');
      return;
    }
    if (rec === null || rec.director === null) {
      this.vacantSince ??= now;
      if (now - this.vacantSince >= this.rankDelay(null) && now >= this.promisedUntil) this.attempt(obs.rev === '0' ? null : obs.rev, rec, 'elected', rec === null ? 'no leader yet' : `vacant: ${rec.reason}`);
      return;
    }
    this.vacantSince = null;
    this.considerPreempt(now, rec);
    if (!rec.peers.includes(this.d.self)) return; // only the leader's peers may take over from it
    const since = Math.max(obs.at, this.etcdBackAt);
    // A handed-over record (beat 0) waits for its target's first beat three times as long: the target is
    // alive and claiming, and the old leader racing it back would undo the switchover.
    const wait = this.d.timing.takeoverAfterMs * (rec.beat === 0 ? 3 : 1) + this.rankDelay(rec.director);
    if (now - since >= wait && now >= this.promisedUntil) {
      this.attempt(obs.rev, rec, 'took over', `no beat from ${rec.director} for ${Math.round(now - since)} ms`);
    }
  }

  /** Lower-priority candidates wait a little longer, so the best one usually wins the swap. */
  private rankDelay(leader: string | null): number {
    const mine = this.settings.priority;
    let better = 0;
    for (const [id, r] of this.d.directors()) {
      if (id === this.d.self || id === leader || !r.healthy) continue;
      const p = r.priorities[this.name];
      if (p !== undefined && (p > mine || (p === mine && id < this.d.self))) better++;
    }
    return better * this.d.timing.beatIntervalMs * 2;
  }

  private attempt(expectRev: string | null, prev: LeaderRecord | null, verb: string, why: string): void {
    if (!this.d.health().ok) return;
    this.attempting = true;
    this.serialize(async () => {
      try {
        if (this.stopped || this.leading()) return;
        const resumed = prev !== null && prev.director === this.d.self;
        const record: LeaderRecord = {
          director: this.d.self, term: resumed ? prev.term : (prev?.term ?? 0) + 1, beat: (prev?.beat ?? 0) + 1,
          peers: [...this.d.peers()], priority: this.settings.priority, since: resumed ? prev.since : Date.now(), reason: why,
        };
        let res;
        try {
          // A swap sent to an etcd that does not answer can still land when it comes back; asking first
          // keeps a standby that lost etcd from leaving such a swap behind (a needless failover later).
          if (!(await this.d.kv.reachable(Math.max(10, Math.floor(this.d.timing.safetyWindowMs / 3))))) {
            this.markFailing();
            return;
          }
        } catch {
          return;
        }
        const sent = this.d.clock.now();
        try {
          res = await this.d.kv.swap(this.d.keys.leader(this.name), expectRev, JSON.stringify(record), this.d.timing.safetyWindowMs);
        } catch {
          this.markFailing();
          return;
        }
        if (!res.ok) {
          if (res.current) this.see(res.current.rev, res.current.value);
          return;
        }
        this.see(res.rev, JSON.stringify(record));
        // The swap landed after we promised a fail-static leader to stay away: lead only once that promise
        // has run out (the named-leader branch of step() resumes then, with a fresh beat).
        if (this.d.clock.now() < this.promisedUntil) return;
        await this.becomeLeader(res.rev, record, sent, `${verb}: ${why}`);
      } finally {
        this.attempting = false;
      }
    });
  }

  private async becomeLeader(rev: string, record: LeaderRecord, sent: number, reason: string): Promise<void> {
    this.myRev = rev;
    this.myRecord = record;
    this.lastConfirmedSend = sent;
    this.leaseUntil = sent + kernelLeaseMs(this.d.timing);
    this.confirmedBeat = record.beat;
    this.lastBeatAt = sent;
    this.coverage.clear();
    this.preemptSince = null;
    this.setRole('leader', reason);
    try {
      // The lease first: addresses are never announced without the kernel's leave to serve them.
      await this.d.hooks.lease(this.name, this.leaseForMs(this.d.clock.now()));
    } catch (err) {
      await this.stepDown(`kernel lease failed: ${(err as Error).message}`, { vacate: true });
      return;
    }
    try {
      await this.d.hooks.claim(this.name);
    } catch (err) {
      await this.stepDown(`claim failed: ${(err as Error).message}`, { vacate: true });
    }
  }

  /**
   * How long the kernel may serve the group from `now`: until the lease's end after our last confirmed
   * send, or, while every peer's promise still runs (fail-static), until the earliest promise ends less
   * the slack and drift the rule allows for (timing.ts).
   */
  private leaseForMs(now: number): number {
    const t = this.d.timing;
    let until = this.lastConfirmedSend + kernelLeaseMs(t);
    const peers = this.d.peers();
    if (peers.length > 0 && peers.every((p) => (this.coverage.get(p) ?? 0) > now)) {
      until = Math.max(until, Math.min(...peers.map((p) => this.coverage.get(p) ?? 0)) - t.maxLeaseSlackMs - t.maxClockDriftMs);
    }
    return until - now;
  }

  /** Writes the kernel lease from the newest confirmation; a failed write steps down (its old deadline stands). */
  private renewLease(): void {
    const forMs = this.leaseForMs(this.d.clock.now());
    this.leaseUntil = this.d.clock.now() + forMs;
    this.d.hooks.lease(this.name, forMs).catch((err: unknown) => {
      if (!this.leading() || this.handingOver) return;
      this.role = 'standby';
      this.serialize(() => this.stepDown(`kernel lease failed: ${err instanceof Error ? err.message : String(err)}`, { vacate: true, from: 'leader' }));
    });
  }

  private async beat(): Promise<void> {
    const rec = this.myRecord;
    const expect = this.myRev;
    if (rec === null || expect === null) return;
    this.beatInFlight = true;
    const sent = this.d.clock.now();
    this.lastBeatAt = sent;
    const next: LeaderRecord = { ...rec, beat: rec.beat + 1, peers: [...this.d.peers()], priority: this.settings.priority };
    try {
      // Two beat intervals, not the whole window: a beat stuck on a dead etcd member gives way to a fresh
      // one (on a member that answers) while the window still has room for it.
      const res = await this.d.kv.swap(this.d.keys.leader(this.name), expect, JSON.stringify(next), this.d.timing.beatIntervalMs * 2);
      if (res.ok) {
        // The newest revision is ours even while we step down or hand over: they swap on it next.
        if (this.myRev === expect) {
          this.myRev = res.rev;
          this.myRecord = next;
        }
        this.d.onBeat?.(this.name, 'confirmed');
        if (!this.leading() || this.handingOver) return;
        if (sent > this.lastConfirmedSend) {
          this.lastConfirmedSend = sent;
          this.renewLease();
        }
        this.confirmedBeat = Math.max(this.confirmedBeat, next.beat);
        if (this.etcdFailing) this.etcdBack();
        if (this.role === 'fail-static') this.setRole('leader', 'etcd confirms beats again');
        return;
      }
      const cur = res.current ? parseJson<LeaderRecord>(res.current.value, isLeaderRecord) : null;
      if (cur && res.current && cur.director === this.d.self && cur.term === rec.term) {
        // A beat of ours that timed out here but landed there: ours still, adopt its revision.
        this.d.onBeat?.(this.name, 'confirmed');
        if (this.myRev === expect) {
          this.myRev = res.current.rev;
          this.myRecord = cur;
        }
        return;
      }
      this.d.onBeat?.(this.name, 'superseded');
      if (!this.leading() || this.handingOver) return;
      this.serialize(() => this.stepDown(`superseded: ${cur?.director ?? 'nobody'} holds the record now`, { vacate: false }));
    } catch {
      this.d.onBeat?.(this.name, 'failed');
      this.markFailing();
    } finally {
      this.beatInFlight = false;
    }
  }

  private checkFence(now: number): void {
    const age = now - this.lastConfirmedSend;
    const t = this.d.timing;
    // Ask as soon as one beat is overdue: a peer needs a round trip and an etcd probe to answer, and
    // its promise must arrive before the window closes.
    if (age > t.beatIntervalMs + t.fenceCheckMs) this.askPromises(now);
    const peers = this.d.peers();
    const covered = peers.length > 0 && peers.every((p) => (this.coverage.get(p) ?? 0) > now);
    // Once every peer has promised, the promises carry the kernel lease (before the window closes, so the
    // kernel never stops a leader that is about to go fail-static); written again a beat further on.
    if (covered && now + this.leaseForMs(now) > this.leaseUntil + t.beatIntervalMs) this.renewLease();
    if (age < t.safetyWindowMs) return;
    if (covered) {
      if (this.role !== 'fail-static') this.setRole('fail-static', `etcd unreachable for ${Math.round(age)} ms; peers ${peers.join(', ')} cannot reach it either, keeping the vips`);
      return;
    }
    const missing = peers.filter((p) => !((this.coverage.get(p) ?? 0) > now));
    const why = peers.length === 0 ? 'no peers to vouch' : `not every peer vouches (${missing.map((p) => `${p}: ${this.peerAnswers.get(p) ?? 'not asked yet'}`).join('; ')})`;
    const from = this.role;
    this.role = 'standby'; // stop beating at once; the release follows immediately
    this.d.onFenced?.(this.name);
    this.serialize(() => this.stepDown(`fenced: no etcd confirmation for ${Math.round(age)} ms, ${why}`, { vacate: false, from }));
  }

  private askPromises(now: number): void {
    if (now - this.lastPromiseAsk < this.d.timing.beatIntervalMs / 2) return;
    this.lastPromiseAsk = now;
    const rec = this.myRecord;
    // Two windows: a promise outlives a couple of late answers from a busy peer, and delays a takeover
    // (when etcd failed for everyone, then only for us) by no more than that.
    const durationMs = this.d.timing.safetyWindowMs * 2;
    for (const peer of this.d.peers()) {
      const sent = this.d.clock.now();
      this.d.transport.requestPromise(peer, { from: this.d.self, group: this.name, term: rec?.term ?? 0, beat: this.confirmedBeat, durationMs }, this.d.timing.safetyWindowMs)
        .then((r) => {
          this.peerAnswers.set(peer, r.reason);
          if (r.granted) this.coverage.set(peer, Math.max(this.coverage.get(peer) ?? 0, sent + durationMs));
        })
        .catch((err: unknown) => { this.peerAnswers.set(peer, `no answer: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`); });
    }
  }

  private considerPreempt(now: number, rec: LeaderRecord): void {
    const s = this.settings;
    if (s.preempt === 'never' || rec.priority >= s.priority || !this.d.health().ok) {
      this.preemptSince = null;
      return;
    }
    this.preemptSince ??= now;
    if (now - this.preemptSince < s.preemptDelayMs) return;
    let synced = '';
    if (s.preempt === 'after-sync') {
      const notYet = this.d.syncedFor(this.name);
      if (notYet !== null) {
        if (notYet !== this.preemptWaitReason) this.d.onTransition({ group: this.name, from: this.role, to: this.role, reason: `preempt waits: ${notYet}` });
        this.preemptWaitReason = notYet;
        return;
      }
      synced = ', connections synced';
    }
    this.preemptWaitReason = null;
    this.preemptSince = now; // ask again after another delay if the leader does not answer
    const req: HandoffRequest = { to: this.d.self, reason: `preempt: priority ${s.priority} > ${rec.priority} of ${rec.director ?? '?'} (${s.preempt}${synced})`, at: Date.now() };
    this.d.kv.put(this.d.keys.handoff(this.name), JSON.stringify(req)).catch(() => undefined);
  }

  /** Planned switchover: release first, then name the new leader, who claims on seeing it. */
  private async handOver(req: HandoffRequest): Promise<void> {
    await this.d.kv.delete(this.d.keys.handoff(this.name)).catch(() => undefined);
    if (!this.leading() || this.myRev === null || this.myRecord === null || req.to === this.d.self) return;
    const target = this.d.directors().get(req.to);
    if (!target?.healthy || target.priorities[this.name] === undefined || !this.d.peers().includes(req.to)) {
      this.transitions = { at: Date.now(), reason: `refused handoff to ${req.to}: not a healthy registered peer serving ${this.name}` };
      this.d.onTransition({ group: this.name, from: this.role, to: this.role, reason: this.transitions.reason });
      return;
    }
    if (this.d.hooks.beforeHandover) {
      await this.d.hooks.beforeHandover(this.name, req.to).catch(() => undefined);
      // Beats went on meanwhile; a leader fenced in the wait has nothing left to hand over.
      if (!this.leading() || this.myRev === null || this.myRecord === null) return;
    }
    this.handingOver = true;
    const from = this.role;
    try {
      await this.d.hooks.release(this.name);
      await this.settleBeat();
      const rec = this.myRecord;
      if (rec === null || this.myRev === null) return;
      // Until the target's first beat writes its own peers, the directors that may take over from it (if it
      // never beats) are ours and us: with none listed, a target that died here would strand the group.
      const peers = [...this.d.peers().filter((p) => p !== req.to), this.d.self];
      const next: LeaderRecord = { director: req.to, term: rec.term + 1, beat: 0, peers, priority: target.priorities[this.name] ?? 0, since: Date.now(), reason: `handed over by ${this.d.self}: ${req.reason}` };
      await this.d.kv.swap(this.d.keys.leader(this.name), this.myRev, JSON.stringify(next), this.d.timing.safetyWindowMs).catch(() => undefined);
    } finally {
      this.handingOver = false;
      this.myRev = null;
      this.myRecord = null;
      this.role = 'standby';
      this.note(from, 'standby', `handed over to ${req.to}: ${req.reason}`);
    }
  }

  private async stepDown(reason: string, opts: { vacate: boolean; from?: GroupRole }): Promise<void> {
    const from = opts.from ?? (this.role === 'standby' ? 'leader' : this.role);
    this.role = 'standby';
    // Release first: the fence's time budget is for this.
    await this.d.hooks.release(this.name).catch(() => undefined);
    this.note(from, this.d.health().ok ? 'standby' : 'unhealthy', reason);
    if (!this.d.health().ok) this.role = 'unhealthy';
    // A beat in flight may still move our revision; the vacancy swaps on the newest one.
    await this.settleBeat();
    const rev = this.myRev;
    const rec = this.myRecord;
    this.myRev = null;
    this.myRecord = null;
    if (opts.vacate && rev !== null && rec !== null) {
      const vacant: LeaderRecord = { ...rec, director: null, beat: rec.beat + 1, reason: `${this.d.self} resigned: ${reason}` };
      await this.d.kv.swap(this.d.keys.leader(this.name), rev, JSON.stringify(vacant), this.d.timing.safetyWindowMs).catch(() => undefined);
    }
  }

  /** Waits (bounded by the call deadline) until no beat is in flight. */
  private async settleBeat(): Promise<void> {
    const deadline = this.d.clock.now() + this.d.timing.safetyWindowMs + 50;
    while (this.beatInFlight && this.d.clock.now() < deadline) await new Promise((r) => setTimeout(r, 2));
  }

  private setRole(to: GroupRole, reason: string): void {
    const from = this.role;
    this.role = to;
    this.note(from, to, reason);
  }

  private note(from: GroupRole, to: GroupRole, reason: string): void {
    this.transitions = { at: Date.now(), reason };
    this.d.onTransition({ group: this.name, from, to, reason });
  }
}
