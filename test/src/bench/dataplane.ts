import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { BenchScope } from './scope.js';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { validateConfig, type Service } from '@lbd/config';
import { KernelLease, NftDataPlane, netnsRunner } from '@lbd/dataplane-nft';
import {
  CLIENT, DIRECTOR, HOSTS, LOCAL_ADDRESSES, VIPS, directorTopology, realServer, removeOrphans, runCommand, runPrefix, setUpDrRealServer,
  type BackgroundProcess, type RealServerHost, type Topology,
} from '@lbd/testkit';
import { busyShare, systemCpuTimes } from './cpu.js';
import { ForeignLoad } from './foreign-load.js';
import { formatMs, formatNumber, formatRatio, median, passMiss, spread, table } from './report.js';
import { BULK_OBJECT, SMALL_OBJECT, startHaproxy, startNginx, writeDocroot } from './servers.js';
import { describeErrors, errorCount, runWrk, writeWrkScript, type WrkResult, type WrkRun } from './wrk.js';

/**
 * `pnpm bench dataplane`: what lbd's nftables data plane costs, as ratios to paths measured in the same
 * run on the same namespaces, servers and client.
 *
 * 1. Throughput: client → real server directly, through a plain routed hop, lbd fullnat, lbd nat, lbd dr,
 *    a minimal hand-written nft fullnat ruleset and haproxy `mode tcp`, each with wrk for keep-alive
 *    requests, one request per connection and 1 MiB objects.
 * 2. Rule scale: full apply, one-server change and unchanged apply at 1 … 10 000 services,
 *    requests/s through service #0 as the table grows, and the kernel lease's renewal at each size
 *    through lbd-nfbatch and through `nft -i`.
 *
 * Everything runs in namespaces named `lbdb<pid>-…` that are removed on every exit path (SIGINT too).
 * Progress goes to stderr, the report to stdout.
 */

export interface DataplaneBenchOptions {
  /** Smoke run: one repetition, 2 s runs, rule scale up to 1 000 services. */
  readonly quick: boolean;
}

/** Port every nginx listens on and every service forwards to. */
const HTTP_PORT = 80;
/** nginx worker processes per real server (the machine has 2 cores for everything). */
const NGINX_WORKERS = 1;
/**
 * CPU placement: with 2 or more CPUs, wrk runs on CPU 0 and every nginx on CPU 1, like a client machine
 * and a server machine. Left to the scheduler, the two sometimes share a core and sometimes not, and
 * keep-alive figures of one path swing between runs by up to 2×. The director has no CPU of its own
 * either way: its forwarding runs in softirq on the CPU that sent the packet (requests on the client's,
 * replies on the server's), and haproxy's threads run wherever the scheduler puts them.
 */
const PLACEMENT = cpus().length >= 2 ? { client: '0', servers: '1' } : { client: undefined, servers: undefined };
/** The direct path: client and rs1 get a second subnet on the servers' bridge, so no router is between them. */
const DIRECT_NET = { client: '198.18.2.2/24', server: '198.18.2.11/24', serverAddress: '198.18.2.11' } as const;
const NFT_MIN_TABLE = 'lbdbench_min';
/**
 * The dr path's vip: on dir1 (client side) and on rs1's loopback (rs1 ignores ARP for it). rs1 sends what it
 * answers from the vip to the client over the servers' bridge (DIRECT_NET, a policy route for that source
 * only), so dr replies skip dir1 as at a dr site, and every other path's replies still go through dir1.
 */
const DR_VIP = '198.18.0.13';
const DR_REPLY_TABLE = '100';

interface Workload {
  readonly id: 'keepalive' | 'close' | 'bulk';
  readonly label: string;
  readonly unit: string;
  readonly object: string;
  readonly closeEach: boolean;
  readonly connections: number;
  readonly value: (r: WrkResult) => number;
}

const WORKLOADS: readonly Workload[] = [
  { id: 'keepalive', label: 'keep-alive', unit: 'req/s', object: SMALL_OBJECT, closeEach: false, connections: 8, value: (r) => r.requestsPerSec },
  { id: 'close', label: '1 req/conn', unit: 'req/s', object: SMALL_OBJECT, closeEach: true, connections: 8, value: (r) => r.requestsPerSec },
  { id: 'bulk', label: '1 MiB objects', unit: 'MiB/s', object: BULK_OBJECT, closeEach: false, connections: 4, value: (r) => r.mibPerSec },
];

type PathId = 'direct' | 'routed' | 'lbd-fullnat' | 'lbd-nat' | 'lbd-dr' | 'nft-min' | 'haproxy';

interface PathDef {
  readonly id: PathId;
  readonly label: string;
  /** Where the client sends its requests. */
  readonly host: string;
  readonly explain: string;
  /** Programs dir1 for this path (dir1 starts with an empty ruleset, no conntrack entries, no proxy). */
  readonly setup: () => Promise<void>;
}

interface Settings {
  readonly reps: number;
  /** Full applies timed per size and repetition (each into a flushed director): the median is over reps × this. */
  readonly fullApplies: number;
  readonly durationSec: number;
  readonly scaleCounts: readonly number[];
  readonly changes: number;
  /** Runs that may be repeated because other processes disturbed them. */
  readonly retryBudget: number;
  /** Time the benchmark may spend in all waiting for other processes to quiet down. */
  readonly waitBudgetMs: number;
  /** Kernel lease renewals timed per size, each way. */
  readonly renewals: { readonly netlink: number; readonly nft: number };
}

function settingsFor(opts: DataplaneBenchOptions): Settings {
  return opts.quick
    ? { reps: 1, fullApplies: 1, durationSec: 2, scaleCounts: [1, 100, 1000], changes: 10, retryBudget: 5, waitBudgetMs: 20_000, renewals: { netlink: 100, nft: 10 } }
    : { reps: 3, fullApplies: 3, durationSec: 5, scaleCounts: [1, 100, 1000, 10_000], changes: 10, retryBudget: 15, waitBudgetMs: 120_000, renewals: { netlink: 500, nft: 30 } };
}

const log = (msg: string): void => {
  process.stderr.write(`[bench] ${msg}\n`);
};
const out = (text = ''): void => {
  process.stdout.write(`${text}\n`);
};

export async function benchDataplane(opts: DataplaneBenchOptions): Promise<number> {
  if (process.getuid?.() !== 0) {
    process.stderr.write('pnpm bench dataplane needs root: it creates network namespaces and programs nftables in them\n');
    return 77;
  }
  for (const tool of ['wrk', 'nginx', 'haproxy', 'nft', 'conntrack', 'ss', 'taskset']) await requireTool(tool);
  const settings = settingsFor(opts);
  const stale = await removeOrphans('lbdb');
  if (stale.length > 0) log(`removed namespaces left by an earlier run: ${stale.join(', ')}`);

  const prefix = runPrefix('lbdb');
  const scope = new BenchScope(prefix, log);

  const started = performance.now();
  try {
    const tmp = (scope.tmp = await mkdtemp(join(tmpdir(), 'lbd-bench-')));
    log(`building namespaces (${prefix}*)`);
    const built = await directorTopology({ prefix, realServers: 3 });
    const topology = (scope.topology = built.topology);
    const ctx = await prepare(topology, built.realServers, tmp, { repeats: settings.retryBudget, waitMs: settings.waitBudgetMs });
    out(`lbd data-plane benchmark${opts.quick ? ' (--quick smoke run: 1 repetition, 2 s runs, up to 1 000 services; not for comparisons)' : ''}`);
    out(`kernel ${await kernelRelease(topology)}, ${cpus().length} CPUs shared by client, director and real servers; ${PLACEMENT.client === undefined
      ? 'no CPU pinning (one CPU)' : `wrk pinned to CPU ${PLACEMENT.client}, nginx to CPU ${PLACEMENT.servers}, the director's work wherever its packets are`}`);
    const busy = await cpuBusy(1000);
    out(`CPU busy before the run (1 s sample, nothing of the benchmark running): ${(busy * 100).toFixed(0)}%${busy > 0.1
      ? ' -- WARNING: something else is using this machine; it skews the figures below' : ''}`);
    out();
    await throughput(ctx, settings);
    out();
    await ruleScale(ctx, settings);
    out();
    out(`other processes on the machine: waited ${(ctx.sampler.waitedMs / 1000).toFixed(0)} s for quiet, repeated ${ctx.sampler.repeated} run(s), kept ${ctx.sampler.flagged} disturbed run(s) (flagged *)`);
    out(`total time ${((performance.now() - started) / 1000).toFixed(0)} s`);
    return 0;
  } finally {
    await scope.close();
  }
}

interface Context {
  readonly topology: Topology;
  readonly realServers: readonly RealServerHost[];
  readonly dir: string;
  readonly wrkScript: string;
  readonly sampler: Sampler;
}

/** Foreign CPU above this share of one CPU during a run makes the run count as disturbed. */
const FOREIGN_LIMIT = 0.1;

interface Sample {
  readonly result: WrkResult;
  /** Foreign CPU during the kept run, as a share of one CPU. */
  readonly foreign: number;
  readonly disturbed: boolean;
  /** Busy share of each CPU during the kept run (everything: wrk, nginx, softirq, haproxy, others). */
  readonly cpuBusy: readonly number[];
}

/**
 * Runs wrk and checks what else ran beside it. The machine may be shared (other developers' builds and
 * tests): before a run the sampler waits, within a time budget, for a quiet second; a run during which
 * other processes still used more than FOREIGN_LIMIT of a CPU is repeated (twice at most, within a budget
 * of repeats), and if it is still disturbed it is kept and flagged.
 */
class Sampler {
  repeated = 0;
  flagged = 0;
  waitedMs = 0;
  constructor(
    private readonly ctx: { topology: Topology; wrkScript: string },
    private readonly foreign: ForeignLoad,
    private repeatBudget: number,
    private readonly waitBudgetMs: number,
  ) {}

  async run(run: Omit<WrkRun, 'cpus'>): Promise<Sample> {
    for (let attempt = 0; ; attempt++) {
      await this.waitQuiet();
      const before = await this.foreign.snapshot();
      const cpuBefore = await perCpuTimes();
      const result = await runWrk(this.ctx.topology, CLIENT.host, this.ctx.wrkScript, { ...run, cpus: PLACEMENT.client });
      const cpuBusy = busyBetween(cpuBefore, await perCpuTimes());
      const after = await this.foreign.snapshot();
      const share = ForeignLoad.between(before, after) / result.durationSec;
      if (share <= FOREIGN_LIMIT) return { result, foreign: share, disturbed: false, cpuBusy };
      const who = `${(share * 100).toFixed(0)}% of a CPU: ${ForeignLoad.describe(before, after)}`;
      if (attempt >= 2 || this.repeatBudget <= 0) {
        this.flagged++;
        log(`other processes ran beside this run (${who}); keeping it, flagged`);
        return { result, foreign: share, disturbed: true, cpuBusy };
      }
      this.repeatBudget--;
      this.repeated++;
      log(`other processes ran beside this run (${who}); repeating it`);
    }
  }

  /** Waits (at most 20 s per call, within the budget) until other processes leave a second quiet. */
  private async waitQuiet(): Promise<void> {
    const deadline = Date.now() + Math.min(20_000, this.waitBudgetMs - this.waitedMs);
    for (;;) {
      const t0 = Date.now();
      const before = await this.foreign.snapshot();
      await new Promise((r) => setTimeout(r, 1000));
      const after = await this.foreign.snapshot();
      const share = ForeignLoad.between(before, after) / ((Date.now() - t0) / 1000);
      if (share <= FOREIGN_LIMIT || Date.now() >= deadline) return;
      this.waitedMs += Date.now() - t0;
      log(`waiting for other processes to quiet down (${(share * 100).toFixed(0)}% of a CPU: ${ForeignLoad.describe(before, after)})`);
    }
  }
}

async function prepare(topology: Topology, realServers: readonly RealServerHost[], dir: string, budget: { repeats: number; waitMs: number }): Promise<Context> {
  // The direct path: the client joins the servers' bridge with an address in a subnet rs1 also has, so
  // its packets cross the same veths and bridge as every other path, minus the director.
  await topology.attach(CLIENT.host, HOSTS.switch, 'eth1');
  await topology.addAddress(CLIENT.host, 'eth1', DIRECT_NET.client);
  await topology.addAddress(realServer(1).host, 'eth0', DIRECT_NET.server);
  await prepareDirectRouting(topology);
  const root = await writeDocroot(dir);
  log(`starting nginx on ${realServers.map((r) => r.host).join(', ')}`);
  await Promise.all(realServers.map((rs) => startNginx(topology, rs.host, dir, root, { workers: NGINX_WORKERS, port: HTTP_PORT, cpus: PLACEMENT.servers })));
  const wrkScript = await writeWrkScript(dir);
  const foreign = await ForeignLoad.create(topology.hostNames.map((h) => topology.ns(h)));
  return { topology, realServers, dir, wrkScript, sampler: new Sampler({ topology, wrkScript }, foreign, budget.repeats, budget.waitMs) };
}

/** The dr path's real server and client side, set up as a dr site is (see DR_VIP). */
async function prepareDirectRouting(topology: Topology): Promise<void> {
  await topology.addAddress(DIRECTOR.host, DIRECTOR.clientIf, `${DR_VIP}/32`, { serviceAddress: true });
  await setUpDrRealServer(topology, realServer(1).host, { vips: [DR_VIP], replyVia: { gateway: DIRECT_NET.client.split('/')[0]!, table: DR_REPLY_TABLE } });
  // The vip's replies reach the client on eth1 while it routes the vip through eth0: not a spoof here.
  for (const scope of ['all', 'eth1']) await topology.sysctl(CLIENT.host, `net.ipv4.conf.${scope}.rp_filter`, '0');
}

// ---------------------------------------------------------------------------------------------------
// Throughput

async function throughput(ctx: Context, s: Settings): Promise<void> {
  const { topology } = ctx;
  const rs1 = realServer(1);
  let haproxy: BackgroundProcess | undefined;
  const lbd = async (raw: Record<string, unknown>): Promise<void> => {
    const services = buildServices([raw]);
    const r = await new NftDataPlane({ runner: netnsRunner(topology.ns(DIRECTOR.host)) }).apply({ services });
    if (!r.changed || !r.fullRebuild) throw new Error('lbd: the first apply into an empty namespace did not build the table');
  };
  const oneServer = [{ address: rs1.ipv4, port: HTTP_PORT, weight: 1 }];
  const paths: PathDef[] = [
    {
      id: 'direct', label: 'direct', host: DIRECT_NET.serverAddress,
      explain: 'client and rs1 on the same bridge (a second subnet on both): the same veths and bridge as the other paths, no director',
      setup: async () => {},
    },
    {
      id: 'routed', label: 'routed hop', host: rs1.ipv4,
      explain: 'client -> dir1 -> rs1 by plain IP forwarding: no nft rules, so no conntrack either',
      setup: async () => {},
    },
    {
      id: 'lbd-fullnat', label: 'lbd fullnat', host: VIPS.ipv4,
      explain: `NftDataPlane, ${VIPS.ipv4}:${HTTP_PORT} fullnat wrr -> rs1, SNAT to ${LOCAL_ADDRESSES.ipv4Range}`,
      setup: () => lbd({
        name: 'bench-fullnat', vip: VIPS.ipv4, port: HTTP_PORT, protocol: 'tcp', mode: 'fullnat', scheduler: 'wrr',
        localAddresses: [LOCAL_ADDRESSES.ipv4Range], realServers: oneServer,
      }),
    },
    {
      id: 'lbd-nat', label: 'lbd nat', host: VIPS.ipv4Nat,
      explain: `NftDataPlane, ${VIPS.ipv4Nat}:${HTTP_PORT} nat wrr -> rs1 (rs1 routes replies via dir1)`,
      setup: () => lbd({
        name: 'bench-nat', vip: VIPS.ipv4Nat, port: HTTP_PORT, protocol: 'tcp', mode: 'nat', scheduler: 'wrr', realServers: oneServer,
      }),
    },
    {
      id: 'lbd-dr', label: 'lbd dr', host: DR_VIP,
      explain: `NftDataPlane, ${DR_VIP}:${HTTP_PORT} dr mh -> rs1's MAC, no conntrack; rs1 holds the vip on lo and answers the client over the bridge`,
      setup: () => lbd({
        name: 'bench-dr', vip: DR_VIP, port: HTTP_PORT, protocol: 'tcp', mode: 'dr', scheduler: 'mh', realServers: oneServer,
      }),
    },
    {
      id: 'nft-min', label: 'minimal nft fullnat', host: VIPS.ipv4,
      explain: `hand-written: one dnat ${VIPS.ipv4}:${HTTP_PORT} -> rs1, one snat to ${LOCAL_ADDRESSES.ipv4Range}`,
      setup: () => nftScript(ctx, `table ip ${NFT_MIN_TABLE} {
  chain prerouting {
    type nat hook prerouting priority dstnat; policy accept;
    ip daddr ${VIPS.ipv4} tcp dport ${HTTP_PORT} dnat to ${rs1.ipv4}:${HTTP_PORT}
  }
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    ct status dnat ip daddr ${rs1.ipv4} tcp dport ${HTTP_PORT} snat to ${LOCAL_ADDRESSES.ipv4Range}
  }
}`),
    },
    {
      id: 'haproxy', label: 'haproxy mode tcp', host: VIPS.ipv4,
      explain: `haproxy ${await haproxyVersion()} on dir1, bind ${VIPS.ipv4}:${HTTP_PORT} -> rs1; default threads (one per core), no splice`,
      setup: async () => {
        haproxy = await startHaproxy(topology, DIRECTOR.host, ctx.dir, { bind: VIPS.ipv4, port: HTTP_PORT, server: rs1.ipv4, serverPort: HTTP_PORT });
      },
    },
  ];

  out(`== Throughput: one real server (rs1, nginx ${await nginxVersion()}, ${NGINX_WORKERS} worker) behind every path ==`);
  out('One real server, so every path reaches exactly the same server process; several would add scheduling noise');
  out('and give the director paths more server capacity than direct.');
  for (const p of paths) out(`  ${p.label.padEnd(20)} ${p.explain}`);
  out(`wrk from the client namespace, 1 thread, ${s.durationSec} s per run, median of ${s.reps} run(s); paths interleaved per repetition.`);
  out(`workloads: ${WORKLOADS.map((w) => `${w.label} (${w.object}, ${w.connections} connections${w.closeEach ? ', Connection: close' : ''}, ${w.unit})`).join('; ')}`);
  out();

  const samples = new Map<string, number[]>();
  const disturbed = new Set<string>();
  const problems: string[] = [];
  for (let rep = 0; rep < s.reps; rep++) {
    // Each repetition starts one path later, so no path always runs first or right after the same one.
    const order = paths.map((_, i) => paths[(i + rep) % paths.length]!);
    for (const p of order) {
      log(`throughput ${rep + 1}/${s.reps}: ${p.label}`);
      await resetDirector(ctx);
      try {
        await p.setup();
        const warm = await runWrk(topology, CLIENT.host, ctx.wrkScript, { url: url(p.host, SMALL_OBJECT), connections: 2, durationSec: 1, closeEach: false, cpus: PLACEMENT.client });
        if (warm.requests === 0 || errorCount(warm) > 0) throw new Error(`path ${p.label} does not work: ${warm.requests} requests, errors: ${describeErrors(warm)}`);
        for (const w of WORKLOADS) {
          const { result: r, disturbed: d, cpuBusy, foreign } = await ctx.sampler.run({ url: url(p.host, w.object), connections: w.connections, durationSec: s.durationSec, closeEach: w.closeEach });
          cpuBusy.forEach((b, i) => push(samples, `${p.id}/${w.id}/cpu${i}`, b));
          const units = w.id === 'bulk' ? r.bytes / 2 ** 20 : r.requests;
          // All CPUs' busy time, less what other processes used beside the run.
          const ownCpuSec = Math.max(0, cpuBusy.reduce((a, b) => a + b, 0) - foreign) * r.durationSec;
          push(samples, `${p.id}/${w.id}/cpuPerUnit`, ownCpuSec / units);
          if (errorCount(r) > 0) problems.push(`${p.label}, ${w.label}, run ${rep + 1}: ${r.requests} requests, errors: ${describeErrors(r)}`);
          push(samples, `${p.id}/${w.id}`, w.value(r));
          if (d) disturbed.add(`${p.id}/${w.id}`);
        }
      } finally {
        await haproxy?.stop();
        haproxy = undefined;
      }
    }
  }
  await resetDirector(ctx);

  const med = (p: PathId, w: Workload['id']): number => median(samples.get(`${p}/${w}`) ?? []);
  const rows = paths.map((p) => [p.label, ...WORKLOADS.flatMap((w) => {
    const vals = samples.get(`${p.id}/${w.id}`) ?? [];
    const flag = disturbed.has(`${p.id}/${w.id}`) ? '*' : '';
    return [`${formatNumber(median(vals))}${s.reps > 1 ? ` ±${(spread(vals) * 100).toFixed(0)}%` : ''}${flag}`, formatRatio(median(vals) / med('direct', w.id))];
  })]);
  out(table(['path', ...WORKLOADS.flatMap((w) => [`${w.label} ${w.unit}`, '× direct'])], rows));
  out('±: half the range of the repetitions, as a share of the median.');
  out(`Each run starts after a quiet second; a run beside which other processes used more than ${FOREIGN_LIMIT * 100}% of a CPU is repeated`);
  out(`(${ctx.sampler.repeated} so far). ${disturbed.size === 0 ? 'No figure includes a disturbed run.' : '*: at least one run of this figure was still disturbed after repeating; treat it with care.'}`);
  out();

  // Where the time goes: with wrk and nginx pinned, CPU 0 carries the client and the softirq work of
  // every packet it sends (the director's forwarding of requests included), CPU 1 the server and replies.
  const ncpu = cpus().length;
  const cpuCell = (p: PathId, w: Workload['id']): string =>
    Array.from({ length: Math.min(ncpu, 4) }, (_, i) => `${(median(samples.get(`${p}/${w}/cpu${i}`) ?? []) * 100).toFixed(0)}`).join(' / ');
  out(`CPU busy % during the runs (median; ${ncpu >= 2 ? `CPU ${PLACEMENT.client} client / CPU ${PLACEMENT.servers} server${ncpu > 2 ? ' / others' : ''}` : 'one CPU'}):`);
  out(table(['path', ...WORKLOADS.map((w) => w.label)], paths.map((p) => [p.label, ...WORKLOADS.map((w) => cpuCell(p.id, w.id))])));
  out();

  // Throughput ratios depend on which CPU saturates first; CPU time per request does not, and shows what
  // each path costs in all (client + director + server), and beyond direct (the director's share).
  const perUnit = (p: PathId, w: Workload['id']): number => median(samples.get(`${p}/${w}/cpuPerUnit`) ?? []);
  const perUnitCell = (p: PathId, w: Workload['id']): string => {
    const v = perUnit(p, w) * 1e6;
    if (p === 'direct') return v.toFixed(0);
    const d = (perUnit(p, w) - perUnit('direct', w)) * 1e6;
    return `${v.toFixed(0)} (${d >= 0 ? '+' : '−'}${Math.abs(d).toFixed(0)})`;
  };
  out('CPU time per request or per MiB in µs, all CPUs together, less other processes (in brackets: the extra over direct, i.e.');
  out('what the path itself costs; a negative extra is noise, or work that saturation moved elsewhere):');
  out(table(['path', ...WORKLOADS.map((w) => `${w.label} µs/${w.id === 'bulk' ? 'MiB' : 'req'}`)], paths.map((p) => [p.label, ...WORKLOADS.map((w) => perUnitCell(p.id, w.id))])));
  const extra = (p: PathId, w: Workload['id']): number => perUnit(p, w) - perUnit('direct', w);
  out(`haproxy's extra CPU ÷ lbd fullnat's: ${WORKLOADS.map((w) => {
    const lbdExtra = extra('lbd-fullnat', w.id);
    // An extra within 5% of direct's own cost cannot be told from noise: no ratio then.
    return `${w.label} ${lbdExtra > 0.05 * perUnit('direct', w.id) ? `${formatRatio(extra('haproxy', w.id) / lbdExtra)}×` : 'n/a (lbd fullnat costs no measurable extra)'}`;
  }).join(', ')}`);
  out();

  // The real server must not be what limits the director paths.
  for (const w of WORKLOADS) {
    const others = paths.filter((p) => p.id !== 'direct');
    const best = others.reduce((a, b) => (med(b.id, w.id) > med(a.id, w.id) ? b : a));
    const headroom = med('direct', w.id) / med(best.id, w.id);
    const serverBusy = PLACEMENT.servers === undefined ? undefined : median(samples.get(`direct/${w.id}/cpu${PLACEMENT.servers}`) ?? []);
    const saturated = serverBusy !== undefined && serverBusy >= 0.95;
    const note = headroom >= 1.03 ? '' : saturated
      ? ' -- WARNING: the real server\'s CPU is saturated in direct runs; this column measures the server, not the paths'
      : ' (plain forwarding costs little in this workload)';
    out(`server headroom, ${w.label}: direct is ${formatRatio(headroom)}× the fastest director path (${best.label})${
      serverBusy === undefined ? '' : `; the server's CPU was ${(serverBusy * 100).toFixed(0)}% busy in direct runs`}${note}`);
  }
  if (problems.length > 0) {
    out('wrk reported errors:');
    for (const p of problems) out(`  ${p}`);
  }
  out();

  const vsHaproxy = (w: Workload['id']): number => med('lbd-fullnat', w) / med('haproxy', w);
  out(`lbd fullnat ÷ haproxy mode tcp: ${WORKLOADS.map((w) => `${w.label} ${formatRatio(vsHaproxy(w.id))}×`).join(', ')}`);
  out(`lbd fullnat ÷ minimal nft fullnat: ${WORKLOADS.map((w) => `${w.label} ${formatRatio(med('lbd-fullnat', w.id) / med('nft-min', w.id))}`).join(', ')}`);
  // dr against the hop it replaces: the director sees only the client's packets, and keeps no state.
  out(`lbd dr ÷ routed hop: ${WORKLOADS.map((w) => `${w.label} ${formatRatio(med('lbd-dr', w.id) / med('routed', w.id))}`).join(', ')}`);
  out(`lbd dr ÷ lbd fullnat: ${WORKLOADS.map((w) => `${w.label} ${formatRatio(med('lbd-dr', w.id) / med('lbd-fullnat', w.id))}`).join(', ')}`);
  out(`extra CPU per request over direct (µs), 1 req/conn: routed ${((extra('routed', 'close')) * 1e6).toFixed(1)}, lbd dr ${(extra('lbd-dr', 'close') * 1e6).toFixed(1)}, lbd fullnat ${(extra('lbd-fullnat', 'close') * 1e6).toFixed(1)}, lbd nat ${(extra('lbd-nat', 'close') * 1e6).toFixed(1)}`);
  out();
  const ratio = (w: Workload['id']): number => med('lbd-fullnat', w) / med('direct', w);
  const targets: [string, number, number][] = [
    ['lbd fullnat keep-alive ≥ 0.90 × direct', ratio('keepalive'), 0.9],
    ['lbd fullnat 1 req/conn ≥ 0.63 × direct', ratio('close'), 0.63],
    ['lbd fullnat 1 MiB objects ≥ 0.82 × direct', ratio('bulk'), 0.82],
    ['lbd fullnat 1 req/conn ≥ 1.4 × haproxy', vsHaproxy('close'), 1.4],
    ['lbd fullnat 1 MiB objects ≥ 2.5 × haproxy', vsHaproxy('bulk'), 2.5],
  ];
  out(table(['target (issue 2)', 'measured', 'result'], targets.map(([label, v, min]) => [label, formatRatio(v), passMiss(v >= min)])));
}

// ---------------------------------------------------------------------------------------------------
// Rule scale

async function ruleScale(ctx: Context, s: Settings): Promise<void> {
  const { topology } = ctx;
  const ns = topology.ns(DIRECTOR.host);
  const closeWorkload = WORKLOADS.find((w) => w.id === 'close')!;
  const overhead = await runnerOverheadMs(topology);
  out('== Rule scale: N services, each fullnat, wrr over rs1..rs3 (weights 3/2/1), IPv4, one lbd table ==');
  out('Service #0 is 198.18.0.10:80, the others 198.18.64.0:80 upwards; all share the local addresses.');
  out(`full apply: NftDataPlane.apply() into dir1 with no lbd table (median of ${s.reps * s.fullApplies}, ${s.fullApplies} a repetition; the fastest and slowest in brackets);`);
  out('unchanged apply: the same array again;');
  out(`one-server change: weight of one real server in one service (3 <-> 4), every other Service object the same, median of ${s.changes};`);
  out(`req/s: one request per connection (${closeWorkload.connections} connections, ${s.durationSec} s, median of ${s.reps}) to service #0 over its 3 real servers;`);
  out('the sizes are interleaved in each repetition (1, 100, ..., then again), so drift hits every size alike.');
  out(`Times are wall clock around apply(), including starting nft under \`ip netns exec\` (${formatMs(overhead)} for \`ip netns exec NS true\` here,`);
  out('which an agent in its own namespace does not pay).');
  out();

  interface Sizes { services: Service[]; validateMs: number; full: number[]; rps: number[]; changes: number[]; unchanged: number[]; ops: number; disturbed: boolean; renewals?: Renewals }
  const sizes = new Map<number, Sizes>();
  for (const n of s.scaleCounts) {
    log(`rule scale: building ${n} service(s)`);
    const raw = Array.from({ length: n }, (_, i) => scaleService(i));
    const t0 = performance.now();
    const services = buildServices(raw);
    sizes.set(n, { services, validateMs: performance.now() - t0, full: [], rps: [], changes: [], unchanged: [], ops: 0, disturbed: false });
  }
  for (let rep = 0; rep < s.reps; rep++) {
    for (const n of s.scaleCounts) {
      log(`rule scale ${rep + 1}/${s.reps}: ${n} service(s)`);
      const z = sizes.get(n)!;
      // The last of the full applies is the table the rest of the repetition works on.
      let dp!: NftDataPlane;
      for (let k = 0; k < s.fullApplies; k++) {
        await resetDirector(ctx);
        dp = new NftDataPlane({ runner: netnsRunner(ns) });
        const t0 = performance.now();
        const first = await dp.apply({ services: z.services });
        z.full.push(performance.now() - t0);
        if (!first.changed || !first.fullRebuild) throw new Error(`${n} services: the first apply did not build the table`);
      }
      await assertUnchanged(dp, z, n);

      const warm = await runWrk(topology, CLIENT.host, ctx.wrkScript, { url: url(VIPS.ipv4, SMALL_OBJECT), connections: 2, durationSec: 1, closeEach: false, cpus: PLACEMENT.client });
      if (warm.requests === 0 || errorCount(warm) > 0) throw new Error(`${n} services: service #0 does not answer: errors ${describeErrors(warm)}`);
      const { result: r, disturbed: d } = await ctx.sampler.run({ url: url(VIPS.ipv4, SMALL_OBJECT), connections: closeWorkload.connections, durationSec: s.durationSec, closeEach: true });
      if (errorCount(r) > 0) log(`${n} services, run ${rep + 1}: wrk errors: ${describeErrors(r)}`);
      if (d) z.disturbed = true;
      z.rps.push(r.requestsPerSec);

      if (rep > 0) continue;
      for (let j = 0; j < s.changes; j++) {
        const idx = (j * 7919 + 1) % n;
        const next = z.services.slice();
        next[idx] = withFirstWeightToggled(z.services[idx]!);
        const t1 = performance.now();
        const c = await dp.apply({ services: next });
        z.changes.push(performance.now() - t1);
        if (!c.changed || c.fullRebuild) throw new Error(`${n} services: a one-server change was not incremental (changed ${c.changed}, fullRebuild ${c.fullRebuild})`);
        z.ops = Math.max(z.ops, c.operations.length);
        z.services = next;
      }
      await assertUnchanged(dp, z, n);
      z.renewals = await leaseRenewals(ns, s.renewals);
    }
  }
  await resetDirector(ctx);

  const rows = s.scaleCounts.map((n) => ({ n, ...sizes.get(n)! }));
  const base = median(rows[0]!.rps);
  out(table(
    ['services', 'validate', 'full apply', 'one-server change (median / max)', 'nft commands', 'unchanged apply', 'req/s svc #0', '× 1 service'],
    rows.map((r) => [r.n.toLocaleString('en-US'), formatMs(r.validateMs), `${formatMs(median(r.full))}${r.full.length > 1 ? ` (${formatMs(Math.min(...r.full))} to ${formatMs(Math.max(...r.full))})` : ''}`, `${formatMs(median(r.changes))} / ${formatMs(Math.max(...r.changes))}`,
      String(r.ops), `${formatMs(median(r.unchanged))} (wrote nothing)`,
      `${formatNumber(median(r.rps))}${s.reps > 1 ? ` ±${(spread(r.rps) * 100).toFixed(0)}%` : ''}${r.disturbed ? '*' : ''}`, formatRatio(median(r.rps) / base)]),
  ));
  if (rows.some((r) => r.disturbed)) out('*: at least one run was disturbed by other processes even after repeating.');
  out();
  const top = rows.find((r) => r.n === 10_000);
  const quickNote = 'not measured (--quick stops at 1,000)';
  const full = top && median(top.full);
  const change = top && median(top.changes);
  const ratio = top && median(top.rps) / base;
  out(table(['target (issue 2)', 'measured', 'result'], [
    ['full apply of 10,000 services ≤ 0.5 s', full === undefined ? quickNote : formatMs(full), passMiss(full === undefined ? undefined : full <= 500)],
    ['one-server change at 10,000 services ≤ 20 ms', change === undefined ? quickNote : formatMs(change), passMiss(change === undefined ? undefined : change <= 20)],
    ['req/s at 10,000 services ≥ 0.95 × at 1', ratio === undefined ? quickNote : formatRatio(ratio), passMiss(ratio === undefined ? undefined : ratio >= 0.95)],
    ['unchanged apply writes nothing', 'changed === false at every size', 'PASS'],
  ]));
  out(table(['target (issue 15)', 'measured', 'result'], [
    ['full apply of 10,000 services ≤ 0.5 s', full === undefined ? quickNote : formatMs(full), passMiss(full === undefined ? undefined : full <= 500)],
    ['one-server change at 10,000 services ≤ 5 ms', change === undefined ? quickNote : formatMs(change), passMiss(change === undefined ? undefined : change <= 5)],
  ]));
  out('validate: validateConfig of the N services (every apply validates the whole config first), once per size.');
  out();
  out(`The kernel lease's renewal (one group, one address: three elements, inet and arp) with the N services in the kernel, back to back,`);
  out(`through lbd-nfbatch (what renews) and through the lease's own \`nft -i\` (what it replaced: nft refreshes its cache of the whole ruleset`);
  out(`whenever a renewal changed its generation); wall ms around KernelLease.lease(), in the director's namespace:`);
  out(table(
    ['services', 'lbd-nfbatch: renewals', 'median / p99 / max', 'nft -i: renewals', 'median / max', 'nft ÷ lbd-nfbatch'],
    rows.filter((r) => r.renewals !== undefined).map((r) => {
      const w = r.renewals!;
      return [r.n.toLocaleString('en-US'), String(w.netlink.length), `${formatMs(median(w.netlink))} / ${formatMs(percentile(w.netlink, 0.99))} / ${formatMs(Math.max(...w.netlink))}`,
        String(w.nft.length), `${formatMs(median(w.nft))} / ${formatMs(Math.max(...w.nft))}`, formatRatio(median(w.nft) / median(w.netlink))];
    }),
  ));
}

interface Renewals { readonly netlink: readonly number[]; readonly nft: readonly number[] }

/**
 * The kernel lease's renewals, timed one by one, both ways (KernelLease's `netlinkWriter`), in `ns` with
 * whatever the data plane has there. The guarded address is one no service uses: the lease tables drop
 * traffic for a guarded address without a lease. The tables go again after each way (remove()).
 */
async function leaseRenewals(ns: string, count: { netlink: number; nft: number }): Promise<Renewals> {
  const out = { netlink: [] as number[], nft: [] as number[] };
  for (const netlinkWriter of [true, false]) {
    const lease = new KernelLease({ runner: netnsRunner(ns), netlinkWriter });
    const times = netlinkWriter ? out.netlink : out.nft;
    try {
      await lease.guard(new Map([['bench', ['198.18.255.254']]]));
      await lease.lease('bench', performance.now() + 5000); // the first starts the writer: not timed
      for (let i = 0; i < (netlinkWriter ? count.netlink : count.nft); i++) {
        const t0 = performance.now();
        await lease.lease('bench', performance.now() + 5000);
        times.push(performance.now() - t0);
      }
    } finally {
      await lease.remove();
    }
  }
  return out;
}

function percentile(xs: readonly number[], p: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

/** Applies the same services again: must write nothing (throws otherwise). */
async function assertUnchanged(dp: NftDataPlane, z: { services: readonly Service[]; unchanged: number[] }, n: number): Promise<void> {
  const t0 = performance.now();
  const r = await dp.apply({ services: z.services });
  z.unchanged.push(performance.now() - t0);
  if (r.changed !== false || r.operations.length !== 0) {
    throw new Error(`${n} services: an unchanged apply wrote ${r.operations.length} operation(s): ${r.operations.slice(0, 3).join(' | ')}`);
  }
}

/** Service i of the scale test: #0 on the usual vip, the others on their own vips 198.18.64.0 upwards. */
function scaleService(i: number): Record<string, unknown> {
  const vip = i === 0 ? VIPS.ipv4 : `198.18.${64 + (i >> 8)}.${i & 0xff}`;
  return {
    name: `svc${i}`, vip, port: HTTP_PORT, protocol: 'tcp', mode: 'fullnat', scheduler: 'wrr',
    localAddresses: [LOCAL_ADDRESSES.ipv4Range],
    realServers: [1, 2, 3].map((k) => ({ address: realServer(k).ipv4, port: HTTP_PORT, weight: 4 - k })),
  };
}

function withFirstWeightToggled(svc: Service): Service {
  return { ...svc, realServers: svc.realServers.map((r, k) => (k === 0 ? { ...r, weight: r.weight === 3 ? 4 : 3 } : r)) };
}

// ---------------------------------------------------------------------------------------------------
// Helpers

function buildServices(raw: readonly Record<string, unknown>[]): Service[] {
  const result = validateConfig({ services: raw });
  if (!result.ok) throw new Error(`benchmark config is invalid: ${result.problems.slice(0, 3).map((p) => `${p.path}: ${p.rule}`).join('; ')}`);
  return [...result.config.services];
}

/**
 * Back to a clean slate between paths: dir1 plain forwarding (no nft rules, no conntrack entries) and no
 * TIME_WAIT sockets on the client or the real servers. Without this, one path's leftovers slow the next:
 * a conntrack entry in TIME_WAIT keeps its NAT binding for a reused tuple, and a real server's TIME_WAIT
 * socket refuses a SYN for the same tuple whose TCP timestamps come from another client-side offset
 * (the routed and nat paths both reach rs1 as 198.18.0.2, with timestamps keyed to different
 * destinations), so the client waits a second for its SYN to be retransmitted.
 */
async function resetDirector(ctx: Context): Promise<void> {
  const { topology } = ctx;
  await topology.exec(DIRECTOR.host, 'nft', ['flush', 'ruleset']);
  await topology.exec(DIRECTOR.host, 'conntrack', ['-F'], { allowFailure: true });
  await Promise.all([CLIENT.host, ...ctx.realServers.map((r) => r.host)].map(async (host) => {
    await topology.exec(host, 'ss', ['-K', '-Htan', 'state', 'time-wait'], { allowFailure: true });
    const { stdout } = await topology.exec(host, 'ss', ['-Htan', 'state', 'time-wait']);
    const left = stdout.split('\n').filter((l) => l.trim() !== '').length;
    if (left > 0) log(`${host}: ${left} TIME_WAIT socket(s) could not be closed (ss -K); the next path may reuse their tuples`);
  }));
}

async function nftScript(ctx: Context, script: string): Promise<void> {
  const file = join(ctx.dir, 'ruleset.nft');
  await writeFile(file, `${script}\n`);
  await ctx.topology.exec(DIRECTOR.host, 'nft', ['-f', file]);
}

function url(host: string, object: string): string {
  return `http://${host}:${HTTP_PORT}${object}`;
}

function push(m: Map<string, number[]>, key: string, v: number): void {
  const list = m.get(key);
  if (list) list.push(v);
  else m.set(key, [v]);
}

async function runnerOverheadMs(topology: Topology): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < 10; i++) {
    const t0 = performance.now();
    await topology.exec(DIRECTOR.host, 'true');
    times.push(performance.now() - t0);
  }
  return median(times);
}

async function requireTool(tool: string): Promise<void> {
  const r = await runCommand('sh', ['-c', 'command -v "$1"', 'sh', tool], { allowFailure: true });
  if (r.code !== 0) {
    throw new Error(`${tool} is not installed: apt-get install ${tool === 'ss' ? 'iproute2' : tool === 'taskset' ? 'util-linux' : tool === 'nginx' ? 'nginx-light' : tool === 'nft' ? 'nftables' : tool}`);
  }
}

async function kernelRelease(topology: Topology): Promise<string> {
  return (await topology.exec(DIRECTOR.host, 'uname', ['-r'])).stdout.trim();
}

async function nginxVersion(): Promise<string> {
  const r = await runCommand('nginx', ['-v'], { allowFailure: true });
  return /nginx\/(\S+)/.exec(r.stderr)?.[1] ?? '?';
}

async function haproxyVersion(): Promise<string> {
  const r = await runCommand('haproxy', ['-v'], { allowFailure: true });
  return /version (\S+)/.exec(r.stdout)?.[1] ?? '?';
}

/** Share of all CPUs' time spent busy (not idle or waiting for I/O) over `ms`, from /proc/stat. */
async function cpuBusy(ms: number): Promise<number> {
  const a = await systemCpuTimes();
  await new Promise((r) => setTimeout(r, ms));
  return busyShare(a, await systemCpuTimes()) || 0;
}

/** Cumulative [busy, total] jiffies per CPU from /proc/stat. */
async function perCpuTimes(): Promise<[number, number][]> {
  const lines = (await readFile('/proc/stat', 'utf8')).split('\n').filter((l) => /^cpu\d+ /.test(l));
  return lines.map((l) => {
    const f = l.trim().split(/\s+/).slice(1).map(Number);
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0); // user..steal; guest time is already in user
    return [total - (f[3] ?? 0) - (f[4] ?? 0), total];
  });
}

function busyBetween(a: readonly [number, number][], b: readonly [number, number][]): number[] {
  return b.map(([busy, total], i) => {
    const dt = total - (a[i]?.[1] ?? 0);
    return dt > 0 ? (busy - (a[i]?.[0] ?? 0)) / dt : 0;
  });
}
