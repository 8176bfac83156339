import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { AdminApi } from '@lbd/proto';
import {
  ECMP_DIRECTORS, ECMP_TIMING, ECMP_VIP, ETCD_MEMBERS, etcdMember, ecmpDrillProblems, ecmpSlotOfLocalAddress, privilegeProblem, removeOrphans, runEcmpDrill, runPrefix, runTestClient, startEcmpLab,
  type EcmpDirector, type EcmpLab, type HttpResult,
} from '@lbd/testkit';
import type { TimingProfileName } from '@lbd/config';
import { cpuDelta, cpuSample, type CpuSample } from './cpu.js';
import { formatCount, median } from './report.js';

/**
 * `pnpm bench ecmp`: the ECMP tier in the lab of test/src/ecmp.privileged.test.ts (a real FRR router, three
 * directors with gobgpd). Prints:
 * - at rest: what the tier's elections cost with no traffic (every slot an election, 3 × 8 of them): CPU of
 *   the directors (agent, gobgpd) and of the etcd members, etcd writes per second, and the slot
 *   transitions meanwhile (target 0), under the timing given (`--timing`, default the lab's);
 * - spread: new connections per director against its share of the slots (issue 13: within ± 10 %);
 * - box death, N times (rotating the director; the lab's drill, packages/testkit/src/ecmp-drill.ts): the
 *   time without service for new connections of the dead director's slots (a fresh connection every 5 ms;
 *   from the first failure's start to the last's, plus one interval), and long-lived TCP streams broken
 *   (issue 13: 0), then the box back and its slots moved back after their sync (streams broken by the move
 *   back counted too).
 */

export interface EcmpBenchOptions {
  readonly quick: boolean;
  readonly count?: number;
  readonly slots?: number;
  readonly timing?: TimingProfileName;
}


function out(line: string): void {
  process.stdout.write(`${line}\n`);
}

function log(line: string): void {
  process.stderr.write(`bench ecmp: ${line}\n`);
}

function percentile(values: readonly number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)]!;
}


export async function benchEcmp(opts: EcmpBenchOptions): Promise<number> {
  const problem = await privilegeProblem({ commands: ['nft', 'ip', 'etcd', 'conntrack', 'openssl', 'gobgpd', 'vtysh'] });
  if (problem !== null) {
    process.stderr.write(`bench ecmp: ${problem}\n`);
    return 1;
  }
  const count = opts.quick ? 1 : (opts.count ?? 5);
  const total = opts.quick ? 2000 : 6000;
  const slots = opts.slots ?? 8;
  const timing = opts.timing ?? ECMP_TIMING;
  const stale = await removeOrphans('lbdb');
  if (stale.length > 0) log(`removed namespaces left by an earlier run: ${stale.join(', ')}`);
  const started = performance.now();
  const loadAtStart = loadavg().map((l) => l.toFixed(2)).join(' ');
  log(`starting the lab (${slots} slots, timing ${timing})`);
  const lab = await startEcmpLab({ prefix: runPrefix('lbdb', 'ecmp'), slots, timing, admin: (socket) => new AdminApi(socket) });
  try {
    await atRest(lab, timing, opts.quick ? 10_000 : 30_000);
    await spread(lab, total);
    await drills(lab, count);
    out(`\nload average at start ${loadAtStart}; total time ${((performance.now() - started) / 1000).toFixed(0)} s`);
    return 0;
  } finally {
    await lab.destroy();
  }
}

/** The tier with no traffic: what its elections cost, and whether any slot moved. */
async function atRest(lab: EcmpLab<AdminApi>, timing: TimingProfileName, ms: number): Promise<void> {
  await lab.waitSteady();
  log(`at rest: ${ms / 1000} s without traffic`);
  const hosts = [...ECMP_DIRECTORS, ...Array.from({ length: ETCD_MEMBERS }, (_, i) => etcdMember(i + 1).host)];
  const sample = async (): Promise<Map<string, CpuSample>> => new Map(await Promise.all(hosts.map(async (h) => [h, await cpuSample(lab.topology.ns(h))] as const)));
  const revision = async (): Promise<number> => {
    const r = await lab.etcd.etcdctl(['endpoint', 'status', '-w', 'json']);
    return Math.max(...(JSON.parse(r.stdout) as Array<{ Status: { header: { revision: number } } }>).map((m) => Number(m.Status.header.revision)));
  };
  const since = new Date().toISOString();
  const [cpu0, rev0] = [await sample(), await revision()];
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, ms));
  const [cpu1, rev1] = [await sample(), await revision()];
  const sec = (performance.now() - t0) / 1000;
  const transitions = ECMP_DIRECTORS.map((d) => lab.agentLog(d, 1_000_000).split('\n').filter((l) => l.includes('"vip group transition"') && (l.match(/"time":"([^"]+)"/)?.[1] ?? '') >= since).length);
  out(`\nat rest, ${lab.slots} slots on ${ECMP_DIRECTORS.length} directors, timing ${timing}, ${sec.toFixed(0)} s without traffic`);
  out('host        cores  by process');
  let total = 0;
  for (const h of hosts) {
    const d = cpuDelta(cpu0.get(h)!, cpu1.get(h)!);
    total += d.cores;
    out(`${h.padEnd(10)} ${d.cores.toFixed(3).padStart(6)}  ${Object.entries(d.byComm).filter(([, c]) => c >= 0.001).map(([c, v]) => `${c} ${v.toFixed(3)}`).join(', ')}`);
  }
  out(`all        ${total.toFixed(3).padStart(6)}  (of ${cpus().length} cores); etcd writes ${((rev1 - rev0) / sec).toFixed(1)}/s; slot transitions ${transitions.reduce((a, b) => a + b, 0)} (target 0)`);
}

async function spread(lab: EcmpLab<AdminApi>, total: number): Promise<void> {
  const owners = await lab.waitSteady();
  log(`spread: ${total} new connections`);
  const r = await runTestClient<HttpResult>(lab.topology, 'client', ['http', '--url', `http://${ECMP_VIP}/`, '--count', String(total), '--concurrency', '16', '--new-connection']);
  const by = new Map<EcmpDirector, number>(ECMP_DIRECTORS.map((d) => [d, 0]));
  for (const [peer, n] of Object.entries(r.peers)) {
    const slot = ecmpSlotOfLocalAddress(peer, lab.slots);
    if (slot === null) continue;
    by.set(owners.get(slot)!, by.get(owners.get(slot)!)! + n);
  }
  out(`\nspread: ${formatCount(r.ok)} of ${formatCount(total)} new connections answered (${formatCount(r.failed)} failed: ${JSON.stringify(r.errors)})`);
  out('director  slots  connections  expected  off by');
  for (const d of ECMP_DIRECTORS) {
    const n = [...owners.values()].filter((o) => o === d).length;
    const want = (r.ok * n) / lab.slots;
    const got = by.get(d)!;
    out(`${d.padEnd(9)} ${String(n).padStart(5)}  ${formatCount(got).padStart(11)}  ${formatCount(want).padStart(8)}  ${want === 0 ? '-' : `${(((got - want) / want) * 100).toFixed(1)} %`}`);
  }
}

async function drills(lab: EcmpLab<AdminApi>, count: number): Promise<void> {
  const outages: number[] = [];
  const rows: string[] = [];
  for (let i = 0; i < count; i++) {
    const victim = ECMP_DIRECTORS[i % ECMP_DIRECTORS.length]!;
    const r = await runEcmpDrill(lab, 'box-death', { victim, log });
    outages.push(r.noServiceMs);
    const problems = ecmpDrillProblems(r);
    rows.push(`${String(i + 1).padStart(5)}  ${victim}  ${String(r.victimSlots).padStart(5)}  ${String(r.noServiceMs).padStart(14)}  ${`${r.failedRequests} of ${r.requests}`.padStart(15)}  ${String(r.brokenStreams).padStart(6)} of ${r.streams}${problems.length === 0 ? '' : `  (${problems.join('; ')})`}`);
    log(`drill ${i + 1}: ${rows.at(-1)}`);
  }
  out(`\nbox death of one director, then its return (slots moved back after their sync), ${count} times`);
  out('drill  box   slots  no service (ms)  requests failed  streams broken');
  for (const r of rows) out(r);
  out(`no service for new connections of the dead director's slots: p50 ${median(outages).toFixed(0)} ms, p99 ${percentile(outages, 0.99).toFixed(0)} ms, max ${Math.max(...outages).toFixed(0)} ms`);
}
