import type { SyncMessage, SyncReply__Output } from '@lbd/proto';
import { nanoid } from 'nanoid';
import type { Logger } from '@lbd/log';
import type { ConnectionSource, SourceChange, SourceListener } from './source.js';
import { FoldingQueue } from './churn.js';
import { LagWindow } from './lag-window.js';
import { toWireChange, type WireChange } from './wire.js';

/**
 * The leader's stream to one standby: Hello, a snapshot of every copied connection, then changes, each message
 * numbered. At most `windowMessages` are unacknowledged at a time, and a message of changes that is not full
 * goes only when none is (the peer's ack clocks it); changes wait behind them in a queue
 * that folds repeated changes to one connection into one, and that is thrown away for a fresh snapshot when it
 * outgrows `maxQueuedChanges` — so a slow or stuck peer costs bounded memory, never the leader's health.
 * A Resync from the peer, an ack that does not come within `ackTimeoutMs`, and a broken stream all end in
 * a new snapshot (on a new stream for the last two).
 */

export interface SenderLinkHandlers {
  reply(r: SyncReply__Output): void;
  /** The transport can take more after a write returned false. */
  drain(): void;
  closed(reason: string | null): void;
}

export interface SenderLink {
  /** False when the transport's buffer is full: wait for `drain`. */
  write(msg: SyncMessage): boolean;
  close(): void;
}

export type Dial = (peer: string, handlers: SenderLinkHandlers) => SenderLink;

export interface SenderOptions {
  readonly self: string;
  readonly peer: string;
  readonly source: ConnectionSource;
  readonly dial: Dial;
  readonly log: Logger;
  readonly windowMessages?: number;
  readonly changesPerMessage?: number;
  readonly maxQueuedChanges?: number;
  readonly ackTimeoutMs?: number;
  /**
   * Changes wait this long for company before a message goes out when none is unacknowledged (fewer, fuller
   * messages). The default, 2 ms, matches lbd-ctnl's own 2 ms event window: events already arrive in batches, so
   * waiting longer adds lag only. While one is unacknowledged, they wait for its ack instead.
   */
  readonly flushMs?: number;
  /** Fault injection for tests: may drop, delay or reorder outgoing messages. */
  readonly faults?: OutgoingFaults;
}

/** Test seam: decides the fate of each outgoing message. */
export interface OutgoingFaults {
  /** 'send', 'drop', or a number of milliseconds to hold the message back (others overtake it). */
  fate(msg: SyncMessage): 'send' | 'drop' | number;
}

export const SENDER_DEFAULTS = {
  windowMessages: 32, changesPerMessage: 512, maxQueuedChanges: 200_000, ackTimeoutMs: 10_000, flushMs: 2,
} as const;

const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 2000;

export type SenderState = 'connecting' | 'snapshot' | 'streaming' | 'down' | 'closed';

export interface SenderStatus {
  readonly peer: string;
  readonly state: SenderState;
  readonly session: string;
  /** The peer has acknowledged a whole snapshot and nothing since is waiting. */
  readonly caughtUp: boolean;
  readonly sentSeq: number;
  readonly ackedSeq: number;
  readonly queued: number;
  readonly connectionsSent: number;
  /** Connections that began and ended while their first copy waited in the queue: neither was sent. */
  readonly endedUnsent: number;
  readonly snapshots: number;
  readonly resyncs: number;
  readonly overflows: number;
  readonly injected: number;
  readonly failed: number;
  /** Kernel event on this director to the peer's acknowledgement, over the messages acknowledged in the last LAG_WINDOW_MS (ms; 0 with none). */
  readonly lagP50Ms: number;
  readonly lagP99Ms: number;
  readonly lastError: string;
  readonly lastSnapshotReason: string;
}

interface InFlight {
  readonly seq: number;
  /** Oldest kernel event behind the message (performance.now()), for the lag. */
  readonly oldestEventAt: number | null;
}

export class SyncSender implements SourceListener {
  private readonly o: Required<Omit<SenderOptions, 'faults'>> & { faults?: OutgoingFaults };
  private link: SenderLink | null = null;
  private state: SenderState = 'connecting';
  private session = '';
  private seq = 0;
  private acked = 0;
  private readonly inFlight: InFlight[] = [];
  private readonly queue = new FoldingQueue<SourceChange>();
  private needSnapshot: string | null = null;
  private snapshotRest: WireChange[] | null = null;
  private snapshotEndSeq = 0;
  private writable = true;
  private flushTimer: ReturnType<typeof setTimeout> | undefined;
  private ackTimer: ReturnType<typeof setTimeout> | undefined;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private retryMs = RETRY_MIN_MS;
  /** The failure last logged; null once the stream has worked since. */
  private reportedError: string | null = null;
  private unsubscribe: (() => void) | undefined;
  private readonly lags = new LagWindow();
  private counters = { connectionsSent: 0, endedUnsent: 0, snapshots: 0, resyncs: 0, overflows: 0, injected: 0, failed: 0 };
  private lastError = '';
  private lastSnapshotReason = '';
  private closed = false;

  constructor(opts: SenderOptions) {
    this.o = { ...SENDER_DEFAULTS, ...opts };
  }

  start(): void {
    this.unsubscribe = this.o.source.subscribe(this);
    this.connect();
  }

  close(): void {
    this.closed = true;
    this.state = 'closed';
    this.unsubscribe?.();
    for (const t of [this.flushTimer, this.ackTimer, this.retryTimer]) if (t !== undefined) clearTimeout(t);
    this.link?.close();
    this.link = null;
  }

  status(): SenderStatus {
    const lag = this.lags.quantiles(performance.now());
    return {
      peer: this.o.peer, state: this.state, session: this.session, caughtUp: this.caughtUp(), sentSeq: this.seq, ackedSeq: this.acked,
      queued: this.queue.size, ...this.counters, lagP50Ms: lag.p50, lagP99Ms: lag.p99, lastError: this.lastError,
      lastSnapshotReason: this.lastSnapshotReason,
    };
  }

  /** Caught up, and every message sent so far acknowledged: nothing is on its way. */
  drained(): boolean {
    return this.caughtUp() && this.acked === this.seq && this.flushTimer === undefined;
  }

  caughtUp(): boolean {
    return this.state === 'streaming' && this.needSnapshot === null && this.snapshotRest === null && this.snapshotEndSeq > 0
      && this.acked >= this.snapshotEndSeq && this.queue.size === 0;
  }

  // ---- SourceListener -------------------------------------------------------------------------------

  changes(changes: readonly SourceChange[]): void {
    // Before the snapshot is taken, what changed is in it anyway.
    if (this.link === null || this.needSnapshot !== null) return;
    // A connection's change replaces the one queued for it, in its place (changes of different connections are
    // independent), keeping its time: the lag of a folded change is that of its oldest part.
    for (const c of changes) if (!this.queue.put(c.key, c, foldChange)) this.counters.endedUnsent++;
    if (this.queue.size > this.o.maxQueuedChanges) {
      this.counters.overflows++;
      this.queue.clear();
      this.requestSnapshot(`queue over ${this.o.maxQueuedChanges} changes (peer too slow)`);
      return;
    }
    this.scheduleFlush();
  }

  resnapshot(reason: string): void {
    if (this.link === null) return;
    this.requestSnapshot(reason);
  }

  // ---- the stream -----------------------------------------------------------------------------------

  private connect(): void {
    if (this.closed) return;
    this.state = 'connecting';
    this.session = nanoid(10);
    this.seq = 0;
    this.acked = 0;
    this.inFlight.length = 0;
    this.queue.clear();
    this.snapshotRest = null;
    this.snapshotEndSeq = 0;
    this.writable = true;
    const session = this.session;
    const guard = <A extends unknown[]>(fn: (...a: A) => void) => (...a: A): void => { if (this.session === session && !this.closed) fn(...a); };
    this.link = this.o.dial(this.o.peer, {
      reply: guard((r) => this.onReply(r)),
      drain: guard(() => { this.writable = true; this.pump(); }),
      closed: guard((reason) => this.onClosed(reason)),
    });
    this.send({ hello: { from: this.o.self, session, groups: this.o.source.groups() } }, null);
    this.requestSnapshot(this.counters.snapshots === 0 ? 'first' : `reconnected${this.lastError ? ` after: ${this.lastError}` : ''}`);
  }

  private onClosed(reason: string | null): void {
    this.link = null;
    if (this.closed) return;
    this.state = 'down';
    this.lastError = reason ?? 'stream ended';
    // A peer that stays away (a director not started yet) fails every retry alike: that is said once, and
    // again only when the stream has worked in between or fails differently (status shows the last error).
    if (this.lastError !== this.reportedError) {
      this.o.log.warn('connection sync: stream to peer ended; retrying', { peer: this.o.peer, reason: this.lastError, retryInMs: this.retryMs });
      this.reportedError = this.lastError;
    }
    this.clearTimers();
    this.retryTimer = setTimeout(() => this.connect(), this.retryMs);
    this.retryMs = Math.min(RETRY_MAX_MS, this.retryMs * 2);
  }

  private restart(reason: string): void {
    this.lastError = reason;
    const link = this.link;
    this.link = null;
    // A new session id first: the old link's late callbacks are then ignored.
    this.session = '';
    link?.close();
    this.onClosed(reason);
  }

  private onReply(r: SyncReply__Output): void {
    if (r.ack) {
      const seq = Number(r.ack.seq);
      if (seq > this.acked && seq <= this.seq) {
        this.acked = seq;
        this.counters.injected = Number(r.ack.injected);
        this.counters.failed = Number(r.ack.failed);
        const now = performance.now();
        while (this.inFlight.length > 0 && this.inFlight[0]!.seq <= seq) {
          const m = this.inFlight.shift()!;
          if (m.oldestEventAt !== null) this.lags.add(now, now - m.oldestEventAt);
        }
        this.retryMs = RETRY_MIN_MS;
        this.reportedError = null;
        if (this.caughtUp() && this.state === 'streaming' && this.acked === this.snapshotEndSeq) {
          this.o.log.info('connection sync: peer caught up', { peer: this.o.peer, session: this.session, connections: this.counters.connectionsSent });
          // What went wrong before this stream is history now: status shows errors that still matter.
          this.lastError = '';
        }
        this.armAckTimer();
        this.pump();
      }
    } else if (r.resync) {
      this.counters.resyncs++;
      this.o.log.warn('connection sync: peer asks for a resync', { peer: this.o.peer, expected: Number(r.resync.expected), reason: r.resync.reason });
      this.queue.clear();
      this.requestSnapshot(`resync: ${r.resync.reason}`);
    }
  }

  private requestSnapshot(reason: string): void {
    this.needSnapshot = reason;
    this.snapshotRest = null;
    this.queue.clear();
    this.pump();
  }

  private scheduleFlush(): void {
    if (this.flushTimer !== undefined) return;
    this.flushTimer = setTimeout(() => { this.flushTimer = undefined; this.pump(); }, this.o.flushMs);
  }

  /** Sends what the window allows: a pending snapshot first, then queued changes. */
  private pump(): void {
    while (this.link !== null && this.writable && this.inFlight.length < this.o.windowMessages) {
      if (this.needSnapshot !== null) {
        const reason = this.needSnapshot;
        this.needSnapshot = null;
        const connections = this.o.source.snapshot();
        this.snapshotRest = connections.map((f) => ({ op: 'upsert', connection: f.connection }));
        this.counters.snapshots++;
        this.lastSnapshotReason = reason;
        this.state = 'snapshot';
        this.snapshotEndSeq = 0;
        this.send({ snapshotBegin: { groups: this.o.source.groups(), connections: connections.length, reason } }, null);
        continue;
      }
      if (this.snapshotRest !== null) {
        if (this.snapshotRest.length > 0) {
          const part = this.snapshotRest.splice(0, this.o.changesPerMessage);
          this.counters.connectionsSent += part.length;
          this.send({ changes: { changes: part.map(toWireChange) } }, null);
          continue;
        }
        this.snapshotRest = null;
        this.send({ snapshotEnd: {} }, null);
        this.snapshotEndSeq = this.seq;
        this.state = 'streaming';
        continue;
      }
      if (this.queue.size === 0) break;
      // While a message is unacknowledged, changes wait for its ack unless a full message's worth is queued: the
      // peer's acks clock the stream (as Nagle's algorithm does TCP's), so a busy peer gets fewer, fuller messages.
      // Each message costs both ends about as much as tens of changes in it (gRPC, TLS, an ack, a kernel batch on the
      // peer), and the peer would not apply this one before the one in flight anyway.
      if (this.inFlight.length > 0 && this.queue.size < this.o.changesPerMessage) break;
      const part = this.queue.take(this.o.changesPerMessage);
      let oldest = Infinity;
      for (const c of part) oldest = Math.min(oldest, c.seenAtMs);
      this.counters.connectionsSent += part.length;
      this.send({ changes: { changes: part.map((c) => toWireChange(c.change)) } }, oldest);
    }
  }

  private send(body: Omit<SyncMessage, 'seq'>, oldestEventAt: number | null): void {
    const link = this.link;
    if (link === null) return;
    const msg: SyncMessage = { seq: ++this.seq, ...body };
    this.inFlight.push({ seq: msg.seq as number, oldestEventAt });
    this.armAckTimer();
    const fate = this.o.faults?.fate(msg) ?? 'send';
    if (fate === 'drop') return;
    if (typeof fate === 'number') {
      setTimeout(() => { if (this.link === link) link.write(msg); }, fate);
      return;
    }
    if (!link.write(msg)) this.writable = false;
  }

  private armAckTimer(): void {
    if (this.ackTimer !== undefined) clearTimeout(this.ackTimer);
    this.ackTimer = undefined;
    if (this.inFlight.length === 0) return;
    this.ackTimer = setTimeout(() => {
      this.o.log.warn('connection sync: no acknowledgement from peer; starting a new stream', { peer: this.o.peer, waitedMs: this.o.ackTimeoutMs, seq: this.seq, acked: this.acked });
      this.restart(`no acknowledgement for ${this.o.ackTimeoutMs} ms`);
    }, this.o.ackTimeoutMs);
  }

  private clearTimers(): void {
    for (const t of [this.flushTimer, this.ackTimer, this.retryTimer]) if (t !== undefined) clearTimeout(t);
    this.flushTimer = this.ackTimer = this.retryTimer = undefined;
  }
}

/**
 * A connection's change put where one is queued for it already. A first copy (the peer cannot hold the connection)
 * and then its remove: neither goes, the connection began and ended between two messages, and would have been an
 * insert and a delete in the peer's kernel for nothing. It matters when a peer falls behind: the longer its queue,
 * the more short connections end in it. A first copy whose binding changed before it went is still a first copy.
 */
function foldChange(queued: SourceChange, c: SourceChange): SourceChange | null {
  if (queued.first === true && c.change.op === 'remove') return null;
  const first = queued.first === true && c.change.op === 'upsert';
  return { key: c.key, change: c.change, seenAtMs: queued.seenAtMs, ...(first ? { first: true } : {}) };
}
