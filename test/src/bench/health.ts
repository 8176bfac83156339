import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { BenchScope } from './scope.js';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatProblem, validateConfig } from '@lbd/config';
import { AdminApi, type HealthEvent__Output, type HealthSchedulerStats__Output } from '@lbd/proto';
import { Topology, parseJsonObject, removeOrphans, runCommand, runPrefix, type BackgroundProcess } from '@lbd/testkit';
import { ForeignLoad } from './foreign-load.js';
import { clockTicks, formatCount as count, formatMs, formatNumber, median, parseProcStat, passMiss, table } from './report.js';

/**
 * `pnpm bench health`: what health checking costs the agent and how fast it notices failures, at the
 * issue's scale: 5 000 tcp checks at a 1 s interval from one director.
 *
 * Topology: namespace `dir` runs lbd-agent (as built, with the real nftables data plane); namespace
 * `targets` runs one Node process holding 5 000 `net.Server`s (50 addresses × 100 ports); one veth
 * between them. The config has 50 nat services × 100 real servers, each with a tcp check
 * (intervalMs 1000, timeoutMs 500, rise 2, fall 3, jitterMs default), so the agent also programs
 * nftables for all of them, as it would in production.
 *
 * 1. Steady state, after a warm-up: the agent's CPU over a window (/proc/PID/stat utime + stime, as
 *    cores), probes started per second, the scheduler's due → start delay (GetHealth's percentiles over
 *    its most recent probes, sampled once a second through a one-service GetHealth whose own cost is
 *    measured and stated), late, skipped and timed-out probes.
 * 2. Detection: one `nft add rule` in the targets namespace makes 100 targets (2 ports on every address,
 *    so every service loses 2 of 100) fail at once, by dropping their SYNs (timeout path) and then, on
 *    other ports, by resetting them (refused path). Each target's latency is the agent's transition time
 *    (WatchHealth) minus the moment `nft` returned; the bound is interval × fall + timeout + 100 ms.
 *    Also: when the health apply that made it quiescent had finished (agent debug log), and the time to come
 *    back after the rule is flushed.
 * 3. Sustained: everything left running for another minute, counting false downs, timeouts and
 *    conntrack drops. The agent's nat rules turn on conntrack in the director namespace, and every
 *    probe gets an entry: tcp probes end with a reset, so it lingers for the CLOSE timeout (10 s); when
 *    they ended with a FIN it stayed for TIME-WAIT (120 s) and 5 000 probes/s overflowed the default
 *    table after about 50 s. The conntrack figures are printed in every phase.
 *
 * Namespaces are `lbdb<pid>-…`, removed on every exit path (SIGINT too). Progress goes to stderr, the
 * report to stdout. No assertions: the PASS/MISS column compares with the issue's targets.
 */

export interface HealthBenchOptions {
  /** Smoke run: 1 000 targets, 10 s window. */
  readonly quick: boolean;
}

const AGENT_BIN = fileURLToPath(new URL('../../../packages/director-agent/dist/bin/lbd-agent.js', import.meta.url));
const TARGETS_BIN = fileURLToPath(new URL('./health-targets.js', import.meta.url));

const CHECK = { kind: 'tcp', intervalMs: 1000, timeoutMs: 500, rise: 2, fall: 3 } as const;
/** The issue's bound on detection (p99). */
const BOUND_MS = CHECK.intervalMs * CHECK.fall + CHECK.timeoutMs + 100;
/** The issue's CPU target and the probe rate it applies at. */
const CPU_TARGET_CORES = 0.5;
const CPU_TARGET_RATE = 5000;
const PORTS_PER_ADDRESS = 100;
const FIRST_PORT = 10_000;
/** Targets failed at once per detection run. */
const FAILING = 100;
const DIRECTOR = 'dir';
const TARGETS = 'targets';
const LINK = { director: '198.19.0.1/16', targets: '198.19.0.2/16' } as const;
/** Target addresses 198.19.1.1 … (one per service), vips 198.18.0.1 … on the director. */
const TARGET_NET = '198.19.1.0/24';
const targetAddress = (i: number): string => `198.19.1.${i + 1}`;
const vipAddress = (i: number): string => `198.18.0.${i + 1}`;
const NFT_TABLE = 'lbdbench_fail';
/** One GetHealth sample per second during the window. */
const SAMPLE_MS = 1000;
/** GetHealth calls whose agent CPU is measured to state the sampling's own cost. */
const COST_CALLS = 20;
/** Foreign CPU above this share of one CPU during the window is worth a warning. */
const FOREIGN_LIMIT = 0.1;

interface Settings {
  readonly targets: number;
  readonly warmupSec: number;
  readonly windowSec: number;
  /** The last phase: everything left running, to see what the probes' conntrack entries do over time. */
  readonly sustainSec: number;
}

function settingsFor(opts: HealthBenchOptions): Settings {
  // The full run's warm-up is short on purpose: at 5 000 probes/s the probes' own conntrack entries fill
  // the director's table about 50 s after the agent starts (see Conntrack), and the window and both
  // detection runs should finish before that; the sustained phase then shows what happens after it.
  return opts.quick ? { targets: 1000, warmupSec: 3, windowSec: 10, sustainSec: 10 } : { targets: 5000, warmupSec: 4, windowSec: 30, sustainSec: 60 };
}

const log = (msg: string): void => {
  process.stderr.write(`[bench] ${msg}\n`);
};
const out = (text = ''): void => {
  process.stdout.write(`${text}\n`);
};
/** The agent's clock (performance-based, offset to the epoch), so event times compare with ours. */
const now = (): number => performance.timeOrigin + performance.now();
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, Math.max(0, ms)));

export async function benchHealth(opts: HealthBenchOptions): Promise<number> {
  if (process.getuid?.() !== 0) {
    process.stderr.write('pnpm bench health needs root: it creates network namespaces and programs nftables in them\n');
    return 77;
  }
  for (const tool of ['nft', 'ss']) await requireTool(tool);
  const s = settingsFor(opts);
  const stale = await removeOrphans('lbdb');
  if (stale.length > 0) log(`removed namespaces left by an earlier run: ${stale.join(', ')}`);

  const prefix = runPrefix('lbdb');
  let api: AdminApi | undefined;
  const stopWatch = new AbortController();
  const scope = new BenchScope(prefix, log);
  scope.onCleanup(() => {
    stopWatch.abort();
    api?.close();
  });

  const started = performance.now();
  try {
    const tmp = (scope.tmp = await mkdtemp(join(tmpdir(), 'lbd-bench-health-')));
    const addresses = Array.from({ length: s.targets / PORTS_PER_ADDRESS }, (_, i) => targetAddress(i));
    log(`building namespaces (${prefix}${DIRECTOR}, ${prefix}${TARGETS})`);
    const topology = (scope.topology = new Topology(prefix));
    await buildTopology(topology, addresses);

    log(`starting ${s.targets} target listeners`);
    const targets = topology.spawn(TARGETS, process.execPath, [TARGETS_BIN, JSON.stringify({ addresses, firstPort: FIRST_PORT, ports: PORTS_PER_ADDRESS })], { label: 'targets' });
    await targets.waitForJson((v) => v.ready === true, 60_000);

    const socket = join(tmp, 'admin.sock');
    const configPath = join(tmp, 'lbd.json');
    const jitterMs = await writeConfig(configPath, socket, addresses);
    log(`starting lbd-agent with ${s.targets} real servers`);
    const agentStart = now();
    const agent = topology.spawn(DIRECTOR, process.execPath, [AGENT_BIN, '--config', configPath, '--admin-socket', socket, '--log-level', 'debug'], { label: 'lbd-agent' });
    await agent.waitForJson((v) => v.msg === 'started', 120_000);
    const startMs = now() - agentStart;
    const agentPid = await mainPid(agent);
    const targetsPid = await mainPid(targets);

    api = new AdminApi(socket);
    const watch = new EventLog(api, stopWatch.signal);
    const ctx: Context = {
      s, topology, api, agent, agentPid, targetsPid, watch, addresses, tck: await clockTicks(), agentStart,
      foreign: await ForeignLoad.create(topology.hostNames.map((h) => topology.ns(h))),
    };

    log(`warming up for ${s.warmupSec} s`);
    await sleep(s.warmupSec * 1000);
    const before = await api.getHealth('', { timeoutMs: 30_000 });
    const upBefore = before.realServers.filter((r) => r.state === 'up').length;
    if (upBefore !== s.targets) log(`WARNING: ${s.targets - upBefore} real server(s) are not up after the warm-up`);

    log(`steady state: ${s.windowSec} s window`);
    const steady = await measureSteady(ctx);
    log('detection: dropping SYNs to 100 targets');
    const drop = await measureDetection(ctx, 'drop', [FIRST_PORT, FIRST_PORT + FAILING / addresses.length - 1]);
    log('detection: resetting connections to 100 other targets');
    const reject = await measureDetection(ctx, 'reject', [FIRST_PORT + FAILING / addresses.length, FIRST_PORT + (2 * FAILING) / addresses.length - 1]);
    await sleep(500);
    const after = await api.getHealth('', { timeoutMs: 30_000 });
    const upAfter = after.realServers.filter((r) => r.state === 'up').length;
    const afterAt = now();
    const perCallSec = await samplingCost(ctx);
    log(`sustained: everything keeps running for ${s.sustainSec} s`);
    const sustained = await measureSustained(ctx);
    const timeWait = await timeWaitCount(topology);

    out(`lbd health-check benchmark: ${formatNumber(s.targets)} tcp checks at ${CHECK.intervalMs / 1000} s${opts.quick
      ? ` (--quick smoke run: ${formatNumber(s.targets)} targets, ${s.windowSec} s window; the CPU target applies to 5 000)` : ''}`);
    out(`kernel ${(await runCommand('uname', ['-r'])).stdout.trim()}, ${cpus().length} CPUs shared by the agent, the target listeners, the kernel's packet work and this process`);
    out(`topology: ${prefix}${DIRECTOR} (lbd-agent, nftables) --veth-- ${prefix}${TARGETS}: one Node process with ${formatNumber(s.targets)} net.Servers `
      + `(${addresses.length} addresses x ${PORTS_PER_ADDRESS} ports)`);
    out(`config: ${addresses.length} nat services x ${PORTS_PER_ADDRESS} real servers, tcp check intervalMs ${CHECK.intervalMs}, timeoutMs ${CHECK.timeoutMs}, `
      + `rise ${CHECK.rise}, fall ${CHECK.fall}, jitterMs ${jitterMs} (default), default flap damping`);
    out(`agent start to "started" (config validated, ${formatNumber(s.targets)} real servers programmed into nftables): ${formatMs(startMs)}`);
    out(`real servers up after the warm-up: ${count(upBefore)}/${formatNumber(s.targets)}; after both detection runs `
      + `(${((afterAt - agentStart) / 1000).toFixed(0)} s after the agent started): ${count(upAfter)}/${formatNumber(s.targets)}`);
    out();
    reportSteady(s, steady, perCallSec);
    out();
    reportDetection([drop, reject]);
    out();
    reportSustained(s, sustained, (sustained.endAt - agentStart) / 1000);
    out();
    out(`director namespace at the end: ${count(timeWait)} TCP sockets in TIME-WAIT (the probes close with a reset, so none are expected)`);
    out(`total time ${((performance.now() - started) / 1000).toFixed(0)} s`);
    return 0;
  } finally {
    await scope.close();
  }
}

interface Context {
  readonly s: Settings;
  readonly topology: Topology;
  readonly api: AdminApi;
  readonly agent: BackgroundProcess;
  readonly agentPid: number;
  readonly targetsPid: number;
  readonly watch: EventLog;
  readonly addresses: readonly string[];
  readonly tck: number;
  readonly foreign: ForeignLoad;
  /** When the agent was spawned (our clock): phases are reported relative to it. */
  readonly agentStart: number;
}

// ---------------------------------------------------------------------------------------------------
// Conntrack

/**
 * The director namespace's connection tracking. The agent's nat rules turn conntrack on there, so each
 * probe (a locally made connection) gets an entry too. tcp probes end with a reset, so it stays for the
 * CLOSE timeout (10 s by default); a FIN close would keep it for TIME-WAIT (120 s): 600 000 entries at
 * 5 000 probes/s, more than the default table holds. When the table is full the kernel drops new
 * connections: probes and clients alike.
 */
interface Conntrack {
  readonly count: number;
  readonly max: number;
  /** nf_conntrack_tcp_timeout_close: how long a probe's entry stays after its reset. */
  readonly closeSec: number;
  /** Packets dropped because the table was full (or an insert failed), since the namespace was made. */
  readonly drops: number;
}

async function conntrack(t: Topology): Promise<Conntrack> {
  const files = ['nf_conntrack_count', 'nf_conntrack_max', 'nf_conntrack_tcp_timeout_close'].map((f) => `/proc/sys/net/netfilter/${f}`);
  const { stdout } = await t.exec(DIRECTOR, 'cat', [...files, '/proc/net/stat/nf_conntrack'], { allowFailure: true });
  const lines = stdout.split('\n').filter((l) => l.trim() !== '');
  const [count, max, closeSec] = lines.slice(0, 3).map(Number);
  // Per-CPU rows of hexadecimal counters under a header naming them.
  const header = (lines[3] ?? '').trim().split(/\s+/);
  let drops = 0;
  for (const row of lines.slice(4)) {
    const v = row.trim().split(/\s+/).map((x) => Number.parseInt(x, 16));
    for (const name of ['drop', 'early_drop', 'insert_failed']) drops += v[header.indexOf(name)] ?? 0;
  }
  return { count: count ?? Number.NaN, max: max ?? Number.NaN, closeSec: closeSec ?? Number.NaN, drops };
}

async function buildTopology(t: Topology, addresses: readonly string[]): Promise<void> {
  await t.addHost(DIRECTOR, { forwarding: true });
  await t.addHost(TARGETS);
  await t.link({ host: DIRECTOR, ifname: 'eth0' }, { host: TARGETS, ifname: 'eth0' });
  await t.addAddress(DIRECTOR, 'eth0', LINK.director);
  await t.addAddress(TARGETS, 'eth0', LINK.targets);
  // Many addresses: one `ip -batch` per namespace rather than a command each.
  const batch = async (host: string, lines: string[]): Promise<void> => {
    const file = join(tmpdir(), `lbd-bench-health-${process.pid}-${host}.ip`);
    await writeFile(file, `${lines.join('\n')}\n`);
    try {
      await t.ip(host, '-batch', file);
    } finally {
      await rm(file, { force: true });
    }
  };
  await batch(TARGETS, addresses.map((a) => `addr add ${a}/32 dev eth0`));
  await batch(DIRECTOR, addresses.map((_, i) => `addr add ${vipAddress(i)}/32 dev lo`));
  // The chain the failures go into; empty until a detection run adds its one rule.
  const nft = join(tmpdir(), `lbd-bench-health-${process.pid}.nft`);
  await writeFile(nft, `table inet ${NFT_TABLE} {\n  chain input {\n    type filter hook input priority 0; policy accept;\n  }\n}\n`);
  try {
    await t.exec(TARGETS, 'nft', ['-f', nft]);
  } finally {
    await rm(nft, { force: true });
  }
}

/** Writes the agent's config (JSON); returns the effective jitterMs (the default). */
async function writeConfig(path: string, socket: string, addresses: readonly string[]): Promise<number> {
  const raw = {
    agent: { adminSocket: socket },
    services: addresses.map((address, i) => ({
      name: `svc${String(i + 1).padStart(2, '0')}`, vip: vipAddress(i), port: 80, protocol: 'tcp', mode: 'nat', scheduler: 'wrr',
      healthCheck: { ...CHECK },
      realServers: Array.from({ length: PORTS_PER_ADDRESS }, (_, p) => ({ address, port: FIRST_PORT + p })),
    })),
  };
  const v = validateConfig(raw);
  if (!v.ok) throw new Error(`the benchmark's config is invalid:\n${v.problems.map(formatProblem).join('\n')}`);
  await writeFile(path, `${JSON.stringify(raw, null, 1)}\n`);
  return v.config.services[0]?.realServers[0]?.healthCheck?.jitterMs ?? Number.NaN;
}

// ---------------------------------------------------------------------------------------------------
// Events

interface Received {
  readonly event: HealthEvent__Output;
  /** Our clock when it arrived. */
  readonly receivedAt: number;
}

/** Every health transition, from WatchHealth, for the life of the run. */
class EventLog {
  readonly events: Received[] = [];
  error: unknown;

  constructor(api: AdminApi, signal: AbortSignal) {
    void (async () => {
      for await (const event of api.watchHealth(0, { signal })) this.events.push({ event, receivedAt: now() });
    })().catch((err: unknown) => {
      this.error = err;
      log(`WatchHealth ended: ${err instanceof Error ? err.message : String(err)}`);
    });
  }

  /** Transitions to `to` at or after index `from` whose server is in `keys` (address:port). */
  matching(from: number, to: 'up' | 'down', keys: ReadonlySet<string>): Map<string, Received> {
    const found = new Map<string, Received>();
    for (const r of this.events.slice(from)) {
      const key = `${r.event.address}:${r.event.port}`;
      if (r.event.to === to && keys.has(key) && !found.has(key)) found.set(key, r);
    }
    return found;
  }

  /** Polls (every 20 ms, until `deadline` on our clock) until every key has a transition to `to`. */
  async waitFor(from: number, to: 'up' | 'down', keys: ReadonlySet<string>, deadline: number): Promise<Map<string, Received>> {
    for (;;) {
      const found = this.matching(from, to, keys);
      if (found.size === keys.size || now() >= deadline || this.error !== undefined) return found;
      await sleep(20);
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// Steady state

interface Steady {
  readonly wallSec: number;
  readonly conntrack: { readonly start: Conntrack; readonly end: Conntrack; readonly growthPerSec: number };
  readonly cores: number;
  readonly userCores: number;
  readonly childCores: number;
  /** The agent's live children (lbd-probe, `nft -i`), which the agent's own counters leave out. */
  readonly helperCores: number;
  readonly helperNames: readonly string[];
  /** When the window began, in seconds after the agent was started. */
  readonly startSec: number;
  readonly targetsCores: number;
  readonly foreignCores: number;
  readonly foreignWho: string;
  readonly probesPerSec: number;
  readonly completedPerSec: number;
  readonly late: number;
  readonly skipped: number;
  readonly timedOut: number;
  readonly transitions: number;
  readonly delay: { p50: number; p99: number; p99Worst: number; max: number; samples: number };
  readonly rssMiB: number;
}

async function measureSteady(ctx: Context): Promise<Steady> {
  const { api, agentPid, s } = ctx;
  const first = ctx.addresses.length > 0 ? 'svc01' : '';
  const ct0 = await conntrack(ctx.topology);
  const f0 = await ctx.foreign.snapshot();
  const t0cpu = await procCpu(ctx.targetsPid, ctx.tck);
  const a0 = await procCpu(agentPid, ctx.tck);
  const w0 = now();
  const s0 = schedulerOf(await api.getHealth(first));
  const events0 = ctx.watch.events.length;
  const samples: HealthSchedulerStats__Output[] = [];
  for (let k = 1; k <= s.windowSec * 1000 / SAMPLE_MS; k++) {
    await sleep(w0 + k * SAMPLE_MS - now());
    samples.push(schedulerOf(await api.getHealth(first)));
  }
  const s1 = samples[samples.length - 1] ?? s0;
  const a1 = await procCpu(agentPid, ctx.tck);
  const w1 = now();
  const t1cpu = await procCpu(ctx.targetsPid, ctx.tck);
  const f1 = await ctx.foreign.snapshot();
  const ct1 = await conntrack(ctx.topology);
  const wallSec = (w1 - w0) / 1000;
  return {
    wallSec,
    conntrack: { start: ct0, end: ct1, growthPerSec: (ct1.count - ct0.count) / wallSec },
    cores: (a1.self - a0.self) / wallSec,
    userCores: (a1.user - a0.user) / wallSec,
    childCores: (a1.children - a0.children) / wallSec,
    helperCores: Math.max(0, a1.helpers - a0.helpers) / wallSec,
    helperNames: a1.helperNames,
    startSec: (w0 - ctx.agentStart) / 1000,
    targetsCores: (t1cpu.self - t0cpu.self) / wallSec,
    foreignCores: ForeignLoad.between(f0, f1) / wallSec,
    foreignWho: ForeignLoad.describe(f0, f1),
    probesPerSec: (s1.started - s0.started) / wallSec,
    completedPerSec: (s1.completed - s0.completed) / wallSec,
    late: s1.late - s0.late,
    skipped: s1.skipped - s0.skipped,
    timedOut: s1.timedOut - s0.timedOut,
    transitions: ctx.watch.events.length - events0,
    delay: {
      p50: median(samples.map((x) => x.startDelayP50Ms)),
      p99: median(samples.map((x) => x.startDelayP99Ms)),
      p99Worst: Math.max(...samples.map((x) => x.startDelayP99Ms)),
      max: Math.max(...samples.map((x) => x.startDelayMaxMs)),
      samples: samples.length,
    },
    rssMiB: await rssMiB(agentPid),
  };
}

function schedulerOf(r: { scheduler: HealthSchedulerStats__Output | null }): HealthSchedulerStats__Output {
  if (r.scheduler === null) throw new Error('GetHealth returned no scheduler stats');
  return r.scheduler;
}

/** Agent CPU seconds of one one-service GetHealth (the window's sampling call), over COST_CALLS calls. */
async function samplingCost(ctx: Context): Promise<number> {
  const c0 = await procCpu(ctx.agentPid, ctx.tck);
  for (let i = 0; i < COST_CALLS; i++) await ctx.api.getHealth('svc01');
  const c1 = await procCpu(ctx.agentPid, ctx.tck);
  return (c1.self - c0.self) / COST_CALLS;
}

function reportSteady(s: Settings, r: Steady, perCallSec: number): void {
  const samplingCores = (perCallSec * r.delay.samples) / r.wallSec;
  const rate = s.targets / (CHECK.intervalMs / 1000);
  const projected = r.probesPerSec * r.conntrack.end.closeSec;
  const full = s.targets === CPU_TARGET_RATE;
  out(`== Steady state: ${r.wallSec.toFixed(0)} s window after ${s.warmupSec} s of warm-up (${r.startSec.toFixed(0)}-${(r.startSec + r.wallSec).toFixed(0)} s after the agent started), every target up ==`);
  out(table(['figure', 'value', 'target', 'result'], [
    ['agent CPU with its helpers', `${(r.cores + r.helperCores).toFixed(3)} cores`, `<= ${CPU_TARGET_CORES} core at ${formatNumber(CPU_TARGET_RATE)} probes/s`,
      full ? passMiss(r.cores + r.helperCores <= CPU_TARGET_CORES) : 'n/a (quick)'],
    ['  the agent process (utime + stime)', `${r.cores.toFixed(3)} cores`, '', ''],
    ['    of which user / system', `${r.userCores.toFixed(3)} / ${(r.cores - r.userCores).toFixed(3)}`, '', ''],
    [`  its helpers (${r.helperNames.join(', ') || 'none'})`, `${r.helperCores.toFixed(3)} cores`, '', ''],
    ['  per 1 000 probes/s', `${((r.cores + r.helperCores) / (r.probesPerSec / 1000)).toFixed(3)} cores`, '', ''],
    ['probes started', `${formatNumber(r.probesPerSec)}/s`, `${formatNumber(rate)}/s (every check once a second)`, passMiss(r.probesPerSec >= rate * 0.99)],
    ['probes completed', `${formatNumber(r.completedPerSec)}/s`, '', ''],
    ['due -> start delay p50', formatMs(r.delay.p50), '', ''],
    ['due -> start delay p99', formatMs(r.delay.p99), '', ''],
    ['  p99 of the worst sample', formatMs(r.delay.p99Worst), '', ''],
    ['  max seen', formatMs(r.delay.max), '', ''],
    ['late (no free slot)', count(r.late), '0', passMiss(r.late === 0)],
    ['skipped (previous still running)', count(r.skipped), '0', passMiss(r.skipped === 0)],
    ['timed out', count(r.timedOut), '0', passMiss(r.timedOut === 0)],
    ['transitions (false downs)', count(r.transitions), '0', passMiss(r.transitions === 0)],
    ['conntrack drops (table full)', count(r.conntrack.end.drops - r.conntrack.start.drops), '0', passMiss(r.conntrack.end.drops === r.conntrack.start.drops)],
    ['conntrack entries at the end', `${count(r.conntrack.end.count)} of ${count(r.conntrack.end.max)}`, '', ''],
    ['  growth', `${formatNumber(r.conntrack.growthPerSec)}/s`, '', ''],
    ['  projected (probes/s x CLOSE timeout)', count(projected), `<= ${count(r.conntrack.end.max)} (nf_conntrack_max)`, passMiss(projected <= r.conntrack.end.max)],
  ]));
  if (projected > r.conntrack.end.max) {
    out(`WARNING: every probe leaves a conntrack entry in the director namespace for nf_conntrack_tcp_timeout_close = ${r.conntrack.end.closeSec} s;`);
    out(`at ${formatNumber(r.probesPerSec)} probes/s that is ${count(projected)} entries, more than the table holds (${count(r.conntrack.end.max)}): it fills about `
      + `${formatNumber(r.conntrack.end.max / Math.max(1, r.probesPerSec))} s after the agent starts, and then the kernel drops new connections,`);
    out('health probes and client connections through the director alike (see the sustained phase below).');
  }
  out(`CPU from /proc/<agent pid>/stat over the window; it includes ${r.delay.samples} one-service GetHealth calls (1 a second) costing about `
    + `${samplingCores.toFixed(3)} cores (measured over ${COST_CALLS} calls after the detection runs); children (nft): ${r.childCores.toFixed(3)} cores.`);
  out(`Delay percentiles: the scheduler keeps the delays of its last 4 096 probes; each 1 s sample gives their p50/p99 and the figures are `
    + `the median over ${r.delay.samples} samples (at ${formatNumber(r.probesPerSec)} probes/s a sample covers ${(4096 / Math.max(1, r.probesPerSec)).toFixed(1)} s).`);
  out(`agent RSS ${r.rssMiB.toFixed(0)} MiB; the target listeners' process used ${r.targetsCores.toFixed(3)} cores; `
    + `processes outside the benchmark used ${r.foreignCores.toFixed(3)} cores${r.foreignCores > FOREIGN_LIMIT
      ? ` -- WARNING: something else was busy (${r.foreignWho}); it may have slowed the agent` : ''}`);
}

// ---------------------------------------------------------------------------------------------------
// Detection

type FailureMode = 'drop' | 'reject';

interface Detection {
  readonly mode: FailureMode;
  readonly ports: readonly [number, number];
  readonly nftMs: number;
  readonly failing: number;
  /** Per target that went down: transition time − t0. */
  readonly latencies: number[];
  readonly probeReasons: Map<string, number>;
  /** Per target: end of the health apply that took it out of rotation − t0. */
  readonly kernel: number[];
  readonly falseDowns: string[];
  readonly recovered: number[];
  readonly agentCores: number;
  readonly deliveryMs: number[];
  /** Conntrack drops in the director from adding the rule until the last target was back up. */
  readonly conntrackDrops: number;
  /** When the rule was added and when the last target was back, in seconds after the agent started. */
  readonly span: readonly [number, number];
  readonly conntrackAtStart: number;
}

async function measureDetection(ctx: Context, mode: FailureMode, ports: readonly [number, number]): Promise<Detection> {
  const keys = new Set(ctx.addresses.flatMap((a) => Array.from({ length: ports[1] - ports[0] + 1 }, (_, i) => `${a}:${ports[0] + i}`)));
  const verdict = mode === 'drop' ? ['drop'] : ['reject', 'with', 'tcp', 'reset'];
  const mark = ctx.watch.events.length;
  const ct0 = await conntrack(ctx.topology);
  const a0 = await procCpu(ctx.agentPid, ctx.tck);
  const w0 = now();
  const spawned = now();
  // One rule, one nft command: every target fails in the same instant (the transaction's commit).
  await ctx.topology.exec(TARGETS, 'nft', ['add', 'rule', 'inet', NFT_TABLE, 'input', 'ip', 'daddr', TARGET_NET, 'tcp', 'dport', `${ports[0]}-${ports[1]}`, ...verdict]);
  const t0 = now();
  const down = await ctx.watch.waitFor(mark, 'down', keys, t0 + 2 * BOUND_MS + 2000);
  // A little longer, so late applies and stray transitions of other targets show.
  await sleep(500);
  const a1 = await procCpu(ctx.agentPid, ctx.tck);
  const w1 = now();
  const falseDowns = ctx.watch.events.slice(mark)
    .filter((r) => r.event.to === 'down' && !keys.has(`${r.event.address}:${r.event.port}`))
    .map((r) => `${r.event.address}:${r.event.port} (${r.event.reason})`);

  const applies = healthApplies(ctx.agent.stdout).filter((a) => a.end >= t0);
  const kernel: number[] = [];
  for (const r of down.values()) {
    const done = applies.find((a) => a.start >= r.event.timeUnixMs);
    if (done !== undefined) kernel.push(done.end - t0);
  }
  const probeReasons = new Map<string, number>();
  for (const r of down.values()) probeReasons.set(r.event.probeReason, (probeReasons.get(r.event.probeReason) ?? 0) + 1);

  const upMark = ctx.watch.events.length;
  await ctx.topology.exec(TARGETS, 'nft', ['flush', 'chain', 'inet', NFT_TABLE, 'input']);
  const r0 = now();
  const up = await ctx.watch.waitFor(upMark, 'up', keys, r0 + 10_000);
  const ct1 = await conntrack(ctx.topology);
  return {
    conntrackDrops: ct1.drops - ct0.drops,
    span: [(t0 - ctx.agentStart) / 1000, (now() - ctx.agentStart) / 1000],
    conntrackAtStart: ct0.count,
    mode, ports, nftMs: t0 - spawned, failing: keys.size,
    latencies: [...down.values()].map((r) => r.event.timeUnixMs - t0),
    probeReasons,
    kernel,
    falseDowns,
    recovered: [...up.values()].map((r) => r.event.timeUnixMs - r0),
    agentCores: (a1.self + a1.children + a1.helpers - a0.self - a0.children - a0.helpers) / ((w1 - w0) / 1000),
    deliveryMs: [...down.values()].map((r) => r.receivedAt - r.event.timeUnixMs),
  };
}

// ---------------------------------------------------------------------------------------------------
// Sustained

interface Sustained {
  readonly sec: number;
  readonly endAt: number;
  readonly cores: number;
  readonly downs: number;
  readonly downServers: number;
  readonly reasons: Map<string, number>;
  readonly timedOut: number;
  readonly started: number;
  readonly late: number;
  readonly skipped: number;
  readonly conntrackDrops: number;
  readonly conntrackEnd: Conntrack;
  readonly upAtEnd: number;
}

/** Leaves everything running (no failures injected) and counts what still goes wrong. */
async function measureSustained(ctx: Context): Promise<Sustained> {
  const first = 'svc01';
  const mark = ctx.watch.events.length;
  const ct0 = await conntrack(ctx.topology);
  const a0 = await procCpu(ctx.agentPid, ctx.tck);
  const w0 = now();
  const s0 = schedulerOf(await ctx.api.getHealth(first));
  await sleep(ctx.s.sustainSec * 1000);
  const s1 = schedulerOf(await ctx.api.getHealth(first));
  const a1 = await procCpu(ctx.agentPid, ctx.tck);
  const w1 = now();
  const ct1 = await conntrack(ctx.topology);
  const all = await ctx.api.getHealth('', { timeoutMs: 30_000 });
  const downs = ctx.watch.events.slice(mark).filter((r) => r.event.to === 'down');
  const reasons = new Map<string, number>();
  for (const r of downs) reasons.set(r.event.probeReason, (reasons.get(r.event.probeReason) ?? 0) + 1);
  return {
    sec: (w1 - w0) / 1000, endAt: w1,
    cores: (a1.self + a1.children + a1.helpers - a0.self - a0.children - a0.helpers) / ((w1 - w0) / 1000),
    downs: downs.length,
    downServers: new Set(downs.map((r) => `${r.event.address}:${r.event.port}`)).size,
    reasons,
    timedOut: s1.timedOut - s0.timedOut,
    started: s1.started - s0.started,
    late: s1.late - s0.late,
    skipped: s1.skipped - s0.skipped,
    conntrackDrops: ct1.drops - ct0.drops,
    conntrackEnd: ct1,
    upAtEnd: all.realServers.filter((r) => r.state === 'up').length,
  };
}

function reportSustained(s: Settings, r: Sustained, sinceStartSec: number): void {
  out(`== Sustained: ${r.sec.toFixed(0)} s more with every target healthy (until ${sinceStartSec.toFixed(0)} s after the agent started) ==`);
  const reasons = [...r.reasons].map(([k, n]) => `${k} ${n}`).join(', ');
  out(table(['figure', 'value', 'target', 'result'], [
    ['transitions to down (false)', `${count(r.downs)} (${count(r.downServers)} servers${reasons ? `; ${reasons}` : ''})`, '0', passMiss(r.downs === 0)],
    ['probes started', `${formatNumber(r.started / r.sec)}/s`, `${formatNumber(s.targets / (CHECK.intervalMs / 1000))}/s`,
      passMiss(r.started / r.sec >= (s.targets / (CHECK.intervalMs / 1000)) * 0.99)],
    ['probes timed out', `${count(r.timedOut)} of ${count(r.started)}`, '0', passMiss(r.timedOut === 0)],
    ['late / skipped', `${count(r.late)} / ${count(r.skipped)}`, '0 / 0', passMiss(r.late === 0 && r.skipped === 0)],
    ['conntrack drops (table full)', count(r.conntrackDrops), '0', passMiss(r.conntrackDrops === 0)],
    ['conntrack entries at the end', `${count(r.conntrackEnd.count)} of ${count(r.conntrackEnd.max)}`, '', ''],
    ['real servers up at the end', `${count(r.upAtEnd)}/${count(s.targets)}`, count(s.targets), passMiss(r.upAtEnd === s.targets)],
    ['agent CPU (with its helpers and nft runs)', `${r.cores.toFixed(3)} cores`, '', ''],
  ]));
}

/** `health applied` lines of the agent's debug log: when each apply started and ended (wall clock ms). */
function healthApplies(stdout: string): { start: number; end: number }[] {
  const outList: { start: number; end: number }[] = [];
  for (const line of stdout.split('\n')) {
    const v = parseJsonObject(line);
    if (v?.msg !== 'health applied' || typeof v.time !== 'string') continue;
    const end = Date.parse(v.time);
    const duration = typeof v.durationMs === 'number' ? v.durationMs : 0;
    outList.push({ start: end - duration, end });
  }
  return outList;
}

function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

function reportDetection(runs: readonly Detection[]): void {
  const perAddress = runs[0] === undefined ? Number.NaN : runs[0].ports[1] - runs[0].ports[0] + 1;
  out(`== Detection: ${FAILING} targets fail at once (${perAddress} ports on each of the ${FAILING / perAddress} addresses, one nft rule in the targets namespace) ==`);
  out(`bound: interval x fall + timeout + 100 ms = ${CHECK.intervalMs} x ${CHECK.fall} + ${CHECK.timeoutMs} + 100 = ${formatNumber(BOUND_MS)} ms (p99)`);
  const label = (m: FailureMode): string => (m === 'drop' ? 'drop (timeout)' : 'reset (refused)');
  out(table(['failure', 'detected', 'p50', 'p99', 'max', 'bound', 'result'], runs.map((r) => [
    label(r.mode), `${r.latencies.length}/${r.failing}`, formatMs(percentile(r.latencies, 50)), formatMs(percentile(r.latencies, 99)),
    formatMs(Math.max(...r.latencies)), formatMs(BOUND_MS),
    passMiss(r.latencies.length === r.failing && percentile(r.latencies, 99) <= BOUND_MS && r.falseDowns.length === 0),
  ])));
  out();
  out(table(['failure', 'out of rotation p50', 'p99', 'max', 'back up p50', 'max', 'back', 'false downs', 'conntrack drops', 'agent CPU'], runs.map((r) => [
    label(r.mode), formatMs(percentile(r.kernel, 50)), formatMs(percentile(r.kernel, 99)), formatMs(Math.max(...r.kernel)),
    formatMs(percentile(r.recovered, 50)), formatMs(Math.max(...r.recovered)), `${r.recovered.length}/${r.failing}`,
    String(r.falseDowns.length), count(r.conntrackDrops), `${r.agentCores.toFixed(2)} cores`,
  ])));
  out('Latencies run from the moment `nft add rule` returned (the rule is in force from its commit, just before) to the agent\'s');
  out('transition time (WatchHealth). "out of rotation": until the health apply that made the target quiescent had finished (agent debug');
  out(`log). "back up": from flushing the rule to the transition up (rise ${CHECK.rise}). agent CPU: from adding the rule until 0.5 s after the last down.`);
  for (const r of runs) {
    const reasons = [...r.probeReasons].map(([k, n]) => `${k} ${n}`).join(', ');
    out(`${label(r.mode)}: ${r.span[0].toFixed(0)}-${r.span[1].toFixed(0)} s after the agent started (conntrack entries at the start: ${count(r.conntrackAtStart)}); `
      + `ports ${r.ports[0]}-${r.ports[1]}; nft ran ${formatMs(r.nftMs)} from spawn to exit; probe reasons: ${reasons || 'none'}; `
      + `WatchHealth delivery p99 ${formatMs(percentile(r.deliveryMs, 99))}`
      + (r.falseDowns.length > 0 ? `; false downs: ${r.falseDowns.slice(0, 5).join(', ')}${r.falseDowns.length > 5 ? ', ...' : ''}` : ''));
  }
}

// ---------------------------------------------------------------------------------------------------
// Processes

/**
 * CPU seconds of a process (utime + stime; utime alone), of its reaped children (cutime + cstime), and of
 * its live children: the helpers it keeps running (lbd-probe, `nft -i`), whose work is the agent's though
 * it is not in the agent's own counters.
 */
async function procCpu(pid: number, tck: number): Promise<{ self: number; user: number; children: number; helpers: number; helperNames: string[] }> {
  const st = parseProcStat(await readFile(`/proc/${pid}/stat`, 'utf8'));
  let helpers = 0;
  const names = new Set<string>();
  for (const task of await readdir(`/proc/${pid}/task`).catch(() => [] as string[])) {
    const children = await readFile(`/proc/${pid}/task/${task}/children`, 'utf8').catch(() => '');
    for (const child of children.trim().split(/\s+/).filter(Boolean)) {
      try {
        const c = parseProcStat(await readFile(`/proc/${child}/stat`, 'utf8'));
        helpers += (c.utime + c.stime) / tck;
        names.add(c.comm);
      } catch {
        // Exited meanwhile: its time is in the agent's cutime/cstime once waited for.
      }
    }
  }
  return { self: (st.utime + st.stime) / tck, user: st.utime / tck, children: (st.cutime + st.cstime) / tck, helpers, helperNames: [...names].sort() };
}

async function rssMiB(pid: number): Promise<number> {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(await readFile(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

/**
 * The pid of the program a BackgroundProcess runs: `ip netns exec` execs it, so normally the child's own
 * pid; if some `ip` forked instead, its only child.
 */
async function mainPid(p: BackgroundProcess): Promise<number> {
  const pid = p.pid;
  if (pid === undefined) throw new Error(`${p.label} has no pid`);
  const comm = (await readFile(`/proc/${pid}/comm`, 'utf8')).trim();
  if (comm !== 'ip') return pid;
  const children = (await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8')).trim().split(/\s+/).map(Number);
  if (children.length !== 1 || !(children[0]! > 0)) throw new Error(`${p.label}: cannot find the process under ip netns exec`);
  return children[0]!;
}

async function timeWaitCount(t: Topology): Promise<number> {
  const { stdout } = await t.exec(DIRECTOR, 'ss', ['-Htan', 'state', 'time-wait'], { allowFailure: true });
  return stdout.split('\n').filter((l) => l.trim() !== '').length;
}

async function requireTool(tool: string): Promise<void> {
  const r = await runCommand('sh', ['-c', 'command -v "$1"', 'sh', tool], { allowFailure: true });
  if (r.code !== 0) throw new Error(`${tool} is not installed: apt-get install ${tool === 'ss' ? 'iproute2' : tool === 'nft' ? 'nftables' : tool}`);
}
