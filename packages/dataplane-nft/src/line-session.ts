import type { ChildProcessWithoutNullStreams } from 'node:child_process';

/**
 * A long-lived child that answers each request (some lines on stdin) with one line on stdout, in order:
 * `ip -batch`, the announcer and the kernel lease's netlink writer. Started on first use and again after it
 * died; when it dies, the requests it had not answered reject.
 */
export class LineSession {
  private child: ChildProcessWithoutNullStreams | null = null;
  private readonly pending: Array<{ resolve: (line: string) => void; reject: (e: Error) => void }> = [];
  private buffer = '';

  constructor(private readonly spawnChild: () => ChildProcessWithoutNullStreams, private readonly name: string,
    private readonly hooks: { onStderr?: (chunk: string) => void; onEnded?: () => void } = {}) {}

  /** Writes `text` (whole lines); resolves with the answer line. */
  request(text: string): Promise<string> {
    const child = this.child ?? this.start();
    return new Promise((resolve, reject) => {
      this.pending.push({ resolve, reject });
      child.stdin.write(text);
    });
  }

  /** Starts the child now, if it is not running (spawn errors throw). */
  start(): ChildProcessWithoutNullStreams {
    if (this.child) return this.child;
    const child = this.spawnChild();
    this.child = child;
    this.buffer = '';
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      this.buffer += chunk;
      for (let nl = this.buffer.indexOf('\n'); nl >= 0; nl = this.buffer.indexOf('\n')) {
        const line = this.buffer.slice(0, nl);
        this.buffer = this.buffer.slice(nl + 1);
        this.pending.shift()?.resolve(line);
      }
    });
    child.stderr.on('data', (chunk: string) => this.hooks.onStderr?.(chunk));
    const ended = (why: string): void => {
      if (this.child !== child) return;
      this.child = null;
      this.hooks.onEnded?.();
      for (const w of this.pending.splice(0)) w.reject(new Error(`${this.name} ${why}`));
    };
    child.on('error', (e) => ended(`failed: ${e.message}`));
    child.on('exit', (code, signal) => ended(`exited (${signal ?? code})`));
    child.stdin.on('error', () => ended('stdin closed'));
    return child;
  }

  close(): void {
    const child = this.child;
    this.child = null;
    if (child) child.stdin.end();
    for (const w of this.pending.splice(0)) w.reject(new Error('closed'));
  }
}
