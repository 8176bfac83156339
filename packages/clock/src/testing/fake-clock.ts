import type { Clock, TimerHandle } from '../clock.js';

interface Timer {
  id: number;
  at: number;
  fn: () => void;
}

/**
 * A Clock for tests: time moves only when the test says. `advance(ms)` runs every timer that falls due, in
 * time order (ties in the order they were set), also timers set by those timers while advancing; after each
 * timer it lets pending promise callbacks run, so work started by a timer (a probe and its result, a keepalive and its answer) happens at
 * that timer's simulated time, not at the end of the advance.
 */
export class FakeClock implements Clock {
  private time: number;
  private nextId = 1;
  private timers: Timer[] = [];

  /** Starts at a fixed epoch time, so phases (now mod interval) are reproducible. */
  constructor(start = 1_700_000_000_000) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const timer: Timer = { id: this.nextId++, at: this.time + Math.max(0, ms), fn };
    this.timers.push(timer);
    return timer.id;
  }

  clearTimeout(handle: TimerHandle): void {
    this.timers = this.timers.filter((t) => t.id !== handle);
  }

  /** Timers set and not yet run or cleared. */
  get pending(): number {
    return this.timers.length;
  }

  /** The time of the earliest pending timer, or null. */
  nextTimerAt(): number | null {
    return this.next()?.at ?? null;
  }

  /** Moves time forward by `ms`, running due timers as described above. */
  async advance(ms: number): Promise<void> {
    const end = this.time + ms;
    await settle();
    for (let t = this.next(); t !== undefined && t.at <= end; t = this.next()) {
      this.timers = this.timers.filter((x) => x !== t);
      // A timer overdue after a holdUp runs late, at the time it is now.
      this.time = Math.max(this.time, t.at);
      t.fn();
      await settle();
    }
    this.time = end;
  }

  /**
   * Moves time forward by `ms` without running any timer, as a held-up event loop (a busy box, a long garbage
   * collection) lets it pass: the next `advance` runs the timers that fell due meanwhile, late.
   */
  holdUp(ms: number): void {
    this.time += ms;
  }

  /** Lets pending promise callbacks run without moving time. */
  flush(): Promise<void> {
    return settle();
  }

  private next(): Timer | undefined {
    let best: Timer | undefined;
    for (const t of this.timers) if (best === undefined || t.at < best.at || (t.at === best.at && t.id < best.id)) best = t;
    return best;
  }
}

/** setImmediate runs after every queued promise callback (and the callbacks they queue) has run. */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
