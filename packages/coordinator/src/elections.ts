import { systemClock, type Clock, type TimerHandle } from '@lbd/clock';
import {
  EtcdProbe, GroupElection, type BeatOutcome, type GroupHooks, type GroupSettings, type PeerTransport, type PromiseReply, type PromiseRequest, type Transition,
} from './group-election.js';
import { BeatBatch } from './beat-batch.js';
import { EtcdKv, type EtcdTlsMaterial, type Kv, type KvLease } from './kv.js';
import { fillDirectorRecords, keys, type DirectorRecord, type GroupView } from './records.js';
import { checkTiming, type ElectionTiming } from './timing.js';

export interface ElectionsOptions {
  readonly id: string;
  readonly endpoints: readonly string[];
  /** The director's etcd client certificate (https endpoints); null or absent: plain. */
  readonly etcdTls?: EtcdTlsMaterial | null;
  readonly prefix: string;
  readonly timing: ElectionTiming;
  /** This director's configured peers: ids (addresses are the transport's business). */
  readonly peers: readonly string[];
  readonly peerAddress: string;
  readonly version: string;
  readonly transport: PeerTransport;
  readonly hooks: GroupHooks;
  health(): { ok: boolean; problems: readonly string[] };
  /** preempt: after-sync waits until this returns null for the group (default: always null, as after-delay). */
  syncedFor?(group: string): string | null;
  onTransition?(t: Transition): void;
  /** Every beat of a group this director leads, with its outcome (for metrics). */
  onBeat?(group: string, outcome: BeatOutcome): void;
  /** A group this director led fenced itself (for metrics). */
  onFenced?(group: string): void;
  /** Each etcd transaction that carried this director's beats, with how many (several groups' share one; for metrics). */
  onBeatTransaction?(beats: number): void;
  readonly clock?: Clock;
  /** The store (default: etcd at `endpoints`, on a connection of its own); tests pass a MemoryKv. */
  readonly kv?: Kv;
  /** TTL of the director's registration (default REGISTRATION_TTL_SEC): how long a dead director stays listed. */
  readonly registrationTtlSec?: number;
}

/**
 * How long a director's registration outlives it (its etcd lease): until then the others still list a
 * dead director as healthy. deploy/systemd/lbd-agent.service waits longer than this before a restart.
 */
export const REGISTRATION_TTL_SEC = 5;

/** How soon a registration that etcd lost, or whose write failed, is written again (and again while it fails). */
const RE_REGISTER_MS = 200;

/** One group's election as this director sees it now. */
export interface ElectionView {
  readonly name: string;
  readonly view: GroupView;
  /** While leading: ms since the last beat etcd confirmed. */
  readonly beatAgeMs: number | null;
}

/**
 * The election side of the coordinator: this director's registration and one GroupElection per vip group
 * it serves, on an etcd connection of its own. It runs apart from everything else the agent does (the
 * agent's election thread), so that nothing but the election's own work can delay a beat; the Coordinator
 * (config, events, failover, status) runs beside the rest of the agent.
 */
export class Elections {
  private readonly kv: Kv;
  private readonly k: ReturnType<typeof keys>;
  private readonly clock: Clock;
  private readonly elections = new Map<string, GroupElection>();
  private readonly beats: BeatBatch;
  private readonly probe: EtcdProbe;
  private checkTimer: TimerHandle | undefined;
  private readonly directorRecords = new Map<string, DirectorRecord>();
  private lease: KvLease | undefined;
  private stopWatch: (() => void) | undefined;
  private publishTimer: TimerHandle | undefined;
  private registerTimer: TimerHandle | undefined;
  private closed = false;

  constructor(private readonly o: ElectionsOptions) {
    checkTiming(o.timing);
    this.clock = o.clock ?? systemClock;
    // Calls that cannot finish within the safety window are useless to an election: fail them then.
    this.kv = o.kv ?? new EtcdKv(o.endpoints, Math.max(o.timing.safetyWindowMs, 200), { hostFailures: 1, tls: o.etcdTls ?? null });
    this.k = keys(o.prefix);
    this.beats = new BeatBatch(this.kv, this.clock, (n) => this.o.onBeatTransaction?.(n));
    this.probe = new EtcdProbe(this.kv, this.clock, o.timing, this.k.probe(o.id));
  }

  /** Transactions that carried beats, and the beats in them, since start (several groups' beats share one). */
  beatWrites(): { transactions: number; beats: number } {
    return { ...this.beats.sent };
  }

  /** Registers and watches the other directors. Elections start with setGroups(). */
  async start(): Promise<void> {
    this.checkEvery();
    const reread = (): void => { this.readDirectors().catch(() => { /* the next event or reconnection reads again; the last list stays meanwhile */ }); };
    const w = await this.kv.watchPrefix(this.k.directors, { put: reread, delete: reread, connected: reread, error: () => { /* it reconnects by itself, then rereads */ } });
    this.stopWatch = () => { w.cancel().catch(() => { /* a watch on a lost connection has nothing left to stop */ }); };
    await this.readDirectors().catch(() => { /* the watch's first event or reconnection reads again */ });
    await this.register();
  }

  /**
   * Every group's periodic check, in one timer callback: when one group's beat is due, the others' go with
   * it (coalesce, decide.ts), so they line up and leave as one etcd transaction (BeatBatch).
   */
  private checkEvery(): void {
    if (this.closed) return;
    this.checkTimer = this.clock.setTimeout(() => {
      const groups = [...this.elections.values()];
      const coalesce = groups.some((e) => e.beatDue());
      for (const e of groups) e.check(coalesce);
      this.checkEvery();
    }, this.o.timing.fenceCheckMs);
  }

  /** The groups this director serves, with its priority in each; starts and stops elections to match. */
  async setGroups(groups: readonly GroupSettings[]): Promise<void> {
    const wanted = new Map(groups.map((g) => [g.name, g]));
    for (const [name, e] of this.elections) {
      if (!wanted.has(name)) {
        this.elections.delete(name);
        await e.stop({ vacate: true });
      }
    }
    for (const g of groups) {
      const e = this.elections.get(g.name);
      if (e) e.update(g);
      else {
        const fresh = new GroupElection(g, {
          self: this.o.id, kv: this.kv, clock: this.clock, timing: this.o.timing, keys: this.k, hooks: this.o.hooks,
          transport: this.o.transport, peers: () => this.o.peers, directors: () => this.directorRecords,
          health: () => this.o.health(), syncedFor: (group) => this.o.syncedFor?.(group) ?? null, onTransition: (t) => { this.o.onTransition?.(t); this.publishSoon(); },
          onBeat: (group, outcome) => this.o.onBeat?.(group, outcome), onFenced: (group) => this.o.onFenced?.(group),
          sendBeat: (key, expectRev, value, timeoutMs) => this.beats.swap(key, expectRev, value, timeoutMs), checks: 'caller', probe: this.probe,
        });
        this.elections.set(g.name, fresh);
        await fresh.start();
        fresh.healthChanged();
      }
    }
    // At once, not coalesced: other directors rank candidates and pick failover targets by these priorities.
    await this.publish().catch(() => { /* the registration's keep-alive keeps the last record; the next transition publishes again */ });
  }

  /** Call when this director's health changes: leaders resign at once, standbys stop being candidates. */
  healthChanged(): void {
    for (const e of this.elections.values()) e.healthChanged();
    this.publishSoon();
  }

  async answerPromise(req: PromiseRequest): Promise<PromiseReply> {
    const e = this.elections.get(req.group);
    if (!e) return { granted: true, etcdReachable: false, reason: `${this.o.id} does not serve ${req.group}` };
    return e.answerPromise(req);
  }

  views(): Record<string, GroupView> {
    return Object.fromEntries([...this.elections].map(([n, e]) => [n, e.view()]));
  }

  /** Every group's election as this director sees it. */
  groups(): ElectionView[] {
    return [...this.elections].map(([name, e]) => ({ name, view: e.view(), beatAgeMs: e.beatAgeMs() }));
  }

  /** Stops every election; `vacate` releases and hands the groups to the standbys at once. */
  async close(opts: { vacate: boolean } = { vacate: true }): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.publishTimer !== undefined) this.clock.clearTimeout(this.publishTimer);
    if (this.checkTimer !== undefined) this.clock.clearTimeout(this.checkTimer);
    if (this.registerTimer !== undefined) this.clock.clearTimeout(this.registerTimer);
    await Promise.all([...this.elections.values()].map((e) => e.stop(opts)));
    this.stopWatch?.();
    if (opts.vacate) await this.lease?.revoke().catch(() => { /* unrevoked, the registration ends with its TTL */ });
    this.lease?.release();
    this.kv.close();
  }

  private async readDirectors(): Promise<void> {
    fillDirectorRecords(this.directorRecords, await this.kv.list(this.k.directors));
    // Registered, yet not listed: etcd expired our registration while it could not hear us, and what put
    // it back failed (seen: after an etcd partition, a registration whose new lease was granted but whose
    // put missed its deadline on a loaded box; the director stayed unlisted, refused as a handover target,
    // until the test gave up). Write it again until it is listed.
    if (this.lease !== undefined && !this.closed && !this.directorRecords.has(this.o.id)) this.ensureRegistered();
  }

  /** Publishes our record soon, and again every RE_REGISTER_MS while that fails (a lost lease re-registers). */
  private ensureRegistered(): void {
    if (this.registerTimer !== undefined || this.closed) return;
    this.registerTimer = this.clock.setTimeout(() => {
      this.registerTimer = undefined;
      // The watch rereads on our put and checks again; a failed put (or a lease etcd no longer knows, which
      // the client reports as lost: register() again) retries here.
      this.publish().catch(() => this.ensureRegistered());
    }, RE_REGISTER_MS);
  }

  private record(): DirectorRecord {
    const h = this.o.health();
    const priorities: Record<string, number> = {};
    for (const [name, e] of this.elections) priorities[name] = e.view().priority;
    return {
      id: this.o.id, version: this.o.version, peerAddress: this.o.peerAddress, priorities, healthy: h.ok, problems: [...h.problems],
      groups: this.views(), updatedAt: Date.now(),
    };
  }

  private async register(): Promise<void> {
    const lease = this.kv.lease(this.o.registrationTtlSec ?? REGISTRATION_TTL_SEC);
    this.lease = lease;
    lease.onLost(() => {
      if (this.closed) return;
      // etcd forgot us (it was unreachable longer than the TTL): register again once it answers. A lease
      // whose grant fails is lost too, which registers again; one granted whose put fails is published again.
      this.clock.setTimeout(() => {
        if (!this.closed) this.register().catch(() => this.ensureRegistered());
      }, RE_REGISTER_MS);
    });
    await lease.put(this.k.director(this.o.id), JSON.stringify(this.record()));
  }

  /** Transitions publish the director record, coalesced (a burst of group changes is one write). */
  private publishSoon(): void {
    if (this.publishTimer !== undefined || this.closed) return;
    this.publishTimer = this.clock.setTimeout(() => {
      this.publishTimer = undefined;
      this.publish().catch(() => { /* the registration's keep-alive keeps the last record; the next transition publishes again */ });
    }, 20);
  }

  private async publish(): Promise<void> {
    const lease = this.lease;
    if (lease === undefined || this.closed) return;
    await lease.put(this.k.director(this.o.id), JSON.stringify(this.record()));
  }
}
