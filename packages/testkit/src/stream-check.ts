/**
 * Verifies one connection to lbd-testserver's stream port: the server writes `<name> <seq>\n` every 50 ms
 * from seq 0, and `echo <text>\n` for each line it receives. A stream is intact when every sequence line
 * came from the same server, in order, without a gap, and it was still flowing when the check ended.
 * Pure: bytes and times in, verdict out; the socket handling is the client's.
 */

/** A sequence line: `rs1 42`. */
const SEQ_LINE = /^(\S+) (\d+)$/;
/** Longest line the server writes; anything longer is garbage, not a slow line. */
const MAX_LINE = 1024;

export interface StreamReport {
  /** Name of the server on the other end, null before the first line. */
  readonly server: string | null;
  /** Sequence lines received. */
  readonly lines: number;
  /** Longest silence between sequence lines (ms), to show stalls that recovered (e.g. a failover). */
  readonly maxGapMs: number;
  /** Null while intact, else the first thing that went wrong. */
  readonly error: string | null;
}

export class StreamChecker {
  private server: string | null = null;
  private lines = 0;
  private buffered = '';
  private firstError: string | null = null;
  private lastLineAtMs: number | undefined;
  private maxGapMs = 0;
  private echoes: string[] = [];

  /** Feeds received text; `nowMs` is the receive time. */
  feed(text: string, nowMs: number): void {
    this.buffered += text;
    let nl: number;
    while ((nl = this.buffered.indexOf('\n')) >= 0) {
      const line = this.buffered.slice(0, nl);
      this.buffered = this.buffered.slice(nl + 1);
      this.line(line, nowMs);
    }
    if (this.buffered.length > MAX_LINE) {
      this.fail(`line longer than ${MAX_LINE} bytes: ${JSON.stringify(this.buffered.slice(0, 40))}...`);
      this.buffered = '';
    }
  }

  /** Records a failure (reset, timeout, ...); the first one is kept. */
  fail(error: string): void {
    this.firstError ??= error;
  }

  /**
   * Ends the check. A stream that has been silent for longer than `stallMs` is not alive any more, even
   * if every line it did send was in order.
   */
  finish(nowMs: number, stallMs: number): StreamReport {
    if (this.lines === 0) this.fail('no line received');
    else if (this.lastLineAtMs !== undefined && nowMs - this.lastLineAtMs > stallMs) {
      this.fail(`stalled: no line for ${nowMs - this.lastLineAtMs} ms (after ${this.lines} lines, the last at ${new Date(this.lastLineAtMs).toISOString()})`);
    }
    return this.report();
  }

  report(): StreamReport {
    return { server: this.server, lines: this.lines, maxGapMs: this.maxGapMs, error: this.firstError };
  }

  get intact(): boolean {
    return this.firstError === null;
  }

  get started(): boolean {
    return this.lines > 0;
  }

  /** Text the server echoed back (without the `echo ` prefix), oldest first. */
  get echoed(): readonly string[] {
    return this.echoes;
  }

  private line(line: string, nowMs: number): void {
    if (line.startsWith('echo ')) {
      this.echoes.push(line.slice(5));
      return;
    }
    const m = SEQ_LINE.exec(line);
    if (!m) {
      this.fail(`unexpected line ${JSON.stringify(line.slice(0, 80))}`);
      return;
    }
    const server = m[1]!;
    const seq = Number(m[2]);
    if (this.server === null) {
      this.server = server;
    } else if (server !== this.server) {
      this.fail(`server changed from ${this.server} to ${server} at line ${this.lines}`);
    }
    if (seq !== this.lines) {
      this.fail(`sequence gap: expected ${this.lines}, got ${seq}`);
    }
    if (this.lastLineAtMs !== undefined) this.maxGapMs = Math.max(this.maxGapMs, nowMs - this.lastLineAtMs);
    this.lastLineAtMs = nowMs;
    // Count by position, not by the received number, so one gap is reported once, not on every later line.
    this.lines++;
  }
}
