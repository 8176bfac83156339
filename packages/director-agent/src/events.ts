import { hostPort, serviceKey, type Service } from '@lbd/config';
import type { EventKind, LbdEvent } from '@lbd/config';
import type { EventSource } from '@lbd/operator-surfaces';

/**
 * The event log: every transition of this director with its reason (LbdEvent, @lbd/operator-surfaces), the answer
 * to "why am I backup?" and "why did rs2 leave?". A bounded history in memory (the oldest go first) and
 * subscribers: the admin API's ListEvents, the dashboard, and in a cluster the etcd store, which keeps the
 * cluster's history (@lbd/coordinator EventStore).
 *
 * Ids sort by time: `<13-digit unix ms>-<director>-<6-digit sequence>`. The log's clock never runs
 * backwards (a wall clock stepped back keeps the last time), so ids sort in the order events were
 * recorded, here and in etcd, whose keys are the ids.
 */

export const DEFAULT_EVENT_HISTORY = 2000;
/** The sequence is six digits: it wraps, and with the millisecond before it the id stays unique. */
const SEQ_MODULO = 1_000_000;
/** Reasons and field values are for people: a runaway one (a 4 MiB problem list) is cut. */
const MAX_TEXT_CHARS = 2000;

export interface EventLogOptions {
  /** This director's name: its cluster id, or the host name when alone. */
  readonly director: string;
  /** Events kept (default 2000). */
  readonly limit?: number;
  /** Wall clock, unix ms (default Date.now). */
  readonly now?: () => number;
  /** Told when a subscriber throws (the log goes on). */
  readonly onSubscriberError?: (err: unknown) => void;
}

export class EventLog implements EventSource {
  readonly director: string;
  private readonly limit: number;
  private readonly now: () => number;
  private readonly onSubscriberError: (err: unknown) => void;
  /** Oldest first; trimmed in chunks, so a full log does not shift the whole array on every event. */
  private events: LbdEvent[] = [];
  private readonly subscribers = new Set<(e: LbdEvent) => void>();
  private seq = 0;
  private lastMs = 0;
  private recordedCount = 0;

  constructor(opts: EventLogOptions) {
    if (opts.director === '' || /[/\s]/.test(opts.director)) {
      // A wiring mistake: the director is part of every id and of the etcd key.
      throw new Error(`EventLog: director "${opts.director}" must be non-empty, without "/" or spaces`);
    }
    this.director = opts.director;
    this.limit = Math.max(1, Math.floor(opts.limit ?? DEFAULT_EVENT_HISTORY));
    this.now = opts.now ?? Date.now;
    this.onSubscriberError = opts.onSubscriberError ?? (() => undefined);
  }

  /** Records one transition and tells every subscriber. Never throws for a subscriber's failure. */
  record(kind: EventKind, subject: string, from: string, to: string, reason: string, fields: Readonly<Record<string, string | number | boolean>> = {}): LbdEvent {
    const ms = Math.max(Math.floor(this.now()), this.lastMs);
    this.lastMs = ms;
    this.seq = (this.seq + 1) % SEQ_MODULO;
    const f: Record<string, string> = {};
    for (const [k, v] of Object.entries(fields)) f[k] = clip(String(v));
    const e: LbdEvent = {
      id: eventId(ms, this.director, this.seq), timeUnixMs: ms, director: this.director, kind, subject: clip(subject),
      from: clip(from), to: clip(to), reason: clip(reason), fields: f,
    };
    this.events.push(e);
    this.recordedCount++;
    // Trim by a tenth of the limit at a time: amortised O(1) per event, never more than 110 % kept.
    if (this.events.length > this.limit + Math.max(1, Math.floor(this.limit / 10))) this.events = this.events.slice(-this.limit);
    for (const fn of [...this.subscribers]) {
      try {
        fn(e);
      } catch (err) {
        this.onSubscriberError(err);
      }
    }
    return e;
  }

  /** Kept events at or after `sinceUnixMs`, oldest first (at most the limit). */
  recent(sinceUnixMs: number): LbdEvent[] {
    const kept = this.events.length > this.limit ? this.events.slice(-this.limit) : this.events;
    // Times never decrease: find the first one at or after `since` by binary search.
    let lo = 0;
    let hi = kept.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (kept[mid]!.timeUnixMs < sinceUnixMs) lo = mid + 1;
      else hi = mid;
    }
    return kept.slice(lo);
  }

  subscribe(fn: (e: LbdEvent) => void): () => void {
    this.subscribers.add(fn);
    return () => { this.subscribers.delete(fn); };
  }

  /** Events recorded since the start (kept or not). */
  get recorded(): number {
    return this.recordedCount;
  }

  get subscriberCount(): number {
    return this.subscribers.size;
  }
}

export function eventId(ms: number, director: string, seq: number): string {
  return `${String(ms).padStart(13, '0')}-${director}-${String(seq).padStart(6, '0')}`;
}

function clip(s: string): string {
  return s.length <= MAX_TEXT_CHARS ? s : `${s.slice(0, MAX_TEXT_CHARS - 1)}…`;
}

/** How many changes a summary names before it says "and N more". */
const SUMMARY_ITEMS = 8;

/**
 * What a new config changes, in words, for the config event's reason: services added (+), removed (-) and
 * changed (~, with their real servers added, removed or reweighted, and the other fields changed), e.g.
 * `+dns; ~web (198.19.1.12:8080 weight 2 -> 0; scheduler)`. '' when no service changed.
 */
export function summarizeServiceChanges(before: readonly Service[], after: readonly Service[]): string {
  const old = new Map(before.map((s) => [serviceKey(s), s]));
  const now = new Map(after.map((s) => [serviceKey(s), s]));
  const items: string[] = [];
  for (const [key, s] of now) if (!old.has(key)) items.push(`+${s.name || key}`);
  for (const [key, s] of old) if (!now.has(key)) items.push(`-${s.name || key}`);
  for (const [key, s] of now) {
    const o = old.get(key);
    if (o === undefined || JSON.stringify(o) === JSON.stringify(s)) continue;
    items.push(`~${s.name || key} (${serviceDiff(o, s)})`);
  }
  if (items.length <= SUMMARY_ITEMS) return items.join('; ');
  return `${items.slice(0, SUMMARY_ITEMS).join('; ')}; and ${items.length - SUMMARY_ITEMS} more`;
}

function serviceDiff(a: Service, b: Service): string {
  const parts: string[] = [];
  const rsOf = (s: Service) => new Map(s.realServers.map((r) => [hostPort(r.address, r.port), r]));
  const ra = rsOf(a);
  const rb = rsOf(b);
  for (const [hp, r] of rb) {
    const o = ra.get(hp);
    if (o === undefined) parts.push(`+${hp}`);
    else if (o.weight !== r.weight) parts.push(`${hp} weight ${o.weight} -> ${r.weight}`);
    else if (JSON.stringify(o) !== JSON.stringify(r)) parts.push(`${hp} changed`);
  }
  for (const hp of ra.keys()) if (!rb.has(hp)) parts.push(`-${hp}`);
  const fields = new Set([...Object.keys(a), ...Object.keys(b)]);
  fields.delete('realServers');
  for (const f of [...fields].sort()) {
    if (JSON.stringify((a as unknown as Record<string, unknown>)[f]) !== JSON.stringify((b as unknown as Record<string, unknown>)[f])) parts.push(f);
  }
  return parts.join(', ');
}

