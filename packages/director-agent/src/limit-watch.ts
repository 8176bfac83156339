import { serviceKey, type Config } from '@lbd/config';
import type { Clock } from '@lbd/health-checker';
import type { Logger } from '@lbd/log';
import type { EventLog } from './events.js';

/**
 * Says when a service's connection limit bites and when it stops: the event log's `limit` events, the
 * transition an operator pages on ("web's 5000 connections are full: new ones are dropped"), where the
 * counter lbd_service_limit_drops_total says how much. The kernel counts the drops (limit_stats); this reads
 * them every `intervalMs` while some service has a limit, and records `under` → `reached` when they grow, and
 * `reached` → `under` once they have not grown for `quietMs`. Nothing here acts on traffic: a late timer
 * only makes an event late.
 */

export interface LimitWatchOptions {
  /** Packets each limited service's limit dropped, by service key (DataPlane.limitDrops). */
  readonly drops: () => Promise<ReadonlyMap<string, number>>;
  readonly config: () => Config;
  readonly events: EventLog;
  readonly clock: Clock;
  readonly log: Logger;
  /** How often the drop counters are read (default 5 s). */
  readonly intervalMs?: number;
  /** How long without a new drop before the limit counts as no longer reached (default 60 s). */
  readonly quietMs?: number;
}

interface Tracked {
  /** The kernel's count at the last reading. */
  drops: number;
  /** Since when drops have been growing (the `reached` event's time), or null while under. */
  reachedAt: number | null;
  /** The drops counted at `reachedAt`: what the `under` event reports as dropped meanwhile. */
  dropsAtReached: number;
  lastGrowthAt: number;
}

export class LimitWatch {
  private readonly intervalMs: number;
  private readonly quietMs: number;
  private readonly tracked = new Map<string, Tracked>();
  private timer: ReturnType<Clock['setTimeout']> | null = null;
  private stopped = false;

  constructor(private readonly o: LimitWatchOptions) {
    this.intervalMs = o.intervalMs ?? 5_000;
    this.quietMs = o.quietMs ?? 60_000;
  }

  start(): void {
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) this.o.clock.clearTimeout(this.timer);
    this.timer = null;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.o.clock.setTimeout(() => {
      this.timer = null;
      this.check().catch((e: unknown) => this.o.log.warn('limit watch: reading the drop counters failed', { err: e instanceof Error ? e.message : String(e) }))
        .finally(() => this.schedule());
    }, this.intervalMs);
  }

  /** One reading: compares each limited service's drops with the last, and records what changed. */
  async check(): Promise<void> {
    const limits = new Map(this.o.config().services.filter((s) => s.connectionLimit !== null).map((s) => [serviceKey(s), s]));
    for (const key of this.tracked.keys()) if (!limits.has(key)) this.tracked.delete(key);
    if (limits.size === 0) return;
    const read = await this.o.drops();
    const now = this.o.clock.now();
    for (const [key, svc] of limits) {
      const drops = read.get(key);
      // Not in the kernel's counters yet: nothing dropped since the limit was set (the set gains an element on the first drop).
      if (drops === undefined) {
        if (!this.tracked.has(key)) this.tracked.set(key, { drops: 0, reachedAt: null, dropsAtReached: 0, lastGrowthAt: now });
        continue;
      }
      const t = this.tracked.get(key);
      // The first reading (or one after the table was rebuilt, which restarts the counter) is a baseline.
      if (t === undefined || drops < t.drops) {
        this.tracked.set(key, { drops, reachedAt: null, dropsAtReached: drops, lastGrowthAt: now });
        continue;
      }
      const name = svc.name;
      if (drops > t.drops) {
        t.lastGrowthAt = now;
        if (t.reachedAt === null) {
          t.reachedAt = now;
          t.dropsAtReached = t.drops;
          this.o.events.record('limit', key, 'under', 'reached',
            `${name} holds its connection limit of ${svc.connectionLimit}: new connections are dropped (${drops - t.drops} packets in the last ${Math.round(this.intervalMs / 1000)} s)`,
            { service: key, name, limit: svc.connectionLimit!, dropped: drops - t.drops });
        }
      } else if (t.reachedAt !== null && now - t.lastGrowthAt >= this.quietMs) {
        this.o.events.record('limit', key, 'reached', 'under',
          `${name} is under its connection limit of ${svc.connectionLimit} again: no drop for ${Math.round(this.quietMs / 1000)} s (${drops - t.dropsAtReached} packets dropped in ${Math.round((t.lastGrowthAt - t.reachedAt) / 1000)} s)`,
          { service: key, name, limit: svc.connectionLimit!, dropped: drops - t.dropsAtReached });
        t.reachedAt = null;
      }
      t.drops = drops;
    }
  }
}
