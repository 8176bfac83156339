import { Etcd3, type Lease } from 'etcd3';
import { systemClock, type Clock } from '@lbd/clock';
import type { Election } from './election.js';
import { Fence } from './fence.js';
import { checkTiming, keepaliveIntervalOf, type FenceTiming } from './timing.js';

/**
 * Election on etcd (etcd3 1.1.2): each term grants a lease, puts `<prefix>/election/<group>/<lease>` with
 * it, and the key with the lowest create revision leads. Fenced by `Fence` from the injected clock (rule in
 * timing.ts). A term ends when the lease is lost, the fence fires, our key disappears, or `signal` aborts
 * (then the lease is revoked so a standby wins at once); a new term starts until `signal` aborts.
 * Not yet: priorities and preemption (next step of issue 4), heartbeats between directors.
 */
export interface EtcdElectionOptions extends Partial<FenceTiming> {
  readonly endpoints: string[];
  readonly prefix: string;
  readonly group: string;
  /** This candidate's id, shown to followers. */
  readonly id: string;
  readonly clock?: Clock;
  /** Deadline of each unary etcd call (default 1000 ms). */
  readonly callTimeoutMs?: number;
  /** Pause between terms after a failure (default 200 ms). */
  readonly retryMs?: number;
}

export const DEFAULT_TIMING: Required<Omit<FenceTiming, 'keepaliveIntervalMs'>> = { ttlMs: 2000, safetyWindowMs: 1000, maxClockDriftMs: 100 };

export class EtcdElection implements Election {
  readonly timing: FenceTiming;
  private readonly client: Etcd3;
  private readonly clock: Clock;
  private readonly dir: string;
  /** The fence of the current term, for tests and status. */
  fence: Fence | undefined;

  constructor(private readonly opts: EtcdElectionOptions) {
    this.timing = {
      ttlMs: opts.ttlMs ?? DEFAULT_TIMING.ttlMs,
      safetyWindowMs: opts.safetyWindowMs ?? DEFAULT_TIMING.safetyWindowMs,
      maxClockDriftMs: opts.maxClockDriftMs ?? DEFAULT_TIMING.maxClockDriftMs,
      keepaliveIntervalMs: keepaliveIntervalOf({ ttlMs: opts.ttlMs ?? DEFAULT_TIMING.ttlMs, safetyWindowMs: 0, maxClockDriftMs: 0 }),
    };
    checkTiming(this.timing);
    this.clock = opts.clock ?? systemClock;
    this.dir = `${opts.prefix}/election/${opts.group}/`;
    const callTimeoutMs = opts.callTimeoutMs ?? 1000;
    this.client = new Etcd3({
      hosts: opts.endpoints,
      dialTimeout: callTimeoutMs,
      defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + callTimeoutMs }),
    });
  }

  async run(opts: { signal: AbortSignal; onLeading(leading: AbortSignal): void; onFollowing(leader: string): void }): Promise<void> {
    while (!opts.signal.aborted) {
      try {
        await this.term(opts);
      } catch {
        // A failed term (etcd unreachable, lease not granted): try again after a pause.
      }
      if (opts.signal.aborted) break;
      await new Promise<void>((resolve) => {
        const t = this.clock.setTimeout(done, this.opts.retryMs ?? 200);
        function done(): void { opts.signal.removeEventListener('abort', onAbort); resolve(); }
        const onAbort = (): void => { this.clock.clearTimeout(t); done(); };
        opts.signal.addEventListener('abort', onAbort, { once: true });
      });
    }
  }

  /** Closes the etcd client. Call after every run() has returned. */
  close(): void {
    this.client.close();
  }

  private async term(opts: { signal: AbortSignal; onLeading(leading: AbortSignal): void; onFollowing(leader: string): void }): Promise<void> {
    const end = new AbortController();
    const endTerm = (reason: string): void => { if (!end.signal.aborted) end.abort(reason); };
    const onOuter = (): void => endTerm('stopped');
    opts.signal.addEventListener('abort', onOuter, { once: true });
    let leading: AbortController | undefined;
    const grantAt = this.clock.now();
    const fence = new Fence(this.clock, this.timing.safetyWindowMs, grantAt, () => {
      leading?.abort('fenced'); // at once, before anything else
      endTerm('fenced');
    });
    this.fence = fence;
    const lease: Lease = this.client.lease(this.timing.ttlMs / 1000);
    lease.on('keepaliveFired', () => fence.sent());
    lease.on('keepaliveSucceeded', () => fence.confirmed());
    lease.on('keepaliveEstablished', () => fence.resetInFlight());
    lease.on('lost', () => { leading?.abort('lease lost'); endTerm('lease lost'); });
    let watcher: Awaited<ReturnType<ReturnType<Etcd3['watch']>['create']>> | undefined;
    try {
      const leaseId = await lease.grant();
      if (end.signal.aborted) return;
      const key = `${this.dir}${leaseId}`;
      await lease.put(key).value(this.opts.id).exec();
      let lastLeader: string | undefined;
      let evaluating = Promise.resolve();
      const evaluate = (): void => {
        evaluating = evaluating.then(async () => {
          if (end.signal.aborted) return;
          const res = await this.client.getAll().prefix(this.dir).sort('Create', 'Ascend').exec();
          if (end.signal.aborted) return;
          const first = res.kvs[0];
          const mine = res.kvs.some((kv) => kv.key.toString() === key);
          if (!mine) return endTerm('key gone');
          if (first === undefined) return;
          if (first.key.toString() === key) {
            if (leading === undefined && !fence.fenced) {
              leading = new AbortController();
              opts.onLeading(leading.signal);
            }
          } else if (leading !== undefined) {
            endTerm('overtaken');
          } else {
            const leader = first.value.toString();
            if (leader !== lastLeader) { lastLeader = leader; opts.onFollowing(leader); }
          }
        }).catch(() => undefined); // a failed read: the next event or the fence decides
      };
      watcher = await this.client.watch().prefix(this.dir).create();
      watcher.on('put', evaluate).on('delete', evaluate).on('connected', evaluate);
      evaluate();
      await new Promise<void>((resolve) => end.signal.addEventListener('abort', () => resolve(), { once: true }));
    } finally {
      leading?.abort(end.signal.reason ?? 'term ended');
      opts.signal.removeEventListener('abort', onOuter);
      fence.stop();
      if (watcher !== undefined) void watcher.cancel().catch(() => undefined);
      // Revoke so a standby wins at once; with etcd unreachable this fails within the call deadline and the
      // lease expires by its TTL (after our fence, by the timing rule).
      await lease.revoke().catch(() => undefined);
      lease.release();
    }
  }
}
