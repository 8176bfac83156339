import type { Clock } from '@lbd/clock';
import { MAX_SWAPS_PER_TXN, type Kv, type SwapItem, type SwapResult } from './kv.js';

/**
 * The beats of every group a director leads, sent together: the beats asked for in one synchronous run
 * (Elections checks all its groups in one timer callback, and their beats line up: decide.ts, `coalesce`)
 * go to etcd as one transaction of compare-and-swaps (Kv.swapMany), each landing or not on its own
 * revision exactly as alone.
 *
 * Why: each group beating alone is one etcd write, one raft round and one fsync per group per beat
 * interval. The ECMP tier makes every director lead several slot groups: 8 slots under the `default`
 * timing were 133 etcd writes a second, which with three directors and etcd on the lab's two cores took
 * 165 % of them with no traffic and left the beats too little to land (fences every few seconds).
 * Batched, a director writes once per interval however many groups it leads.
 *
 * Safety is unchanged (timing.ts): each beat still swaps on the revision its group saw, and its lease still
 * runs from the time decide.ts recorded when it asked for the beat, which is no later than the send.
 */
export class BeatBatch {
  private pending: Array<{ readonly item: SwapItem; readonly deadline: number; resolve(r: SwapResult): void; reject(err: unknown): void }> = [];
  private scheduled = false;
  /** Transactions sent, and beats they carried (for metrics and tests). */
  readonly sent = { transactions: 0, beats: 0 };

  /** `onSend`: each transaction as it leaves, with the beats it carries (metrics). */
  constructor(private readonly kv: Kv, private readonly clock: Clock, private readonly onSend?: (beats: number) => void) {}

  /** Queues one swap for the transaction that leaves once the current synchronous run is over. */
  swap(key: string, expectRev: string, value: string, timeoutMs: number): Promise<SwapResult> {
    // A key already waiting (a second try beside a first that has not left yet: not seen, but one
    // transaction cannot write a key twice) sends what waits first.
    if (this.pending.some((p) => p.item.key === key)) this.flush();
    return new Promise<SwapResult>((resolve, reject) => {
      this.pending.push({ item: { key, expectRev, value }, deadline: this.clock.now() + timeoutMs, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        queueMicrotask(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    const all = this.pending;
    this.pending = [];
    for (let i = 0; i < all.length; i += MAX_SWAPS_PER_TXN) this.send(all.slice(i, i + MAX_SWAPS_PER_TXN));
  }

  private send(batch: typeof this.pending): void {
    if (batch.length === 0) return;
    this.sent.transactions += 1;
    this.sent.beats += batch.length;
    this.onSend?.(batch.length);
    // The earliest deadline for all: a beat's answer after its own deadline is useless to its group.
    const timeoutMs = Math.max(1, Math.min(...batch.map((p) => p.deadline)) - this.clock.now());
    const only = batch.length === 1 ? batch[0]! : null;
    let results: Promise<SwapResult[]>;
    try {
      results = only !== null
        ? this.kv.swap(only.item.key, only.item.expectRev, only.item.value, timeoutMs).then((r) => [r])
        : this.kv.swapMany(batch.map((p) => p.item), timeoutMs);
    } catch (err) {
      results = Promise.reject(err);
    }
    results.then(
      (rs) => batch.forEach((p, n) => p.resolve(rs[n]!)),
      (err: unknown) => batch.forEach((p) => p.reject(err)),
    );
  }
}
