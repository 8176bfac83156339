import { readFile, readdir, readlink, stat } from 'node:fs/promises';
import { clockTicks, parseProcStat } from './report.js';

/**
 * CPU time used by processes that are not the benchmark's: everything outside its network namespaces
 * except this process itself and kernel threads. On a 2-core machine another developer's test run
 * halves a figure, so each measurement checks how much foreign CPU ran beside it and is repeated when
 * that was more than a little.
 *
 * Counts user + system time, and the time of reaped children, so short-lived processes count through
 * their parent once it waits for them. Approximate (a process whose parent is not watched, or that moves
 * between namespaces, is missed): the check finds heavy neighbours, not every tick.
 */
export type Snapshot = ReadonlyMap<number, { readonly sec: number; readonly comm: string }>;

export class ForeignLoad {
  private constructor(
    private readonly ownNamespaces: ReadonlySet<string>,
    private readonly ticksPerSec: number,
  ) {}

  /** `namespaces`: names under /run/netns that belong to the benchmark. */
  static async create(namespaces: readonly string[]): Promise<ForeignLoad> {
    const links = await Promise.all(namespaces.map(async (ns) => `net:[${(await stat(`/run/netns/${ns}`)).ino}]`));
    return new ForeignLoad(new Set(links), await clockTicks());
  }

  /** CPU seconds and command name of every foreign process now, by pid. */
  async snapshot(): Promise<Snapshot> {
    const out = new Map<number, { sec: number; comm: string }>();
    const pids = (await readdir('/proc')).filter((d) => /^\d+$/.test(d)).map(Number).filter((p) => p !== process.pid);
    await Promise.all(pids.map(async (pid) => {
      try {
        const [statText, net] = await Promise.all([readFile(`/proc/${pid}/stat`, 'utf8'), readlink(`/proc/${pid}/ns/net`)]);
        if (this.ownNamespaces.has(net)) return;
        const st = parseProcStat(statText);
        const PF_KTHREAD = 0x00200000;
        if ((st.flags & PF_KTHREAD) !== 0) return;
        out.set(pid, { sec: (st.utime + st.stime + st.cutime + st.cstime) / this.ticksPerSec, comm: st.comm });
      } catch {
        // Exited while we looked.
      }
    }));
    return out;
  }

  /**
   * Foreign CPU seconds between two snapshots. A process that exited in between hands its whole lifetime
   * to its parent's reaped-children time; its share from before the window is taken off again, so only
   * this window's work counts (and long-lived children are not counted twice).
   */
  static between(before: Snapshot, after: Snapshot): number {
    return Math.max(0, ForeignLoad.contributions(before, after).reduce((a, c) => a + c.sec, 0));
  }

  /** Per-process shares of `between`, largest first (exited processes count negative, see above). */
  static contributions(before: Snapshot, after: Snapshot): { pid: number; comm: string; sec: number }[] {
    const out: { pid: number; comm: string; sec: number }[] = [];
    for (const [pid, a] of after) out.push({ pid, comm: a.comm, sec: a.sec - (before.get(pid)?.sec ?? 0) });
    for (const [pid, b] of before) if (!after.has(pid)) out.push({ pid, comm: b.comm, sec: -b.sec });
    return out.filter((c) => c.sec !== 0).sort((x, y) => y.sec - x.sec);
  }

  /** `node 0.61 s, mocha 0.20 s`: who used the CPU, for a log line. */
  static describe(before: Snapshot, after: Snapshot, n = 3): string {
    return ForeignLoad.contributions(before, after).slice(0, n).filter((c) => c.sec > 0)
      .map((c) => `${c.comm}[${c.pid}] ${c.sec.toFixed(2)} s`).join(', ');
  }
}
