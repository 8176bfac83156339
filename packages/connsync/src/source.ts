import { connectionKey, sameBinding, sameProxyState, type ConnectionEvent, type ConnectionTable, type ConnectionWatch, type SyncedConnection } from '@lbd/dataplane';
import type { Logger } from '@lbd/log';
import { ChurnTable } from './churn.js';
import type { LedSlots } from './slots.js';
import type { WireChange } from './wire.js';

/**
 * The leader's side of connection sync before any peer: which of the kernel's connections are to be copied,
 * kept as a map so a peer that (re)joins gets a snapshot without a kernel dump, and the changes to it,
 * fanned out to every sender.
 *
 * A connection is copied once it can survive a move: a TCP connection once established (a half-open one is simply
 * retried by its client), a UDP connection once assured (traffic both ways, more than one packet: one-packet
 * exchanges never cost a copy). A service's `minAgeMs` holds a connection back until it is that old, so short
 * connections cost nothing; a connection destroyed before then is never sent at all.
 */

/**
 * What this director copies now, by service key: the services whose sync is enabled of the vip groups it leads
 * (every connection of such a service goes with its group), and the ECMP services when it leads slots (a
 * connection goes with the slot its local address belongs to, and is copied only when that slot is led).
 */
export type SyncScope = ReadonlyMap<string, ScopeEntry>;

export type ScopeEntry =
  | { readonly group: string; readonly minAgeMs: number }
  | { readonly slots: LedSlots; readonly minAgeMs: number };

/** A connection being copied, with its service's key (kept: it decides which connections a scope change drops). */
export interface CopiedConnection {
  readonly connection: SyncedConnection;
  readonly service: string;
}

export interface SourceChange {
  /** connectionKey of the change's connection (every peer's sender folds its queue by it). */
  readonly key: string;
  readonly change: WireChange;
  /** When the kernel event behind it was read (performance.now()). */
  readonly seenAtMs: number;
  /**
   * An upsert of a connection no peer can hold: it was not copied when a peer's snapshot was read, nor sent since
   * (the source's first copy of it). Such an upsert and the connection's remove, both still queued for a peer, are
   * dropped together: it began and ended between two messages.
   */
  readonly first?: true;
}

export interface SourceListener {
  changes(changes: readonly SourceChange[]): void;
  /** The connections changed in a way changes cannot tell (scope changed, events lost): send a new snapshot. */
  resnapshot(reason: string): void;
}

export const COPIED_TCP_STATES: ReadonlySet<string> = new Set(['ESTABLISHED', 'FIN_WAIT', 'CLOSE_WAIT', 'LAST_ACK']);
/**
 * Too young to be copied: a TCP handshake, a UDP flow not yet assured. Not sent as they come (a SYN flood would
 * flood the peers), but kept, so that a planned handover sends them to the target just before it claims
 * (handOverYoung): a handshake under way then completes on the new holder, with the same real server.
 */
export const YOUNG_STATES: ReadonlySet<string> = new Set(['SYN_SENT', 'SYN_RECV', 'SYN_SENT2', 'UNREPLIED', 'REPLIED']);
/**
 * A TCP connection that is over. Its copies go as soon as the kernel says so, not when it forgets the entry
 * (TIME_WAIT lasts 2 minutes): a copy left ESTABLISHED on a peer is a ghost that a new connection from the
 * same client port (reused by then) can meet after a slot or group moved there, whose SYN the ghost's old
 * binding sends to the old real server and local address, and whose handshake then fails.
 */
export const ENDED_TCP_STATES: ReadonlySet<string> = new Set(['TIME_WAIT', 'CLOSE']);
/** The most young connections kept: past it (a flood), new ones are not kept, and a handover sends what is. */
const MAX_YOUNG = 65_536;
/** How often connections held back by minAgeMs are looked at. */
const HOLD_SWEEP_MS = 50;

/** A watch of the kernel's events that failed to start is tried again after this, doubling up to the cap. */
const WATCH_RETRY_FIRST_MS = 250;
const WATCH_RETRY_MAX_MS = 10_000;

export function serviceKeyOfConnection(f: Pick<SyncedConnection, 'protocol' | 'vip'>): string {
  const host = f.vip.address.includes(':') ? `[${f.vip.address}]` : f.vip.address;
  return `${host}:${f.vip.port}/${f.protocol}`;
}

export function copiable(f: SyncedConnection): boolean {
  return f.protocol === 'tcp' ? COPIED_TCP_STATES.has(f.state) : f.state === 'ASSURED';
}

/** The group `f` (of service `entry`) is copied under, or null when this director does not copy it. */
function groupIn(entry: ScopeEntry | undefined, f: Pick<SyncedConnection, 'localAddress'>): string | null {
  if (entry === undefined) return null;
  if ('group' in entry) return entry.group;
  return f.localAddress === null ? null : entry.slots.groupOf(f.localAddress.address);
}

/**
 * What a scope copies, as words to compare: a service of a vip group, or a led slot (with its pools) of an
 * ECMP service. A word that comes or goes is a scope change: connections are dropped or read, and resent.
 */
function scopeWords(scope: SyncScope): Set<string> {
  const words = new Set<string>();
  for (const [service, s] of scope) {
    if ('group' in s) words.add(`${service} ${s.group}`);
    else for (const [group, pools] of s.slots.led) words.add(`${service} ${group} ${pools}`);
  }
  return words;
}

export interface ConnectionSourceStats {
  readonly connections: number;
  readonly heldBack: number;
  readonly eventsSeen: number;
  readonly lossEvents: number;
  readonly lastLoss: string;
}

export class ConnectionSource {
  /** Connections being copied, by connectionKey. */
  private readonly copied = new ChurnTable<CopiedConnection>();
  /** Connections held back by minAgeMs: key → when the connection was first seen, its latest form, and when it is due. */
  private readonly held = new ChurnTable<CopiedConnection & { dueAt: number; seenAt: number }>();
  /** Young connections of the scope (YOUNG_STATES), by connectionKey: sent only by handOverYoung. */
  private readonly young = new ChurnTable<CopiedConnection>();
  /** When each connection of a service with minAgeMs was first seen (its `new` event). */
  private readonly firstSeen = new ChurnTable<number>();
  private scope: SyncScope = new Map();
  private readonly listeners = new Set<SourceListener>();
  private watch: ConnectionWatch | undefined;
  /** A watch that failed to start is tried again then; its delay doubles while it keeps failing. */
  private watchRetry: ReturnType<typeof setTimeout> | undefined;
  private watchRetryMs = WATCH_RETRY_FIRST_MS;
  private following: Promise<void> = Promise.resolve();
  private sweep: ReturnType<typeof setInterval> | undefined;
  /** Keys destroyed while a dump was running: the dump may still list them. */
  private destroyedDuringDump: Set<string> | null = null;
  private eventsSeen = 0;
  private lossEvents = 0;
  private lastLoss = '';
  private rebuilding: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly table: ConnectionTable, private readonly log: Logger) {}

  async start(): Promise<void> {
    this.sweep = setInterval(() => this.releaseHeld(), HOLD_SWEEP_MS);
  }

  async close(): Promise<void> {
    if (this.sweep !== undefined) clearInterval(this.sweep);
    if (this.watchRetry !== undefined) clearTimeout(this.watchRetry);
    this.closed = true;
    await this.watch?.close();
    this.watch = undefined;
  }

  /**
   * The kernel's events are followed only while something is copied: a standby injecting a snapshot
   * would otherwise read every one of its own injections back (and, when they overflow the event
   * socket, read its whole table again for nothing).
   *
   * Never throws. A watch that cannot start (seen on a saturated box: the helper's probe entry's event
   * did not come back within its deadline) is tried again with backoff, and once it runs the table is
   * read again and resent to every peer. Throwing here failed the agent's config apply, and a director
   * whose apply fails hands its groups over and withdraws its paths: a busy box must not make a director
   * give up its groups because its copy to the peers fell behind. Until then the peers get the table as
   * the last read found it, and a standby's preempt: after-sync waits as for any stream not caught up.
   */
  private follow(on: boolean): Promise<void> {
    // One at a time: two callers that both found no watch would start two.
    this.following = this.following.then(() => this.followNow(on)).catch((err: unknown) => {
      this.log.error('connection sync: changing what follows the kernel\'s events failed', { error: err });
    });
    return this.following;
  }

  private async followNow(on: boolean): Promise<void> {
    if (on && this.watch === undefined && !this.closed) {
      if (this.watchRetry !== undefined) return; // a retry is due; it starts the watch
      try {
        this.watch = await this.table.watch({
          onEvents: (events) => this.onEvents(events),
          onLoss: (reason, ended) => this.onLoss(reason, ended),
        });
        this.watchRetryMs = WATCH_RETRY_FIRST_MS;
      } catch (err) {
        this.lossEvents++;
        this.lastLoss = `cannot follow the kernel's connection events: ${err instanceof Error ? err.message : String(err)}`;
        this.log.warn('connection sync: cannot follow the kernel\'s connection events; trying again', { error: err, retryInMs: this.watchRetryMs });
        this.watchRetry = setTimeout(() => {
          this.watchRetry = undefined;
          if (this.closed || this.scope.size === 0) return;
          void this.follow(true).then(() => {
            if (this.watch !== undefined) return this.rebuild().then(() => this.emitResnapshot('following the kernel\'s events again'));
            return undefined;
          });
        }, this.watchRetryMs);
        this.watchRetryMs = Math.min(this.watchRetryMs * 2, WATCH_RETRY_MAX_MS);
      }
    } else if (!on) {
      if (this.watchRetry !== undefined) clearTimeout(this.watchRetry);
      this.watchRetry = undefined;
      this.watchRetryMs = WATCH_RETRY_FIRST_MS;
      if (this.watch !== undefined) {
        const w = this.watch;
        this.watch = undefined;
        await w.close();
      }
    }
  }

  subscribe(l: SourceListener): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }

  /** The connections to copy now, for a snapshot. */
  snapshot(): CopiedConnection[] {
    return this.copied.values();
  }

  /** The groups (vip groups and slots) whose connections this source copies. */
  groups(): string[] {
    return [...new Set([...this.scope.values()].flatMap((s) => ('group' in s ? [s.group] : [...s.slots.led.keys()])))].sort();
  }

  stats(): ConnectionSourceStats {
    return { connections: this.copied.size, heldBack: this.held.size, eventsSeen: this.eventsSeen, lossEvents: this.lossEvents, lastLoss: this.lastLoss };
  }

  /**
   * Changes what is copied (this director took over or gave up a group or a slot, or the config changed).
   * Connections of services or slots that left the scope are dropped; the kernel is read for those that joined
   * (a new leader finds the connections its peer copied to it there). Every listener then sends a new snapshot.
   */
  async setScope(scope: SyncScope): Promise<void> {
    const before = scopeWords(this.scope);
    const after = scopeWords(scope);
    this.scope = scope;
    const joined = [...after].some((w) => !before.has(w));
    const left = [...before].some((w) => !after.has(w));
    // A changed minAgeMs applies to connections from now on: nothing to resend.
    if (!joined && !left) return;
    for (const [k, wf] of this.copied) if (this.groupOf(wf) === null) this.copied.delete(k);
    for (const [k, h] of this.held) if (this.groupOf(h) === null) this.held.delete(k);
    for (const [k, y] of this.young) if (this.groupOf(y) === null) this.young.delete(k);
    // Events first, then the table: a connection that changes in between is in one or the other (or both).
    await this.follow(scope.size > 0);
    if (joined) await this.rebuild();
    this.emitResnapshot('vip groups changed');
  }

  /**
   * Reads the kernel's connections of the scope into the map (events keep running meanwhile), and forgets the
   * copied and held connections that ended unseen: not listed, or listed as over (an ended TCP connection's
   * destroy is not reported, its update into TIME_WAIT or CLOSE is: when that update was lost, this is where
   * its end is learnt). One that changed during the dump is left to its events.
   */
  private rebuild(): Promise<void> {
    this.rebuilding = this.rebuilding.then(async () => {
      this.destroyedDuringDump = new Set();
      const copiedBefore = new Map(this.copied);
      const heldBefore = new Map(this.held);
      let connections: SyncedConnection[];
      let read = true;
      try {
        connections = await this.table.dump();
      } catch (err) {
        this.log.error('connection sync: reading the connection table failed', { error: err });
        connections = [];
        read = false;
      }
      const destroyed = this.destroyedDuringDump;
      this.destroyedDuringDump = null;
      // What ended unseen is looked for only among what was copied or held before (none at a first read).
      const prune = read && (copiedBefore.size > 0 || heldBefore.size > 0);
      const alive = new Set<string>();
      for (const f of connections) {
        const key = connectionKey(f);
        if (prune && copiable(f)) alive.add(key);
        const service = serviceKeyOfConnection(f);
        // A connection found in the kernel has no known age: old enough.
        if (groupIn(this.scope.get(service), f) === null || destroyed.has(key) || !copiable(f)) continue;
        this.copied.add(key, { connection: f, service });
      }
      if (!prune) return;
      for (const [key, c] of copiedBefore) if (!alive.has(key) && this.copied.get(key) === c) this.copied.delete(key);
      for (const [key, h] of heldBefore) {
        if (!alive.has(key) && this.held.get(key) === h) { this.held.delete(key); this.firstSeen.delete(key); }
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
    // A broken watch is started again before the table is read, so nothing falls between the two (one that
    // cannot start is retried by follow, which reads and resends again once it runs).
    const again = ended ? this.follow(true) : Promise.resolve();
    void again.then(() => this.rebuild()).then(() => this.emitResnapshot(`events lost: ${reason}`));
  }

  private onEvents(events: readonly ConnectionEvent[]): void {
    this.eventsSeen += events.length;
    const out: SourceChange[] = [];
    const now = performance.now();
    for (const e of events) {
      const key = connectionKey(e.connection);
      const f = e.kind === 'update' ? withKnown(e.connection, (this.copied.get(key) ?? this.young.get(key) ?? this.held.get(key))?.connection) : e.connection;
      const service = serviceKeyOfConnection(f);
      const s = this.scope.get(service);
      if (e.kind === 'destroy') {
        this.destroyedDuringDump?.add(key);
        this.firstSeen.delete(key);
        this.held.delete(key);
        this.young.delete(key);
        const had = this.copied.get(key);
        if (had !== undefined && this.copied.delete(key)) out.push({ key, change: removal(f, had), seenAtMs: e.seenAtMs });
        continue;
      }
      if (s === undefined) continue;
      if (groupIn(s, f) === null) {
        // An ECMP connection of a slot this director does not lead (a peer's copy it injected, mostly). One copied
        // already has changed its local address: a peer that owns the other slot injected its own binding over it.
        // It is no longer this director's to send, nor to remove (that peer holds it live): it is dropped quietly,
        // and this director's next snapshot of the slot removes the peers' copies of the old binding.
        this.held.delete(key);
        this.copied.delete(key);
        this.young.delete(key);
        continue;
      }
      // Its age counts from its first event here: the NEW one, or (lbd-ctnl keeps handshakes back) the first
      // update after the handshake, one round trip later.
      if (s.minAgeMs > 0 && (e.kind === 'new' || !this.firstSeen.has(key)) && !this.copied.has(key)) this.firstSeen.set(key, e.seenAtMs);
      if (!copiable(f)) {
        if (f.protocol === 'tcp' && ENDED_TCP_STATES.has(f.state)) {
          // Over before it was due (minAgeMs): never sent, as if destroyed. Its held form is older than its end
          // (lbd-ctnl's filter passes none of the closing states), and would go to every peer as a ghost.
          this.held.delete(key);
          this.firstSeen.delete(key);
          this.young.delete(key);
          const had = this.copied.get(key);
          if (had !== undefined && this.copied.delete(key)) out.push({ key, change: removal(f, had), seenAtMs: e.seenAtMs });
          continue;
        }
        if (YOUNG_STATES.has(f.state) && (this.young.has(key) || this.young.size < MAX_YOUNG)) this.young.set(key, { connection: f, service });
        continue;
      }
      this.young.delete(key);
      const had = this.copied.get(key);
      if (had !== undefined) {
        // A copy goes again when its binding changed, or a SYN-proxied one's numbers: the kernel reports the
        // sequence adjustment in an update of its own, after the one that made the connection ESTABLISHED.
        if (!sameBinding(had.connection, f) || !sameProxyState(had.connection, f)) {
          this.copied.set(key, { connection: f, service });
          out.push({ key, change: { op: 'upsert', connection: f }, seenAtMs: e.seenAtMs });
        }
        continue;
      }
      const seenAt = this.firstSeen.get(key);
      if (s.minAgeMs > 0 && seenAt !== undefined && now - seenAt < s.minAgeMs) {
        this.held.set(key, { connection: f, service, dueAt: seenAt + s.minAgeMs, seenAt: e.seenAtMs });
        continue;
      }
      this.firstSeen.delete(key);
      this.copied.set(key, { connection: f, service });
      out.push({ key, change: { op: 'upsert', connection: f }, seenAtMs: e.seenAtMs, first: true });
    }
    this.emit(out);
  }

  /**
   * A planned handover of `group` is about to happen: its young connections (a TCP handshake, a UDP flow not yet
   * assured) are sent to every peer now, and copied from here on like the others, so that the target holds them
   * when it claims: the client's next packet of a handshake under way (its ACK, a retried SYN) then finds the
   * same binding there instead of being scheduled afresh. One that completed meanwhile is sent as it is now.
   * Returns how many were sent.
   */
  async handOverYoung(group: string): Promise<number> {
    // The handshakes the watch kept back (lbd-ctnl's keep-young) join those reported as they came (the perl helper).
    for (const e of (await this.watch?.takeYoung?.()) ?? []) this.keepYoung(e);
    const out: SourceChange[] = [];
    const now = performance.now();
    for (const [key, y] of this.young) {
      if (this.groupOf(y) !== group) continue;
      this.young.delete(key);
      if (this.copied.has(key)) continue;
      this.held.delete(key);
      this.copied.set(key, y);
      out.push({ key, change: { op: 'upsert', connection: y.connection }, seenAtMs: now, first: true });
    }
    this.emit(out);
    return out.length;
  }

  /** A handshake the watch kept back, now the source's to follow (as young, if its service and group are copied). */
  private keepYoung(e: ConnectionEvent): void {
    const key = connectionKey(e.connection);
    if (this.copied.has(key)) return; // established since, and copied
    const f = withKnown(e.connection, this.young.get(key)?.connection);
    const service = serviceKeyOfConnection(f);
    if (groupIn(this.scope.get(service), f) === null || !YOUNG_STATES.has(f.state)) return;
    if (this.young.has(key) || this.young.size < MAX_YOUNG) this.young.set(key, { connection: f, service });
  }

  private releaseHeld(): void {
    if (this.held.size === 0) return;
    const now = performance.now();
    const out: SourceChange[] = [];
    for (const [key, h] of this.held) {
      if (h.dueAt > now) continue;
      this.held.delete(key);
      this.firstSeen.delete(key);
      if (this.groupOf(h) === null) continue;
      this.copied.set(key, { connection: h.connection, service: h.service });
      // Its lag counts from when it became due, not from when it was first seen.
      out.push({ key, change: { op: 'upsert', connection: h.connection }, seenAtMs: h.dueAt, first: true });
    }
    this.emit(out);
  }

  /** The group a copied (or held) connection goes with in the current scope, or null when it is not copied now. */
  private groupOf(c: CopiedConnection): string | null {
    return groupIn(this.scope.get(c.service), c.connection);
  }

  private emit(out: SourceChange[]): void {
    if (out.length === 0) return;
    for (const l of this.listeners) l.changes(out);
  }

  private emitResnapshot(reason: string): void {
    for (const l of this.listeners) l.resnapshot(reason);
  }
}

/**
 * An update event says only what changed, so what it leaves out comes from an earlier event of the same
 * connection (same binding): a SYN-proxied connection's cookie (in its NEW event) and sequence adjustment (in an
 * update of its own, which has no TCP state: seen in the lab as NEW SYN_SENT with the cookie, then ESTABLISHED,
 * then a stateless update with the adjustment). A dump has them all.
 */
function withKnown(f: SyncedConnection, known: SyncedConnection | undefined): SyncedConnection {
  if (known === undefined || !sameBinding(known, f)) return f;
  const state = f.state === '' ? known.state : f.state;
  const synProxy = f.synProxy ?? known.synProxy;
  const seqAdjust = f.seqAdjust ?? known.seqAdjust;
  if (state === f.state && synProxy === f.synProxy && seqAdjust === f.seqAdjust) return f;
  return { ...f, state, ...(synProxy ? { synProxy } : {}), ...(seqAdjust ? { seqAdjust } : {}) };
}

/**
 * The remove of a copied connection, with the binding its peers hold (the one sent): a peer removes only an
 * entry with that binding. When this director's entry goes because a peer's copy of the same client connection
 * with another binding was put over it (the client reused its port; that peer holds the new connection), the
 * other peers keep that copy, and so does the peer that holds it live.
 */
function removal(f: SyncedConnection, sent: CopiedConnection): WireChange {
  return { op: 'remove', connection: f, binding: { realServer: sent.connection.realServer, localAddress: sent.connection.localAddress } };
}
