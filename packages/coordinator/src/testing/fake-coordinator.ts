import { FakeClock } from '@lbd/clock/testing';
import type { StoredEvent } from '@lbd/config';
import { ConfigStore, ConfigStoreCoordinator } from '../config-store.js';
import type { ClusterStatus, Coordinator, FailoverResult, ListedEvents } from '../coordinator.js';
import { byTime } from '../event-store.js';
import { keys } from '../records.js';
import { TIMING_PROFILES, worstCaseTakeoverMs } from '../timing.js';
import { MemoryKv } from './memory-kv.js';

export interface FakeCoordinatorOptions {
  /** This director's id, as status reports it (default `dir1`). */
  readonly self?: string;
  /** Where the cluster config lives (default: a store of its own on a fake clock). Share one to make a cluster. */
  readonly kv?: MemoryKv;
  readonly prefix?: string;
}

/**
 * The Coordinator in memory, for tests of what uses it (the agent's cluster config source, its admin
 * backend). The cluster config is the real ConfigStore over a MemoryKv, so compare-and-swap, history and
 * watches behave as they do over etcd, and the MemoryKv's faults apply to it. The event history is a list
 * (its revision is its length); failovers and status answer what the test sets.
 *
 * Fault injection: `setUnreachable(true)` fails every call (config and events alike) until it is cleared.
 */
export class FakeCoordinator extends ConfigStoreCoordinator implements Coordinator {
  readonly kv: MemoryKv;
  /** Every event appended, in order: the cluster's event history. */
  readonly events: StoredEvent[] = [];
  /** Every failover asked for. */
  readonly failovers: Array<{ readonly group: string; readonly to: string | undefined }> = [];
  /** What failover answers (default: it refuses, as with no leader); set by the test. */
  onFailover: (group: string, to: string | undefined) => FailoverResult | Promise<FailoverResult> = (group) => {
    throw new Error(`group ${group} has no leader to fail over from`);
  };
  closed = false;
  private readonly self: string;
  protected readonly config: ConfigStore;
  private readonly eventWatchers = new Set<(e: StoredEvent) => void>();
  private unreachable = false;

  constructor(opts: FakeCoordinatorOptions = {}) {
    super();
    this.self = opts.self ?? 'dir1';
    this.kv = opts.kv ?? new MemoryKv(new FakeClock(0));
    this.config = new ConfigStore(this.kv, keys(opts.prefix ?? '/lbd'));
  }

  /** Every call fails (as when etcd cannot be reached) until cleared. */
  setUnreachable(on: boolean): void {
    this.unreachable = on;
    this.kv.setStoreFault(on ? { kind: 'unreachable', fail: 'at-once' } : null);
  }

  appendEvent(e: StoredEvent): void {
    if (this.closed) return;
    this.events.push(e);
    for (const w of this.eventWatchers) w(e);
  }

  async listEvents(sinceUnixMs: number, limit: number): Promise<ListedEvents> {
    this.check('list events');
    const perDirector = new Map<string, StoredEvent[]>();
    for (const e of this.events) {
      if (e.timeUnixMs < sinceUnixMs) continue;
      const list = perDirector.get(e.director) ?? [];
      list.push(e);
      perDirector.set(e.director, list);
    }
    const out = [...perDirector.values()].flatMap((l) => l.slice(-limit)).sort(byTime);
    return { events: out.slice(-limit), revision: String(this.events.length) };
  }

  /** `onError` is never called: a watch that started does not fail here (setUnreachable fails the start). */
  async watchEvents(afterRevision: string, onEvent: (e: StoredEvent) => void, onError: (err: Error) => void): Promise<() => Promise<void>> {
    void onError;
    this.check('watch events');
    for (const e of this.events.slice(Number(afterRevision))) onEvent(e);
    this.eventWatchers.add(onEvent);
    return async () => { this.eventWatchers.delete(onEvent); };
  }

  async failover(group: string, to?: string): Promise<FailoverResult> {
    this.check('failover');
    this.failovers.push({ group, to });
    return this.onFailover(group, to);
  }

  async status(groups: readonly string[]): Promise<ClusterStatus> {
    const timing = TIMING_PROFILES.default;
    return {
      self: this.self, etcd: { reachable: !this.unreachable, endpoints: [] }, worstCaseTakeoverMs: worstCaseTakeoverMs(timing), timing,
      directors: [], groups: groups.map((name) => ({ name, record: null })),
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.eventWatchers.clear();
  }

  private check(op: string): void {
    if (this.unreachable) throw new Error(`${op}: the fake coordinator is unreachable`);
  }
}
