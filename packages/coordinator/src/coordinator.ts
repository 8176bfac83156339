import type { StoredEvent } from '@lbd/config';
import { askAgainIfStalled } from '@lbd/clock';
import { ConfigStore, ConfigStoreCoordinator, type ConfigWrite, type StoredConfig } from './config-store.js';
import { EventStore, type EventStoreLog } from './event-store.js';
import { EtcdKv, type EtcdTlsMaterial } from './kv.js';
import {
  fillDirectorRecords, isLeaderRecord, keys, parseJson, type ConfigRecord, type DirectorRecord, type HandoffRequest, type LeaderRecord,
} from './records.js';
import { checkTiming, worstCaseTakeoverMs, type ElectionTiming } from './timing.js';

export interface CoordinatorOptions {
  readonly id: string;
  readonly endpoints: readonly string[];
  /** The director's etcd client certificate (https endpoints); null or absent: plain. */
  readonly etcdTls?: EtcdTlsMaterial | null;
  readonly prefix: string;
  readonly timing: ElectionTiming;
  /** The cluster event history: events kept per director (default 5000), and where its outages are logged. */
  readonly events?: { readonly keep?: number; readonly log?: EventStoreLog };
}

export interface GroupRecordStatus {
  readonly name: string;
  /** The record in etcd as this director reads it now (null: none, or etcd did not answer). */
  readonly record: LeaderRecord | null;
}

export interface ClusterStatus {
  readonly self: string;
  readonly etcd: { readonly reachable: boolean; readonly endpoints: readonly string[] };
  readonly worstCaseTakeoverMs: number;
  readonly timing: ElectionTiming;
  readonly directors: readonly (DirectorRecord & { readonly leaseLeftMs: number | null })[];
  readonly groups: readonly GroupRecordStatus[];
}

/**
 * How long an operator's etcd call (a config write, a failover request, a status read) may take. Nothing
 * here is timed against the safety window (the elections have their own connection), so a busy etcd or
 * a busy agent makes an apply slower, never refused: measured, a window-long deadline refused a config
 * apply while a loaded etcd answered in 300 ms.
 */
const OPERATOR_CALL_MS = 2000;
/**
 * Each etcd read of a status (lbadm cluster status, the dashboard, metrics): a status answers within its
 * callers' deadlines (2 s) even when etcd is slow or a member is down; a read that takes longer shows as
 * unknown.
 */
const STATUS_CALL_MS = 500;

/** A planned switchover that happened: who led, who leads now, and how long the handoff took. */
export interface FailoverResult {
  readonly from: string;
  readonly to: string;
  readonly tookMs: number;
}

/** The cluster's events at or after a time, and the store revision they were read at (where a watch starts). */
export interface ListedEvents {
  readonly events: StoredEvent[];
  readonly revision: string;
}

/**
 * What a director asks of the cluster beside its election: the cluster config (read, compare-and-swap
 * write, history, watch), the cluster's event history (append, read, follow), planned switchovers and
 * the cluster's status as the store holds it. The agent depends on this interface only: EtcdCoordinator
 * is the implementation, FakeCoordinator (`@lbd/coordinator/testing`) keeps it in memory. The elections
 * themselves are not here: they run apart (Elections, elections.ts).
 */
export interface Coordinator {
  /** The config the cluster runs, or null when none was written yet. */
  currentConfig(): Promise<StoredConfig | null>;
  /**
   * Writes `rec` as the next revision. `expectRevision`: the config revision the writer based its change on
   * (0: none yet); a different current revision loses with `conflict`.
   */
  writeConfig(rec: Omit<ConfigRecord, 'revision'>, expectRevision: number): Promise<ConfigWrite>;
  /** Every accepted config, oldest first. */
  configHistory(): Promise<StoredConfig[]>;
  /** An accepted config by its revision, or null when the history has none. */
  configAt(revision: number): Promise<ConfigRecord | null>;
  /** Calls `onChange` with every new config (and once with the current one). Returns a stop function. */
  watchConfig(onChange: (c: StoredConfig | null) => void): Promise<() => Promise<void>>;
  /** Queues this director's event for the cluster's history and returns at once. */
  appendEvent(e: StoredEvent): void;
  /** The cluster's events at or after `sinceUnixMs`: the newest `limit` of each director, merged by time. */
  listEvents(sinceUnixMs: number, limit: number): Promise<ListedEvents>;
  /**
   * Calls `onEvent` with every event appended after `afterRevision` (from listEvents). Returns the stop
   * function; `onError`: the watch failed for good.
   */
  watchEvents(afterRevision: string, onEvent: (e: StoredEvent) => void, onError: (err: Error) => void): Promise<() => Promise<void>>;
  /**
   * Planned switchover of `group` to `to` (default: the healthiest, highest-priority other director).
   * Resolves with the new leader once the record names it, or rejects with why not.
   */
  failover(group: string, to?: string, timeoutMs?: number): Promise<FailoverResult>;
  /** The store's view of the cluster: the directors registered, and each of `groups`' leader record. */
  status(groups: readonly string[]): Promise<ClusterStatus>;
  /** Writes what events are queued (briefly), then closes the connections. */
  close(): Promise<void>;
}

/**
 * The Coordinator over etcd: the cluster config store, the cluster's event history, planned switchovers
 * and the cluster's status as etcd holds it. The elections themselves (registration, beats, fences,
 * takeovers) are Elections (elections.ts), which runs apart, on its own etcd connection. With Elections,
 * the only code that talks to etcd.
 */
export class EtcdCoordinator extends ConfigStoreCoordinator implements Coordinator {
  protected readonly config: ConfigStore;
  /** The cluster's event history (its own etcd connection: see event-store.ts). */
  private readonly events: EventStore;
  private readonly kv: EtcdKv;
  private readonly k: ReturnType<typeof keys>;
  private readonly directorRecords = new Map<string, DirectorRecord>();
  private closed = false;

  constructor(private readonly o: CoordinatorOptions) {
    super();
    checkTiming(o.timing);
    this.kv = new EtcdKv(o.endpoints, OPERATOR_CALL_MS, { tls: o.etcdTls ?? null });
    this.k = keys(o.prefix);
    this.config = new ConfigStore(this.kv, this.k);
    this.events = new EventStore({ endpoints: o.endpoints, etcdTls: o.etcdTls ?? null, prefix: o.prefix, director: o.id, ...o.events });
  }

  appendEvent(e: StoredEvent): void {
    this.events.append(e);
  }

  listEvents(sinceUnixMs: number, limit: number): Promise<ListedEvents> {
    return this.events.list(sinceUnixMs, limit);
  }

  watchEvents(afterRevision: string, onEvent: (e: StoredEvent) => void, onError: (err: Error) => void): Promise<() => Promise<void>> {
    return this.events.watch(afterRevision, onEvent, onError);
  }

  async failover(group: string, to?: string, timeoutMs = 3000): Promise<FailoverResult> {
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
    await this.kv.put(this.k.handoff(group), JSON.stringify(req));
    for (;;) {
      const now = await this.kv.get(this.k.leader(group)).catch(() => null);
      const r = now ? parseJson<LeaderRecord>(now.value, isLeaderRecord) : null;
      if (r?.director === target && r.beat > 0) return { from: rec.director, to: target, tookMs: Date.now() - started };
      if (Date.now() - started > timeoutMs) throw new Error(`${target} did not take ${group} over within ${timeoutMs} ms (leader is ${r?.director ?? 'nobody'}: ${r?.reason ?? ''})`);
      await new Promise((res) => setTimeout(res, 5));
    }
  }

  async status(groups: readonly string[]): Promise<ClusterStatus> {
    // Asked again when a busy box's stalled loop, not etcd, made the first one late (askAgainIfStalled).
    const reachable = await askAgainIfStalled(() => this.kv.reachable(STATUS_CALL_MS, { read: this.k.config }), STATUS_CALL_MS);
    // The reads at once, each bounded: a status is read on every lbadm call, dashboard tick and scrape.
    const [out] = await Promise.all([
      Promise.all(groups.map(async (name): Promise<GroupRecordStatus> => {
        const entry = reachable ? await this.kv.get(this.k.leader(name), STATUS_CALL_MS).catch(() => null) : null;
        return { name, record: entry ? parseJson<LeaderRecord>(entry.value, isLeaderRecord) : null };
      })),
      reachable ? this.readDirectors(STATUS_CALL_MS).catch(() => { /* the directors as last read; the status says whether etcd answered */ }) : undefined,
    ]);
    // A snapshot: a concurrent read refills the map while the lease lookups wait.
    const directors: Array<DirectorRecord & { leaseLeftMs: number | null }> = await Promise.all([...this.directorRecords.values()]
      .map(async (d) => ({ ...d, leaseLeftMs: reachable ? await this.leaseLeft(d.id) : null })));
    return {
      self: this.o.id, etcd: { reachable, endpoints: this.o.endpoints }, worstCaseTakeoverMs: worstCaseTakeoverMs(this.o.timing),
      timing: this.o.timing, directors: directors.sort((a, b) => a.id.localeCompare(b.id)), groups: out,
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.events.close();
    this.kv.close();
  }

  private async leaseLeft(id: string): Promise<number | null> {
    try {
      return await this.kv.leaseTtlMs(this.k.director(id), STATUS_CALL_MS);
    } catch {
      return null;
    }
  }

  private async readDirectors(timeoutMs?: number): Promise<void> {
    fillDirectorRecords(this.directorRecords, await this.kv.list(this.k.directors, timeoutMs));
  }
}
