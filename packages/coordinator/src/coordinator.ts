import { systemClock, type Clock } from '@lbd/clock';
import type { Lease } from 'etcd3';
import { ConfigStore } from './config-store.js';
import { EventStore, type EventStoreLog } from './event-store.js';
import {
  GroupElection, type BeatOutcome, type GroupHooks, type GroupSettings, type PeerTransport, type PromiseReply, type PromiseRequest, type Transition,
} from './group-election.js';
import { Kv } from './kv.js';
import {
  isDirectorRecord, isLeaderRecord, keys, parseJson, type DirectorRecord, type GroupView, type HandoffRequest, type LeaderRecord,
} from './records.js';
import { checkTiming, worstCaseTakeoverMs, type ElectionTiming } from './timing.js';

export interface CoordinatorOptions {
  readonly id: string;
  readonly endpoints: readonly string[];
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
  readonly clock?: Clock;
  /** TTL of the director's registration (default REGISTRATION_TTL_SEC): how long a dead director stays listed. */
  readonly registrationTtlSec?: number;
  /** The cluster event history: events kept per director (default 5000), and where its outages are logged. */
  readonly events?: { readonly keep?: number; readonly log?: EventStoreLog };
}

/**
 * How long a director's registration outlives it (its etcd lease): until then the others still list a
 * dead director as healthy. deploy/systemd/lbd-agent.service waits longer than this before a restart.
 */
export const REGISTRATION_TTL_SEC = 5;

export interface GroupStatus {
  readonly name: string;
  readonly view: GroupView;
  /** The record in etcd as this director last saw it. */
  readonly record: LeaderRecord | null;
  readonly beatAgeMs: number | null;
}

export interface ClusterStatus {
  readonly self: string;
  readonly etcd: { readonly reachable: boolean; readonly endpoints: readonly string[] };
  readonly worstCaseTakeoverMs: number;
  readonly timing: ElectionTiming;
  readonly directors: readonly (DirectorRecord & { readonly leaseLeftMs: number | null })[];
  readonly groups: readonly GroupStatus[];
}

/**
 * The coordinator: registration of this director, one GroupElection per vip group it serves, planned
 * switchovers and the cluster config store. The only code that talks to etcd.
 */
export class Coordinator {
  readonly config: ConfigStore;
  /** The cluster's event history (its own etcd connection: see event-store.ts). */
  readonly events: EventStore;
  private readonly kv: Kv;
  private readonly k: ReturnType<typeof keys>;
  private readonly clock: Clock;
  private readonly elections = new Map<string, GroupElection>();
  private readonly directorRecords = new Map<string, DirectorRecord>();
  private lease: Lease | undefined;
  private stopWatch: (() => void) | undefined;
  private publishTimer: ReturnType<typeof setTimeout> | undefined;
  private closed = false;

  constructor(private readonly o: CoordinatorOptions) {
    checkTiming(o.timing);
    this.clock = o.clock ?? systemClock;
    // Calls that cannot finish within the safety window are useless to an election: fail them then.
    this.kv = new Kv(o.endpoints, Math.max(o.timing.safetyWindowMs, 200));
    this.k = keys(o.prefix);
    this.config = new ConfigStore(this.kv, this.k);
    this.events = new EventStore({ endpoints: o.endpoints, prefix: o.prefix, director: o.id, ...o.events });
  }

  /** Registers and watches the other directors. Elections start with setGroups(). */
  async start(): Promise<void> {
    const w = await this.kv.watchPrefix(this.k.directors);
    // A failed read is retried by the next event or reconnection; the last list stays meanwhile.
    const reread = (): void => { this.readDirectors().catch(() => undefined); };
    w.on('put', reread).on('delete', reread).on('connected', reread).on('error', () => undefined);
    this.stopWatch = () => { void w.cancel().catch(() => undefined); };
    await this.readDirectors().catch(() => undefined);
    await this.register();
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
        });
        this.elections.set(g.name, fresh);
        await fresh.start();
        fresh.healthChanged();
      }
    }
    // At once, not coalesced: other directors rank candidates and pick failover targets by these priorities.
    await this.publish().catch(() => undefined);
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

  /**
   * Planned switchover of `group` to `to` (default: the healthiest, highest-priority other director).
   * Resolves with the new leader once the record names it, or rejects with why not.
   */
  async failover(group: string, to?: string, timeoutMs = 3000): Promise<{ from: string; to: string; tookMs: number }> {
    const cur = await this.kv.get(this.k.leader(group));
    const rec = cur ? parseJson<LeaderRecord>(cur.value, isLeaderRecord) : null;
    if (!rec?.director) throw new Error(`group ${group} has no leader to fail over from`);
    await this.readDirectors();
    const candidates = [...this.directorRecords.values()]
      .filter((d) => d.id !== rec.director && d.healthy && d.priorities[group] !== undefined)
      .sort((a, b) => (b.priorities[group]! - a.priorities[group]!) || a.id.localeCompare(b.id));
    const target = to ?? candidates[0]?.id;
    if (target === undefined) throw new Error(`no healthy director other than ${rec.director} serves group ${group}`);
    if (!candidates.some((c) => c.id === target)) {
      const d = this.directorRecords.get(target);
      throw new Error(d === undefined ? `director ${target} is not registered` : d.priorities[group] === undefined ? `director ${target} does not serve group ${group}` : target === rec.director ? `${target} already leads ${group}` : `director ${target} is unhealthy: ${d.problems.join(', ')}`);
    }
    if (!rec.peers.includes(target)) throw new Error(`${target} is not in ${rec.director}'s peer list; add it to agent.peers on ${rec.director}`);
    const started = Date.now();
    const req: HandoffRequest = { to: target, reason: `lbadm failover${to ? ` --to ${to}` : ''}`, at: started };
    await this.kv.client.put(this.k.handoff(group)).value(JSON.stringify(req)).exec();
    for (;;) {
      const now = await this.kv.get(this.k.leader(group)).catch(() => null);
      const r = now ? parseJson<LeaderRecord>(now.value, isLeaderRecord) : null;
      if (r?.director === target && r.beat > 0) return { from: rec.director, to: target, tookMs: Date.now() - started };
      if (Date.now() - started > timeoutMs) throw new Error(`${target} did not take ${group} over within ${timeoutMs} ms (leader is ${r?.director ?? 'nobody'}: ${r?.reason ?? ''})`);
      await new Promise((res) => setTimeout(res, 5));
    }
  }

  async status(): Promise<ClusterStatus> {
    const reachable = await this.kv.reachable(500);
    const groups: GroupStatus[] = [];
    for (const [name, e] of this.elections) {
      const entry = reachable ? await this.kv.get(this.k.leader(name)).catch(() => null) : null;
      groups.push({ name, view: e.view(), record: entry ? parseJson<LeaderRecord>(entry.value, isLeaderRecord) : null, beatAgeMs: e.beatAgeMs() });
    }
    if (reachable) await this.readDirectors().catch(() => undefined);
    const directors: Array<DirectorRecord & { leaseLeftMs: number | null }> = [];
    // A snapshot: the watch refills the map while the lease lookups wait.
    for (const d of [...this.directorRecords.values()]) directors.push({ ...d, leaseLeftMs: reachable ? await this.leaseLeft(d.id) : null });
    return {
      self: this.o.id, etcd: { reachable, endpoints: this.o.endpoints }, worstCaseTakeoverMs: worstCaseTakeoverMs(this.o.timing),
      timing: this.o.timing, directors: directors.sort((a, b) => a.id.localeCompare(b.id)), groups,
    };
  }

  /** Stops every election; `vacate` releases and hands the groups to the standbys at once. */
  async close(opts: { vacate: boolean } = { vacate: true }): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.publishTimer !== undefined) clearTimeout(this.publishTimer);
    await Promise.all([...this.elections.values()].map((e) => e.stop(opts)));
    // After the elections: their last transitions (released, vacated) are in the history too.
    await this.events.close();
    this.stopWatch?.();
    if (opts.vacate) await this.lease?.revoke().catch(() => undefined);
    this.lease?.release();
    this.kv.close();
  }

  private async leaseLeft(id: string): Promise<number | null> {
    try {
      const res = await this.kv.client.get(this.k.director(id)).exec();
      const lease = res.kvs[0]?.lease;
      if (lease === undefined || lease === '0') return null;
      const r = await this.kv.client.leaseClient.leaseTimeToLive({ ID: lease });
      return Number(r.TTL) * 1000;
    } catch {
      return null;
    }
  }

  private async readDirectors(): Promise<void> {
    const all = await this.kv.list(this.k.directors);
    this.directorRecords.clear();
    for (const e of all) {
      const r = parseJson<DirectorRecord>(e.value, isDirectorRecord);
      if (r) this.directorRecords.set(r.id, r);
    }
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
    lease.on('lost', () => {
      if (this.closed) return;
      // etcd forgot us (it was unreachable longer than the TTL): register again once it answers.
      setTimeout(() => { if (!this.closed) void this.register().catch(() => undefined); }, 200);
    });
    await lease.put(this.k.director(this.o.id)).value(JSON.stringify(this.record())).exec();
  }

  /** Transitions publish the director record, coalesced (a burst of group changes is one write). */
  private publishSoon(): void {
    if (this.publishTimer !== undefined || this.closed) return;
    this.publishTimer = setTimeout(() => {
      this.publishTimer = undefined;
      this.publish().catch(() => undefined);
    }, 20);
  }

  private async publish(): Promise<void> {
    const lease = this.lease;
    if (lease === undefined || this.closed) return;
    await lease.put(this.k.director(this.o.id)).value(JSON.stringify(this.record())).exec();
  }
}
