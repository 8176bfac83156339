import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { TABLE_NAME } from './model.js';
import { OneAtATime } from './one-at-a-time.js';

/**
 * One long-lived `nft -i` for small changes. Starting `nft` and the kernel's cleanup when its netlink
 * socket closes cost about 15 ms per process; a one-server change itself takes about 1 ms. Each line
 * written to `nft -i` is parsed as one batch, so a change sent as one line (its commands joined by `;`)
 * is still one atomic transaction.
 *
 * How a change's end is known: after the change line a sentinel line lists lbd's small `schema` set;
 * nft handles lines in order and writes a failed line's error to stderr before it reads the next one,
 * so once the sentinel's listing is complete every error of the change has been written.
 * Large changes (full rebuilds, long element lists) still go through `nft -f FILE`.
 */
export class NftSession {
  private child: ChildProcessWithoutNullStreams | null = null;
  private stdout = '';
  private stderr = '';
  private waiter: { done: () => void; fail: (e: Error) => void } | null = null;
  /** The calls, one at a time: a line's end is known only by its own sentinel (see run). */
  private readonly turns = new OneAtATime();

  /**
   * `sentinel`: a command that lists a small set of the session's own table (the default is the data
   * plane's `schema` set); its listing ends with the two closing braces the end of a change is known by.
   */
  constructor(private readonly start: () => ChildProcessWithoutNullStreams, private readonly sentinel = `list set ip ${TABLE_NAME} schema`) {}

  /**
   * Applies `commands` as one transaction; resolves with nft's error text ('' on success). With `timeoutMs`,
   * a session that has not answered by then is killed and the call rejects (the next call starts another):
   * a sentinel that itself fails (its table deleted under us) would otherwise never end the wait.
   */
  run(commands: readonly string[], timeoutMs?: number): Promise<string> {
    // One change in flight at a time: a second line written before the first's sentinel came would take
    // over the wait, and the first call would never end (seen: a config apply's guard() beside a beat's
    // lease renewal stopped the kernel lease's writer, and with it the election, for good). The timeout
    // counts from the call's own turn.
    return this.turns.run(() => this.runNow(commands, timeoutMs));
  }

  private async runNow(commands: readonly string[], timeoutMs?: number): Promise<string> {
    const child = this.ensure();
    // Held while a change is in flight (the process must not exit awaiting nft), released when idle.
    setRef(child, true);
    this.stdout = '';
    this.stderr = '';
    const sentinelEnd = '}\n}\n';
    const finished = new Promise<void>((done, fail) => {
      this.waiter = { done, fail };
    });
    child.stdin.write(`${commands.join('; ')}\n${this.sentinel}\n`);
    const check = (): void => {
      if (this.stdout.endsWith(sentinelEnd)) this.waiter?.done();
    };
    const onData = (): void => check();
    child.stdout.on('data', onData);
    const timer = timeoutMs === undefined ? undefined : setTimeout(() => {
      this.waiter?.fail(new Error(`nft -i did not answer within ${timeoutMs} ms: ${this.stderr.trim()}`));
      if (this.child === child) this.child = null;
      child.kill('SIGKILL');
    }, timeoutMs);
    try {
      check();
      await finished;
    } finally {
      clearTimeout(timer);
      child.stdout.off('data', onData);
      this.waiter = null;
      setRef(child, false);
    }
    // Errors written before the sentinel's listing may be delivered in the same turn, after it.
    await new Promise((r) => setImmediate(r));
    return this.stderr.trim();
  }

  close(): void {
    this.child?.stdin.end();
    this.child = null;
  }

  private ensure(): ChildProcessWithoutNullStreams {
    if (this.child) return this.child;
    const child = this.start();
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stdout.on('data', (d: string) => { this.stdout += d; });
    child.stderr.on('data', (d: string) => { this.stderr += d; });
    const gone = (why: string): void => {
      if (this.child === child) this.child = null;
      this.waiter?.fail(new Error(`nft -i ${why}: ${this.stderr.trim()}`));
    };
    child.on('exit', (code) => gone(`exited (${code})`));
    child.on('error', (e) => gone(`failed to start (${e.message})`));
    // An idle session must not keep the agent (or a test) from exiting.
    setRef(child, false);
    this.child = child;
    return child;
  }
}

type Refable = { ref?: () => void; unref?: () => void };

function setRef(child: ChildProcessWithoutNullStreams, on: boolean): void {
  for (const h of [child, child.stdin, child.stdout, child.stderr] as unknown as Refable[]) {
    if (on) h.ref?.();
    else h.unref?.();
  }
}
