import type { Coordinator } from '@lbd/coordinator';
import { isLbdEvent, type LbdEvent } from '@lbd/config';
import { AgentError, type EventQuery, type EventSink } from '@lbd/operator-surfaces';
import type { EventLog } from './events.js';

/**
 * ListEvents: which events a query selects, from where. Alone, this director's log (LocalEventHistory).
 * In a cluster (ClusterEventHistory), etcd's history of every director merged with this director's log
 * (its newest events may not be in etcd yet), then, with follow, etcd's watch and the local log together;
 * an event seen twice (here, then from etcd) is sent once. `scope: local` reads this director's log alone.
 */
export interface EventHistory {
  /**
   * Sends the kept events `q` selects, oldest first, then (with `q.follow`) new ones; without follow it
   * ends the sink itself. Resolves to the stop function once the kept events are sent.
   */
  list(q: EventQuery, sink: EventSink): Promise<() => void>;
}

/** The most kept events a cluster ListEvents reads from etcd before filtering by kind. */
const MAX_EVENTS_READ = 10_000;

function matcher(q: EventQuery): (e: LbdEvent) => boolean {
  return (e) => (q.kind === '' || e.kind === q.kind) && (q.director === '' || e.director === q.director);
}

/** This director's own log: the newest `limit` that match, then, with follow, each new one. */
export class LocalEventHistory implements EventHistory {
  constructor(private readonly log: EventLog) {}

  async list(q: EventQuery, sink: EventSink): Promise<() => void> {
    const match = matcher(q);
    for (const e of this.log.recent(q.sinceUnixMs).filter(match).slice(-q.limit)) sink.event(e);
    if (!q.follow) { sink.end(); return () => { /* nothing to unsubscribe */ }; }
    return this.log.subscribe((e) => { if (match(e)) sink.event(e); });
  }
}

/** The cluster's history in etcd (through the Coordinator), merged with this director's log. */
export class ClusterEventHistory implements EventHistory {
  private readonly local: LocalEventHistory;

  constructor(private readonly log: EventLog, private readonly coordinator: Coordinator) {
    this.local = new LocalEventHistory(log);
  }

  async list(q: EventQuery, sink: EventSink): Promise<() => void> {
    if (q.scope === 'local') return this.local.list(q, sink);
    const match = matcher(q);
    const coordinator = this.coordinator;
    const seen = new SeenIds();
    const buffered: LbdEvent[] = [];
    let live = false;
    const send = (e: LbdEvent): void => {
      if (!match(e) || !seen.add(e.id)) return;
      sink.event(e);
    };
    // Subscribed before reading etcd, so nothing recorded meanwhile is missed; sent after the history.
    const unsubscribe = q.follow ? this.log.subscribe((e) => { if (live) send(e); else buffered.push(e); }) : () => { /* nothing to unsubscribe */ };
    let listed;
    try {
      // With a kind filter, read more: the limit counts what matches.
      listed = await coordinator.listEvents(q.sinceUnixMs, q.kind === '' ? q.limit : MAX_EVENTS_READ);
    } catch (cause) {
      unsubscribe();
      throw new AgentError('EtcdUnavailable', `cannot read the cluster's event history from etcd (${(cause as Error).message}); lbadm events --local shows this director's`, { cause });
    }
    const merged = new Map<string, LbdEvent>();
    for (const e of listed.events) if (isLbdEvent(e)) merged.set(e.id, e);
    for (const e of this.log.recent(q.sinceUnixMs)) merged.set(e.id, e);
    const history = [...merged.values()].filter(match).sort((a, b) => a.timeUnixMs - b.timeUnixMs || (a.id < b.id ? -1 : 1)).slice(-q.limit);
    for (const e of history) send(e);
    if (!q.follow) { sink.end(); return () => { /* nothing to unsubscribe */ }; }
    for (const e of buffered.splice(0)) send(e);
    live = true;
    let stopWatch: (() => Promise<void>) | null = null;
    let stopped = false;
    try {
      stopWatch = await coordinator.watchEvents(listed.revision, (e) => { if (isLbdEvent(e)) send(e); }, (err) => {
        sink.fail(new AgentError('EtcdUnavailable', `the cluster's event history cannot be followed: ${err.message}; lbadm events --local --follow follows this director's`, { cause: err }));
      });
    } catch (cause) {
      unsubscribe();
      throw new AgentError('EtcdUnavailable', `cannot follow the cluster's event history in etcd (${(cause as Error).message}); lbadm events --local --follow follows this director's`, { cause });
    }
    return () => {
      if (stopped) return;
      stopped = true;
      unsubscribe();
      void stopWatch?.();
    };
  }
}

/** Ids already sent on one stream, bounded: a copy arrives from etcd soon after the local one, or never. */
class SeenIds {
  private readonly ids = new Set<string>();
  /** False when `id` was already seen. */
  add(id: string): boolean {
    if (this.ids.has(id)) return false;
    this.ids.add(id);
    if (this.ids.size > 20_000) {
      // Sets iterate in insertion order: forget the oldest half.
      let n = 10_000;
      for (const old of this.ids) { if (n-- <= 0) break; this.ids.delete(old); }
    }
    return true;
  }
}
