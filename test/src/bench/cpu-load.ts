import { spawn, type ChildProcess } from 'node:child_process';
import { availableParallelism } from 'node:os';

/**
 * A foreign CPU load for the benchmarks' loaded variants: one busy loop per core, in the root namespace,
 * nothing to do with lbd. Each loop ends by itself after `ms` (so a benchmark that dies leaves nothing
 * spinning for long); stopLoad kills whatever is left.
 */
export function cpuLoad(ms: number): ChildProcess[] {
  return Array.from({ length: availableParallelism() }, () =>
    spawn(process.execPath, ['-e', `const end = Date.now() + ${ms}; while (Date.now() < end) {}`], { stdio: 'ignore' }));
}

/** Kills the loops (those already ended ignore it) and empties `load`. */
export function stopLoad(load: ChildProcess[]): void {
  for (const p of load.splice(0)) p.kill('SIGKILL');
}
