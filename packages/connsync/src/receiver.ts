import { slotOfGroup } from '@lbd/config';
import { connectionKey, withProxyState, type ConnectionChange, type ConnectionTable, type SyncedConnection, type Endpoint } from '@lbd/dataplane';
import type { SyncMessage__Output, SyncReply } from '@lbd/proto';
import type { Logger } from '@lbd/log';
import { serviceKeyOfConnection } from './source.js';
import { fromWireChange, MalformedMessage, type WireChange } from './wire.js';

/**
 * A standby's side of one leader's stream. Messages are applied strictly in sequence, one batch at a time
 * (consecutive messages that arrived meanwhile are applied together: one conntrack run for many), and
 * acknowledged after. A gap asks for a resync; until the snapshot that answers it arrives, everything is
 * acknowledged but ignored, so the leader's window keeps moving. A message that does not check out is
 * refused whole and ends the stream: nothing of it reaches the kernel.
 */

export interface ReceiverContext {
  readonly table: ConnectionTable;
  readonly log: Logger;
  /** This director's ct mark for a real server of a service (by key), or null when it has no such one. */
  markOf(service: string, realServer: Endpoint): number | null;
  /**
   * The group a connection of a service (by key) goes with in this director's config: the service's vip group,
   * or, for an ECMP service, the slot group whose pool holds the connection's `localAddress`. Null when this
   * director has no such service, or the connection is an ECMP one whose local address is in no slot's pool.
   */
  groupOf(service: string, localAddress: string | null): string | null;
  /**
   * Whether a service (by key) is an ECMP service, whose connections go with slots. A remove names only the
   * connection, not its local address, so its slot is not known (see `take`). Absent: no service is.
   */
  slotted?(service: string): boolean;
  /** Whether this director leads the group itself: then a peer's copy is stale and must not win. */
  leads(group: string): boolean;
}

export interface ReceiverLink {
  write(reply: SyncReply): void;
  /** Ends the stream with an error the sender sees (gRPC status INVALID_ARGUMENT etc.). */
  fail(code: 'invalid' | 'denied' | 'exhausted', details: string): void;
}

export type ReceiverState = 'waiting' | 'snapshot' | 'streaming' | 'resync' | 'ended';

export interface ReceiverStatus {
  readonly peer: string;
  readonly session: string;
  readonly state: ReceiverState;
  /** Groups whose snapshot from this peer completed, and when (Date.now()). */
  readonly caughtUp: Readonly<Record<string, number>>;
  readonly received: number;
  readonly inserted: number;
  readonly replaced: number;
  readonly refreshed: number;
  readonly removed: number;
  readonly failed: number;
  readonly skipped: number;
  readonly resyncs: number;
  readonly lastError: string;
}

/** A sender that ignores the window cannot make the receiver buffer without bound. */
const MAX_BUFFERED_MESSAGES = 256;
/** At most one kernel run per this long (the lag it adds is at most this). */
const MIN_APPLY_GAP_MS = 2;
/**
 * Changes per kernel run when several messages are waiting (a message is never split: one larger than this is a
 * run of its own). A run holds the sync thread while the kernel works (ctnl-writer.node writes on that thread),
 * about 17 µs a change on the test machine: 2 048 is some 35 ms. It was 20 000, more than a conforming sender's
 * whole window (32 messages of 512), and a standby catching up held every other stream of its thread, and the
 * acks, for 0.34 s.
 */
const MAX_CHANGES_PER_APPLY = 2_048;

export class SyncReceiver {
  private peer = '';
  private session = '';
  private state: ReceiverState = 'waiting';
  private expected = 1;
  /** While resyncing: only a SnapshotBegin numbered above this is accepted. */
  private resyncFloor = 0;
  private readonly buffer: SyncMessage__Output[] = [];
  private working = false;
  private lastApplyAt = -Infinity;
  /**
   * The snapshot being received: its groups, the connections it named, and what this director held of those
   * groups when it began (read then, not at the end: a standby starting empty, after a reboot, reads
   * nothing, where a read at the end would list the whole snapshot back).
   */
  private snapshot: { groups: Set<string>; keys: Set<string>; before: Map<string, SyncedConnection> } | null = null;
  private readonly caught = new Map<string, number>();
  /** The slot groups the peer says it sends (its hello, then its latest snapshot's): where its removes may belong. */
  private peerSlots: readonly string[] = [];
  private counts = { received: 0, inserted: 0, replaced: 0, refreshed: 0, removed: 0, failed: 0, skipped: 0, resyncs: 0 };
  private lastError = '';
  private ended = false;

  /**
   * `allowedPeers`: the director ids this stream may speak for (its certificate's names, intersected with
   * the configured peers).
   */
  constructor(private readonly ctx: ReceiverContext, private readonly link: ReceiverLink, private readonly allowedPeers: ReadonlySet<string>) {}

  get peerId(): string {
    return this.peer;
  }

  status(): ReceiverStatus {
    return { peer: this.peer, session: this.session, state: this.state, caughtUp: Object.fromEntries(this.caught), ...this.counts, lastError: this.lastError };
  }

  /** Whether a whole snapshot of `group` from this stream has been applied, and the stream still runs. */
  caughtUp(group: string): boolean {
    return !this.ended && this.state === 'streaming' && this.caught.has(group);
  }

  end(reason: string): void {
    if (this.ended) return;
    this.ended = true;
    this.state = 'ended';
    this.lastError ||= reason;
  }

  onMessage(m: SyncMessage__Output): void {
    if (this.ended) return;
    if (this.buffer.length >= MAX_BUFFERED_MESSAGES) {
      this.refuse('exhausted', `more than ${MAX_BUFFERED_MESSAGES} messages unacknowledged: the sender ignores its window`);
      return;
    }
    this.buffer.push(m);
    void this.work();
  }

  private refuse(code: 'invalid' | 'denied' | 'exhausted', details: string): void {
    this.ctx.log.warn('connection sync: refused a peer\'s stream', { peer: this.peer || '(before hello)', details });
    this.lastError = details;
    this.end(details);
    this.link.fail(code, details);
  }

  private async work(): Promise<void> {
    if (this.working) return;
    this.working = true;
    try {
      while (this.buffer.length > 0 && !this.ended) {
        // Each kernel run is a round trip to the ctnetlink writer and a wake-up of this loop: under a steady
        // trickle of new connections, gather for 2 ms instead of running once per message. 2 ms (was 10, when a
        // run started a process) halved lag p50 at the connsync bench's load without costing the standby more.
        const since = performance.now() - this.lastApplyAt;
        if (since < MIN_APPLY_GAP_MS) await new Promise((r) => setTimeout(r, MIN_APPLY_GAP_MS - since));
        const batch: ConnectionChange[] = [];
        let lastSeq = 0;
        // Take messages up to (not past) a snapshot's begin or end: each sees every change before it applied.
        while (this.buffer.length > 0) {
          const m = this.buffer[0]!;
          const seq = Number(m.seq);
          if ((m.snapshotEnd || m.snapshotBegin) && batch.length > 0 && this.accepts(m, seq)) break;
          if (batch.length > 0 && batch.length + (m.changes?.changes.length ?? 0) > MAX_CHANGES_PER_APPLY) break;
          this.buffer.shift();
          lastSeq = seq;
          if (!this.accepts(m, seq)) {
            this.skipOrGap(seq);
            continue;
          }
          this.expected = seq + 1;
          this.counts.received++;
          if (!this.take(m, batch)) return;
          if (m.snapshotBegin) await this.readBefore();
          if (m.snapshotEnd) {
            await this.finishSnapshot();
            break;
          }
        }
        if (batch.length > 0) {
          await this.apply(batch);
          this.lastApplyAt = performance.now();
        }
        if (this.ended) return;
        if (lastSeq > 0) this.link.write({ ack: { seq: lastSeq, injected: this.counts.inserted + this.counts.replaced + this.counts.refreshed, failed: this.counts.failed } });
        // More waiting: one turn of the event loop before the next run, I/O included, so the ack just written goes out
        // and the thread's other streams are read before a run holds the thread again. (The gap's timer above is no
        // such turn: set after a run longer than the gap, it can fire in the same timers phase, before any I/O.)
        if (this.buffer.length > 0) await new Promise((r) => setImmediate(r));
      }
    } finally {
      this.working = false;
    }
  }

  /** Whether `m` is the next message to apply. */
  private accepts(m: SyncMessage__Output, seq: number): boolean {
    if (this.state === 'resync') return m.snapshotBegin != null && seq > this.resyncFloor;
    return seq === this.expected;
  }

  private skipOrGap(seq: number): void {
    if (this.state === 'resync' || seq < this.expected) return; // a duplicate or a straggler: already dealt with
    this.counts.resyncs++;
    const reason = `gap: expected message ${this.expected}, got ${seq}`;
    this.ctx.log.warn('connection sync: asking the peer for a resync', { peer: this.peer, reason });
    this.link.write({ resync: { expected: this.expected, reason } });
    this.state = 'resync';
    this.resyncFloor = seq;
    this.snapshot = null;
  }

  /** Applies one in-sequence message's bookkeeping; changes go into `batch`. False: the stream was refused. */
  private take(m: SyncMessage__Output, batch: ConnectionChange[]): boolean {
    if (m.hello) {
      if (this.peer !== '') return this.fail('invalid', 'hello: sent twice');
      if (!this.allowedPeers.has(m.hello.from)) {
        return this.fail('denied', `hello.from: ${JSON.stringify(m.hello.from)} is not a configured peer named by the stream's certificate (allowed: ${[...this.allowedPeers].join(', ') || 'none'})`);
      }
      this.peer = m.hello.from;
      this.session = m.hello.session;
      this.peerSlots = m.hello.groups.filter((g) => slotOfGroup(g) !== null);
      this.ctx.log.info('connection sync: peer stream opened', { peer: this.peer, session: this.session, groups: m.hello.groups });
      return true;
    }
    if (this.peer === '') return this.fail('invalid', 'the first message must be a hello');
    if (m.snapshotBegin) {
      const groups = new Set(m.snapshotBegin.groups);
      this.peerSlots = [...groups].filter((g) => slotOfGroup(g) !== null);
      this.snapshot = { groups, keys: new Set(), before: new Map() };
      // A group the peer no longer sends (it gave the group or slot up) is not caught up from this stream any
      // more: its new leader's stream must catch up on it before this director may take it back.
      this.caught.clear();
      this.state = 'snapshot';
      this.ctx.log.info('connection sync: snapshot from peer started', { peer: this.peer, groups: [...groups], connections: Number(m.snapshotBegin.connections), reason: m.snapshotBegin.reason });
      return true;
    }
    if (m.changes) {
      let wire: WireChange[];
      try {
        wire = m.changes.changes.map((c, i) => fromWireChange(c, `changes[${i}]`));
      } catch (err) {
        if (err instanceof MalformedMessage) return this.fail('invalid', `message ${String(m.seq)}: ${err.message}`);
        throw err;
      }
      // Asked at most once per message (the answer cannot change within one).
      let leadsPeerSlot: boolean | undefined;
      for (const w of wire) {
        const service = serviceKeyOfConnection(w.connection);
        if (w.op === 'remove' && this.ctx.slotted?.(service) === true) {
          // The remove of an ECMP connection, whose slot the wire does not say: it belongs to one of the slots the
          // peer sends. While this director leads one of those too (a slot moving between them), the connection
          // may be live here, so no remove from the peer is applied; the peer's next snapshot, which its losing
          // the slot brings, removes what was stale.
          leadsPeerSlot ??= this.peerSlots.some((g) => this.ctx.leads(g));
          if (leadsPeerSlot) { this.counts.skipped++; continue; }
          batch.push(removeChange(w));
          this.snapshot?.keys.delete(connectionKey(w.connection));
          continue;
        }
        const group = this.ctx.groupOf(service, w.op === 'upsert' ? w.connection.localAddress?.address ?? null : null);
        if (group === null) { this.counts.failed++; continue; }
        if (this.ctx.leads(group)) { this.counts.skipped++; continue; }
        if (w.op === 'remove') {
          batch.push(removeChange(w));
          this.snapshot?.keys.delete(connectionKey(w.connection));
          continue;
        }
        const mark = this.ctx.markOf(service, w.connection.realServer);
        if (mark === null) { this.counts.failed++; continue; }
        const f = w.connection;
        batch.push({
          op: 'upsert',
          connection: withProxyState<SyncedConnection>({ protocol: f.protocol, client: f.client, vip: f.vip, realServer: f.realServer, localAddress: f.localAddress, mark, state: f.state, timeoutSec: f.timeoutSec }, f),
        });
        this.snapshot?.keys.add(connectionKey(w.connection));
      }
      return true;
    }
    if (m.snapshotEnd) return true;
    return this.fail('invalid', `message ${String(m.seq)}: has no body`);
  }

  private fail(code: 'invalid' | 'denied', details: string): false {
    this.refuse(code, details);
    return false;
  }

  private async apply(batch: ConnectionChange[]): Promise<void> {
    try {
      const r = await this.ctx.table.apply(batch, { evictReplyHolder: (holder) => this.mayEvict(holder) });
      this.counts.inserted += r.inserted;
      this.counts.replaced += r.replaced;
      this.counts.refreshed += r.refreshed;
      this.counts.removed += r.removed;
      this.counts.failed += r.failed;
      if (r.failed > 0) {
        const error = r.errors[0] ?? `${r.failed} changes failed`;
        // A copy not injected is a connection a takeover would break: said once per kind of failure, not per batch.
        if (error.replace(/\d+/g, '#') !== this.lastError.replace(/\d+/g, '#')) {
          this.ctx.log.warn('connection sync: copies from a peer could not be injected', { peer: this.peer, failed: r.failed, error });
        }
        this.lastError = error;
      }
    } catch (err) {
      this.counts.failed += batch.length;
      this.lastError = err instanceof Error ? err.message : String(err);
      this.ctx.log.error('connection sync: injecting connections failed', { peer: this.peer, changes: batch.length, error: err });
    }
  }

  /**
   * Whether an entry holding the reply tuple of a copy being injected may go (the kernel keeps reply tuples
   * unique). Yes unless it is a connection of a group this director leads, which is live here: otherwise it
   * is a leftover (this director served the group before, stopped, and never saw the connection close) or an
   * older copy, and the leader, whose kernel cannot hold both, has the newer connection.
   */
  private mayEvict(holder: SyncedConnection): boolean {
    const group = this.ctx.groupOf(serviceKeyOfConnection(holder), holder.localAddress?.address ?? null);
    return group === null || !this.ctx.leads(group);
  }

  /** What this director holds of the starting snapshot's groups: the candidates for removal at its end. */
  private async readBefore(): Promise<void> {
    const snap = this.snapshot;
    if (snap === null) return;
    try {
      for (const f of await this.ctx.table.dump()) {
        const g = this.ctx.groupOf(serviceKeyOfConnection(f), f.localAddress?.address ?? null);
        if (g !== null && snap.groups.has(g) && !this.ctx.leads(g)) snap.before.set(connectionKey(f), f);
      }
    } catch (err) {
      this.lastError = `reading the connection table before a snapshot: ${err instanceof Error ? err.message : String(err)}`;
    }
  }

  /** Removes what this director held of the snapshot's groups that the snapshot did not name. */
  private async finishSnapshot(): Promise<void> {
    const snap = this.snapshot;
    this.snapshot = null;
    this.state = 'streaming';
    if (snap === null) return;
    const stale: ConnectionChange[] = [];
    for (const [key, f] of snap.before) {
      if (snap.keys.has(key)) continue;
      // A group this director claimed while the snapshot came (a slot moving back to it, a takeover): the
      // peer's copies of it were skipped, so the snapshot names none of them, and what it holds of the group
      // is its own live connections now. Removing them would break every one on its next packet.
      const group = this.ctx.groupOf(serviceKeyOfConnection(f), f.localAddress?.address ?? null);
      if (group !== null && this.ctx.leads(group)) continue;
      // By its binding, not its client tuple: since it was read, another peer's stream may have put a live copy
      // of the same client connection over it (a client port reused while this director held a leftover of
      // the port's earlier connection): that copy stays. (Seen: a scale-out's joining director lost the copy
      // of a slot it was about to take, and the stream broke when it took the slot.)
      stale.push({ op: 'remove-binding', connection: f });
    }
    if (stale.length > 0) await this.apply(stale);
    const now = Date.now();
    for (const g of snap.groups) this.caught.set(g, now);
    this.ctx.log.info('connection sync: caught up with peer', { peer: this.peer, groups: [...snap.groups], connections: snap.keys.size, staleRemoved: stale.length });
  }
}

/** A peer's remove as a change to the table: by the binding the peer removed when it says (see source.ts, removal). */
function removeChange(w: WireChange & { op: 'remove' }): ConnectionChange {
  if (w.binding === undefined) return { op: 'remove', connection: w.connection };
  // Field by field, as the upsert above: see withProxyState.
  const c = w.connection;
  return { op: 'remove-binding', connection: { protocol: c.protocol, client: c.client, vip: c.vip, realServer: w.binding.realServer, localAddress: w.binding.localAddress } };
}
