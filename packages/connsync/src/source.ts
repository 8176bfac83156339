import { flowKey, sameBinding, type FlowEvent, type FlowTable, type FlowWatch, type SyncedFlow } from '@lbd/dataplane';
import type { Logger } from './log.js';
import type { WireChange } from './wire.js';

/**
 * The leader's side of connection sync before any peer: which of the kernel's flows are to be copied,
 * kept as a map so a peer that (re)joins gets a snapshot without a kernel dump, and the changes to it,
 * fanned out to every sender.
 *
 * A flow is copied once it can survive a move: a TCP flow once established (a half-open one is simply
 * retried by its client), a UDP flow once assured (traffic both ways, more than one packet: one-packet
 * exchanges never cost a copy). A service's `minAgeMs` holds a flow back until it is that old, so short
 * connections cost nothing; a flow destroyed before then is never sent at all.
 */

/** What this director copies now: the services of the groups it leads whose sync is enabled, by key. */
export type SyncScope = ReadonlyMap<string, { readonly group: string; readonly minAgeMs: number }>;

/** A flow being copied, with its service's key (kept: it decides which flows a scope change drops). */
export interface CopiedFlow {
  readonly flow: SyncedFlow;
  readonly service: string;
}

export interface SourceChange {
  readonly change: WireChange;
  /** When the kernel event behind it was read (performance.now()). */
  readonly seenAtMs: number;
}

export interface SourceListener {
  changes(changes: readonly SourceChange[]): void;
  /** The flows changed in a way changes cannot tell (scope changed, events lost): send a new snapshot. */
  resnapshot(reason: string): void;
}

const COPIED_TCP_STATES = new Set(['ESTABLISHED', 'FIN_WAIT', 'CLOSE_WAIT', 'LAST_ACK']);
/** How often flows held back by minAgeMs are looked at. */
const HOLD_SWEEP_MS = 50;

export function serviceKeyOfFlow(f: Pick<SyncedFlow, 'protocol' | 'vip'>): string {
  const host = f.vip.address.includes(':') ? `[${f.vip.address}]` : f.vip.address;
  return `${host}:${f.vip.port}/${f.protocol}`;
}

export function copiable(f: SyncedFlow): boolean {
  return f.protocol === 'tcp' ? COPIED_TCP_STATES.has(f.state) : f.state === 'ASSURED';
}

export interface FlowSourceStats {
  readonly flows: number;
  readonly heldBack: number;
  readonly eventsSeen: number;
  readonly lossEvents: number;
  readonly lastLoss: string;
}

export class FlowSource {
  /** Flows being copied, by flowKey. */
  private readonly copied = new Map<string, CopiedFlow>();
  /** Flows held back by minAgeMs: key → when the flow was first seen, its latest form, and when it is due. */
  private readonly held = new Map<string, CopiedFlow & { dueAt: number; seenAt: number }>();
  /** When each flow of a service with minAgeMs was first seen (its `new` event). */
  private readonly firstSeen = new Map<string, number>();
  private scope: SyncScope = new Map();
  private readonly listeners = new Set<SourceListener>();
  private watch: FlowWatch | undefined;
  private sweep: ReturnType<typeof setInterval> | undefined;
  /** Keys destroyed while a dump was running: the dump may still list them. */
  private destroyedDuringDump: Set<string> | null = null;
  private eventsSeen = 0;
  private lossEvents = 0;
  private lastLoss = '';
  private rebuilding: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly table: FlowTable, private readonly log: Logger) {}

  async start(): Promise<void> {
    this.sweep = setInterval(() => this.releaseHeld(), HOLD_SWEEP_MS);
  }

  async close(): Promise<void> {
    if (this.sweep !== undefined) clearInterval(this.sweep);
    this.closed = true;
    await this.watch?.close();
    this.watch = undefined;
  }

  /**
   * The kernel's events are followed only while something is copied: a standby injecting a snapshot
   * would otherwise read every one of its own injections back (and, when they overflow the event
   * socket, read its whole table again for nothing).
   */
  private async follow(on: boolean): Promise<void> {
    if (on && this.watch === undefined && !this.closed) {
      this.watch = await this.table.watch({
        onEvents: (events) => this.onEvents(events),
        onLoss: (reason, ended) => this.onLoss(reason, ended),
      });
    } else if (!on && this.watch !== undefined) {
      const w = this.watch;
      this.watch = undefined;
      await w.close();
    }
  }

  subscribe(l: SourceListener): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }

  /** The flows to copy now, for a snapshot. */
  snapshot(): CopiedFlow[] {
    return [...this.copied.values()];
  }

  /** The groups whose flows this source copies. */
  groups(): string[] {
    return [...new Set([...this.scope.values()].map((s) => s.group))].sort();
  }

  stats(): FlowSourceStats {
    return { flows: this.copied.size, heldBack: this.held.size, eventsSeen: this.eventsSeen, lossEvents: this.lossEvents, lastLoss: this.lastLoss };
  }

  /**
   * Changes what is copied (this director took over or gave up a group, or the config changed). Flows of
   * services that left the scope are dropped; the kernel is read for those that joined (a new leader
   * finds the flows its peer copied to it there). Every listener then sends a new snapshot.
   */
  async setScope(scope: SyncScope): Promise<void> {
    const before = this.scope;
    this.scope = scope;
    const joined = [...scope.keys()].some((k) => !before.has(k));
    const left = [...before.keys()].some((k) => !scope.has(k));
    // A changed minAgeMs applies to flows from now on: nothing to resend.
    if (!joined && !left) return;
    for (const [k, wf] of this.copied) if (!scope.has(wf.service)) this.copied.delete(k);
    for (const [k, h] of this.held) if (!scope.has(h.service)) this.held.delete(k);
    // Events first, then the table: a flow that changes in between is in one or the other (or both).
    await this.follow(scope.size > 0);
    if (joined) await this.rebuild();
    this.emitResnapshot('vip groups changed');
  }

  /** Reads the kernel's flows of the scope into the map (events keep running meanwhile). */
  private rebuild(): Promise<void> {
    this.rebuilding = this.rebuilding.then(async () => {
      this.destroyedDuringDump = new Set();
      let flows: SyncedFlow[];
      try {
        flows = await this.table.dump();
      } catch (err) {
        this.log.error('connection sync: reading the connection table failed', { error: err });
        flows = [];
      }
      const destroyed = this.destroyedDuringDump;
      this.destroyedDuringDump = null;
      for (const f of flows) {
        const key = flowKey(f);
        const service = serviceKeyOfFlow(f);
        // A flow found in the kernel has no known age: old enough.
        if (!this.scope.has(service) || destroyed.has(key) || !copiable(f) || this.copied.has(key)) continue;
        this.copied.set(key, { flow: f, service });
      }
    });
    return this.rebuilding;
  }

  private onLoss(reason: string, ended: boolean): void {
    if (ended) this.watch = undefined;
    if (this.scope.size === 0) return;
    this.lossEvents++;
    this.lastLoss = reason;
    this.log.warn('connection sync: kernel events lost; reading the table again and resending it to every peer', { reason, watchEnded: ended });
    // A broken watch is started again before the table is read, so nothing falls between the two.
    const again = ended ? this.follow(true).catch((err: unknown) => this.log.error('connection sync: cannot follow the kernel\'s events again', { error: err })) : Promise.resolve();
    void again.then(() => this.rebuild()).then(() => this.emitResnapshot(`events lost: ${reason}`));
  }

  private onEvents(events: readonly FlowEvent[]): void {
    this.eventsSeen += events.length;
    const out: SourceChange[] = [];
    const now = performance.now();
    for (const e of events) {
      const f = e.flow;
      const service = serviceKeyOfFlow(f);
      const s = this.scope.get(service);
      const key = flowKey(f);
      if (e.kind === 'destroy') {
        this.destroyedDuringDump?.add(key);
        this.firstSeen.delete(key);
        this.held.delete(key);
        if (this.copied.delete(key)) out.push({ change: { op: 'remove', flow: f }, seenAtMs: e.seenAtMs });
        continue;
      }
      if (s === undefined) continue;
      if (e.kind === 'new' && s.minAgeMs > 0) this.firstSeen.set(key, e.seenAtMs);
      if (!copiable(f)) continue;
      const had = this.copied.get(key);
      if (had !== undefined) {
        if (!sameBinding(had.flow, f)) {
          this.copied.set(key, { flow: f, service });
          out.push({ change: { op: 'upsert', flow: f }, seenAtMs: e.seenAtMs });
        }
        continue;
      }
      const seenAt = this.firstSeen.get(key);
      if (s.minAgeMs > 0 && seenAt !== undefined && now - seenAt < s.minAgeMs) {
        this.held.set(key, { flow: f, service, dueAt: seenAt + s.minAgeMs, seenAt: e.seenAtMs });
        continue;
      }
      this.firstSeen.delete(key);
      this.copied.set(key, { flow: f, service });
      out.push({ change: { op: 'upsert', flow: f }, seenAtMs: e.seenAtMs });
    }
    this.emit(out);
  }

  private releaseHeld(): void {
    if (this.held.size === 0) return;
    const now = performance.now();
    const out: SourceChange[] = [];
    for (const [key, h] of this.held) {
      if (h.dueAt > now) continue;
      this.held.delete(key);
      this.firstSeen.delete(key);
      if (!this.scope.has(h.service)) continue;
      this.copied.set(key, { flow: h.flow, service: h.service });
      // Its lag counts from when it became due, not from when it was first seen.
      out.push({ change: { op: 'upsert', flow: h.flow }, seenAtMs: h.dueAt });
    }
    this.emit(out);
  }

  private emit(out: SourceChange[]): void {
    if (out.length === 0) return;
    for (const l of this.listeners) l.changes(out);
  }

  private emitResnapshot(reason: string): void {
    for (const l of this.listeners) l.resnapshot(reason);
  }
}
