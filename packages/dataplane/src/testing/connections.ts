import { connectionKey, sameBinding, type ConnectionApplyResult, type ConnectionChange, type ConnectionEvent, type ConnectionTable, type ConnectionWatch, type ConnectionWatchHandlers, type SyncedConnection } from '../connections.js';

/**
 * An in-memory ConnectionTable: a map of connections by key. Tests drive it as a kernel would (`open`, `close`,
 * `lose`) and read what a sync peer injected (`connections`). Applying emits events like conntrack does for
 * injected entries, marked `injected`.
 */
export class FakeConnectionTable implements ConnectionTable {
  readonly connections = new Map<string, SyncedConnection>();
  private readonly watchers = new Set<ConnectionWatchHandlers>();
  prepared = false;
  applyCount = 0;
  /** Set to make every apply fail (as if conntrack were missing). */
  failApply: Error | null = null;
  /** The next this many watches fail to start (as the real one does when no probe event comes back in time). */
  failWatches = 0;
  watchStarts = 0;
  /**
   * As lbd-ctnl's keep-young: the events of TCP handshakes (SYN_SENT, SYN_RECV) from `open` are kept, not
   * reported, until a watch's takeYoung takes them; a later event of the connection forgets its handshake.
   */
  keepYoung = false;
  private readonly keptYoung = new Map<string, ConnectionEvent>();

  async prepare(): Promise<void> {
    this.prepared = true;
  }

  async watch(handlers: ConnectionWatchHandlers): Promise<ConnectionWatch> {
    this.watchStarts++;
    if (this.failWatches > 0) {
      this.failWatches--;
      throw new Error('watch: no conntrack event within 3000 ms of a test entry');
    }
    this.watchers.add(handlers);
    return {
      close: async () => { this.watchers.delete(handlers); },
      takeYoung: async () => {
        const kept = [...this.keptYoung.values()];
        this.keptYoung.clear();
        return kept;
      },
    };
  }

  async dump(): Promise<SyncedConnection[]> {
    return [...this.connections.values()];
  }

  async apply(changes: readonly ConnectionChange[]): Promise<ConnectionApplyResult> {
    this.applyCount++;
    if (this.failApply) throw this.failApply;
    let inserted = 0, replaced = 0, refreshed = 0, removed = 0;
    const events: ConnectionEvent[] = [];
    for (const c of changes) {
      const key = connectionKey(c.connection);
      const had = this.connections.get(key);
      if (c.op === 'remove' || c.op === 'remove-binding') {
        if (had && (c.op === 'remove' || sameBinding(had, c.connection))) { this.connections.delete(key); removed++; events.push(this.event('destroy', had, true)); }
        continue;
      }
      if (!had) inserted++;
      else if (sameBinding(had, c.connection)) refreshed++;
      else replaced++;
      this.connections.set(key, c.connection);
      events.push(this.event(had ? 'update' : 'new', c.connection, true));
    }
    this.emit(events);
    return { inserted, replaced, refreshed, removed, failed: 0, errors: [] };
  }

  /** A connection the kernel made from traffic (or changed: a state change is an update). */
  open(connection: SyncedConnection, kind: 'new' | 'update' = 'new'): void {
    const key = connectionKey(connection);
    this.connections.set(key, connection);
    if (this.keepYoung && connection.protocol === 'tcp' && (connection.state === 'SYN_SENT' || connection.state === 'SYN_RECV')) {
      this.keptYoung.set(key, this.event('update', connection, false));
      return;
    }
    this.keptYoung.delete(key);
    this.emit([this.event(kind, connection, false)]);
  }

  close(connection: SyncedConnection): void {
    const key = connectionKey(connection);
    this.connections.delete(key);
    this.keptYoung.delete(key);
    this.emit([this.event('destroy', connection, false)]);
  }

  /** The kernel dropped events; `ended`: the watch broke too. */
  lose(reason = 'ENOBUFS: events lost', ended = false): void {
    for (const w of [...this.watchers]) {
      if (ended) this.watchers.delete(w);
      w.onLoss(reason, ended);
    }
  }

  private event(kind: ConnectionEvent['kind'], connection: SyncedConnection, injected: boolean): ConnectionEvent {
    return { kind, connection, injected, seenAtMs: performance.now() };
  }

  private emit(events: ConnectionEvent[]): void {
    if (events.length === 0) return;
    for (const w of this.watchers) w.onEvents(events);
  }
}
