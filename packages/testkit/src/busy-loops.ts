import { availableParallelism } from 'node:os';
import { BackgroundProcess } from './exec.js';

/**
 * A foreign CPU load for drills and benchmarks: busy loops in the root namespace, nothing to do with lbd,
 * one per core asked for. The agents must keep their timing while the machine is busy (DESIGN.md: a vip
 * moves only when something failed, never because the director was busy), and CI runs the HA drills so.
 *
 * Each loop ends by itself after `maxMs` (a crashed caller leaves no spinning process behind for long);
 * `stop()` kills and reaps them all.
 */
export class BusyLoops {
  private constructor(private readonly loops: readonly BackgroundProcess[]) {}

  /** Starts `cores` busy loops (default: one per core), each ending by itself after `maxMs`. */
  static start(maxMs: number, cores = availableParallelism()): BusyLoops {
    if (!Number.isInteger(cores) || cores < 0 || cores > 256) throw new Error(`busy loops: cores must be 0..256 (got ${cores})`);
    if (!(maxMs > 0)) throw new Error(`busy loops: maxMs must be > 0 (got ${maxMs})`);
    const script = `const end = Date.now() + ${Math.ceil(maxMs)}; while (Date.now() < end) {}`;
    return new BusyLoops(Array.from({ length: cores }, (_, i) => new BackgroundProcess(`busy-loop-${i + 1}`, process.execPath, ['-e', script])));
  }

  get count(): number {
    return this.loops.length;
  }

  /** Kills every loop (the loop never yields to a SIGTERM handler, so SIGKILL) and waits until each has exited. */
  async stop(): Promise<void> {
    for (const p of this.loops) p.signal('SIGKILL');
    await Promise.all(this.loops.map((p) => p.exited));
  }
}
