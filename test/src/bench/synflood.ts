import { mkdtemp, readFile } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { validateConfig, type Service } from '@lbd/config';
import { NftDataPlane, netnsRunner } from '@lbd/dataplane-nft';
import {
  CLIENT, DIRECTOR, LOCAL_ADDRESSES, SPOOFED_SOURCES, VIPS, directorTopology, removeOrphans, runCommand, runPrefix, synFlood, tcpExtCounter,
  type SynFloodResult, type Topology,
} from '@lbd/testkit';
import { busyShare, systemCpuTimes } from './cpu.js';
import { conntrackStatistics } from './kernel-counters.js';
import { formatNumber, formatRatio, table } from './report.js';
import { BenchScope } from './scope.js';
import { SMALL_OBJECT, startNginx, writeDocroot } from './servers.js';
import { describeErrors, errorCount, runWrk, writeWrkScript, type WrkResult } from './wrk.js';

/**
 * `pnpm bench synflood`: what a SYN flood does to a director with and without the SYN proxy (synProxy).
 * The one-director lab, a fullnat service over three nginx real servers. In each phase wrk opens one
 * connection per request (legitimate clients) for D seconds while, from the same client namespace, a
 * spoofed-source SYN flood (testkit's synFlood: raw packets, as fast as perl sends them, from a /20 the
 * director routes back to the client, where the SYN-ACKs die) runs beside it. Per phase: legitimate
 * requests/s and their errors, SYNs sent, the director's conntrack entries at the end and its table's
 * limit, and where the CPU went.
 */

export interface SynFloodBenchOptions {
  readonly quick: boolean;
}

const HTTP_PORT = 80;
/** A bound on every flood: no phase sends more, whatever the machine's speed. */
const MAX_SYNS = 10_000_000;

const log = (msg: string): void => {
  process.stderr.write(`[bench] ${msg}\n`);
};
const out = (text = ''): void => {
  process.stdout.write(`${text}\n`);
};

interface Phase {
  readonly label: string;
  readonly synProxy: boolean;
  /** SYNs per second; 0: as fast as the flood tool goes; null: no flood. */
  readonly flood: number | null;
}

/** The paced flood: the same rate with and without the proxy, below what the tool reaches either way here. */
const PACED_RATE = 30_000;

const PHASES: readonly Phase[] = [
  { label: 'no proxy, no flood', synProxy: false, flood: null },
  { label: 'proxy, no flood', synProxy: true, flood: null },
  { label: `no proxy, flood ${PACED_RATE / 1000}k/s`, synProxy: false, flood: PACED_RATE },
  { label: `proxy, flood ${PACED_RATE / 1000}k/s`, synProxy: true, flood: PACED_RATE },
  { label: 'no proxy, flood flat out', synProxy: false, flood: 0 },
  { label: 'proxy, flood flat out', synProxy: true, flood: 0 },
];

interface PhaseResult {
  readonly wrk: WrkResult;
  readonly flood: SynFloodResult | null;
  /** conntrack entries on the director right after the phase: all, and those from the flood's sources. */
  readonly entries: number;
  readonly floodEntries: number;
  /** `conntrack -S` insert failures and drops during the phase (a full table drops new connections). */
  readonly tableDrops: number;
  /** Cores busy in all (every CPU's busy share, summed). */
  readonly cores: number;
  /** The legitimate client's SYN retransmissions (TcpExt TCPSynRetrans): its SYNs or their answers lost. */
  readonly synRetrans: number;
  /** Packets the kernel dropped from full per-CPU backlogs (softnet_stat), machine-wide. */
  readonly backlogDrops: number;
}

export async function benchSynFlood(opts: SynFloodBenchOptions): Promise<number> {
  if (process.getuid?.() !== 0) {
    process.stderr.write('pnpm bench synflood needs root: it creates network namespaces and programs nftables in them\n');
    return 77;
  }
  for (const tool of ['wrk', 'nginx', 'nft', 'conntrack', 'perl']) {
    const r = await runCommand('sh', ['-c', 'command -v "$1"', 'sh', tool], { allowFailure: true });
    if (r.code !== 0) throw new Error(`${tool} is not installed: apt-get install ${tool === 'nginx' ? 'nginx-light' : tool === 'nft' ? 'nftables' : tool}`);
  }
  const seconds = opts.quick ? 3 : 10;
  const stale = await removeOrphans('lbdb');
  if (stale.length > 0) log(`removed namespaces left by an earlier run: ${stale.join(', ')}`);
  const prefix = runPrefix('lbdb');
  const scope = new BenchScope(prefix, log);
  try {
    const dir = (scope.tmp = await mkdtemp(join(tmpdir(), 'lbd-bench-')));
    log(`building namespaces (${prefix}*)`);
    const built = await directorTopology({ prefix, realServers: 3 });
    const topology = (scope.topology = built.topology);
    await topology.setRoute(DIRECTOR.host, SPOOFED_SOURCES.prefix, CLIENT.ipv4);
    const root = await writeDocroot(dir);
    for (const rs of built.realServers) await topology.sysctl(rs.host, 'net.ipv4.tcp_synack_retries', '1');
    await Promise.all(built.realServers.map((rs) => startNginx(topology, rs.host, dir, root, { workers: 1, port: HTTP_PORT })));
    const script = await writeWrkScript(dir);
    const dp = new NftDataPlane({ runner: netnsRunner(topology.ns(DIRECTOR.host)) });
    const realServers = built.realServers.map((rs) => ({ address: rs.ipv4, port: HTTP_PORT }));
    const conntrackMax = Number((await topology.exec(DIRECTOR.host, 'sysctl', ['-n', 'net.netfilter.nf_conntrack_max'])).stdout.trim());

    out(`lbd SYN-flood benchmark${opts.quick ? ' (--quick: 3 s phases; not for comparisons)' : ''}`);
    out(`${cpus().length} CPUs shared by client, flood, director and real servers; the director's conntrack table holds at most ${formatNumber(conntrackMax)} entries`);
    out(`service ${VIPS.ipv4}:${HTTP_PORT} fullnat mh over 3 nginx real servers; legitimate load: wrk, 8 connections, one request each (Connection: close), ${seconds} s per phase;`);
    out(`flood: spoofed SYNs from ${SPOOFED_SOURCES.prefix} at the vip, as fast as one perl process sends them, for the same ${seconds} s (at most ${formatNumber(MAX_SYNS)})`);
    out();

    const results: PhaseResult[] = [];
    for (const phase of PHASES) {
      log(`phase: ${phase.label}`);
      results.push(await runPhase(topology, dp, script, phase, seconds, realServers));
    }
    const base = results[0]!.wrk.requestsPerSec;
    out(table(['phase', 'legit req/s', '× no flood', 'legit errors', 'legit SYN retrans', 'SYNs sent', 'SYN/s', 'conntrack entries (flood\'s)', 'table drops', 'backlog drops', 'cores busy', 'flood tool\'s'],
      PHASES.map((p, i) => {
        const r = results[i]!;
        const tool = r.flood === null ? 0 : r.flood.cpuSeconds / r.wrk.durationSec;
        return [
          p.label, formatNumber(r.wrk.requestsPerSec), formatRatio(r.wrk.requestsPerSec / base), errorCount(r.wrk) === 0 ? '0' : describeErrors(r.wrk), formatNumber(r.synRetrans),
          r.flood === null ? '-' : formatNumber(r.flood.sent), r.flood === null ? '-' : formatNumber(r.flood.sent / r.flood.seconds),
          `${formatNumber(r.entries)} (${formatNumber(r.floodEntries)})`, formatNumber(r.tableDrops), formatNumber(r.backlogDrops),
          r.cores.toFixed(2), r.flood === null ? '-' : tool.toFixed(2),
        ];
      })));
    out();
    out('conntrack entries: the director\'s table right after the phase (legitimate connections linger in TIME_WAIT for 2 minutes);');
    out('table drops: new connections the kernel refused because the table was full (conntrack -S drop + insert_failed + early_drop).');
    out('backlog drops: packets dropped from full per-CPU input queues (softnet_stat), machine-wide.');
    out('cores busy: all CPUs together; flood tool\'s: the perl process itself.');
    const flooded = results[2]!;
    const proxied = results[3]!;
    out(`at ${formatNumber(PACED_RATE)} SYN/s, legitimate requests ran at ${formatRatio(proxied.wrk.requestsPerSec / results[1]!.wrk.requestsPerSec)}× the unflooded rate with the proxy `
      + `and ${formatRatio(flooded.wrk.requestsPerSec / base)}× without; the flood left ${formatNumber(proxied.floodEntries)} conntrack entries with the proxy and ${formatNumber(flooded.floodEntries)} without`);
    out();
    // CPU, from a flood alone (no legitimate load to shrink under it and confound the difference).
    log('CPU: the flood alone, without and with the proxy');
    const cost = [];
    for (const synProxy of [false, true]) cost.push(await floodCost(topology, dp, synProxy, seconds, realServers));
    const [plain, proxy] = cost as [FloodCost, FloodCost];
    out(`The flood alone at ${formatNumber(PACED_RATE)} SYN/s for ${seconds} s, no legitimate load: cores busy (all CPUs, less the same ${seconds} s idle)`);
    out(`  without the proxy ${plain.cores.toFixed(2)}: the flood tool, the director's conntrack entry, NAT and forwarding per SYN, the real servers' SYN-ACKs`);
    out(`  with the proxy ${proxy.cores.toFixed(2)}: the flood tool and the director's syncookie SYN-ACK; nothing reaches a real server`);
    out(`  the proxy saves ${(((plain.cores - proxy.cores) * seconds) / ((plain.sent + proxy.sent) / 2) * 1e6).toFixed(1)} µs of CPU per SYN. (In this lab the sending, the director and the`);
    out('  real servers share the CPUs, and much of the kernel\'s work runs in the sender\'s softirq: there is no figure of the director alone.)');
    return 0;
  } finally {
    await scope.close();
  }
}

async function runPhase(topology: Topology, dp: NftDataPlane, script: string, phase: Phase, seconds: number, realServers: Array<{ address: string; port: number }>): Promise<PhaseResult> {
  await drained(topology);
  await dp.apply({ services: buildServices(phase.synProxy, realServers) });
  await topology.exec(DIRECTOR.host, 'conntrack', ['-F'], { allowFailure: true });
  const statsBefore = await conntrackStats(topology);
  const busyBefore = await systemCpuTimes();
  const [retransBefore, backlogBefore] = [await tcpExt(topology, CLIENT.host, 'TCPSynRetrans'), await softnetDrops()];
  const [wrk, flood] = await Promise.all([
    runWrk(topology, CLIENT.host, script, { url: `http://${VIPS.ipv4}:${HTTP_PORT}${SMALL_OBJECT}`, connections: 8, durationSec: seconds, closeEach: true }),
    phase.flood === null
      ? Promise.resolve(null)
      : synFlood(topology, CLIENT.host, { target: { address: VIPS.ipv4, port: HTTP_PORT }, sources: SPOOFED_SOURCES.first, count: MAX_SYNS, maxSeconds: seconds, ratePerSec: phase.flood }),
  ]);
  const busyAfter = await systemCpuTimes();
  const [retransAfter, backlogAfter] = [await tcpExt(topology, CLIENT.host, 'TCPSynRetrans'), await softnetDrops()];
  const entries = Number((await topology.exec(DIRECTOR.host, 'conntrack', ['-C'])).stdout.trim());
  const listed = await topology.exec(DIRECTOR.host, 'conntrack', ['-L', '-s', SPOOFED_SOURCES.prefix], { allowFailure: true, timeoutMs: 120_000 });
  const floodEntries = Number(/(\d+) flow entries have been shown/.exec(listed.stderr)?.[1] ?? NaN);
  const statsAfter = await conntrackStats(topology);
  const cores = busyShare(busyBefore, busyAfter) * cpus().length;
  return {
    wrk, flood, entries, floodEntries, tableDrops: statsAfter - statsBefore, cores,
    synRetrans: retransAfter - retransBefore, backlogDrops: backlogAfter - backlogBefore,
  };
}

function buildServices(synProxy: boolean, realServers: Array<{ address: string; port: number }>): Service[] {
  const result = validateConfig({
    services: [{
      name: 'web', vip: VIPS.ipv4, port: HTTP_PORT, mode: 'fullnat', scheduler: 'mh', localAddresses: [LOCAL_ADDRESSES.ipv4Range], realServers,
      ...(synProxy ? { synProxy: true } : {}),
    }],
  });
  if (!result.ok) throw new Error(`benchmark config is invalid: ${result.problems.map((p) => `${p.path}: ${p.rule}`).join('; ')}`);
  return [...result.config.services];
}

/** conntrack -S: drop + insert_failed + early_drop, summed over the CPUs. */
async function conntrackStats(topology: Topology): Promise<number> {
  const s = await conntrackStatistics(topology, DIRECTOR.host);
  return (s.drop ?? 0) + (s.insert_failed ?? 0) + (s.early_drop ?? 0);
}

interface FloodCost {
  /** Cores busy during the flood, less an idle stretch as long just before. */
  readonly cores: number;
  readonly sent: number;
}

/** Cores a paced flood alone (no legitimate load) keeps busy, beyond an idle stretch as long. */
async function floodCost(topology: Topology, dp: NftDataPlane, synProxy: boolean, seconds: number, realServers: Array<{ address: string; port: number }>): Promise<FloodCost> {
  await drained(topology);
  await dp.apply({ services: buildServices(synProxy, realServers) });
  await topology.exec(DIRECTOR.host, 'conntrack', ['-F'], { allowFailure: true });
  const idle0 = await systemCpuTimes();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const idle1 = await systemCpuTimes();
  const flood = await synFlood(topology, CLIENT.host, { target: { address: VIPS.ipv4, port: HTTP_PORT }, sources: SPOOFED_SOURCES.first, count: MAX_SYNS, maxSeconds: seconds, ratePerSec: PACED_RATE });
  const busy1 = await systemCpuTimes();
  const n = cpus().length;
  const idleCores = (idle1.busy - idle0.busy) / ((idle1.total - idle0.total) / n);
  const floodCores = (busy1.busy - idle1.busy) / ((busy1.total - idle1.total) / n);
  return { cores: floodCores - idleCores, sent: flood.sent };
}

/**
 * Waits until no real server holds a half-open connection: a flood that reached them (no proxy) leaves each
 * its SYN queue full of spoofed clients it keeps answering, and the next phase would measure that instead.
 * The servers give up on a SYN-ACK after one retransmission (tcp_synack_retries=1, set at the start).
 */
async function drained(topology: Topology): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const counts = await Promise.all(['rs1', 'rs2', 'rs3'].map(async (h) => (await topology.exec(h, 'ss', ['-Htn', 'state', 'syn-recv'])).stdout.split('\n').filter((l) => l.trim() !== '').length));
    if (counts.every((n) => n === 0)) return;
    if (Date.now() > deadline) throw new Error(`real servers still hold half-open connections after a minute: ${counts.join(', ')}`);
    log(`waiting for the real servers' half-open connections to time out (${counts.join(', ')})`);
    await new Promise((r) => setTimeout(r, 2000));
  }
}

/** A TcpExt counter of a namespace (/proc/net/netstat); 0 where the kernel has none. */
async function tcpExt(topology: Topology, host: string, name: string): Promise<number> {
  return (await tcpExtCounter(topology, host, name)) ?? 0;
}

/** /proc/net/softnet_stat's second column (backlog drops), summed over the CPUs. */
async function softnetDrops(): Promise<number> {
  return (await readFile('/proc/net/softnet_stat', 'utf8')).split('\n').filter((l) => l.trim() !== '')
    .reduce((n, l) => n + Number.parseInt(l.trim().split(/\s+/)[1] ?? '0', 16), 0);
}

