import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The compiled connect prober (native/lbd-probe.c), built beside this file's directory. */
export const LBD_PROBE_HELPER = fileURLToPath(new URL('../lbd-probe', import.meta.url));

/** Whether the compiled connect prober was built. */
export function nativeConnectAvailable(): boolean {
  return existsSync(LBD_PROBE_HELPER);
}

/** How long a helper that died is not started again (probes meanwhile connect another way). */
const RESTART_DELAY_MS = 1000;

/** How a connect ended: `OK`, `TIMEOUT`, or the connect's errno by name (`ECONNREFUSED`, ...). */
export type ConnectCode = string;

export interface PendingConnect {
  readonly result: Promise<ConnectCode>;
  /** Forgets the connect (its socket is closed with a reset); its result never comes. */
  cancel(): void;
}

interface Waiting { readonly gen: number; resolve(code: ConnectCode): void }

/**
 * Plain tcp connect checks through one lbd-probe process: a request line per connect, an answer line per
 * result (the protocol is in lbd-probe.c). Slots are reused, each use with a new generation, so an answer
 * that crosses its probe's cancel is recognised and dropped.
 *
 * The process is started on first use and again after it died, at most once a second (the probes it held
 * end with a code naming that; until it runs again, connect() returns null). It does not keep the agent's
 * event loop alive: a pending probe's own timer does.
 */
export class NativeConnector {
  private child: ChildProcessWithoutNullStreams | null = null;
  private readonly waiting = new Map<number, Waiting>();
  private readonly free: number[] = [];
  private nextSlot = 0;
  private gen = 0;
  private pendingText = '';
  private corked = false;
  private restartAt = 0;

  constructor(private readonly start: () => ChildProcessWithoutNullStreams = () => spawn(LBD_PROBE_HELPER, [], { stdio: 'pipe' })) {}

  /**
   * Starts a connect; null while the helper is down and not yet due to be started again (the caller then
   * connects another way).
   */
  connect(address: string, port: number, timeoutMs: number): PendingConnect | null {
    const child = this.helper();
    if (child === null) return null;
    const slot = this.free.pop() ?? this.nextSlot++;
    const gen = (this.gen = (this.gen + 1) >>> 0);
    let resolve!: (code: ConnectCode) => void;
    const result = new Promise<ConnectCode>((r) => { resolve = r; });
    this.waiting.set(slot, { gen, resolve });
    // Addresses are literals validated by config; a space or newline would break the line protocol.
    if (/[\s]/.test(address)) {
      this.release(slot);
      resolve('EINVAL');
    } else {
      this.send(child, `P ${slot} ${gen} ${address} ${port} ${Math.max(1, Math.ceil(timeoutMs))}\n`);
    }
    return {
      result,
      cancel: () => {
        const w = this.waiting.get(slot);
        if (w === undefined || w.gen !== gen) return;
        this.release(slot);
        if (this.child !== null) this.send(this.child, `C ${slot} ${gen}\n`);
      },
    };
  }

  /** Stops the helper; pending connects end with `ECANCELED`. */
  close(): void {
    const child = this.child;
    this.child = null;
    child?.stdin.end();
    this.failAll('ECANCELED');
  }

  /**
   * Requests made in one turn of the event loop go in one write: the scheduler starts every probe due at
   * a timer at once, and a write per probe was a system call per probe.
   */
  private send(child: ChildProcessWithoutNullStreams, line: string): void {
    if (!this.corked) {
      this.corked = true;
      child.stdin.cork();
      process.nextTick(() => {
        this.corked = false;
        child.stdin.uncork();
      });
    }
    child.stdin.write(line);
  }

  private release(slot: number): void {
    this.waiting.delete(slot);
    this.free.push(slot);
  }

  private failAll(code: ConnectCode): void {
    for (const [slot, w] of [...this.waiting]) {
      this.release(slot);
      w.resolve(code);
    }
  }

  private helper(): ChildProcessWithoutNullStreams | null {
    if (this.child !== null) return this.child;
    // A helper that died is started again at most once a second: one that cannot start (gone, broken)
    // must not cost a process start per probe.
    if (performance.now() < this.restartAt) return null;
    const child = this.start();
    this.child = child;
    this.pendingText = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (text: string) => this.answers(text));
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (t: string) => { stderr = (stderr + t).slice(-500); });
    const died = (why: string): void => {
      if (this.child !== child) return;
      this.child = null;
      this.restartAt = performance.now() + RESTART_DELAY_MS;
      // What the probes it held say: the helper's own words, for the check's message.
      this.failAll(`lbd-probe ${why}${stderr.trim() ? `: ${stderr.trim().split('\n').at(-1)}` : ''}`);
    };
    child.on('error', (err) => died(`could not run (${err.message})`));
    // 'close', not 'exit': by then its stderr has been read to the end.
    child.on('close', (code, signal) => died(signal ? `was killed by ${signal}` : `exited with ${code}`));
    child.stdin.on('error', () => { /* the exit handler says what happened */ });
    child.unref();
    for (const s of [child.stdin, child.stdout, child.stderr]) (s as unknown as { unref?: () => void }).unref?.();
    return child;
  }

  private answers(text: string): void {
    const lines = (this.pendingText + text).split('\n');
    this.pendingText = lines.pop()!;
    for (const line of lines) {
      const [slotText, genText, code] = line.split(' ');
      const slot = Number(slotText);
      const w = this.waiting.get(slot);
      if (w === undefined || w.gen !== Number(genText) || code === undefined) continue;
      this.release(slot);
      w.resolve(code);
    }
  }
}
