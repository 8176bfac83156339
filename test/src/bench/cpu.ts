import { readFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { namespacePids } from '@lbd/testkit';
import { clockTicks, parseProcStat } from './report.js';

/** Busy and total jiffies of all CPUs together (/proc/stat's first line; user..steal, guest time is in user). */
export async function systemCpuTimes(): Promise<{ busy: number; total: number }> {
  const f = (await readFile('/proc/stat', 'utf8')).split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: total - (f[3] ?? 0) - (f[4] ?? 0), total };
}

/** The share of all CPUs' time spent busy between two systemCpuTimes() readings (NaN when no time passed). */
export function busyShare(a: { busy: number; total: number }, b: { busy: number; total: number }): number {
  return b.total > a.total ? (b.busy - a.busy) / (b.total - a.total) : Number.NaN;
}

/** CPU of every process in a network namespace, as the benchmarks sample it. */

export interface CpuSample {
  /** utime + stime (+ cutime + cstime: children waited for) per pid, seconds, with the command name. */
  readonly byPid: ReadonlyMap<number, { comm: string; sec: number }>;
  readonly atMs: number;
}

/** Every process in `ns` now, with its CPU so far. */
export async function cpuSample(ns: string): Promise<CpuSample> {
  const tck = await clockTicks();
  const byPid = new Map<number, { comm: string; sec: number }>();
  for (const pid of await namespacePids(ns)) {
    try {
      const st = parseProcStat(await readFile(`/proc/${pid}/stat`, 'utf8'));
      byPid.set(pid, { comm: st.comm, sec: (st.utime + st.stime + st.cutime + st.cstime) / tck });
    } catch {
      // Exited meanwhile: its time is in its parent's cutime/cstime once waited for.
    }
  }
  return { byPid, atMs: performance.now() };
}

/** Cores used between two samples, in total and per command name (a process new in `b` counts whole). */
export function cpuDelta(a: CpuSample, b: CpuSample): { cores: number; byComm: Record<string, number> } {
  const wallSec = (b.atMs - a.atMs) / 1000;
  const byComm: Record<string, number> = {};
  let total = 0;
  for (const [pid, v] of b.byPid) {
    const d = Math.max(0, v.sec - (a.byPid.get(pid)?.sec ?? 0));
    total += d;
    byComm[v.comm] = (byComm[v.comm] ?? 0) + d / wallSec;
  }
  return { cores: total / wallSec, byComm };
}

/**
 * CPU seconds so far of the standby's kernel I/O outside this process: the ctnetlink helpers running in
 * `ns` (the table starts them there) and the conntrack runs this process has waited for (its cutime + cstime,
 * from /proc/self/stat, which also holds a helper that exited).
 */
export async function kernelIoCpuSec(ns: string): Promise<number> {
  const st = parseProcStat(await readFile('/proc/self/stat', 'utf8'));
  const running = [...(await cpuSample(ns)).byPid.values()].reduce((sum, p) => sum + p.sec, 0);
  return (st.cutime + st.cstime) / (await clockTicks()) + running;
}
