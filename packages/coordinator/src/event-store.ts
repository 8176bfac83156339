import { isStoredEvent, type StoredEvent } from '@lbd/config';
import type { Logger } from '@lbd/log';
import { EtcdKv, type EtcdTlsMaterial } from './kv.js';
import { parseJson } from './records.js';

/**
 * The cluster's event history in etcd: each director appends its own events (transitions with their
 * reasons, see the agent's event log) under `<prefix>/events/<director>/<id>`, and trims its own to the
 * newest `keep`, so etcd stays small whatever happens. Ids start with the 13-digit unix ms, so a key range
 * is a time range and key order is time order within a director.
 *
 * Appending never waits for etcd: events go into a bounded queue that one writer drains in batches (one
 * transaction each, gathered over 50 ms). While etcd cannot be written the writer retries with a backoff and the queue keeps
 * the newest events (the oldest are dropped and counted); the outage is logged once when it starts and
 * once when it ends, not per event. The store has its own etcd connection, so a long history read or a
 * stuck write never delays an election's beat, and its failures never trip the elections' circuit breaker.
 */

/** What the store logs with: the agent's logger fits. */
export type EventStoreLog = Pick<Logger, 'info' | 'warn'>;

export interface EventStoreOptions {
  readonly endpoints: readonly string[];
  readonly etcdTls?: EtcdTlsMaterial | null;
  readonly prefix: string;
  /** This director: it writes and trims only `<prefix>/events/<director>/`. */
  readonly director: string;
  /** Events kept per director in etcd (default 5000). */
  readonly keep?: number;
  /** Events waiting to be written (default 1000); beyond it the oldest waiting are dropped. */
  readonly maxQueued?: number;
  /** Deadline of one etcd call (default 2000 ms). */
  readonly callTimeoutMs?: number;
  readonly log?: EventStoreLog;
}

export interface EventStoreStats {
  readonly written: number;
  /** Write attempts that failed (each batch counts once per attempt). */
  readonly failures: number;
  /** Events dropped from a full queue (never written). */
  readonly dropped: number;
  readonly queued: number;
  /** Whether the last write failed. */
  readonly failing: boolean;
  readonly trimmed: number;
}

export const DEFAULT_EVENTS_KEPT = 5000;
const DEFAULT_MAX_QUEUED = 1000;
/** Events per etcd transaction: well under etcd's default of 128 operations. */
const BATCH = 64;
/** Trim after this many writes (and at the first), so a director's count overshoots `keep` by at most this. */
const TRIM_EVERY = 100;
/** How long the writer waits for more events before writing a batch. */
const COALESCE_MS = 50;
const RETRY_MIN_MS = 200;
const RETRY_MAX_MS = 10_000;

/** The first key after every key that starts with `prefix` (prefixes here are ASCII). */
function prefixEnd(prefix: string): string {
  return prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
}

export class EventStore {
  private readonly kv: EtcdKv;
  private readonly root: string;
  private readonly own: string;
  private readonly keep: number;
  private readonly maxQueued: number;
  private readonly callTimeoutMs: number;
  private readonly log: EventStoreLog | undefined;
  private readonly queue: StoredEvent[] = [];
  private writing: Promise<void> | null = null;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private retryMs = RETRY_MIN_MS;
  private sinceTrim = TRIM_EVERY;
  private closed = false;
  private counts = { written: 0, failures: 0, dropped: 0, trimmed: 0 };
  private failing = false;
  private outageFirstError = '';

  constructor(o: EventStoreOptions) {
    if (o.director === '' || o.director.includes('/')) throw new Error(`EventStore: director "${o.director}" must be non-empty, without "/"`);
    this.callTimeoutMs = o.callTimeoutMs ?? 2000;
    this.kv = new EtcdKv(o.endpoints, this.callTimeoutMs, { tls: o.etcdTls ?? null });
    this.root = `${o.prefix.replace(/\/+$/, '')}/events/`;
    this.own = `${this.root}${o.director}/`;
    this.keep = Math.max(1, o.keep ?? DEFAULT_EVENTS_KEPT);
    this.maxQueued = Math.max(1, o.maxQueued ?? DEFAULT_MAX_QUEUED);
    this.log = o.log;
  }

  /** Queues `e` for etcd and returns at once. */
  append(e: StoredEvent): void {
    if (this.closed) return;
    this.queue.push(e);
    if (this.queue.length > this.maxQueued) {
      const n = this.queue.length - this.maxQueued;
      this.queue.splice(0, n);
      this.counts.dropped += n;
    }
    this.kick();
  }

  stats(): EventStoreStats {
    return { ...this.counts, queued: this.queue.length, failing: this.failing };
  }

  /**
   * The cluster's events at or after `sinceUnixMs`: the newest `limit` of each director, merged by time
   * (oldest first, at most `limit` in all), read at one etcd revision, which is returned for `watch`.
   */
  async list(sinceUnixMs: number, limit: number): Promise<{ events: StoredEvent[]; revision: string }> {
    const deadline = (): number => Date.now() + this.callTimeoutMs * 2;
    const end = prefixEnd(this.root);
    // The directors that have events: one tiny read per director, skipping over each one's keys.
    const directors: string[] = [];
    let revision: string | undefined;
    for (let cursor = this.root; ;) {
      const r = await this.kv.range(cursor, end, { deadline: deadline(), limit: 1, ...(revision === undefined ? {} : { revision }) });
      revision ??= r.revision;
      const key = r.entries[0]?.key;
      if (key === undefined) break;
      const d = key.slice(this.root.length).split('/')[0]!;
      directors.push(d);
      cursor = prefixEnd(`${this.root}${d}/`);
    }
    if (revision === undefined) throw new Error('etcd answered without a revision');
    const from = String(Math.max(0, Math.floor(sinceUnixMs))).padStart(13, '0');
    const out: StoredEvent[] = [];
    for (const d of directors) {
      const dp = `${this.root}${d}/`;
      const r = await this.kv.range(`${dp}${from}`, prefixEnd(dp), { deadline: deadline(), descending: true, limit, revision });
      for (const kv of r.entries) {
        const e = parseJson<StoredEvent>(kv.value, isStoredEvent);
        if (e !== null && e.timeUnixMs >= sinceUnixMs) out.push(e);
      }
    }
    out.sort(byTime);
    return { events: out.slice(-limit), revision };
  }

  /**
   * Calls `onEvent` with every event any director appends after etcd revision `afterRevision` (from
   * `list`, so nothing falls between the two). Returns the stop function. `onError`: the watch failed
   * for good (etcd3 reconnects by itself otherwise).
   */
  async watch(afterRevision: string, onEvent: (e: StoredEvent) => void, onError: (err: Error) => void): Promise<() => Promise<void>> {
    const w = await this.kv.watchPrefixAfter(this.root, afterRevision, {
      put: (kv) => {
        const e = parseJson<StoredEvent>(kv.value, isStoredEvent);
        if (e !== null) onEvent(e);
      },
      error: (err) => onError(err as Error),
    });
    return async () => { await w.cancel().catch(() => { /* a watch on a lost connection has nothing left to stop */ }); };
  }

  /** Writes what is queued (waiting at most `flushMs`), then closes the connection. */
  async close(flushMs = 500): Promise<void> {
    if (this.closed) return;
    if (this.retryTimer !== undefined) { clearTimeout(this.retryTimer); this.retryTimer = undefined; }
    const flushed = (async () => {
      while (this.queue.length > 0 || this.writing !== null) {
        if (this.writing === null) this.kick(true);
        await this.writing;
        if (this.failing) return;
      }
    })();
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([flushed, new Promise((r) => { timer = setTimeout(r, flushMs); })]);
    clearTimeout(timer);
    this.closed = true;
    this.kv.close();
  }

  private kick(force = false): void {
    if (this.writing !== null || this.queue.length === 0 || this.closed) return;
    if (this.retryTimer !== undefined && !force) return;
    // A burst of transitions (a claim is an event per address) becomes one etcd write: elections share etcd's raft log.
    const settle = force ? Promise.resolve() : new Promise((r) => setTimeout(r, COALESCE_MS));
    this.writing = settle.then(() => this.writeSome()).finally(() => {
      this.writing = null;
      if (!this.failing) this.kick();
    });
  }

  private async writeSome(): Promise<void> {
    const batch = this.queue.slice(0, BATCH);
    try {
      await this.kv.putAll(batch.map((e) => ({ key: `${this.own}${e.id}`, value: JSON.stringify(e) })), Date.now() + this.callTimeoutMs);
    } catch (err) {
      this.counts.failures++;
      if (!this.failing) {
        this.failing = true;
        this.outageFirstError = (err as Error).message;
        this.log?.warn('event history: cannot write to etcd; events stay in the local log and are retried', {
          error: this.outageFirstError, queued: this.queue.length, maxQueued: this.maxQueued,
        });
      }
      if (!this.closed) {
        this.retryTimer = setTimeout(() => { this.retryTimer = undefined; this.kick(); }, this.retryMs);
        this.retryMs = Math.min(RETRY_MAX_MS, this.retryMs * 2);
      }
      return;
    }
    // The queue may have dropped from its front meanwhile: remove exactly what was written.
    for (const e of batch) {
      const i = this.queue.indexOf(e);
      if (i >= 0) this.queue.splice(i, 1);
    }
    this.counts.written += batch.length;
    this.retryMs = RETRY_MIN_MS;
    if (this.failing) {
      this.failing = false;
      this.log?.info('event history: writing to etcd again', {
        failedAttempts: this.counts.failures, droppedSoFar: this.counts.dropped, firstError: this.outageFirstError,
      });
    }
    this.sinceTrim += batch.length;
    if (this.sinceTrim >= TRIM_EVERY) {
      this.sinceTrim = 0;
      await this.trim().catch(() => { this.sinceTrim = TRIM_EVERY; });
    }
  }

  /** Deletes this director's oldest events beyond `keep`. */
  private async trim(): Promise<void> {
    const deadline = Date.now() + this.callTimeoutMs;
    const count = await this.kv.count(this.own, deadline);
    const excess = count - this.keep;
    if (excess <= 0) return;
    const keys = await this.kv.firstKeys(this.own, excess, deadline);
    const last = keys[keys.length - 1];
    if (last === undefined) return;
    // One range delete: from the first key of this director up to and including the last excess one.
    await this.kv.deleteRange(this.own, `${last}\0`, deadline);
    this.counts.trimmed += keys.length;
  }
}

/** Oldest first; events of the same millisecond in id order. */
export function byTime(a: StoredEvent, b: StoredEvent): number {
  return a.timeUnixMs - b.timeUnixMs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}
