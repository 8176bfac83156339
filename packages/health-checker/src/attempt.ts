import { isIPv6 } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { ProbeOptions, ProbeReason, ProbeResult, ProbeTarget } from './types.js';

/**
 * What every prober shares: the words that name a target, the mapping of socket errors to reasons, and one
 * probe's lifetime (settle once: the check's own outcome, its timeout or an abort, whichever comes first,
 * then release everything it held). Probers are thin adapters over node:net, node:dgram, undici and
 * child_process; this module keeps their results uniform.
 */

/** `198.19.1.12:8080`, `[fd00::12]:8080`. */
export function endpoint(address: string, port: number): string {
  return isIPv6(address) ? `[${address}]:${port}` : `${address}:${port}`;
}

/** How messages name a probe: 'tcp connect to 198.19.1.12:8080', 'http GET /healthz', 'exec /usr/bin/check'. */
export function describeTarget(target: ProbeTarget): string {
  switch (target.kind) {
    case 'tcp':
      return `tcp connect to ${endpoint(target.address, target.port)}`;
    case 'udp':
      return `udp ${endpoint(target.address, target.port)}`;
    case 'http':
    case 'https':
      return `${target.kind} ${target.method ?? 'GET'} ${target.path ?? '/'}`;
    case 'icmp':
      return `icmp echo to ${target.address}`;
    case 'exec': {
      const argv = (target.command ?? []).join(' ');
      // An argv can be long (inline scripts); the message is a log line, not a copy of the config.
      return `exec ${argv.length > 60 ? `${argv.slice(0, 57)}...` : argv}`;
    }
  }
}

/** Whole milliseconds, but never 0 for something that took time (0 reads as "not measured"). */
function roundMs(ms: number): number {
  return ms <= 0 ? 0 : Math.max(1, Math.round(ms));
}

export function timeoutMessage(target: ProbeTarget, timeoutMs: number, phase?: string): string {
  return `${describeTarget(target)}: timeout after ${timeoutMs} ms${phase ? ` (${phase})` : ''}`;
}

/**
 * The outcome of an aborted probe. An abort whose reason is a TimeoutError (how the scheduler aborts a
 * probe at its timeout) is a timeout; any other abort (a removed check, shutdown) is reported as an error
 * that no caller is expected to act on.
 */
export function abortedOutcome(target: ProbeTarget, signal: AbortSignal, timeoutMs: number, phase?: string): [ProbeReason, string] {
  const r: unknown = signal.reason;
  if (r instanceof Error && r.name === 'TimeoutError') return ['timeout', timeoutMessage(target, timeoutMs, phase)];
  return ['error', `${describeTarget(target)}: aborted`];
}

/** Socket error codes → reason and the words after the target's description. */
export function classifyNetError(err: unknown): [ProbeReason, string] {
  const code = (err as { code?: unknown } | null)?.code;
  switch (code) {
    case 'ECONNREFUSED':
      return ['refused', 'refused'];
    case 'ECONNRESET':
    case 'EPIPE':
      return ['reset', 'connection reset'];
    case 'EHOSTUNREACH':
      return ['unreachable', 'host unreachable'];
    case 'ENETUNREACH':
      return ['unreachable', 'network unreachable'];
    case 'ETIMEDOUT':
      return ['timeout', 'timed out'];
    default: {
      const msg = err instanceof Error ? err.message : String(err);
      return ['error', typeof code === 'string' && !msg.includes(code) ? `${code}: ${msg}` : msg];
    }
  }
}

export interface AttemptContext {
  /** Ends the probe with this outcome (later calls are ignored). */
  settle(reason: ProbeReason, message: string): void;
  /** Runs when the probe ends, however it ends: close sockets, kill processes. */
  onCleanup(fn: () => void): void;
  /** Names what the probe is waiting for, quoted in a timeout message: 'connected, no reply'. */
  setPhase(phase: string): void;
  /** Whether the probe has already ended (a late callback should do nothing). */
  readonly done: boolean;
}

/**
 * Runs one probe: `body` starts the work and calls `settle` when it knows the outcome. The timeout and
 * the caller's signal settle it too. Never rejects: a throw from `body` becomes reason 'error'.
 */
export function attempt(target: ProbeTarget, opts: ProbeOptions, body: (ctx: AttemptContext) => void): Promise<ProbeResult> {
  const started = performance.now();
  return new Promise<ProbeResult>((resolve) => {
    let done = false;
    let phase: string | undefined;
    const cleanups: Array<() => void> = [];
    const settle = (reason: ProbeReason, message: string): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      for (const fn of cleanups.splice(0)) {
        try {
          fn();
        } catch {
          // Cleanup is best effort (a socket already closed, a process already gone); the outcome stands.
        }
      }
      resolve({ ok: reason === 'ok', reason, message, durationMs: roundMs(performance.now() - started) });
    };
    const onAbort = (): void => {
      if (opts.signal) settle(...abortedOutcome(target, opts.signal, opts.timeoutMs, phase));
    };
    // The timeout's verdict waits for node to read its sockets once more (setImmediate runs after that): after a
    // stall of the event loop (a busy box, a long garbage collection) node runs the timers that fell due before
    // it reads its sockets, so an answer that came in during the stall would lose to the timer unread, and a
    // busy director would take healthy real servers out.
    const timer = setTimeout(() => setImmediate(() => settle('timeout', timeoutMessage(target, opts.timeoutMs, phase))), opts.timeoutMs);
    if (opts.signal?.aborted) {
      onAbort();
      return;
    }
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const ctx: AttemptContext = {
      settle,
      onCleanup(fn) {
        if (done) {
          try {
            fn();
          } catch {
            // as above
          }
        } else cleanups.push(fn);
      },
      setPhase(p) {
        phase = p;
      },
      get done() {
        return done;
      },
    };
    try {
      body(ctx);
    } catch (err) {
      settle('error', `${describeTarget(target)}: ${err instanceof Error ? err.message : String(err)}`);
    }
  });
}

/** Probers read at most this much of a reply or body: enough for any health page, bounded against a hostile one. */
export const REPLY_LIMIT_BYTES = 64 * 1024;

/** 'tcp connect to …: reply "-ERR busy" does not contain "+PONG"', or says the server sent nothing. */
export function mismatchMessage(what: string, reply: string, expect: string): string {
  if (reply === '') return `${what}: closed without a reply (want ${JSON.stringify(expect)})`;
  // Control characters escaped and the length bounded: the message is one log line.
  const shown = JSON.stringify(reply.length > 40 ? `${reply.slice(0, 40)}...` : reply);
  return `${what}: reply ${shown} does not contain ${JSON.stringify(expect)}`;
}
