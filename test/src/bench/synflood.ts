import { mkdtemp, readFile } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { validateConfig, type Service } from '@lbd/config';
import { NftDataPlane, netnsRunner } from '@lbd/dataplane-nft';
import {
  CLIENT, DIRECTOR, LOCAL_ADDRESSES, VIPS, directorTopology, removeOrphans, runCommand, runPrefix, synFlood,
  type SynFloodResult, type Topology,
} from '@lbd/testkit';
import { cpuDelta, cpuSample } from './cpu.js';
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
const FLOOD_SOURCES = { first: '198.18.96.0', prefix: '198.18.96.0/20' } as const;
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
  readonly flood: boolean;
}

const PHASES: readonly Phase[] = [
  { label: 'no proxy, no flood', synProxy: false, flood: false },
  { label: 'proxy, no flood', synProxy: true, flood: false },
  { label: 'no proxy, flood', synProxy: false, flood: true },
  { label: 'proxy, flood', synProxy: true, flood: true },
];

interface PhaseResult {
  readonly wrk: WrkResult;
  readonly flood: SynFloodResult | null;
  /** conntrack entries on the director right after the phase. */
  readonly entries: number;
  /** `conntrack -S` insert failures and drops during the phase (a full table drops new connections). */
  readonly tableDrops: number;
  /** Cores busy in all, and the share of processes of the client (wrk, the flood) and real servers (nginx). */
  readonly cores: { total: number; client: number; servers: number };
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
    await topology.setRoute(DIRECTOR.host, FLOOD_SOURCES.prefix, CLIENT.ipv4);
    const root = await writeDocroot(dir);
    await Promise.all(built.realServers.map((rs) => startNginx(topology, rs.host, dir, root, { workers: 1, port: HTTP_PORT })));
    const script = await writeWrkScript(dir);
    const dp = new NftDataPlane({ runner: netnsRunner(topology.ns(DIRECTOR.host)) });
    const realServers = built.realServers.map((rs) => ({ address: rs.ipv4, port: HTTP_PORT }));
    const conntrackMax = Number((await topology.exec(DIRECTOR.host, 'sysctl', ['-n', 'net.netfilter.nf_conntrack_max'])).stdout.trim());

    out(`lbd SYN-flood benchmark${opts.quick ? ' (--quick: 3 s phases; not for comparisons)' : ''}`);
    out(`${cpus().length} CPUs shared by client, flood, director and real servers; the director's conntrack table holds at most ${formatNumber(conntrackMax)} entries`);
    out(`service ${VIPS.ipv4}:${HTTP_PORT} fullnat mh over 3 nginx real servers; legitimate load: wrk, 8 connections, one request each (Connection: close), ${seconds} s per phase;`);
    out(`flood: spoofed SYNs from ${FLOOD_SOURCES.prefix} at the vip, as fast as one perl process sends them, for the same ${seconds} s (at most ${formatNumber(MAX_SYNS)})`);
    out();

    const results: PhaseResult[] = [];
    for (const phase of PHASES) {
      log(`phase: ${phase.label}`);
      results.push(await runPhase(topology, dp, script, phase, seconds, realServers));
    }
    const base = results[0]!.wrk.requestsPerSec;
    out(table(['phase', 'legit req/s', '× no flood', 'legit errors', 'SYNs sent', 'SYN/s', 'conntrack entries', 'table drops', 'cores busy (client / servers / kernel+rest)'],
      PHASES.map((p, i) => {
        const r = results[i]!;
        const rest = Math.max(0, r.cores.total - r.cores.client - r.cores.servers);
        return [
          p.label, formatNumber(r.wrk.requestsPerSec), formatRatio(r.wrk.requestsPerSec / base), errorCount(r.wrk) === 0 ? '0' : describeErrors(r.wrk),
          r.flood === null ? '-' : formatNumber(r.flood.sent), r.flood === null ? '-' : formatNumber(r.flood.sent / r.flood.seconds),
          formatNumber(r.entries), formatNumber(r.tableDrops),
          `${r.cores.total.toFixed(2)} (${r.cores.client.toFixed(2)} / ${r.cores.servers.toFixed(2)} / ${rest.toFixed(2)})`,
        ];
      })));
    out();
    out('conntrack entries: the director\'s table right after the phase (legitimate connections linger in TIME_WAIT for 2 minutes);');
    out('table drops: new connections the kernel refused because the table was full (conntrack -S drop + insert_failed + early_drop).');
    out('cores busy: all CPUs; client = wrk and the flood tool, servers = nginx; the rest is kernel work (softirq: the director\'s');
    out('forwarding, its SYN proxy, the servers\' TCP stacks) and anything else on the machine.');
    const flooded = results[2]!;
    const proxied = results[3]!;
    out(`with the proxy under flood, legitimate requests ran at ${formatRatio(proxied.wrk.requestsPerSec / results[1]!.wrk.requestsPerSec)}× the proxy's unflooded rate `
      + `(without it: ${formatRatio(flooded.wrk.requestsPerSec / base)}×), and the flood left ${formatNumber(proxied.entries)} entries against ${formatNumber(flooded.entries)}`);
    return 0;
  } finally {
    await scope.close();
  }
}

async function runPhase(topology: Topology, dp: NftDataPlane, script: string, phase: Phase, seconds: number, realServers: Array<{ address: string; port: number }>): Promise<PhaseResult> {
  await dp.apply({ services: buildServices(phase.synProxy, realServers) });
  await topology.exec(DIRECTOR.host, 'conntrack', ['-F'], { allowFailure: true });
  const statsBefore = await conntrackStats(topology);
  const hosts = { client: topology.ns(CLIENT.host), servers: ['rs1', 'rs2', 'rs3'].map((h) => topology.ns(h)) };
  const before = await Promise.all([cpuSample(hosts.client), ...hosts.servers.map((ns) => cpuSample(ns))]);
  const busyBefore = await totalBusy();
  const [wrk, flood] = await Promise.all([
    runWrk(topology, CLIENT.host, script, { url: `http://${VIPS.ipv4}:${HTTP_PORT}${SMALL_OBJECT}`, connections: 8, durationSec: seconds, closeEach: true }),
    phase.flood
      ? synFlood(topology, CLIENT.host, { target: { address: VIPS.ipv4, port: HTTP_PORT }, sources: FLOOD_SOURCES.first, count: MAX_SYNS, maxSeconds: seconds })
      : Promise.resolve(null),
  ]);
  const busyAfter = await totalBusy();
  const after = await Promise.all([cpuSample(hosts.client), ...hosts.servers.map((ns) => cpuSample(ns))]);
  const entries = Number((await topology.exec(DIRECTOR.host, 'conntrack', ['-C'])).stdout.trim());
  const statsAfter = await conntrackStats(topology);
  const client = cpuDelta(before[0]!, after[0]!).cores;
  const servers = hosts.servers.reduce((n, _, i) => n + cpuDelta(before[i + 1]!, after[i + 1]!).cores, 0);
  const total = (busyAfter.busy - busyBefore.busy) / ((busyAfter.total - busyBefore.total) / cpus().length);
  return { wrk, flood, entries, tableDrops: statsAfter - statsBefore, cores: { total, client, servers } };
}

function buildServices(synProxy: boolean, realServers: Array<{ address: string; port: number }>): Service[] {
  const result = validateConfig({
    services: [{
      name: 'web', vip: VIPS.ipv4, port: HTTP_PORT, mode: 'fullnat', scheduler: 'mh', localAddresses: [LOCAL_ADDRESSES.ipv4Range], realServers,
      ...(synProxy ? { synProxy: true, sync: { enabled: false } } : {}),
    }],
  });
  if (!result.ok) throw new Error(`benchmark config is invalid: ${result.problems.map((p) => `${p.path}: ${p.rule}`).join('; ')}`);
  return [...result.config.services];
}

/** conntrack -S: drop + insert_failed + early_drop, summed over the CPUs. */
async function conntrackStats(topology: Topology): Promise<number> {
  const { stdout } = await topology.exec(DIRECTOR.host, 'conntrack', ['-S']);
  let n = 0;
  for (const m of stdout.matchAll(/\b(drop|insert_failed|early_drop)=(\d+)/g)) n += Number(m[2]);
  return n;
}

/** Busy and total jiffies of all CPUs together (/proc/stat's first line). */
async function totalBusy(): Promise<{ busy: number; total: number }> {
  const f = (await readFile('/proc/stat', 'utf8')).split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: total - (f[3] ?? 0) - (f[4] ?? 0), total };
}
