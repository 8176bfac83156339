import type { HealthState } from '@lbd/config';
import type { ProbeResult } from './types.js';

/**
 * The health state machine: pure, table-driven, no timers. One probe result and the time in, the next record
 * and at most one transition out. Envoy's and HAProxy's rise/fall thresholds plus route-flap damping:
 * - `fall` consecutive failures take an up server down; `rise` consecutive successes bring a down server up;
 * - a server that keeps changing state is held down: when it goes down and it has changed state
 *   `maxTransitions` times or more within `windowMs` (this change included), it stays down until
 *   `holdDownUntil` whatever its probes say; each further hold-down doubles (up to `maxHoldDownMs`); the
 *   doubling is forgotten once a whole window passes without a state change. When a hold-down ends the
 *   server still needs `rise` successes, counted from results after the end.
 * Why hold down on the way down, not by refusing the way up: the hold-down then starts with a transition
 * whose reason says so, and a server that is up stays in rotation until a probe actually fails.
 */

export interface Thresholds {
  /** Consecutive successes that bring a down server up (≥ 1). */
  rise: number;
  /** Consecutive failures that take an up server down (≥ 1). */
  fall: number;
}

export interface FlapPolicy {
  windowMs: number;
  /** State changes within windowMs at which the next down transition holds the server down; 0 disables damping. */
  maxTransitions: number;
  /** The first hold-down; each further one doubles. */
  holdDownMs: number;
  maxHoldDownMs: number;
}

export const DEFAULT_FLAP_POLICY: Readonly<FlapPolicy> = Object.freeze({
  windowMs: 60_000,
  maxTransitions: 4,
  holdDownMs: 5_000,
  maxHoldDownMs: 300_000,
});

export interface HealthRecord {
  state: HealthState;
  /** Consecutive successes (0 after a failure, and while held down). */
  successes: number;
  /** Consecutive failures (0 after a success). */
  failures: number;
  /** Times of the state changes within the flap window, oldest first. */
  transitions: number[];
  /** While set and in the future the server stays down. */
  holdDownUntil: number | null;
  /** Hold-downs so far (the next lasts holdDownMs × 2^holdDowns); forgotten after a window without changes. */
  holdDowns: number;
  lastResult?: ProbeResult;
  /** When the server entered its current state (slow start ramps from here). */
  since: number;
}

export interface HealthTransition {
  from: HealthState;
  to: HealthState;
  /** Why, in words that logs, `lbadm health` and the dashboard reuse. */
  reason: string;
}

export function initialHealth(state: HealthState, now: number): HealthRecord {
  return { state, successes: 0, failures: 0, transitions: [], holdDownUntil: null, holdDowns: 0, since: now };
}

export function nextHealth(
  prev: HealthRecord,
  result: ProbeResult,
  t: Thresholds,
  flap: FlapPolicy,
  now: number,
): { record: HealthRecord; transition: HealthTransition | null } {
  const transitions = prev.transitions.filter((at) => now - at < flap.windowMs);
  const holdDownUntil = prev.holdDownUntil !== null && now < prev.holdDownUntil ? prev.holdDownUntil : null;
  const base = { ...prev, transitions, holdDownUntil, lastResult: result };

  if (result.ok) {
    if (prev.state === 'up') return { record: { ...base, successes: prev.successes + 1, failures: 0 }, transition: null };
    // Successes while held down do not count: the server must prove itself after the hold-down.
    if (holdDownUntil !== null) return { record: { ...base, successes: 0, failures: 0 }, transition: null };
    const successes = prev.successes + 1;
    if (successes < t.rise) return { record: { ...base, successes, failures: 0 }, transition: null };
    return {
      record: { ...base, state: 'up', successes, failures: 0, since: now, transitions: [...transitions, now], holdDowns: holdDownsAfter(prev, transitions) },
      transition: { from: 'down', to: 'up', reason: `${result.message} (${count(successes, 'success', 'successes')})` },
    };
  }

  const failures = prev.failures + 1;
  if (prev.state === 'down' || failures < t.fall) return { record: { ...base, successes: 0, failures }, transition: null };
  const changes = [...transitions, now];
  let holdDowns = holdDownsAfter(prev, transitions);
  let reason = `${result.message} (${count(failures, 'failure', 'failures')})`;
  let until: number | null = null;
  if (flap.maxTransitions > 0 && changes.length >= flap.maxTransitions) {
    const ms = Math.min(flap.holdDownMs * 2 ** holdDowns, flap.maxHoldDownMs);
    until = now + ms;
    holdDowns += 1;
    reason += `; held down ${formatDuration(ms)}: ${changes.length} state changes in ${formatDuration(flap.windowMs)}`;
  }
  return {
    record: { ...base, state: 'down', successes: 0, failures, since: now, transitions: changes, holdDownUntil: until, holdDowns },
    transition: { from: 'up', to: 'down', reason },
  };
}

/** The doubling is forgotten when the previous state change is a whole window old (none left in `recent`). */
function holdDownsAfter(prev: HealthRecord, recent: number[]): number {
  return recent.length === 0 ? 0 : prev.holdDowns;
}

function count(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** '500 ms', '5 s', '2.5 s', '60 s', '5 min' (minutes from 2 min on, when whole). */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms >= 120_000 && ms % 60_000 === 0) return `${ms / 60_000} min`;
  return `${Number((ms / 1000).toFixed(3))} s`;
}

/**
 * The weight to program for a server that came up at `upSinceMs` while it ramps: linear from 1 to `weight`
 * over `slowStartMs` (like HAProxy's slowstart), so a cold cache or JIT is not flooded at once. Never 0 for
 * an up server (0 would make it quiescent); a configured weight of 0 stays 0 (the operator made it quiescent).
 * The agent re-programs the weight as it grows; the steps are whole numbers, so at most `weight - 1` changes.
 */
export function slowStartWeight(weight: number, upSinceMs: number, slowStartMs: number, now: number): number {
  if (weight <= 0) return 0;
  if (slowStartMs <= 0) return weight;
  const elapsed = now - upSinceMs;
  if (elapsed >= slowStartMs) return weight;
  if (elapsed <= 0) return 1;
  return Math.min(weight, Math.max(1, Math.floor(1 + ((weight - 1) * elapsed) / slowStartMs)));
}
