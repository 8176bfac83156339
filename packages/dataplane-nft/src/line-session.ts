import type { ChildProcessWithoutNullStreams } from 'node:child_process';

export interface LineSessionOptions {
  /** Called with each chunk the child writes on stderr (the session keeps its own tail too: `why()`). */
  readonly onStderr?: (chunk: string) => void;
  /**
   * After the child ended, could not be started or was given up, it is not started again for this long:
   * requests meanwhile reject at once, and the caller's fallback covers the gap (default 0: at once).
   */
  readonly restartAfterMs?: number;
  /**
   * A request unanswered this long gives the child up (it is killed and its requests reject): a child that
   * stopped answering would otherwise hold every later request behind this one (default: no limit).
   */
  readonly answerTimeoutMs?: number;
}

/** The last this many characters of the child's stderr are kept for messages. */
const STDERR_TAIL_CHARS = 1000;
/**
 * A child's 'exit' can come before its last stderr is read (seen on a busy box: "exited (3)" without the
 * reason it wrote just before): the requests it leaves reject once its stderr has ended, or after this long
 * (a grandchild may hold the pipe open).
 */
const STDERR_DRAIN_MS = 200;

/**
 * A long-lived child that answers each request (some lines, or a frame, on stdin) with one line on stdout, in order:
 * `ip -batch`, the announcer and the kernel lease's writer (lbd-nfbatch). Started on first use (or `warm()`) and
 * again after it ended, no sooner than `restartAfterMs`; when it ends, the requests it had not answered
 * reject, with its last stderr in the message.
 */
export class LineSession {
  private child: ChildProcessWithoutNullStreams | null = null;
  private readonly pending: Array<{ resolve: (line: string) => void; reject: (e: Error) => void }> = [];
  private buffer = '';
  private stderr = '';
  /** When the child last ended (or could not start), on the monotonic clock. */
  private endedAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly spawnChild: () => ChildProcessWithoutNullStreams, private readonly name: string,
    private readonly opts: LineSessionOptions = {}) {}

  /** Writes `text` (whole lines, or whatever whole request the child reads); resolves with the answer line. */
  async request(text: string | Buffer): Promise<string> {
    const child = this.start();
    const answer = new Promise<string>((resolve, reject) => {
      this.pending.push({ resolve, reject });
      child.stdin.write(text);
    });
    const limit = this.opts.answerTimeoutMs;
    if (limit === undefined) return answer;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new Error(`${this.name} did not answer within ${limit} ms${this.why()}`));
        this.giveUp(child);
      }, limit);
    });
    try {
      return await Promise.race([answer, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Starts the child now if it is not running (a takeover's first request should not wait for it to start).
   * Throws when it is resting after it ended, or cannot be started; `warm()` is the same without the throw.
   */
  start(): ChildProcessWithoutNullStreams {
    if (this.child) return this.child;
    const rest = (this.opts.restartAfterMs ?? 0) - (performance.now() - this.endedAt);
    if (rest > 0) throw new Error(`${this.name} ended; not started again for another ${Math.ceil(rest)} ms${this.why()}`);
    let child: ChildProcessWithoutNullStreams;
    try {
      child = this.spawnChild();
    } catch (e) {
      this.endedAt = performance.now();
      throw new Error(`${this.name} could not be started: ${(e as Error).message}`, { cause: e });
    }
    this.child = child;
    this.buffer = '';
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      // A child that ended answers nothing more: its late output must not answer the next child's requests.
      if (this.child !== child) return;
      this.buffer += chunk;
      for (let nl = this.buffer.indexOf('\n'); nl >= 0; nl = this.buffer.indexOf('\n')) {
        const line = this.buffer.slice(0, nl);
        this.buffer = this.buffer.slice(nl + 1);
        this.pending.shift()?.resolve(line);
      }
    });
    child.stderr.on('data', (chunk: string) => {
      this.stderr = (this.stderr + chunk).slice(-STDERR_TAIL_CHARS);
      this.opts.onStderr?.(chunk);
    });
    child.on('error', (e) => this.ended(child, `failed: ${e.message}`));
    child.on('exit', (code, signal) => this.ended(child, `exited (${signal ?? code})`, true));
    child.stdin.on('error', () => this.ended(child, 'stdin closed'));
    return child;
  }

  /** `start()` without the throw: a child that cannot start says why at the first request. */
  warm(): void {
    try {
      this.start();
    } catch {
      // See above.
    }
  }

  close(): void {
    const child = this.child;
    this.child = null;
    if (child) child.stdin.end();
    for (const w of this.pending.splice(0)) w.reject(new Error(`${this.name} closed`));
  }

  /** The child's last stderr, as a message suffix (`: ...`), or nothing. */
  why(): string {
    const s = this.stderr.trim();
    return s === '' ? '' : `: ${s}`;
  }

  private ended(child: ChildProcessWithoutNullStreams, why: string, drainStderr = false): void {
    if (this.child !== child) return;
    this.child = null;
    this.endedAt = performance.now();
    const left = this.pending.splice(0);
    const reject = (): void => { for (const w of left) w.reject(new Error(`${this.name} ${why}${this.why()}`)); };
    if (!drainStderr || left.length === 0 || child.stderr.readableEnded) {
      reject();
      return;
    }
    const timer = setTimeout(() => { child.stderr.off('end', done); reject(); }, STDERR_DRAIN_MS);
    function done(): void {
      clearTimeout(timer);
      reject();
    }
    child.stderr.once('end', done);
  }

  /** A child that stopped answering: killed (closing its stdin would not end one stuck in the kernel). */
  private giveUp(child: ChildProcessWithoutNullStreams): void {
    this.ended(child, 'given up');
    child.kill('SIGKILL');
  }
}
