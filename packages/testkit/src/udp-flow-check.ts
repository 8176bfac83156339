/**
 * One long-lived UDP flow of `lbd-testclient udp-flows`: a request/response protocol over one socket with a
 * fixed source port (so the director sees one conntrack flow for the whole run). Sequence numbers are
 * sent one at a time, a new one every interval once the previous one was answered; an unanswered one is
 * re-sent (same seq) every timeout, up to a bound. "No lost data" means every seq was eventually
 * answered, and every answer came from the same real server.
 *
 * Pure: times in, what to send and the verdict out. The socket, timers and payload format are the client's.
 */

const NO_ANSWER = 'no answer at all';

export interface UdpFlowTiming {
  /** Time from one seq's first send to the next seq's. */
  readonly intervalMs: number;
  /** Time without an answer after which a seq is re-sent. */
  readonly timeoutMs: number;
  /** Re-sends of one seq before it counts as lost. */
  readonly maxRetries: number;
}

export interface UdpFlowReport {
  readonly sourcePort: number;
  /** The server that answered first; null before any answer. */
  readonly server: string | null;
  /** Sequence numbers answered. */
  readonly answered: number;
  /** Re-sends, over all sequence numbers. */
  readonly retries: number;
  /** Longest time between two answers (ms): a failover the flow survived shows here. */
  readonly maxGapMs: number;
  /** Null while intact, else the first thing that went wrong. */
  readonly error: string | null;
}

/** What the client does next: send `send` (when given) now, and call tick() again at `wakeAtMs`. */
export interface UdpFlowStep {
  readonly send?: number;
  readonly wakeAtMs: number;
}

export class UdpFlowChecker {
  private server: string | null = null;
  private answered = 0;
  private retries = 0;
  private maxGapMs = 0;
  private firstError: string | null = null;
  private lastAnswerAtMs: number | undefined;
  /** The seq waiting for its answer, if any. */
  private outstanding: { seq: number; firstSentAtMs: number; lastSentAtMs: number; retries: number } | undefined;
  /** Next seq to send, and the earliest time it may go out. */
  private nextSeq = 0;
  private nextDueMs: number | undefined;
  private lastSendError: string | undefined;
  private stopped = false;
  private failedHard = false;

  constructor(readonly sourcePort: number, private readonly timing: UdpFlowTiming) {}

  /** Called on a timer (first at the start): sends a new seq when due, re-sends or gives up on a late one. */
  tick(nowMs: number): UdpFlowStep {
    if (this.failedHard) return { wakeAtMs: Number.POSITIVE_INFINITY };
    const o = this.outstanding;
    if (o !== undefined) {
      const resendAt = o.lastSentAtMs + this.timing.timeoutMs;
      if (nowMs < resendAt) return { wakeAtMs: resendAt };
      if (o.retries >= this.timing.maxRetries) {
        this.fail(`seq ${o.seq} never answered (${o.retries} retries over ${nowMs - o.firstSentAtMs} ms${this.lastSendError ? `; last send error ${this.lastSendError}` : ''})`);
        this.outstanding = undefined;
        this.nextDueMs = nowMs;
        return this.tick(nowMs);
      }
      o.retries++;
      this.retries++;
      o.lastSentAtMs = nowMs;
      return { send: o.seq, wakeAtMs: nowMs + this.timing.timeoutMs };
    }
    if (this.stopped) return { wakeAtMs: Number.POSITIVE_INFINITY };
    const due = this.nextDueMs ?? nowMs;
    if (nowMs < due) return { wakeAtMs: due };
    const seq = this.nextSeq++;
    this.outstanding = { seq, firstSentAtMs: nowMs, lastSentAtMs: nowMs, retries: 0 };
    this.nextDueMs = nowMs + this.timing.intervalMs;
    return { send: seq, wakeAtMs: nowMs + this.timing.timeoutMs };
  }

  /**
   * An answer to `seq` from `server`. Every answer's server is checked, also late duplicates of a
   * re-sent seq: a duplicate from another server is the flow moving too. Returns true when it answered
   * the outstanding seq (the client then calls tick() for the next one).
   */
  answer(seq: number, server: string, nowMs: number): boolean {
    if (this.server === null) this.server = server;
    else if (server !== this.server) this.fail(`server changed from ${this.server} to ${server} at seq ${seq}`);
    if (this.outstanding?.seq !== seq) return false;
    this.outstanding = undefined;
    this.answered++;
    if (this.lastAnswerAtMs !== undefined) this.maxGapMs = Math.max(this.maxGapMs, nowMs - this.lastAnswerAtMs);
    this.lastAnswerAtMs = nowMs;
    return true;
  }

  /** A send failed (ENETUNREACH during a failover, ...): not fatal, the re-sends go on; named if the seq is lost. */
  sendFailed(error: string): void {
    this.lastSendError = error;
  }

  /** The flow cannot go on (its socket could not bind, or closed): no more sends. The first error is kept. */
  fail(error: string, opts: { fatal?: boolean } = {}): void {
    this.firstError ??= error;
    if (opts.fatal) {
      this.failedHard = true;
      this.outstanding = undefined;
    }
  }

  /** No new seqs from now on; the outstanding one is still re-sent until answered or given up. */
  stop(): void {
    this.stopped = true;
  }

  /** Nothing waits for an answer (after stop(): the flow is done). */
  get idle(): boolean {
    return this.outstanding === undefined;
  }

  /** The first seq was answered, or the flow failed before that: what `ready` waits for. */
  get settled(): boolean {
    return this.answered > 0 || this.firstError !== null;
  }

  get started(): boolean {
    return this.answered > 0;
  }

  /** Ends the check: a seq still unanswered now is lost too. */
  finish(nowMs: number): UdpFlowReport {
    const o = this.outstanding;
    if (o !== undefined) {
      this.fail(`seq ${o.seq} not answered by the end (${o.retries} retries over ${nowMs - o.firstSentAtMs} ms)`);
      this.outstanding = undefined;
    }
    this.stopped = true;
    if (this.answered === 0 && !this.firstError?.startsWith(NO_ANSWER)) this.firstError = `${NO_ANSWER}${this.firstError !== null ? ` (${this.firstError})` : ''}`;
    return this.report();
  }

  report(): UdpFlowReport {
    return {
      sourcePort: this.sourcePort, server: this.server, answered: this.answered, retries: this.retries,
      maxGapMs: this.maxGapMs, error: this.firstError,
    };
  }
}
