/**
 * The sync lag's recent quantiles: each acknowledged message's lag (its oldest kernel event to the peer's
 * ack), kept with when it was acknowledged, and read over the last LAG_WINDOW_MS only.
 *
 * Why by time: a window of the last N messages spans 15 s at 5 000 new connections a second and hours on a
 * quiet director, so one slow second long past could hold `lbadm cluster status`, the dashboard and the
 * lbd_sync_lag_seconds gauge up for as long. Bounded in memory: at most `capacity` messages (the newest), so
 * at very high message rates the window is shorter than LAG_WINDOW_MS.
 */
export const LAG_WINDOW_MS = 10_000;
const DEFAULT_CAPACITY = 8192;

export interface LagQuantiles {
  /** Milliseconds, one decimal; 0 when no message was acknowledged within the window. */
  readonly p50: number;
  readonly p99: number;
}

export class LagWindow {
  private readonly at: Float64Array;
  private readonly lag: Float64Array;
  /** Where the next sample goes; the ring holds min(count, capacity) samples before it. */
  private next = 0;
  private count = 0;

  constructor(private readonly windowMs = LAG_WINDOW_MS, private readonly capacity = DEFAULT_CAPACITY) {
    this.at = new Float64Array(capacity);
    this.lag = new Float64Array(capacity);
  }

  /** A message acknowledged at `atMs` (the clock the caller reads `now` from) with a lag of `lagMs`. */
  add(atMs: number, lagMs: number): void {
    this.at[this.next] = atMs;
    this.lag[this.next] = lagMs;
    this.next = (this.next + 1) % this.capacity;
    if (this.count < this.capacity) this.count++;
  }

  quantiles(nowMs: number): LagQuantiles {
    const since = nowMs - this.windowMs;
    const recent = new Float64Array(this.count);
    let n = 0;
    // Newest first, stopping at the first sample older than the window: samples are added in time order.
    for (let k = 1; k <= this.count; k++) {
      const i = (this.next - k + this.capacity) % this.capacity;
      if (this.at[i]! < since) break;
      recent[n++] = this.lag[i]!;
    }
    if (n === 0) return { p50: 0, p99: 0 };
    const sorted = recent.subarray(0, n).sort();
    const pct = (p: number): number => Math.round(sorted[Math.min(n - 1, Math.floor(p * n))]! * 10) / 10;
    return { p50: pct(0.5), p99: pct(0.99) };
  }
}
