import { execFile, spawn as spawnChild, type ChildProcess } from 'node:child_process';

/**
 * Running commands for tests, benchmarks and the lab: a bounded one-shot `runCommand` and a tracked
 * `BackgroundProcess`. Not for production code: the agent runs kernel commands only through the data-plane
 * adapter's injected runner.
 */

export interface ExecResult {
  readonly stdout: string;
  readonly stderr: string;
  /** Exit code; -1 when the command was killed by a signal or its timeout. */
  readonly code: number;
}

export interface ExecOptions {
  /** Resolve with the result instead of rejecting when the command exits non-zero. */
  readonly allowFailure?: boolean;
  /** Kill the command after this long (default 30 s): a test never waits forever on a hung tool. */
  readonly timeoutMs?: number;
  readonly env?: NodeJS.ProcessEnv;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const MAX_BUFFER = 64 * 1024 * 1024;

/** A command exited non-zero (or could not start); the message carries its stderr. */
export class CommandError extends Error {
  constructor(
    readonly command: string,
    readonly result: ExecResult,
    opts: { cause?: unknown } = {},
  ) {
    const detail = result.stderr.trim() || result.stdout.trim() || 'no output';
    super(`${command}: exited ${result.code}: ${detail}`, { cause: opts.cause });
    this.name = 'CommandError';
  }
}

/** Quotes an argv for messages only (never passed to a shell). */
export function formatCommand(cmd: string, args: readonly string[]): string {
  return [cmd, ...args].map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');
}

export function runCommand(cmd: string, args: readonly string[], opts: ExecOptions = {}): Promise<ExecResult> {
  const command = formatCommand(cmd, args);
  return new Promise((resolve, reject) => {
    execFile(cmd, args, {
      encoding: 'utf8', maxBuffer: MAX_BUFFER, timeout: opts.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      killSignal: 'SIGKILL', env: opts.env ?? process.env,
    }, (err, stdout, stderr) => {
      if (!err) return resolve({ stdout, stderr, code: 0 });
      // A numeric code is an exit status; a string code (ENOENT, ...) means it never ran.
      const code = typeof err.code === 'number' ? err.code : -1;
      const result: ExecResult = {
        stdout, stderr: stderr || (err.killed ? `killed after ${opts.timeoutMs ?? DEFAULT_TIMEOUT_MS} ms` : err.message), code,
      };
      if (opts.allowFailure && typeof err.code === 'number') return resolve(result);
      reject(new CommandError(command, result, { cause: err }));
    });
  });
}

export interface ProcessExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface SpawnOptions {
  readonly env?: NodeJS.ProcessEnv;
  /** Also copy the process's output to this process's stderr, prefixed by its label (debugging). */
  readonly echo?: boolean;
}

/** Output kept per stream; a long benchmark must not grow memory without bound. */
const MAX_KEPT_OUTPUT = 4 * 1024 * 1024;
const MAX_KEPT_LINES = 10_000;

/**
 * A background process in its own process group, so stopping it also stops whatever it started
 * (`ip netns exec` execs the command, but a shell wrapper would fork). Keeps its output for assertions
 * and offers event-driven waits on its output lines.
 */
export class BackgroundProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<ProcessExit>;
  private exit: ProcessExit | undefined;
  private readonly streams: Record<OutputStream, StreamState> = { stdout: newStreamState(), stderr: newStreamState() };

  constructor(readonly label: string, cmd: string, args: readonly string[], opts: SpawnOptions = {}) {
    this.child = spawnChild(cmd, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: opts.env ?? process.env });
    this.exited = new Promise((resolve) => {
      this.child.once('error', (e) => {
        this.streams.stderr.text += `${label}: could not start: ${e.message}\n`;
        this.exit ??= { code: -1, signal: null };
        resolve(this.exit);
      });
      this.child.once('close', (code, signal) => {
        this.exit ??= { code, signal };
        resolve(this.exit);
      });
    });
    for (const name of ['stdout', 'stderr'] as const) {
      const st = this.streams[name];
      const readable = this.child[name]!;
      readable.setEncoding('utf8').on('data', (chunk: string) => {
        st.text = keepTail(st.text + chunk);
        if (opts.echo) process.stderr.write(prefixLines(label, chunk));
        st.partial += chunk;
        const lines = st.partial.split('\n');
        st.partial = lines.pop()!;
        for (const line of lines) addLine(st, line);
      });
      // A last line without a newline still counts once the stream ends.
      readable.on('end', () => {
        if (st.partial !== '') addLine(st, st.partial);
        st.partial = '';
      });
    }
  }

  get pid(): number | undefined { return this.child.pid; }
  get stdout(): string { return this.streams.stdout.text; }
  get stderr(): string { return this.streams.stderr.text; }
  get running(): boolean { return this.exit === undefined; }

  /**
   * Resolves with the first line on `stream` (stdout by default) that `match` accepts, including lines
   * printed before the call (so a caller cannot miss a readiness line by awaiting something else first);
   * rejects on timeout or exit.
   */
  waitForLine(match: (line: string) => boolean, timeoutMs: number, stream: OutputStream = 'stdout'): Promise<string> {
    const st = this.streams[stream];
    const seen = st.lines.find(match);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const done = (fn: () => void): void => { clearTimeout(timer); st.waiters.delete(onLine); fn(); };
      const onLine = (line: string): void => { if (match(line)) done(() => resolve(line)); };
      const timer = setTimeout(() => done(() => reject(new Error(
        `${this.label}: no matching ${stream} line within ${timeoutMs} ms; stderr: ${this.stderrTail()}`))), timeoutMs);
      st.waiters.add(onLine);
      void this.exited.then((e) => done(() => reject(new Error(
        `${this.label}: exited (code ${e.code}, signal ${e.signal}) before printing a matching ${stream} line; stderr: ${this.stderrTail()}`))));
    });
  }

  /** Like waitForLine for a JSON line: resolves with the first parsed object `match` accepts. */
  async waitForJson<T = Record<string, unknown>>(match: (value: Record<string, unknown>) => boolean, timeoutMs: number, stream: OutputStream = 'stdout'): Promise<T> {
    const line = await this.waitForLine((l) => {
      const v = parseJsonObject(l);
      return v !== undefined && match(v);
    }, timeoutMs, stream);
    return JSON.parse(line) as T;
  }

  /** The last complete stdout line that is a JSON object (a final report), if any. */
  lastJson<T = Record<string, unknown>>(): T | undefined {
    const lines = this.streams.stdout.lines;
    for (let i = lines.length - 1; i >= 0; i--) {
      const v = parseJsonObject(lines[i]!);
      if (v !== undefined) return v as T;
    }
    return undefined;
  }

  private stderrTail(): string {
    return this.stderr.trim().slice(-2000) || '(empty)';
  }

  /** Sends a signal to the whole process group. */
  signal(sig: NodeJS.Signals): void {
    if (!this.running || this.child.pid === undefined) return;
    try {
      process.kill(-this.child.pid, sig);
    } catch {
      // The group is already gone.
    }
  }

  /** SIGTERM to the group, SIGKILL after `graceMs`; resolves once the process has exited. */
  async stop(graceMs = 2000): Promise<ProcessExit> {
    if (!this.running) return this.exited;
    this.signal('SIGTERM');
    const timer = setTimeout(() => this.signal('SIGKILL'), graceMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** The parsed object if `line` is a JSON object, else undefined. */
export function parseJsonObject(line: string): Record<string, unknown> | undefined {
  const t = line.trim();
  if (!t.startsWith('{')) return undefined;
  try {
    const v: unknown = JSON.parse(t);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

export type OutputStream = 'stdout' | 'stderr';

interface StreamState {
  /** Raw output (the most recent MAX_KEPT_OUTPUT characters). */
  text: string;
  partial: string;
  /** Complete lines (the most recent MAX_KEPT_LINES). */
  readonly lines: string[];
  readonly waiters: Set<(line: string) => void>;
}

function newStreamState(): StreamState {
  return { text: '', partial: '', lines: [], waiters: new Set() };
}

function addLine(st: StreamState, line: string): void {
  st.lines.push(line);
  if (st.lines.length > MAX_KEPT_LINES) st.lines.shift();
  for (const w of [...st.waiters]) w(line);
}

function keepTail(s: string): string {
  return s.length > MAX_KEPT_OUTPUT ? s.slice(s.length - MAX_KEPT_OUTPUT) : s;
}

function prefixLines(label: string, chunk: string): string {
  return chunk.replace(/^(?=.)/gm, `[${label}] `);
}
