import { spawn, type ChildProcess } from 'node:child_process';
import { runCommand } from './exec.js';
import type { Topology } from './netns.js';

/** The routing table the mirror writes, and the id of its resilient group (its members get ids above it). */
export const MIRROR_TABLE = 100;
const GROUP_ID = 900;
const RULE_PREF = 100;
/**
 * A bucket unused this long may go to a member that has too few (the kernel's default is 120 s). The
 * lab's route grows one next hop at a time while the tier starts; with 120 s the first next hop would keep
 * most buckets for minutes. A bucket that carries a flow is used all the time, so it stays.
 */
const IDLE_TIMER_SEC = 1;

/**
 * The lab router's resilient mirror (issue 13). zebra (FRR 8.4) installs a multipath route as a
 * hash-threshold next-hop group: when a member goes, every flow is hashed again over the rest, so flows of
 * other members move too. A `type resilient` group keeps a table of buckets and moves only the buckets of
 * the member that went. zebra cannot install one, so this mirrors zebra's route for one prefix into table
 * MIRROR_TABLE through a resilient group of next hops of its own, again on every route or next-hop change
 * the kernel reports (`ip monitor`, no polling), and `use(true)` steers the traffic that comes in on the
 * client's interface to that table (an `ip rule`); `use(false)` leaves it to zebra's group.
 *
 * Lab equipment, not product: a router vendor's resilient hashing does this inside the router.
 */
export class ResilientMirror {
  private monitor: ChildProcess | null = null;
  private running: Promise<void> = Promise.resolve();
  private again = false;
  private busy = false;
  private stopped = false;
  /** gateway address -> the id of the mirror's own next hop through it (stable for the lab's life). */
  private readonly memberIds = new Map<string, number>();
  private lastError = '';
  /** The member list last written (gateway%dev ...); null before the first. */
  private written: string | null = null;

  private constructor(private readonly t: Topology, private readonly host: string, private readonly prefix: string,
    private readonly iif: string, private readonly buckets: number) {}

  /** Starts mirroring `prefix` (a host address) on `host`, for traffic arriving on `iif`. Resolves after the first sync. */
  static async start(t: Topology, host: string, prefix: string, opts: { iif: string; buckets?: number }): Promise<ResilientMirror> {
    const m = new ResilientMirror(t, host, prefix, opts.iif, opts.buckets ?? 64);
    m.monitor = spawn('ip', ['-n', t.ns(host), 'monitor', 'route', 'nexthop'], { stdio: ['ignore', 'pipe', 'ignore'] });
    m.monitor.stdout!.on('data', () => m.schedule());
    m.monitor.on('error', () => undefined);
    await m.sync();
    return m;
  }

  /** Mirrors zebra's route once more (and waits for it): what the monitor triggers on every change. */
  sync(): Promise<void> {
    this.schedule();
    return this.running;
  }

  /** Whether the client's traffic uses the resilient group (true) or zebra's hash-threshold group (false). */
  async use(resilient: boolean): Promise<void> {
    await this.ip(['rule', 'del', 'pref', String(RULE_PREF)], true);
    if (resilient) await this.ip(['rule', 'add', 'pref', String(RULE_PREF), 'iif', this.iif, 'lookup', String(MIRROR_TABLE)]);
  }

  /**
   * What the resilient group forwards over: its route and every bucket's next hop, one line. Equal
   * before and after a drill means no flow moved; `movedShare` compares two of these.
   */
  async describe(): Promise<string> {
    const route = (await this.ip(['route', 'show', 'exact', this.prefix, 'table', String(MIRROR_TABLE)], true)).replace(/\s+/g, ' ').trim();
    const buckets = await this.bucketMap();
    return `${route} buckets ${buckets.join(',')}`;
  }

  /** The next hop (its gateway) of each bucket, in bucket order; [] without a group. */
  async bucketMap(): Promise<string[]> {
    const out = await this.ip(['-j', 'nexthop', 'bucket', 'show', 'id', String(GROUP_ID)], true);
    if (out.trim() === '') return [];
    const gatewayOf = new Map([...this.memberIds].map(([gw, id]) => [id, gw]));
    const rows = JSON.parse(out) as Array<{ bucket?: { index: number; nhid: number } }>;
    const map: string[] = [];
    for (const r of rows) if (r.bucket) map[r.bucket.index] = gatewayOf.get(r.bucket.nhid) ?? `nhid ${r.bucket.nhid}`;
    return map;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.monitor?.kill();
    await this.running.catch(() => undefined);
    await this.use(false).catch(() => undefined);
  }

  /** Why the last sync failed ('' when it did not). */
  error(): string {
    return this.lastError;
  }

  private schedule(): void {
    if (this.stopped) return;
    if (this.busy) {
      this.again = true;
      return;
    }
    this.busy = true;
    this.running = (async () => {
      do {
        this.again = false;
        try {
          await this.mirror();
          this.lastError = '';
        } catch (e) {
          this.lastError = (e as Error).message;
          this.written = null; // write it all again at the next change
        }
      } while (this.again && !this.stopped);
      this.busy = false;
    })();
  }

  private async mirror(): Promise<void> {
    const fam = this.prefix.includes(':') ? '-6' : '-4';
    const raw = await this.ip(['-j', fam, 'route', 'show', 'exact', this.prefix], true);
    const routes = raw.trim() === '' ? [] : (JSON.parse(raw) as Array<{ gateway?: string; dev?: string; nexthops?: Array<{ gateway?: string; dev?: string }> }>);
    const hops = routes.flatMap((r) => r.nexthops ?? [{ gateway: r.gateway, dev: r.dev }])
      .filter((h): h is { gateway: string; dev: string } => typeof h.gateway === 'string' && typeof h.dev === 'string');
    // Only a change is written: every write is itself a change the monitor reports.
    const want = hops.map((h) => `${h.gateway}%${h.dev}`).join(' ');
    if (want === this.written) return;
    this.written = want;
    if (hops.length === 0) {
      await this.ip(['route', 'del', this.prefix, 'table', String(MIRROR_TABLE)], true);
      await this.ip(['nexthop', 'del', 'id', String(GROUP_ID)], true);
      return;
    }
    const ids: number[] = [];
    for (const h of hops) {
      let id = this.memberIds.get(h.gateway);
      if (id === undefined) this.memberIds.set(h.gateway, (id = GROUP_ID + 1 + this.memberIds.size));
      await this.ip(['nexthop', 'replace', 'id', String(id), 'via', h.gateway, 'dev', h.dev]);
      ids.push(id);
    }
    // Replacing a resilient group with another member list keeps the buckets of the members that stay.
    const exists = (await this.ip(['nexthop', 'show', 'id', String(GROUP_ID)], true)).trim() !== '';
    await this.ip(['nexthop', exists ? 'replace' : 'add', 'id', String(GROUP_ID), 'group', ids.join('/'),
      ...(exists ? [] : ['type', 'resilient', 'buckets', String(this.buckets), 'idle_timer', String(IDLE_TIMER_SEC)])]);
    await this.ip(['route', 'replace', this.prefix, 'nhid', String(GROUP_ID), 'table', String(MIRROR_TABLE)]);
  }

  private async ip(args: string[], allowFailure = false): Promise<string> {
    const res = await runCommand('ip', ['-n', this.t.ns(this.host), ...args], { allowFailure: true, timeoutMs: 5000 });
    if (res.code !== 0 && !allowFailure) throw new Error(`ip ${args.join(' ')}: ${res.stderr.trim()}`);
    return res.code === 0 ? res.stdout : '';
  }
}

/** The share of buckets whose next hop differs between two bucket maps (bucketMap), 0..1. */
export function movedShare(before: readonly string[], after: readonly string[]): number {
  if (before.length === 0) return after.length === 0 ? 0 : 1;
  let moved = 0;
  for (let i = 0; i < before.length; i++) if (before[i] !== after[i]) moved++;
  return moved / before.length;
}
