import type { Clock, TimerHandle } from '@lbd/clock';
import { checkSwapItems, type Entry, type Kv, type KvLease, type KvProbe, type KvWatch, type SwapItem, type SwapResult, type WatchHandlers } from '../kv.js';

/**
 * An in-memory etcd for tests, on an injected (fake) clock: one store with etcd's revisions (one per write
 * transaction; entries carry their mod revision), compare-and-swap, watches that deliver puts and deletes in
 * revision order, leases with keep-alive, and faults. `new MemoryKv(clock)` is a store and a first client of
 * it; `connect()` adds a client (one per director), each with a link of its own that can fail:
 *
 *   unreachable  calls fail (at once, or at their deadline on the clock); nothing lands; watches hear
 *                nothing until the link heals, then report `connected` and every event they missed, in order
 *   slow         every call lands and answers `ms` later; a call whose deadline is shorter fails at its
 *                deadline, and its write still lands at `ms` (as etcd applies a proposal its caller gave up on)
 *   held         the client's process is frozen: its calls land at once, but it hears no answer and no watch
 *                event until the fault is cleared (then all of them, in order)
 *   writes-stalled  reads answer, writes wait (etcd's raft log not moving while its leader still answers
 *                reads): a write lands and answers when the fault is cleared, or fails at its deadline and
 *                still lands then (a store fault: every client's writes wait in one queue)
 *
 * A fault set on the store (`setStoreFault`) is every client's: a frozen or slow etcd. `loseAnswers(n)`
 * makes the client's next n writes land with their answers lost (they fail at their deadline);
 * `delayWrites(n, ms)` makes them land and answer `ms` later (a lost packet, retransmitted: the calls after
 * them travel apart, as on another member's connection).
 * Not a model of etcd's raft or of its client's retries: a link is up, slow, held or down, and calls see the
 * state their link is in when they start.
 */
export type KvFault =
  | { readonly kind: 'unreachable'; readonly fail?: 'at-deadline' | 'at-once' }
  | { readonly kind: 'slow'; readonly ms: number }
  | { readonly kind: 'held' }
  | { readonly kind: 'writes-stalled' };

export class KvUnreachable extends Error {
  constructor(readonly op: string, detail: string) {
    super(`${op}: ${detail}`);
  }
}

interface StoredEntry {
  value: string;
  modRev: number;
  lease: number | null;
}

interface Change {
  readonly kind: 'put' | 'delete';
  readonly key: string;
  readonly value: string;
  readonly rev: number;
}

interface StoredLease {
  readonly id: number;
  readonly ttlMs: number;
  deadline: number;
  readonly keys: Set<string>;
  lost: Array<() => void>;
}

/** The store all clients share. */
class Store {
  rev = 0;
  readonly entries = new Map<string, StoredEntry>();
  readonly watchers = new Set<ClientWatch>();
  readonly leases = new Map<number, StoredLease>();
  readonly clients = new Set<MemoryKv>();
  fault: KvFault | null = null;
  /** Writes waiting for a `writes-stalled` fault to clear, in the order they came. */
  stalledWrites: Array<() => void> = [];
  private nextLease = 1;

  constructor(readonly clock: Clock) {}

  /** Applies puts and deletes as one transaction (one revision), then tells the watchers. */
  commit(ops: ReadonlyArray<{ key: string; value: string | null; lease?: number | null }>): number {
    const changes: Change[] = [];
    const rev = this.rev + 1;
    for (const op of ops) {
      if (op.value === null) {
        const had = this.entries.get(op.key);
        if (had === undefined) continue;
        this.entries.delete(op.key);
        if (had.lease !== null) this.leases.get(had.lease)?.keys.delete(op.key);
        changes.push({ kind: 'delete', key: op.key, value: '', rev });
      } else {
        const lease = op.lease ?? null;
        const had = this.entries.get(op.key);
        if (had?.lease != null && had.lease !== lease) this.leases.get(had.lease)?.keys.delete(op.key);
        this.entries.set(op.key, { value: op.value, modRev: rev, lease });
        if (lease !== null) this.leases.get(lease)?.keys.add(op.key);
        changes.push({ kind: 'put', key: op.key, value: op.value, rev });
      }
    }
    if (changes.length === 0) return this.rev;
    this.rev = rev;
    for (const w of [...this.watchers]) w.offer(changes);
    return rev;
  }

  entry(key: string): Entry | null {
    const e = this.entries.get(key);
    return e === undefined ? null : { value: e.value, rev: String(e.modRev) };
  }

  grant(ttlMs: number): StoredLease {
    const l: StoredLease = { id: this.nextLease++, ttlMs, deadline: this.clock.now() + ttlMs, keys: new Set(), lost: [] };
    this.leases.set(l.id, l);
    return l;
  }

  revoke(id: number): void {
    const l = this.leases.get(id);
    if (l === undefined) return;
    this.leases.delete(id);
    this.commit([...l.keys].map((key) => ({ key, value: null })));
  }

  /** Expires leases whose deadline has passed (called from keep-alive timers). */
  expire(): void {
    const now = this.clock.now();
    for (const l of [...this.leases.values()]) {
      if (l.deadline > now) continue;
      this.revoke(l.id);
      for (const fn of l.lost) fn();
    }
  }
}

class ClientWatch {
  /** Events this watch's client has not heard yet (its link is down or held). */
  private backlog: Change[] = [];
  private lastDelivery = 0;
  cancelled = false;

  constructor(private readonly client: MemoryKv, private readonly matches: (key: string) => boolean, private readonly h: WatchHandlers) {}

  offer(changes: readonly Change[]): void {
    const mine = changes.filter((c) => this.matches(c.key));
    if (mine.length === 0 || this.cancelled) return;
    const f = this.client.linkFault();
    if (f?.kind === 'unreachable' || f?.kind === 'held') {
      this.backlog.push(...mine);
      return;
    }
    if (f?.kind === 'slow') {
      // In order, even if the delay shrinks meanwhile.
      const clock = this.client.clock;
      const at = Math.max(this.lastDelivery, clock.now() + f.ms);
      this.lastDelivery = at;
      clock.setTimeout(() => this.deliver(mine), at - clock.now());
      return;
    }
    this.deliver(mine);
  }

  /** The link is back (`reconnected`: it was down, not merely held): report that, then what was missed. */
  healed(reconnected: boolean): void {
    if (this.cancelled) return;
    const missed = this.backlog;
    this.backlog = [];
    if (reconnected) this.h.connected?.();
    this.deliver(missed);
  }

  private deliver(changes: readonly Change[]): void {
    for (const c of changes) {
      if (this.cancelled) return;
      if (c.kind === 'put') this.h.put?.({ key: c.key, value: c.value, rev: String(c.rev) });
      else this.h.delete?.({ key: c.key, rev: String(c.rev) });
    }
  }
}

export class MemoryKv implements Kv {
  private fault: KvFault | null = null;
  private answersToLose = 0;
  private writesToDelay: { n: number; ms: number } = { n: 0, ms: 0 };
  private closed = false;
  /** Answers (and failures) waiting for a held link to be released. */
  private heldAnswers: Array<() => void> = [];
  private readonly watches = new Set<ClientWatch>();
  private readonly store: Store;
  /** Calls made, by operation (what a test may count). */
  readonly calls = new Map<string, number>();

  /** A new store on `clock`, and its first client; `callTimeoutMs`: the deadline of calls that name none. */
  constructor(readonly clock: Clock, private readonly callTimeoutMs = 1000, store?: Store) {
    this.store = store ?? new Store(clock);
    this.store.clients.add(this);
  }

  /** Another client of the same store (another director's connection). */
  connect(callTimeoutMs = this.callTimeoutMs): MemoryKv {
    return new MemoryKv(this.clock, callTimeoutMs, this.store);
  }

  /** This client's link: null heals it (held answers and missed watch events arrive now, in order). */
  setFault(f: KvFault | null): void {
    const was = this.linkFault();
    this.fault = f;
    this.afterFaultChange(was);
  }

  /** Every client's link at once: an etcd that is frozen (unreachable) or slow. */
  setStoreFault(f: KvFault | null): void {
    const clients = [...this.store.clients];
    const was = new Map([...clients].map((c) => [c, c.linkFault()]));
    this.store.fault = f;
    for (const c of clients) c.afterFaultChange(was.get(c) ?? null);
    if (f?.kind !== 'writes-stalled') {
      const stalled = this.store.stalledWrites;
      this.store.stalledWrites = [];
      for (const land of stalled) land();
    }
  }

  /** The next `n` writes of this client land, and their answers are lost (they fail at their deadline). */
  loseAnswers(n: number): void {
    this.answersToLose += n;
  }

  /** The next `n` writes of this client land `ms` later, and answer then (or fail at a shorter deadline). */
  delayWrites(n: number, ms: number): void {
    this.writesToDelay = { n, ms };
  }

  /** The fault this client's calls meet now (its own link's first, then the store's). */
  linkFault(): KvFault | null {
    return this.fault ?? this.store.fault;
  }

  /** What the store holds, read past every fault (for assertions). */
  peek(key: string): Entry | null {
    return this.store.entry(key);
  }

  /** The store's revision. */
  get revision(): number {
    return this.store.rev;
  }

  get(key: string, timeoutMs = this.callTimeoutMs): Promise<Entry | null> {
    return this.call('get', timeoutMs, false, () => this.store.entry(key));
  }

  list(prefix: string, timeoutMs = this.callTimeoutMs): Promise<Array<{ key: string } & Entry>> {
    return this.call('list', timeoutMs, false, () => [...this.store.entries]
      .filter(([k]) => k.startsWith(prefix)).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, e]) => ({ key, value: e.value, rev: String(e.modRev) })));
  }

  swap(key: string, expectRev: string | null, value: string, timeoutMs = this.callTimeoutMs, also?: { key: string; value: string }): Promise<SwapResult> {
    return this.call('swap', timeoutMs, true, (): SwapResult => {
      const cur = this.store.entries.get(key);
      const matches = expectRev === null ? cur === undefined : cur !== undefined && String(cur.modRev) === expectRev;
      if (!matches) return { ok: false, current: this.store.entry(key) };
      const ops = [{ key, value }];
      if (also) ops.push({ key: also.key, value: also.value });
      return { ok: true, rev: String(this.store.commit(ops)) };
    });
  }

  swapMany(items: readonly SwapItem[], timeoutMs = this.callTimeoutMs): Promise<SwapResult[]> {
    try {
      checkSwapItems(items);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.call('swapMany', timeoutMs, true, (): SwapResult[] => {
      const matches = items.map((i) => String(this.store.entries.get(i.key)?.modRev) === i.expectRev);
      const rev = String(this.store.commit(items.filter((_, n) => matches[n]).map((i) => ({ key: i.key, value: i.value }))));
      return items.map((i, n): SwapResult => (matches[n] ? { ok: true, rev } : { ok: false, current: this.store.entry(i.key) }));
    });
  }

  put(key: string, value: string, timeoutMs = this.callTimeoutMs): Promise<void> {
    return this.call('put', timeoutMs, true, () => { this.store.commit([{ key, value }]); });
  }

  delete(key: string): Promise<void> {
    return this.call('delete', this.callTimeoutMs, true, () => { this.store.commit([{ key, value: null }]); });
  }

  reachable(timeoutMs: number, probe: KvProbe): Promise<boolean> {
    if ('read' in probe) return this.call('reachable', timeoutMs, false, () => true).catch(() => false);
    return this.call('reachable', timeoutMs, true, () => { this.store.commit([{ key: probe.write, value: String(this.clock.now()) }]); return true; }).catch(() => false);
  }

  watchKey(key: string, handlers: WatchHandlers): Promise<KvWatch> {
    return this.watch((k) => k === key, handlers);
  }

  watchPrefix(prefix: string, handlers: WatchHandlers): Promise<KvWatch> {
    return this.watch((k) => k.startsWith(prefix), handlers);
  }

  /** Kept alive every third of the TTL while this client reaches the store; expires (keys deleted, `onLost`) when it cannot. */
  lease(ttlSec: number): KvLease {
    const l = this.store.grant(ttlSec * 1000);
    let timer: TimerHandle | undefined;
    const keepAlive = (): void => {
      const f = this.linkFault();
      if (f === null || f.kind === 'slow') l.deadline = this.clock.now() + l.ttlMs;
      this.store.expire();
      if (this.store.leases.has(l.id)) timer = this.clock.setTimeout(keepAlive, l.ttlMs / 3);
    };
    timer = this.clock.setTimeout(keepAlive, l.ttlMs / 3);
    return {
      put: (key, value) => this.call('lease.put', this.callTimeoutMs, true, () => {
        if (!this.store.leases.has(l.id)) throw new Error(`lease ${l.id} not found`);
        this.store.commit([{ key, value, lease: l.id }]);
      }),
      onLost: (fn) => { l.lost.push(fn); },
      revoke: () => this.call('lease.revoke', this.callTimeoutMs, true, () => { this.clock.clearTimeout(timer); this.store.revoke(l.id); }),
      release: () => { this.clock.clearTimeout(timer); },
    };
  }

  close(): void {
    this.closed = true;
    this.store.clients.delete(this);
    for (const w of this.watches) this.cancelWatch(w);
  }

  private async watch(matches: (key: string) => boolean, handlers: WatchHandlers): Promise<KvWatch> {
    // Creating a watch needs the store like any call; from then on it is the client's.
    await this.call('watch', this.callTimeoutMs, false, () => undefined);
    const w = new ClientWatch(this, matches, handlers);
    this.watches.add(w);
    this.store.watchers.add(w);
    return { cancel: async () => { this.cancelWatch(w); } };
  }

  private cancelWatch(w: ClientWatch): void {
    w.cancelled = true;
    this.watches.delete(w);
    this.store.watchers.delete(w);
  }

  private afterFaultChange(was: KvFault | null): void {
    const now = this.linkFault();
    const down = (f: KvFault | null): boolean => f?.kind === 'unreachable' || f?.kind === 'held';
    if (was?.kind === 'held' && now?.kind !== 'held') {
      const answers = this.heldAnswers;
      this.heldAnswers = [];
      for (const a of answers) a();
    }
    if (down(was) && !down(now)) for (const w of this.watches) w.healed(was?.kind === 'unreachable');
  }

  /**
   * One call through this client's link: `op` runs on the store when the call lands (never, at once, or
   * after a delay) and its result (or failure) is the answer, which may come late, be held, or be lost.
   */
  private call<T>(name: string, timeoutMs: number, write: boolean, op: () => T): Promise<T> {
    this.calls.set(name, (this.calls.get(name) ?? 0) + 1);
    if (this.closed) return Promise.reject(new Error(`${name}: client closed`));
    const f = this.linkFault();
    const lose = write && this.answersToLose > 0;
    if (lose) this.answersToLose--;
    const delay = write && this.writesToDelay.n > 0 ? this.writesToDelay.ms : 0;
    if (delay > 0) this.writesToDelay.n--;
    return new Promise<T>((resolve, reject) => {
      let done = false;
      const answer = (fn: () => void): void => {
        if (done) return;
        done = true;
        if (this.linkFault()?.kind === 'held') this.heldAnswers.push(fn);
        else fn();
      };
      const failAtDeadline = (detail: string): void => {
        this.clock.setTimeout(() => answer(() => reject(new KvUnreachable(name, `${detail} (deadline ${timeoutMs} ms)`))), timeoutMs);
      };
      const land = (): void => {
        let result: { ok: true; value: T } | { ok: false; err: unknown };
        try {
          result = { ok: true, value: op() };
        } catch (err) {
          result = { ok: false, err };
        }
        if (lose) return;
        answer(() => (result.ok ? resolve(result.value) : reject(result.err)));
      };
      if (f?.kind === 'unreachable') {
        if (f.fail === 'at-once') answer(() => reject(new KvUnreachable(name, 'store unreachable')));
        else failAtDeadline('store unreachable');
        return;
      }
      if (lose) failAtDeadline('answer lost');
      if (write && f?.kind === 'writes-stalled') {
        failAtDeadline('writes stalled');
        this.store.stalledWrites.push(land);
        return;
      }
      const late = Math.max(delay, f?.kind === 'slow' ? f.ms : 0);
      if (late > 0) {
        if (late > timeoutMs) failAtDeadline(`store answers after ${late} ms`);
        this.clock.setTimeout(land, late);
        return;
      }
      // Up (or held): lands now, answers after the caller's current synchronous work, like any I/O.
      queueMicrotask(land);
    });
  }
}
