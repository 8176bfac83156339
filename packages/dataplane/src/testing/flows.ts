import { flowKey, sameBinding, type FlowApplyResult, type FlowChange, type FlowEvent, type FlowTable, type FlowWatch, type FlowWatchHandlers, type SyncedFlow } from '../flows.js';

/**
 * An in-memory FlowTable: a map of flows by key. Tests drive it as a kernel would (`open`, `close`,
 * `lose`) and read what a sync peer injected (`flows`). Applying emits events like conntrack does for
 * injected entries, marked `injected`.
 */
export class FakeFlowTable implements FlowTable {
  readonly flows = new Map<string, SyncedFlow>();
  private readonly watchers = new Set<FlowWatchHandlers>();
  prepared = false;
  applyCount = 0;
  /** Set to make every apply fail (as if conntrack were missing). */
  failApply: Error | null = null;

  async prepare(): Promise<void> {
    this.prepared = true;
  }

  async watch(handlers: FlowWatchHandlers): Promise<FlowWatch> {
    this.watchers.add(handlers);
    return { close: async () => { this.watchers.delete(handlers); } };
  }

  async dump(): Promise<SyncedFlow[]> {
    return [...this.flows.values()];
  }

  async apply(changes: readonly FlowChange[]): Promise<FlowApplyResult> {
    this.applyCount++;
    if (this.failApply) throw this.failApply;
    let inserted = 0, replaced = 0, refreshed = 0, removed = 0;
    const events: FlowEvent[] = [];
    for (const c of changes) {
      const key = flowKey(c.flow);
      const had = this.flows.get(key);
      if (c.op === 'remove') {
        if (had) { this.flows.delete(key); removed++; events.push(this.event('destroy', had, true)); }
        continue;
      }
      if (!had) inserted++;
      else if (sameBinding(had, c.flow)) refreshed++;
      else replaced++;
      this.flows.set(key, c.flow);
      events.push(this.event(had ? 'update' : 'new', c.flow, true));
    }
    this.emit(events);
    return { inserted, replaced, refreshed, removed, failed: 0, errors: [] };
  }

  /** A flow the kernel made from traffic (or changed: a state change is an update). */
  open(flow: SyncedFlow, kind: 'new' | 'update' = 'new'): void {
    this.flows.set(flowKey(flow), flow);
    this.emit([this.event(kind, flow, false)]);
  }

  close(flow: SyncedFlow): void {
    this.flows.delete(flowKey(flow));
    this.emit([this.event('destroy', flow, false)]);
  }

  /** The kernel dropped events; `ended`: the watch broke too. */
  lose(reason = 'ENOBUFS: events lost', ended = false): void {
    for (const w of [...this.watchers]) {
      if (ended) this.watchers.delete(w);
      w.onLoss(reason, ended);
    }
  }

  private event(kind: FlowEvent['kind'], flow: SyncedFlow, injected: boolean): FlowEvent {
    return { kind, flow, injected, seenAtMs: performance.now() };
  }

  private emit(events: FlowEvent[]): void {
    if (events.length === 0) return;
    for (const w of this.watchers) w.onEvents(events);
  }
}
