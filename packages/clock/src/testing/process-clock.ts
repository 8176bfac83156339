import type { Clock, TimerHandle } from '../clock.js';
import type { FakeClock } from './fake-clock.js';

/**
 * A director's process clock in a test of several directors: the shared fake time, but its timers wait
 * while the process is frozen (SIGSTOP), and run, late, when it is thawed.
 */
export class ProcessClock implements Clock {
  private frozen = false;
  private held: Array<{ fn: () => void; cancelled: boolean }> = [];
  constructor(private readonly base: FakeClock) {}
  now(): number { return this.base.now(); }
  setTimeout(fn: () => void, ms: number): TimerHandle {
    const h = { fn, cancelled: false, inner: undefined as TimerHandle };
    h.inner = this.base.setTimeout(() => {
      if (h.cancelled) return;
      if (this.frozen) this.held.push(h);
      else fn();
    }, ms);
    return h;
  }
  clearTimeout(handle: TimerHandle): void {
    const h = handle as { cancelled: boolean; inner: TimerHandle } | undefined;
    if (h === undefined) return;
    h.cancelled = true;
    this.base.clearTimeout(h.inner);
  }
  freeze(): void { this.frozen = true; }
  thaw(): void {
    this.frozen = false;
    const due = this.held;
    this.held = [];
    for (const h of due) if (!h.cancelled) h.fn();
  }
}
