import { performance } from 'node:perf_hooks';

/**
 * Time, injected. The health scheduler and the election's fence read the time and set timers only through
 * a Clock, so their tests run on a FakeClock (`@lbd/clock/testing`) in simulated time, with no sleeps.
 */
export interface Clock {
  /** Milliseconds; only differences and `now % interval` (health-probe phases) matter. */
  now(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

/** Opaque: whatever the Clock's setTimeout returned. */
export type TimerHandle = unknown;

/**
 * The real clock. `now()` is monotonic (performance.now) but offset to the Unix epoch at process start, so it
 * reads like Date.now() in events and logs, yet a wall-clock step (NTP, an operator's `date -s`) cannot make
 * every check due at once or none for an hour.
 */
export const systemClock: Clock = {
  now: () => performance.timeOrigin + performance.now(),
  // Rounded up: a timer that fires a fraction of a millisecond early would find nothing due and re-arm.
  setTimeout: (fn, ms) => setTimeout(fn, Math.max(0, Math.ceil(ms))),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};
