import { ConsecutiveBreaker, circuitBreaker, handleWhen, retry } from 'cockatiel';
import { Etcd3, isRecoverableError, type Lease, type Watcher } from 'etcd3';

/**
 * The few key-value operations lbd's election and stores need (Kv), and their etcd implementation (EtcdKv,
 * over etcd3 1.1.2: the only module that imports etcd3). Each call has its own deadline: a read or a swap
 * that cannot finish within it fails instead of queueing behind an unreachable etcd (a late swap must never
 * land after the caller has given up on it and acted on that). Tests run the election over MemoryKv
 * (`@lbd/coordinator/testing`), on a fake clock, with faults injected.
 */
export interface Entry {
  readonly value: string;
  /** Mod revision, as a decimal string (int64). */
  readonly rev: string;
}

export type SwapResult = { readonly ok: true; readonly rev: string } | { readonly ok: false; readonly current: Entry | null };

/** One compare-and-swap of a `swapMany`: `value` goes to `key` if its mod revision is still `expectRev`. */
export interface SwapItem {
  readonly key: string;
  readonly expectRev: string;
  readonly value: string;
}

/**
 * Items per `swapMany` transaction at most: etcd refuses a transaction with more operations than its
 * --max-txn-ops (128 by default) at any one level.
 */
export const MAX_SWAPS_PER_TXN = 100;

/** What a watch reports; every handler is optional. Events arrive in revision order. */
export interface WatchHandlers {
  put?(e: { readonly key: string; readonly value: string; readonly rev: string }): void;
  delete?(e: { readonly key: string; readonly rev: string }): void;
  /** The watch is (again) connected: events missed meanwhile follow. */
  connected?(): void;
  disconnected?(): void;
  error?(err: unknown): void;
}

export interface KvWatch {
  cancel(): Promise<void>;
}

/** A lease with automatic keep-alive: keys put through it vanish when it is revoked or expires. */
export interface KvLease {
  put(key: string, value: string): Promise<void>;
  /** The store forgot the lease (unreachable longer than its TTL): its keys are gone. */
  onLost(fn: () => void): void;
  revoke(): Promise<void>;
  /** Stops the keep-alive without revoking (the keys stay until the TTL runs out). */
  release(): void;
}

export interface Kv {
  get(key: string, timeoutMs?: number): Promise<Entry | null>;
  list(prefix: string, timeoutMs?: number): Promise<Array<{ key: string } & Entry>>;
  /**
   * Writes `value` if the key's mod revision is still `expectRev` (`null`: the key must not exist), and
   * `also` with it. On a lost swap returns what is there now.
   */
  swap(key: string, expectRev: string | null, value: string, timeoutMs?: number, also?: { key: string; value: string }): Promise<SwapResult>;
  /**
   * Several swaps in one transaction (one write, one revision): each lands or not on its own compare, as
   * alone, and the results come in order. At most MAX_SWAPS_PER_TXN items, each key once.
   */
  swapMany(items: readonly SwapItem[], timeoutMs?: number): Promise<SwapResult[]>;
  put(key: string, value: string, timeoutMs?: number): Promise<void>;
  delete(key: string): Promise<void>;
  /**
   * Whether the store answers within `timeoutMs`: a linearizable read of `probe.read` (for etcd: one that
   * needs a raft leader), or a put of `probe.write` (one that needs a quorum to persist it, as a beat does:
   * etcd can answer reads while its writes wait). The key is one the caller may touch: under etcd's
   * role-based access a director reads and writes only under the cluster prefix, and a denied probe would
   * look like an unreachable etcd.
   */
  reachable(timeoutMs: number, probe: KvProbe): Promise<boolean>;
  watchKey(key: string, handlers: WatchHandlers): Promise<KvWatch>;
  watchPrefix(prefix: string, handlers: WatchHandlers): Promise<KvWatch>;
  lease(ttlSec: number): KvLease;
  close(): void;
}

/**
 * A director's client certificate for etcd (agent.cluster.etcdTls), as PEM bytes: plain data, so it crosses
 * to the election thread. With it every call is TLS, and etcd (--client-cert-auth) knows the director by
 * the certificate's common name.
 */
/** What `reachable` does: read one key, or write one (the value: the time). */
export type KvProbe = { readonly read: string } | { readonly write: string };

export interface EtcdTlsMaterial {
  readonly ca: Uint8Array;
  readonly cert: Uint8Array;
  readonly key: Uint8Array;
}

export class EtcdKv implements Kv {
  private readonly client: Etcd3;

  /**
   * `hostFailures`: consecutive failures after which a member is skipped for 100 ms. The election's own
   * connection uses 1: a beat that fails on a member that died is retried at once on another, instead of
   * the next two beats trying the dead one again (three beats is most of a safety window: the leader fenced
   * while etcd was fine for everyone else).
   */
  constructor(endpoints: readonly string[], private readonly callTimeoutMs: number, opts: { hostFailures?: number; tls?: EtcdTlsMaterial | null } = {}) {
    const tls = opts.tls ?? null;
    this.client = new Etcd3({
      hosts: [...endpoints],
      ...(tls === null ? {} : { credentials: { rootCertificate: Buffer.from(tls.ca), certChain: Buffer.from(tls.cert), privateKey: Buffer.from(tls.key) } }),
      dialTimeout: callTimeoutMs,
      defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + callTimeoutMs }),
      faultHandling: {
        // etcd3's default opens a host's breaker for 5 s after 3 failures: while an etcd member dies and
        // the others elect a leader, every host fails a few calls, and the client then refused to try any
        // of them for 5 s (measured: a leader fenced 5.5 s into a 1 s etcd election). Retry soon instead.
        host: () => circuitBreaker(handleWhen(isRecoverableError), { halfOpenAfter: 100, breaker: new ConsecutiveBreaker(opts.hostFailures ?? 3) }),
        // One more attempt, on another host, for errors that say the host (not the request) failed.
        global: retry(handleWhen(isRecoverableError), { maxAttempts: 1 }),
      },
    });
  }

  async get(key: string, timeoutMs = this.callTimeoutMs): Promise<Entry | null> {
    const res = await this.client.get(key).options({ deadline: Date.now() + timeoutMs }).exec();
    const kv = res.kvs[0];
    return kv === undefined ? null : { value: kv.value.toString(), rev: kv.mod_revision };
  }

  async list(prefix: string, timeoutMs = this.callTimeoutMs): Promise<Array<{ key: string } & Entry>> {
    const res = await this.client.getAll().prefix(prefix).options({ deadline: Date.now() + timeoutMs }).exec();
    return res.kvs.map((kv) => ({ key: kv.key.toString(), value: kv.value.toString(), rev: kv.mod_revision }));
  }

  async swap(key: string, expectRev: string | null, value: string, timeoutMs = this.callTimeoutMs, also?: { key: string; value: string }): Promise<SwapResult> {
    const deadline = { deadline: Date.now() + timeoutMs };
    const cond = expectRev === null ? this.client.if(key, 'Create', '==', 0) : this.client.if(key, 'Mod', '==', expectRev);
    const puts = [this.client.put(key).value(value)];
    if (also) puts.push(this.client.put(also.key).value(also.value));
    const res = await cond.options(deadline).then(...puts).else(this.client.get(key)).commit();
    if (res.succeeded) return { ok: true, rev: res.header.revision };
    const kv = res.responses[0]?.response_range?.kvs[0];
    return { ok: false, current: kv === undefined ? null : { value: kv.value.toString(), rev: kv.mod_revision } };
  }

  async swapMany(items: readonly SwapItem[], timeoutMs = this.callTimeoutMs): Promise<SwapResult[]> {
    checkSwapItems(items);
    // One transaction of nested ones (etcd >= 3.3): the outer has no compare, so each inner one's compare
    // decides only its own put, and every put that lands shares the one revision the header reports.
    const res = await this.client.kv.txn({
      success: items.map((i) => ({
        request_txn: {
          compare: [{ key: Buffer.from(i.key), target: 'Mod', result: 'Equal', mod_revision: i.expectRev }],
          success: [{ request_put: { key: Buffer.from(i.key), value: Buffer.from(i.value) } }],
          failure: [{ request_range: { key: Buffer.from(i.key) } }],
        },
      })),
    }, { deadline: Date.now() + timeoutMs });
    return items.map((i, n) => {
      const inner = res.responses[n]?.response_txn;
      if (inner === undefined) throw new Error(`etcd answered a transaction of ${items.length} swaps without the result of swap ${n + 1} (${i.key})`);
      if (inner.succeeded) return { ok: true, rev: res.header.revision };
      const kv = inner.responses[0]?.response_range?.kvs[0];
      return { ok: false, current: kv === undefined ? null : { value: kv.value.toString(), rev: kv.mod_revision } };
    });
  }

  async put(key: string, value: string, timeoutMs = this.callTimeoutMs): Promise<void> {
    await this.client.put(key).value(value).options({ deadline: Date.now() + timeoutMs }).exec();
  }

  async delete(key: string): Promise<void> {
    await this.client.delete().key(key).exec();
  }

  async reachable(timeoutMs: number, kvProbe: KvProbe): Promise<boolean> {
    // Our own timer as well as the call's deadline: dialing a member that just died, or waiting out a
    // retry, happens before the deadline applies. The call ends at the bound: one left running past it, as
    // the trial call of its member's half-open circuit breaker, holds every other call to that member until
    // it ends (cockatiel lets one through and makes the rest wait for it), the election's beats among them
    // (suite 50: a new leader fenced 900 ms after a handover while a probe to a killed member ran on).
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<boolean>((resolve) => { timer = setTimeout(() => resolve(false), timeoutMs); });
    const deadline = { deadline: Date.now() + timeoutMs };
    const probe = 'read' in kvProbe ? this.client.get(kvProbe.read).options(deadline).exec() : this.client.put(kvProbe.write).value(String(Date.now())).options(deadline).exec();
    const call = probe.then(() => true, () => false);
    try {
      return await Promise.race([call, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  async watchKey(key: string, handlers: WatchHandlers): Promise<KvWatch> {
    return wire(await this.client.watch().key(key).create(), handlers);
  }

  async watchPrefix(prefix: string, handlers: WatchHandlers): Promise<KvWatch> {
    return wire(await this.client.watch().prefix(prefix).create(), handlers);
  }

  lease(ttlSec: number): KvLease {
    const lease: Lease = this.client.lease(ttlSec, { autoKeepAlive: true });
    return {
      put: async (key, value) => { await lease.put(key).value(value).exec(); },
      onLost: (fn) => { lease.on('lost', () => fn()); },
      revoke: async () => { await lease.revoke(); },
      release: () => lease.release(),
    };
  }

  // etcd-only operations, for the stores beside the election (the event history's ranges at a revision, its
  // batched writes and trims; a registration's lease): not part of Kv, which the election and its fake share.
  // Each takes an absolute deadline (unix ms), so a caller can bound several calls by one.

  /** Time left on the lease `key` is attached to, in ms; null when the key has none (or is gone). */
  async leaseTtlMs(key: string, timeoutMs: number): Promise<number | null> {
    const res = await this.client.get(key).options({ deadline: Date.now() + timeoutMs }).exec();
    const lease = res.kvs[0]?.lease;
    if (lease === undefined || lease === '0') return null;
    const r = await this.client.leaseClient.leaseTimeToLive({ ID: lease }, { deadline: Date.now() + timeoutMs });
    return Number(r.TTL) * 1000;
  }

  /** Keys in [start, end) in key order (descending: newest key first), read at `revision` (default: now). */
  async range(
    start: string, end: string, o: { readonly deadline: number; readonly limit?: number; readonly descending?: boolean; readonly revision?: string },
  ): Promise<{ entries: Array<{ key: string; value: string }>; revision: string }> {
    const b = this.client.getAll().inRange({ start, end });
    if (o.descending) b.sort('Key', 'Descend');
    if (o.limit !== undefined) b.limit(o.limit);
    if (o.revision !== undefined) b.revision(o.revision);
    const r = await b.options({ deadline: o.deadline }).exec();
    return { entries: r.kvs.map((kv) => ({ key: kv.key.toString(), value: kv.value.toString() })), revision: r.header.revision };
  }

  /** Writes every entry in one transaction. */
  async putAll(entries: readonly { readonly key: string; readonly value: string }[], deadline: number): Promise<void> {
    await this.client.kv.txn({
      success: entries.map((e) => ({ request_put: { key: Buffer.from(e.key), value: Buffer.from(e.value) } })),
    }, { deadline });
  }

  async count(prefix: string, deadline: number): Promise<number> {
    return this.client.getAll().prefix(prefix).options({ deadline }).count();
  }

  /** The first `limit` keys under `prefix`, in key order. */
  async firstKeys(prefix: string, limit: number, deadline: number): Promise<string[]> {
    return this.client.getAll().prefix(prefix).sort('Key', 'Ascend').limit(limit).options({ deadline }).keys();
  }

  /** Deletes the keys in [start, end). */
  async deleteRange(start: string, end: string, deadline: number): Promise<void> {
    await this.client.delete().inRange({ start, end }).options({ deadline }).exec();
  }

  /** Watches `prefix` from the revision after `afterRevision`, so nothing written since that read is missed. */
  async watchPrefixAfter(prefix: string, afterRevision: string, handlers: WatchHandlers): Promise<KvWatch> {
    return wire(await this.client.watch().prefix(prefix).startRevision(String(BigInt(afterRevision) + 1n)).create(), handlers);
  }

  close(): void {
    this.client.close();
  }
}

/** Throws on what no store takes in one transaction: too many items, or one key twice. */
export function checkSwapItems(items: readonly SwapItem[]): void {
  if (items.length > MAX_SWAPS_PER_TXN) throw new RangeError(`swapMany: ${items.length} swaps in one transaction; at most ${MAX_SWAPS_PER_TXN}`);
  const keys = new Set<string>();
  for (const i of items) {
    if (keys.has(i.key)) throw new RangeError(`swapMany: ${i.key} twice in one transaction (etcd refuses a key written twice)`);
    keys.add(i.key);
  }
}

function wire(w: Watcher, h: WatchHandlers): KvWatch {
  w.on('put', (kv) => h.put?.({ key: kv.key.toString(), value: kv.value.toString(), rev: kv.mod_revision }))
    .on('delete', (kv) => h.delete?.({ key: kv.key.toString(), rev: kv.mod_revision }))
    .on('connected', () => h.connected?.())
    .on('disconnected', () => h.disconnected?.())
    // Without a listener an 'error' event would throw.
    .on('error', (err) => h.error?.(err));
  return { cancel: async () => { await w.cancel(); } };
}
