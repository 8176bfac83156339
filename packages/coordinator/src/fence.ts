import type { Clock, TimerHandle } from '@lbd/clock';

/**
 * The self-fence: proves the lease alive from the holder's own clock. `sent()` when a renewal goes out,
 * `confirmed()` when etcd answers it (in order: answers come back in send order on the keepalive stream);
 * the fence fires `onFenced` once `now − lastConfirmedSend >= windowMs`. Knows nothing of etcd.
 */
export class Fence {
  private last: number;
  private inFlight: number[] = [];
  private timer: TimerHandle | undefined;
  private done = false;

  /** `start`: the send time of the grant, the first proof. */
  constructor(private readonly clock: Clock, private readonly windowMs: number, start: number, private readonly onFenced: (sinceMs: number) => void) {
    this.last = start;
    this.arm();
  }

  get lastSuccessfulKeepalive(): number {
    return this.last;
  }

  get fenced(): boolean {
    return this.done;
  }

  sent(): void {
    this.inFlight.push(this.clock.now());
  }

  confirmed(): void {
    const at = this.inFlight.shift();
    if (at === undefined || this.done) return;
    if (at > this.last) this.last = at;
    this.arm();
  }

  /** The keepalive stream restarted: renewals in flight on the old one will not be answered. */
  resetInFlight(): void {
    this.inFlight = [];
  }

  stop(): void {
    this.done = true;
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = this.clock.setTimeout(() => this.check(), this.last + this.windowMs - this.clock.now());
  }

  private check(): void {
    this.timer = undefined;
    if (this.done) return;
    const since = this.clock.now() - this.last;
    if (since >= this.windowMs) {
      this.stop();
      this.onFenced(since);
    } else this.arm();
  }
}
