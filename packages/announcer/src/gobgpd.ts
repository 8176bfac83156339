import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';

export interface GobgpdOptions {
  /** The API's unix socket (gobgpd `--api-hosts unix://PATH`): no TCP port, reachable by file permission only. */
  readonly socket: string;
  /** The program and the words before its own arguments (default `gobgpd`; tests: `ip netns exec NS gobgpd`). */
  readonly command?: readonly string[];
  /** After gobgpd exited, started again after this long (default 1 000 ms). */
  readonly restartAfterMs?: number;
  /** Transitions only: started, exited, restarting. */
  readonly onEvent?: (msg: string, fields: Record<string, unknown>) => void;
}

/**
 * Runs gobgpd for the agent and starts it again when it exits. gobgpd keeps nothing across a restart (no
 * config file: everything comes over the API), and GoBgpAnnouncer sees a restarted one by its empty global
 * config and sets it up again, so a restart costs the routers one session flap and nothing else. A
 * gobgpd that an operator runs instead is adopted by pointing the announcer at its socket, without this.
 */
export class GobgpdProcess {
  private child: ChildProcess | null = null;
  private stopped = false;
  private timer: NodeJS.Timeout | null = null;
  private stderr = '';

  constructor(private readonly opts: GobgpdOptions) {}

  /** Starts gobgpd; resolves once its API socket exists (bounded by `timeoutMs`). */
  async start(timeoutMs = 10_000): Promise<void> {
    this.stopped = false;
    this.spawnOnce();
    const deadline = Date.now() + timeoutMs;
    while (!existsSync(this.opts.socket)) {
      if (this.child === null) throw new Error(`gobgpd exited before its API socket ${this.opts.socket} appeared${this.why()}`);
      if (Date.now() > deadline) throw new Error(`gobgpd's API socket ${this.opts.socket} did not appear within ${timeoutMs} ms${this.why()}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Stops gobgpd (SIGTERM, then SIGKILL after `graceMs`); no restart after this. */
  async stop(graceMs = 2000): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    const late = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(late);
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  private spawnOnce(): void {
    const [cmd, ...pre] = this.opts.command ?? ['gobgpd'];
    // A socket left by a gobgpd that died would make the new one fail to listen.
    rmSync(this.opts.socket, { force: true });
    const child = spawn(cmd!, [...pre, '--api-hosts', `unix://${this.opts.socket}`, '--pprof-disable', '--log-plain', '--log-level', 'warn'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    this.child = child;
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (c: string) => { this.stderr = (this.stderr + c).slice(-1000); });
    child.on('error', (e) => { this.stderr += e.message; });
    child.on('exit', (code, signal) => {
      if (this.child === child) this.child = null;
      if (this.stopped) return;
      const restartAfterMs = this.opts.restartAfterMs ?? 1000;
      this.opts.onEvent?.('gobgpd exited; starting it again', { code, signal, restartAfterMs, stderr: this.stderr.trim() });
      this.timer = setTimeout(() => { if (!this.stopped) this.spawnOnce(); }, restartAfterMs);
      this.timer.unref();
    });
    child.once('spawn', () => this.opts.onEvent?.('gobgpd started', { pid: child.pid, socket: this.opts.socket }));
  }

  private why(): string {
    const s = this.stderr.trim();
    return s === '' ? '' : `: ${s}`;
  }
}
