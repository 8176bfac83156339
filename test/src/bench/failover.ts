import type { ChildProcess } from 'node:child_process';
import { AdminApi } from '@lbd/proto';
import {
  DRILL_MODES, drillSummary, formatDrill, privilegeProblem, removeOrphans, runDrill, runPrefix, startHaLab,
  type DrillMode, type DrillResult,
} from '@lbd/testkit';
import { cpuLoad, stopLoad } from './cpu-load.js';
import { passMiss, sum, table } from './report.js';

/**
 * `pnpm bench failover [--count N] [--quick]`: failure drills (packages/testkit/src/drill.ts) on an HA lab,
 * N of each mode, with the `default` and the `fast` timing profile, each quiet and with a foreign CPU load
 * saturating every core. Prints p50/p99/max of the time without service and the other figures per
 * variant, then the figures next to the targets. Asserts nothing: a MISS is a figure to look at.
 *
 * Targets: unplanned failover (box death, etcd partition) <= 500 ms p99 with `default`, <= 150 ms p99 with
 * `fast`; planned switchover <= 200 ms with no failed request beyond those in flight; never two holders.
 */

const DEFAULT_COUNT = 20;
const MAX_COUNT = 1000;

interface Variant {
  readonly name: string;
  readonly timing: 'default' | 'fast';
  readonly cpuLoad: boolean;
}

const TARGETS = { unplanned: { default: 500, fast: 150 }, switchover: 200 } as const;

export async function benchFailover(opts: { quick: boolean; count?: number; loadCount?: number }): Promise<number> {
  const problem = await privilegeProblem({ commands: ['nft', 'ip', 'etcd', 'etcdctl', 'arping'] });
  if (problem !== null) {
    process.stderr.write(`bench failover: ${problem}\n`);
    return 1;
  }
  const count = opts.count ?? (opts.quick ? 1 : DEFAULT_COUNT);
  if (!Number.isInteger(count) || count < 1 || count > MAX_COUNT) throw new Error(`--count must be 1..${MAX_COUNT}`);
  const variants: Variant[] = [
    { name: 'default', timing: 'default', cpuLoad: false },
    { name: 'fast', timing: 'fast', cpuLoad: false },
    ...(opts.quick ? [] : [
      { name: 'default + cpu load', timing: 'default', cpuLoad: true } as const,
      { name: 'fast + cpu load', timing: 'fast', cpuLoad: true } as const,
    ]),
  ];
  await removeOrphans('lbdb');
  const all = new Map<string, DrillResult[]>();
  for (const v of variants) {
    process.stdout.write(`\n== ${v.name}: ${v.cpuLoad ? (opts.loadCount ?? count) : count} drill(s) of each mode (${DRILL_MODES.join(', ')})\n`);
    const n = v.cpuLoad ? (opts.loadCount ?? count) : count;
    const results = await runVariant(v, n);
    all.set(v.name, results);
    process.stdout.write(`\n${formatDrill(results)}`);
  }
  process.stdout.write(`\n== targets\n${targets(variants, all)}\n`);
  return 0;
}

async function runVariant(v: Variant, count: number): Promise<DrillResult[]> {
  const lab = await startHaLab({ prefix: runPrefix('lbdb', 'fo'), timing: v.timing, admin: (s) => new AdminApi(s) });
  const load: ChildProcess[] = [];
  const results: DrillResult[] = [];
  try {
    for (const mode of DRILL_MODES) {
      for (let i = 1; i <= count; i++) {
        // The load runs during each drill only (not the lab start or steady waits), bounded by its own deadline.
        if (v.cpuLoad) load.push(...cpuLoad(60_000));
        try {
          const r = await runDrill(lab, mode);
          results.push(r);
          process.stdout.write(`${v.name} ${mode} ${i}/${count}: ${drillSummary(r)}\n`);
        } finally {
          stopLoad(load);
        }
      }
    }
  } finally {
    stopLoad(load);
    await lab.destroy();
  }
  return results;
}

function p99(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(0.99 * s.length) - 1))] ?? NaN;
}

function targets(variants: readonly Variant[], all: ReadonlyMap<string, DrillResult[]>): string {
  const rows: string[][] = [];
  for (const v of variants) {
    const rs = all.get(v.name) ?? [];
    const of = (m: DrillMode): DrillResult[] => rs.filter((r) => r.mode === m);
    for (const m of ['box-death', 'etcd-partition'] as const) {
      const ns = p99(of(m).map((r) => r.noServiceMs));
      const back = p99(of(m).map((r) => r.restoredAfterMs));
      const bound = TARGETS.unplanned[v.timing];
      rows.push([v.name, `${m}: no service p99`, `${ns} ms`, `<= ${bound} ms`, passMiss(ns <= bound)]);
      rows.push([v.name, `${m}: service back p99`, `${back} ms`, `<= ${bound} ms`, passMiss(back <= bound)]);
    }
    const sw = of('switchover');
    const swNs = p99(sw.map((r) => r.noServiceMs));
    rows.push([v.name, 'switchover: no service p99', `${swNs} ms`, `<= ${TARGETS.switchover} ms`, passMiss(swNs <= TARGETS.switchover)]);
    // A request may fail only if it was open while the Failover call ran.
    const beyond = sum(sw.map((r) => r.failedStartsMs.filter((s) => s > r.injectMs).length));
    rows.push([v.name, 'switchover: failed beyond in flight', String(beyond), '0', passMiss(beyond === 0)]);
    const dual = sum(rs.map((r) => r.dualOwnership));
    rows.push([v.name, 'dual-ownership intervals (all modes, kernel events)', String(dual), '0', passMiss(dual === 0)]);
  }
  return table(['variant', 'figure', 'measured', 'target', ''], rows);
}
