import { mkdtemp, readFile } from 'node:fs/promises';
import { cpus, loadavg, release, tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { parseConfig, serviceKey, type Service } from '@lbd/config';
import { ConnectionSync, LAG_WINDOW_MS, SyncReceiver, realServerName, toWireChange } from '@lbd/connsync';
import { type ConnectionApplyResult, type ConnectionChange, type ConnectionTable, type ConnectionWatch, type ConnectionWatchHandlers, type SyncedConnection } from '@lbd/dataplane';
import { silentLogger, type Logger } from '@lbd/director-agent';
import { ConntrackConnectionTable, defaultCtnlHelper, listConntrack, netnsRunner, parseConntrack, type CtnlWriterKind } from '@lbd/dataplane-nft';
import {
  AdminApi, connSyncServiceDefinition, peerServerCredentials, syncProto, type Change, type ClusterStatus__Output, type ConnSyncPeer__Output, type PeerSecurity, type SyncMessage,
} from '@lbd/proto';
import {
  Topology, freePort, makeClusterPki, privilegeProblem, removeOrphans, runPrefix, spawnTestClient, waitFor,
  waitSteady, type BackgroundProcess, type DirectorName, type HaLab, type ReadyReport, type StreamResult, type UdpFlowsReadyReport, type UdpFlowsResult,
} from '@lbd/testkit';
import { startBulkLeader, type BulkLeaderData, type BulkLeaderMessage } from './bulk-leader.js';
import { busyShare, cpuDelta, cpuSample, kernelIoCpuSec, systemCpuTimes, type CpuSample } from './cpu.js';
import { conntrackStatistics } from './kernel-counters.js';
import { formatCount as count, formatMs, formatNumber, formatRatio, passMiss, sum, table } from './report.js';
import { BenchScope } from './scope.js';
import { SMALL_OBJECT } from './servers.js';
import { benchSyncPath, reportSyncPath, type SyncPathResult } from './sync-path.js';
import { GROUP, LOCAL_ADDRESSES, ONE_SERVICE_CONFIG, RS_HOSTS, VIP, applyConfig, other, startLab, type SyncLabUser, writesOf } from './sync-lab.js';
import { WorkerLink } from './worker-link.js';
import { describeErrors, errorCount, runWrk, writeWrkScript, type WrkResult } from './wrk.js';

/**
 * `pnpm bench connsync [--count N] [--quick]`: connection sync between directors (@lbd/connsync), at the
 * issue's scale. Progress goes to stderr, the report to stdout; nothing is asserted: the PASS/MISS column
 * compares each figure with the issue's target.
 *
 * 1. Bulk: 100 000 fullnat tcp connections.
 *    a. The kernel alone (the baseline): one ConntrackConnectionTable.apply of 100 000 upserts into a fresh
 *       namespace, and `conntrack -C` there to confirm.
 *    b. The whole path: two ConnectionSync instances, on loopback gRPC with mutual TLS (a throwaway PKI): the
 *       leader's in a worker thread (bulk-leader.ts: its own event loop and heap, as the leader's agent has on its
 *       own director), its table a FakeConnectionTable holding the connections (no kernel on that side, so the
 *       figure is the standby's); the standby's on this process's main thread, a ConntrackConnectionTable in
 *       another fresh namespace. Timed from the leader's setLeading until the standby's receiver has caught up
 *       and its kernel holds every connection.
 *    c. (b) with both ends on the main thread, as the figure was measured until 5 December: the leader's work
 *       then adds to the standby's on one thread, which two agents never do.
 *    d. The standby's receive-and-inject path alone (reported next to 2, whose lag it isolates): a
 *       SyncReceiver over a ConntrackConnectionTable in a fresh namespace, fed in this process as a sender would
 *       (hello, an empty snapshot, then every 5 ms a `changes` message of 25 new fullnat tcp connections, 5 000/s,
 *       for 10 s; each message through the real protobuf serializer and back), no gRPC, no wrk, no lab. Lag
 *       is from the moment each message was due in that pace to its (cumulative) ack; CPU is this process's
 *       (process.cpuUsage) and that of the ctnetlink helper in the namespace and of any conntrack runs (dumps)
 *       it waited for (/proc/PID/stat; /proc/self/stat cutime + cstime).
 *    e. The whole sync path alone (sync-path.ts): the leader's ConnectionSync in a worker thread reading lbd-ctnl's
 *       event lines at 5 000 new connections/s, gRPC + mutual TLS, the standby's into conntrack through
 *       lbd-ctnl; the CPU of each end's thread, with the machine to itself, and the lag, two rounds of 10 s (the
 *       sender's lag window: it then holds the round's messages and none of the warm-up's).
 * 2. Incremental lag: the HA lab (startHaLab: two directors running lbd-agent with mutual TLS, three etcd
 *    members, three real servers running nginx), wrk in the client namespace opening a new connection per
 *    request (`Connection: close`) at 5 000/s for a bounded time (paced by a schedule: wrk.ts). Each connection
 *    reaches ESTABLISHED, so each is one connection to copy. The leader's
 *    sender lag (kernel event to the standby's ack, over the messages acknowledged in the last 10 s) is sampled
 *    every 500 ms; each load run comes after a 3 s warm-up load and 10 s for that window to forget it (the
 *    warm-up's lag, sync's first seconds in fresh agents, is reported on its own);
 *    CPU is every process in each director's namespace (the agent, its ctnetlink helpers and the conntrack
 *    runs it waits for), from /proc/PID/stat, in cores over the load window; the same load with sync disabled
 *    per service (`sync: { enabled: false }`, applied through the admin API) is the baseline (with nothing
 *    to copy, the agents do not follow conntrack's events then). Leader changes during the load are counted:
 *    they are a figure too. After each paced run the same load runs unpaced: the lab's capacity, a figure of
 *    its own (wrk and nginx share the 2 CPUs with both directors there, as no director shares with its clients).
 * 3. Drills: --count N times (default 3; --quick 1) each of a planned switchover (admin failover) and a box
 *    death (killBox; then reviveBox, `conntrack -F` as after a reboot, a new agent, steady again), with 100
 *    TCP streams and 20 UDP connections through round-robin fullnat vips (a director without the connection's entry
 *    sends its next packet to whichever server comes next), with sync and without. The group never
 *    preempts, so each drill is exactly one change of leader (no failback inside the window counted). The
 *    drills run before the load, on a fresh lab: the load leaves tens of thousands of entries behind. A
 *    drill that cannot complete (a wait runs out) is reported with its reason, and counts as a MISS.
 *
 * Everything is bounded (the load by time and rate, every wait by a deadline); the namespaces
 * (`lbdb<pid>cs-…`) and every process in them go on every way out, SIGINT included.
 */

export interface ConnsyncBenchOptions {
  readonly quick: boolean;
  readonly count?: number;
}

const TARGETS = { bulkMs: 2000, lagP99Ms: 50, rate: 5000, brokenWithSync: 0, syncOnOffRatio: 0.95, coresPerDirector: 0.25 } as const;
const DEFAULT_COUNT = 3;
const MAX_COUNT = 100;
/**
 * Connections wrk keeps open. The pace needs rate × round trip of them at least: 100 held 5 000/s only while
 * a connection's cycle stayed under 20 ms, so a slower path would have been offered less than the rate.
 */
const WRK_CONNECTIONS = 200;
const STREAMS = 100;
const UDP_CONNECTIONS = 20;
const DRILL_LOAD_MS = 90_000;
/** How long the load runs on after a takeover before it is checked (broken streams show up within this). */
const AFTER_TAKEOVER_MS = 3000;
const LAG_SAMPLE_MS = 500;
/** Load before each measured load run (section 2). */
const WARMUP_SEC = 3;

interface Settings {
  readonly bulk: number;
  readonly loadSec: number;
  /** How long the standby path alone (1d) is fed. */
  readonly standbySec: number;
  /** The whole path alone (1e): how long each round's leader is fed, and how many rounds. */
  readonly pathSec: number;
  readonly pathRounds: number;
  readonly count: number;
}

function settingsFor(opts: ConnsyncBenchOptions): Settings {
  const count = opts.count ?? (opts.quick ? 1 : DEFAULT_COUNT);
  if (!Number.isInteger(count) || count < 1 || count > MAX_COUNT) throw new Error(`--count must be 1..${MAX_COUNT}`);
  return opts.quick
    ? { bulk: 10_000, loadSec: 4, standbySec: 2, pathSec: 2, pathRounds: 1, count }
    : { bulk: 100_000, loadSec: 15, standbySec: 10, pathSec: LAG_WINDOW_MS / 1000, pathRounds: 2, count };
}

const log = (msg: string): void => { process.stderr.write(`[connsync] ${msg}\n`); };
const out = (line = ''): void => { process.stdout.write(`${line}\n`); };
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function benchConnsync(opts: ConnsyncBenchOptions): Promise<number> {
  const problem = await privilegeProblem({ commands: ['nft', 'etcd', 'etcdctl', 'arping', 'conntrack', 'openssl', 'wrk', 'nginx'] });
  if (problem !== null) {
    process.stderr.write(`bench connsync: ${problem}\n`);
    return 1;
  }
  const s = settingsFor(opts);
  const stale = await removeOrphans('lbdb');
  if (stale.length > 0) log(`removed namespaces left by an earlier run: ${stale.join(', ')}`);
  const prefix = runPrefix('lbdb', 'cs');
  const scope = new BenchScope(prefix, log);
  const started = performance.now();
  const loadAtStart = loadavg().map((l) => l.toFixed(2)).join(' ');
  try {
    scope.tmp = await mkdtemp(join(tmpdir(), 'lbd-bench-connsync-'));
    const bulk = await benchBulk(scope, prefix, s);
    // Before the lab exists: nothing else runs on the machine meanwhile.
    const standbyPath = await benchStandbyPath(scope, prefix, s);
    const syncPath = await benchSyncPath(scope, prefix, s.pathSec, s.pathRounds, log);
    const lab = await startLab(LAB_USER, scope, prefix);
    // Drills first, on a fresh lab: the load leaves tens of thousands of entries (and, see the report, can
    // cost failovers of its own), which would weigh on every drill after it.
    const drills = await benchDrills(lab, s);
    const load = await benchLoad(lab, scope.tmp, s);
    report(s, bulk, standbyPath, syncPath, load, drills, opts.quick, loadAtStart);
    out(`\ntotal time ${((performance.now() - started) / 1000).toFixed(0)} s`);
    return 0;
  } finally {
    await scope.close();
  }
}

// ---- 1. bulk --------------------------------------------------------------------------------------

interface BulkResult {
  readonly entries: number;
  /** The kernel alone: one apply. */
  readonly kernelMs: number;
  readonly kernelInserted: number;
  readonly kernelCount: number;
  readonly kernelErrors: readonly string[];
  readonly whole: WholePathResult;
  /** Diagnostic: the same with the standby's own event watch stubbed out. */
  /** The whole path with both ends on this process's one thread (how it was measured until 5 December). */
  readonly oneThread: WholePathResult;
  /** Listing the kernel-alone table back (the agent's status, metrics and replanning read it so). */
  readonly listing: ListingResult;
  /** The bulk's changes through the stream's codec, lbd's and proto-loader's. */
  readonly codec: CodecResult;
}

interface WholePathResult {
  /** setLeading to the standby's receiver caught up, and to its kernel holding every connection. */
  readonly caughtUpMs: number;
  readonly wholeMs: number;
  readonly count: number;
  readonly inserted: number;
  readonly failed: number;
  /** This process's CPU over the run (both ends), seconds; and that of the standby's ctnetlink helper and conntrack runs. */
  readonly processCpuSec: number;
  readonly childrenCpuSec: number;
  /** Where the standby's time went: its ConnectionTable calls. */
  readonly sink: TimedStats;
  /** Event losses (ENOBUFS) the standby's own ConnectionSource saw; each makes it dump the table. */
  readonly lossEvents: number;
  readonly warnings: readonly string[];
  readonly warnCount: number;
  /** Where the standby's table wrote (ConntrackConnectionTable.writerKind). */
  readonly writer: CtnlWriterKind;
}

interface TimedStats {
  readonly applies: number;
  readonly applyMs: number;
  readonly applySizes: readonly number[];
  readonly dumps: number;
  readonly dumpMs: number;
}

/** A ConnectionTable that times the calls the standby's receiver makes (the bulk figure's breakdown). */
class TimedConnectionTable implements ConnectionTable {
  private applyMs = 0;
  private dumpMs = 0;
  private dumps = 0;
  private sizes: number[] = [];

  constructor(private readonly inner: ConnectionTable) {}

  reset(): void {
    this.applyMs = 0;
    this.dumpMs = 0;
    this.dumps = 0;
    this.sizes = [];
  }

  stats(): TimedStats {
    return { applies: this.sizes.length, applyMs: this.applyMs, applySizes: [...this.sizes], dumps: this.dumps, dumpMs: this.dumpMs };
  }

  prepare(): Promise<void> {
    return this.inner.prepare();
  }

  watch(h: ConnectionWatchHandlers): Promise<ConnectionWatch> {
    return this.inner.watch(h);
  }

  async dump(): Promise<SyncedConnection[]> {
    const t0 = performance.now();
    try {
      return await this.inner.dump();
    } finally {
      this.dumps++;
      this.dumpMs += performance.now() - t0;
    }
  }

  async apply(changes: readonly ConnectionChange[]): Promise<ConnectionApplyResult> {
    const t0 = performance.now();
    try {
      return await this.inner.apply(changes);
    } finally {
      this.sizes.push(changes.length);
      this.applyMs += performance.now() - t0;
    }
  }
}

/**
 * Connection i of the bulk set: distinct clients in 198.18.0.0/15 (250 addresses x ports from 10 000), round
 * robin over the three real servers, fullnat with a local address and port unique per real server.
 */
function bulkConnection(i: number): SyncedConnection {
  const rs = i % RS_HOSTS.length;
  return {
    protocol: 'tcp',
    client: { address: `198.18.100.${(i % 250) + 1}`, port: 10_000 + Math.floor(i / 250) },
    vip: { address: VIP, port: 80 },
    realServer: { address: RS_HOSTS[rs]!, port: 8080 },
    // (rs, local) is i mod 12, so (rs, local, port) is unique.
    localAddress: { address: LOCAL_ADDRESSES[i % LOCAL_ADDRESSES.length]!, port: 1024 + Math.floor(i / 12) },
    mark: (1 << 16) | (rs + 1),
    state: 'ESTABLISHED',
    timeoutSec: 3600,
  };
}

async function conntrackCount(t: Topology, host: string): Promise<number> {
  const { stdout } = await t.exec(host, 'conntrack', ['-C'], { timeoutMs: 10_000 });
  return Number(stdout.trim());
}

/** The client's TCP retransmission counters and each director's conntrack statistics (summed over CPUs). */
interface StallCounters {
  readonly client: Record<string, number>;
  readonly conntrack: Record<DirectorName, Record<string, number>>;
}

const CLIENT_TCP_COUNTERS = ['TcpExtTCPSynRetrans', 'TcpRetransSegs'] as const;
const CONNTRACK_STATS = ['invalid', 'insert_failed', 'drop', 'early_drop', 'error', 'clash_resolve', 'chaintoolong'] as const;

async function stallCounters(t: Topology): Promise<StallCounters> {
  // -a: absolute values, -s: without touching nstat's history file.
  const { stdout } = await t.exec('client', 'nstat', ['-asz', ...CLIENT_TCP_COUNTERS], { timeoutMs: 10_000 });
  const client: Record<string, number> = {};
  for (const name of CLIENT_TCP_COUNTERS) client[name] = Number(new RegExp(`^${name}\\s+(\\d+)`, 'm').exec(stdout)?.[1] ?? Number.NaN);
  const conntrack = { dir1: {}, dir2: {} } as Record<DirectorName, Record<string, number>>;
  for (const d of ['dir1', 'dir2'] as const) {
    const all = await conntrackStatistics(t, d);
    for (const name of CONNTRACK_STATS) conntrack[d][name] = all[name] ?? 0;
  }
  return { client, conntrack };
}

/** What changed between two readings, the counters that moved only. */
function describeStalls(a: StallCounters, b: StallCounters): string {
  const moved = (x: Record<string, number>, y: Record<string, number>): string =>
    Object.keys(y).filter((k) => y[k] !== x[k]).map((k) => `${k} ${y[k]! - x[k]!}`).join(', ') || 'none';
  return `client ${moved(a.client, b.client)}; conntrack dir1 ${moved(a.conntrack.dir1, b.conntrack.dir1)}, dir2 ${moved(a.conntrack.dir2, b.conntrack.dir2)}`;
}

async function benchBulk(scope: BenchScope, prefix: string, s: Settings): Promise<BulkResult> {
  const t = (scope.topology = new Topology(prefix));
  const connections = Array.from({ length: s.bulk }, (_, i) => bulkConnection(i));

  // a. The kernel alone.
  log(`bulk (a): ${formatNumber(s.bulk)} upserts into conntrack in ${t.ns('bulka')}`);
  await t.addHost('bulka');
  const alone = new ConntrackConnectionTable({ runner: netnsRunner(t.ns('bulka')) });
  let kernelMs: number;
  let applied;
  try {
    await alone.prepare();
    const changes: ConnectionChange[] = connections.map((connection) => ({ op: 'upsert', connection }));
    const t0 = performance.now();
    applied = await alone.apply(changes);
    kernelMs = performance.now() - t0;
  } finally {
    await alone.dispose();
  }
  const kernelCount = await conntrackCount(t, 'bulka');
  log(`bulk (a): ${formatMs(kernelMs)}, inserted ${applied.inserted}, failed ${applied.failed}, conntrack -C ${kernelCount}`);
  const listing = await benchListing(t.ns('bulka'), kernelCount);

  await t.destroy();
  scope.topology = undefined;

  // b. The whole path; c. the same on one thread.
  const pki = await makeClusterPki(join(scope.tmp!, 'pki'), ['dir1', 'dir2']);
  const security = async (id: string): Promise<PeerSecurity> => ({
    kind: 'tls', ca: await readFile(pki.ca.certPath), cert: await readFile(pki.certs[id]!.certPath), key: await readFile(pki.certs[id]!.keyPath),
  });
  const ctx: WholePathContext = { scope, prefix, connections, leaderSec: await security('dir1'), standbySec: await security('dir2') };
  const whole = await wholePath(ctx, 'bulkb', true);
  const oneThread = await wholePath(ctx, 'bulkc', false);
  const codec = benchCodec(connections);
  return { entries: s.bulk, kernelMs, kernelInserted: applied.inserted, kernelCount, kernelErrors: applied.errors, listing, whole, oneThread, codec };
}

/** µs per change to serialize and to parse a SyncMessage stream of the bulk, per codec (3 runs each, interleaved). */
interface CodecResult {
  readonly lbd: { readonly serializeUs: readonly number[]; readonly parseUs: readonly number[] };
  readonly protoLoader: { readonly serializeUs: readonly number[]; readonly parseUs: readonly number[] };
}

/**
 * The bulk's connections as the sender sends them (`changesPerMessage` 512), serialized and parsed by the
 * stream's codec (sync-codec.ts, what connSyncServiceDefinition uses) and by proto-loader's (what it
 * replaced). CPU on this process's main thread, which is what either costs an agent.
 */
function benchCodec(connections: readonly SyncedConnection[]): CodecResult {
  const messages: SyncMessage[] = [];
  for (let i = 0; i < connections.length; i += 512) {
    messages.push({ seq: messages.length + 1, changes: { changes: connections.slice(i, i + 512).map((connection) => toWireChange({ op: 'upsert', connection })) } });
  }
  const ours = connSyncServiceDefinition().Stream;
  const theirs = syncProto().ConnSync.service.Stream;
  const result = { lbd: { serializeUs: [] as number[], parseUs: [] as number[] }, protoLoader: { serializeUs: [] as number[], parseUs: [] as number[] } };
  const perChange = (ms: number): number => (ms * 1000) / connections.length;
  for (let run = 0; run < 3; run++) {
    for (const [codec, into] of [[ours, result.lbd], [theirs, result.protoLoader]] as const) {
      let t0 = performance.now();
      const bytes = messages.map((m) => codec.requestSerialize(m));
      into.serializeUs.push(perChange(performance.now() - t0));
      t0 = performance.now();
      let parsed = 0;
      for (const b of bytes) parsed += codec.requestDeserialize(b).changes?.changes.length ?? 0;
      into.parseUs.push(perChange(performance.now() - t0));
      if (parsed !== connections.length) throw new Error(`the codec parsed ${parsed} of ${connections.length} changes back`);
    }
  }
  const us = (xs: readonly number[]): string => xs.map((x) => x.toFixed(2)).join(', ');
  log(`bulk: codec per change, serialize / parse: lbd ${us(result.lbd.serializeUs)} / ${us(result.lbd.parseUs)} us; proto-loader ${us(result.protoLoader.serializeUs)} / ${us(result.protoLoader.parseUs)} us`);
  return result;
}

/**
 * Listing the table just filled, listed and parsed as the agent does (listConntrack: lbd-ctnl's dump, or the perl
 * helper's where it was not built), and by `conntrack -L -o extended` as a reference, interleaved.
 */
interface ListingResult {
  /** `lbd-ctnl dump` runs (none where lbd-ctnl was not built), the perl helper's dump, `conntrack -L -o extended`, ms. */
  readonly dumpMs: readonly number[];
  readonly perlMs: readonly number[];
  readonly conntrackMs: readonly number[];
  /** Entries a listing returned that differ from the kernel's count (none expected). */
  readonly mismatches: readonly string[];
}

async function benchListing(ns: string, expected: number): Promise<ListingResult> {
  const dumpMs: number[] = [];
  const perlMs: number[] = [];
  const conntrackMs: number[] = [];
  const mismatches: string[] = [];
  const ways = defaultCtnlHelper() === 'native' ? (['native', 'perl', 'conntrack'] as const) : (['perl', 'conntrack'] as const);
  const runner = netnsRunner(ns);
  for (let i = 0; i < 3; i++) {
    for (const way of ways) {
      const t0 = performance.now();
      const n = way === 'conntrack' ? parseConntrack((await runner.run('conntrack', ['-L', '-o', 'extended'])).stdout).length
        : (await listConntrack(runner, way, 'bench', { proxyNumbers: true })).length;
      (way === 'native' ? dumpMs : way === 'perl' ? perlMs : conntrackMs).push(performance.now() - t0);
      if (n !== expected) mismatches.push(`${way === 'native' ? 'lbd-ctnl dump' : way === 'perl' ? 'the perl dump' : 'conntrack -L'} listed ${n} of ${expected}`);
    }
  }
  log(`bulk (a): listing ${formatNumber(expected)} entries: lbd-ctnl dump ${dumpMs.map(formatMs).join(', ') || 'not built'}; perl dump ${perlMs.map(formatMs).join(', ')}; conntrack -L ${conntrackMs.map(formatMs).join(', ')}`);
  return { dumpMs, perlMs, conntrackMs, mismatches };
}

interface WholePathContext {
  readonly scope: BenchScope;
  readonly prefix: string;
  readonly connections: readonly SyncedConnection[];
  readonly leaderSec: PeerSecurity;
  readonly standbySec: PeerSecurity;
}

/** The bulk's leader, wherever it runs: told to lead, described when the standby does not catch up, closed. */
interface BulkLeader {
  lead(): Promise<void>;
  describe(): string;
  close(): Promise<{ readonly warnings: readonly string[]; readonly warnCount: number }>;
}

/** The leader on this thread, beside the standby. */
class InProcessLeader implements BulkLeader {
  private constructor(private readonly sync: ConnectionSync) {}

  static async start(ctx: WholePathContext, standbyPort: number, log: Logger): Promise<InProcessLeader> {
    return new InProcessLeader(await startBulkLeader(ctx.connections, standbyPort, ctx.leaderSec, ONE_SERVICE_CONFIG, log));
  }

  lead(): Promise<void> { return this.sync.setLeading(new Set([GROUP])); }
  describe(): string { return JSON.stringify(this.sync.status().senders); }
  async close(): Promise<{ warnings: string[]; warnCount: number }> {
    await this.sync.close();
    return { warnings: [], warnCount: 0 }; // its warnings went to the run's log directly
  }
}

/** The leader in a worker thread (bulk-leader.ts). */
class BulkLeaderThread implements BulkLeader {
  private constructor(private readonly link: WorkerLink<BulkLeaderMessage>) {}

  static async start(ctx: WholePathContext, standbyPort: number): Promise<BulkLeaderThread> {
    const sec = ctx.leaderSec;
    if (sec.kind !== 'tls') throw new Error('the bulk leader runs with TLS');
    const data: BulkLeaderData = { connections: ctx.connections, peerPort: standbyPort, ca: sec.ca, cert: sec.cert, key: sec.key, configText: ONE_SERVICE_CONFIG, group: GROUP };
    return new BulkLeaderThread(await WorkerLink.start<BulkLeaderMessage>(new URL('./bulk-leader.js', import.meta.url), data));
  }

  async lead(): Promise<void> {
    await this.link.ask({ lead: true }, (m) => 'leading' in m);
  }

  describe(): string { return this.link.failure === null ? 'the leader thread runs' : `the leader thread failed: ${this.link.failure}`; }

  async close(): Promise<{ warnings: readonly string[]; warnCount: number }> {
    const m = await this.link.close();
    return m !== null && 'closed' in m ? { warnings: m.warnings, warnCount: m.warnCount } : { warnings: ['the leader thread did not close within 10 s'], warnCount: 1 };
  }
}

/**
 * One whole-path run into a fresh namespace `host`. `leaderThread`: the leader's ConnectionSync runs in a worker
 * thread (bulk-leader.ts), with its own event loop and heap as on its own director; otherwise both ends share
 * this process's one thread, as the figure was measured until 5 December (which adds the leader's work to the
 * standby's). (Until then the second run had the standby's event watch stubbed out, to show what its own
 * injections' events cost. The standby leads nothing here, so its source never watches: the two runs were the
 * same, and their difference was noise.)
 */
async function wholePath(ctx: WholePathContext, host: string, leaderThread: boolean): Promise<WholePathResult> {
  const t = (ctx.scope.topology = new Topology(ctx.prefix));
  const n = ctx.connections.length;
  const warnings: string[] = [];
  const keep = (msg: string, f?: Readonly<Record<string, unknown>>): void => { if (warnings.length < 5) warnings.push(`${msg} ${JSON.stringify(f ?? {})}`); };
  let warnCount = 0;
  const syncLog: Logger = { debug: () => undefined, info: () => undefined, warn: (m, f) => { warnCount++; keep(m, f); }, error: (m, f) => { warnCount++; keep(m, f); } };
  const label = `bulk (${leaderThread ? 'b' : 'c'}, ${leaderThread ? 'the leader in a thread of its own' : 'both ends on one thread'})`;
  log(`${label}: leader (FakeConnectionTable, ${formatNumber(n)} connections) -> gRPC + mutual TLS on loopback -> standby (conntrack in ${t.ns(host)})`);
  await t.addHost(host);
  const standbyPort = await freePort();
  const services: readonly Service[] = parseConfig(ONE_SERVICE_CONFIG, 'bench connsync', { cluster: true }).services;
  const marks = new Map<string, number>();
  for (const svc of services) svc.realServers.forEach((rs, i) => marks.set(realServerName(serviceKey(svc), rs), (1 << 16) | (i + 1)));

  const sinkTable = new ConntrackConnectionTable({ runner: netnsRunner(t.ns(host)) });
  const sink = new TimedConnectionTable(sinkTable);
  const leader = leaderThread ? await BulkLeaderThread.start(ctx, standbyPort) : await InProcessLeader.start(ctx, standbyPort, syncLog);
  const standby = new ConnectionSync({ self: 'dir2', peers: [{ id: 'dir1', address: '127.0.0.1', port: 1 }], security: ctx.standbySec, table: sink, log: syncLog });
  const server = new grpc.Server();
  const forgetCleanup = ctx.scope.onCleanup(() => server.forceShutdown());
  try {
    await standby.start();
    await standby.setConfig(services);
    standby.setMarks(marks);
    server.addService(connSyncServiceDefinition(), standby.handlers());
    await new Promise<void>((resolve, reject) => server.bindAsync(`127.0.0.1:${standbyPort}`, peerServerCredentials(ctx.standbySec), (err) => (err ? reject(err) : resolve())));

    const cpu0 = process.cpuUsage();
    const children0 = await kernelIoCpuSec(t.ns(host));
    const t0 = performance.now();
    sink.reset();
    await leader.lead();
    await waitFor('the standby caught up with the leader', 60_000 + n, async () => standby.notCaughtUp(GROUP) === null, 5)
      .catch((e: Error) => { throw new Error(`${e.message}: ${JSON.stringify(standby.status().receivers)} ${leader.describe()} ${warnings.join(' | ')}`); });
    const caughtUpMs = performance.now() - t0;
    let count = 0;
    // The watch's probe entry (mark 0, 1 s) may be counted too: at least n.
    await waitFor(`the standby's kernel holding ${n} entries`, 30_000, async () => (count = await conntrackCount(t, host)) >= n, 20)
      .catch((e: Error) => { log(`${e.message} (it holds ${count})`); });
    const wholeMs = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const processCpuSec = (cpu.user + cpu.system) / 1e6;
    const childrenCpuSec = (await kernelIoCpuSec(t.ns(host))) - children0;
    const r = standby.status().receivers[0];
    const st = sink.stats();
    const lossEvents = standby.status().source.lossEvents;
    log(`${label}: caught up after ${formatMs(caughtUpMs)}, kernel holds ${count} after ${formatMs(wholeMs)}; `
      + `${st.applies} applies (${formatMs(st.applyMs)}), ${st.dumps} dumps (${formatMs(st.dumpMs)}), standby event losses ${lossEvents}, CPU ${processCpuSec.toFixed(1)} s + ctnetlink helpers and conntrack runs ${childrenCpuSec.toFixed(1)} s`);
    return {
      caughtUpMs, wholeMs, count, inserted: r?.inserted ?? 0, failed: r?.failed ?? 0, processCpuSec, childrenCpuSec, sink: st, lossEvents, warnings, warnCount,
      writer: sinkTable.writerKind,
    };
  } finally {
    const left = await leader.close().catch(() => ({ warnings: [], warnCount: 0 }));
    for (const w of left.warnings) keep(w);
    warnCount += left.warnCount;
    await standby.close().catch(() => undefined);
    server.forceShutdown();
    forgetCleanup();
    await sinkTable.dispose();
    // The bulk namespaces go at once: their entries would only weigh on the lab's kernel.
    await t.destroy();
    ctx.scope.topology = undefined;
  }
}

// ---- 1d. the standby's receive-and-inject path alone ------------------------------------------------

const STANDBY_PATH = {
  /** A `changes` message every this many ms, of this many new connections: 5 000 connections/s. */
  periodMs: 5, perMessage: 25,
  /** The receiver's context: every connection's service is in group 'g', with this mark; this director leads nothing. */
  group: 'g', mark: (1 << 16) | 1,
  /** As the real sender: at most this many messages unacknowledged (SENDER_DEFAULTS.windowMessages). */
  window: 32,
  /** How long the tail may take to be acknowledged once the feed stops. */
  drainMs: 30_000,
} as const;

interface StandbyPathResult {
  readonly messages: number;
  readonly fed: number;
  /** From the first `changes` message due to the last one sent. */
  readonly feedMs: number;
  /** From the first `changes` message due to the last ack. */
  readonly runMs: number;
  readonly lagP50Ms: number;
  readonly lagP99Ms: number;
  readonly lagMaxMs: number;
  /** Messages sent more than one period after they were due (a late timer, or the window full). */
  readonly late: number;
  readonly windowFull: number;
  /** Messages the receiver acknowledged (of `messages`); all of them unless it refused the stream or the drain timed out. */
  readonly acked: number;
  readonly nodeCores: number;
  readonly kernelIoCores: number;
  readonly kernelCount: number;
  readonly inserted: number;
  readonly failed: number;
  readonly problem: string;
  /** Where the table wrote (ConntrackConnectionTable.writerKind). */
  readonly writer: CtnlWriterKind;
}

/** Connection i of the standby-path feed: distinct fullnat tcp connections in 198.18.0.0/15, unique reply tuples too. */
function standbyPathChange(i: number): Change {
  const a = i >> 12;
  return {
    upsert: {
      id: { protocol: 'tcp', client: { address: `198.18.${16 + (a >> 8)}.${a & 255}`, port: 10_000 + (i & 0xfff) }, vip: { address: VIP, port: 80 } },
      realServer: { address: RS_HOSTS[i % RS_HOSTS.length]!, port: 8080 },
      // (real server, local address) is i mod 12, so (real server, local address, port) is unique.
      localAddress: { address: LOCAL_ADDRESSES[i % LOCAL_ADDRESSES.length]!, port: 1024 + Math.floor(i / 12) },
      state: 'ESTABLISHED', timeoutSec: 3600,
    },
  };
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
}

async function benchStandbyPath(scope: BenchScope, prefix: string, s: Settings): Promise<StandbyPathResult> {
  const P = STANDBY_PATH;
  const t = (scope.topology = new Topology(prefix));
  const messages = Math.round((s.standbySec * 1000) / P.periodMs);
  log(`standby path alone: SyncReceiver -> conntrack in ${t.ns('recv')}, ${formatNumber((P.perMessage * 1000) / P.periodMs)} connections/s `
    + `(${P.perMessage} every ${P.periodMs} ms) for ${s.standbySec} s, no gRPC, no wrk, no lab`);
  await t.addHost('recv');
  const connectionTable = new ConntrackConnectionTable({ runner: netnsRunner(t.ns('recv')) });
  try {
    await connectionTable.prepare();
    const def = connSyncServiceDefinition().Stream;
    const quiet = silentLogger;
    let acked = 0;
    let problem = '';
    const dueAt = new Map<number, number>();
    const lags: number[] = [];
    let lastAckAt = 0;
    const receiver = new SyncReceiver(
      { table: connectionTable, log: quiet, markOf: () => P.mark, groupOf: () => P.group, leads: () => false },
      {
        write: (reply) => {
          if (reply.resync) problem ||= `the receiver asked for a resync: ${reply.resync.reason ?? ''}`;
          if (!reply.ack) return;
          const seq = Number(reply.ack.seq);
          const now = performance.now();
          // Acks are cumulative: one covers every message up to its seq.
          for (let q = acked + 1; q <= seq; q++) {
            const due = dueAt.get(q);
            if (due !== undefined) lags.push(now - due);
          }
          acked = Math.max(acked, seq);
          lastAckAt = now;
        },
        fail: (code, details) => { problem ||= `the receiver refused the stream (${code}): ${details}`; },
      },
      new Set(['dir1']),
    );
    // As on the wire: each message encoded and decoded by the real protobuf serializers.
    const send = (m: SyncMessage): void => receiver.onMessage(def.requestDeserialize(def.requestSerialize(m)));
    let seq = 0;
    send({ seq: ++seq, hello: { from: 'dir1', session: 'bench', groups: [P.group] } });
    send({ seq: ++seq, snapshotBegin: { groups: [P.group], connections: 0, reason: 'bench' } });
    send({ seq: ++seq, snapshotEnd: {} });
    await waitFor('the receiver acknowledging the empty snapshot', 10_000, async () => acked >= seq || problem !== '', 2);
    if (problem !== '') throw new Error(`standby path alone: ${problem}`);
    const first = seq + 1;

    const cpu0 = process.cpuUsage();
    const children0 = await kernelIoCpuSec(t.ns('recv'));
    const t0 = performance.now();
    let sent = 0;
    let fed = 0;
    let late = 0;
    let windowFull = 0;
    // Paced by the clock, not by a timer's count: every message due by now goes out (a late timer sends
    // two), unless the sender's window is full, as the real sender would hold them.
    while (sent < messages && problem === '') {
      const due = Math.min(messages, Math.floor((performance.now() - t0) / P.periodMs) + 1);
      let held = false;
      while (sent < due) {
        if (seq - acked >= P.window) { held = true; break; }
        const changes: Change[] = [];
        for (let k = 0; k < P.perMessage; k++) changes.push(standbyPathChange(fed++));
        const dueMs = t0 + sent * P.periodMs;
        if (performance.now() - dueMs > P.periodMs) late++;
        dueAt.set(++seq, dueMs);
        send({ seq, changes: { changes } });
        sent++;
      }
      if (held) windowFull++;
      await sleep(held ? 1 : Math.max(0, t0 + sent * P.periodMs - performance.now()));
    }
    const feedMs = performance.now() - t0;
    await waitFor(`the receiver acknowledging message ${seq}`, P.drainMs, async () => acked >= seq || problem !== '', 2)
      .catch((e: Error) => { problem ||= e.message; });
    const runMs = (acked >= seq ? lastAckAt : performance.now()) - t0;
    const cpu = process.cpuUsage(cpu0);
    const conntrackSec = (await kernelIoCpuSec(t.ns('recv'))) - children0;
    const st = receiver.status();
    const kernelCount = await conntrackCount(t, 'recv');
    lags.sort((a, b) => a - b);
    const r: StandbyPathResult = {
      messages: sent, fed, feedMs, runMs, lagP50Ms: percentile(lags, 0.5), lagP99Ms: percentile(lags, 0.99), lagMaxMs: lags.at(-1) ?? Number.NaN,
      late, windowFull, acked: Math.max(0, acked - first + 1), nodeCores: (cpu.user + cpu.system) / 1000 / runMs, kernelIoCores: (conntrackSec * 1000) / runMs,
      kernelCount, inserted: st.inserted, failed: st.failed, problem: problem || st.lastError, writer: connectionTable.writerKind,
    };
    log(`standby path alone: ${count(r.fed)} connections in ${formatMs(r.feedMs)} (${formatNumber(r.fed / (r.feedMs / 1000))}/s), ack lag p50 ${formatMs(r.lagP50Ms)} `
      + `p99 ${formatMs(r.lagP99Ms)} max ${formatMs(r.lagMaxMs)}; CPU ${r.nodeCores.toFixed(2)} cores Node + ${r.kernelIoCores.toFixed(2)} ctnetlink helper and conntrack runs; `
      + `conntrack -C ${r.kernelCount}${r.problem ? `; ${r.problem}` : ''}`);
    return r;
  } finally {
    await connectionTable.dispose();
    await t.destroy();
    scope.topology = undefined;
  }
}

// ---- the lab (sync-lab.ts) ---------------------------------------------------------------------

const LAB_USER: SyncLabUser = { bench: 'connsync', log };

function peerOf(st: ClusterStatus__Output | undefined, direction: 'to' | 'from'): ConnSyncPeer__Output | undefined {
  return st?.sync?.peers.find((p) => p.direction === direction);
}

// ---- 2. incremental lag and CPU ---------------------------------------------------------------------

interface LoadRun extends LoadMeasure {
  readonly sync: boolean;
  readonly leader: DirectorName;
  /** Leader's sender right after the warm-up: the first WARMUP_SEC of sync in fresh agents (sync on only). */
  readonly coldP99Ms: number;
  /** Leader's sender, read right after the load (the messages acknowledged in its last LAG_WINDOW_MS). */
  readonly lagP50Ms: number;
  readonly lagP99Ms: number;
  /** Worst p99 of the samples taken during the load. */
  readonly worstP99Ms: number;
  readonly samples: number;
  /** Worst p99 of the samples taken LAG_WINDOW_MS or more into the load: each over a whole window of it. */
  readonly worstFullP99Ms: number;
  readonly fullSamples: number;
  readonly injected: number;
  /** Messages the standby received, and changes the leader sent (lower bounds when the leader changed). */
  readonly messages: number;
  readonly changesSent: number;
  readonly standbyFailed: number;
  readonly snapshots: number;
  readonly resyncs: number;
  readonly lossEvents: number;
  readonly maxQueued: number;
  readonly toState: string;
  /** Who led once the load was over, and how often the leader changed during it (the load cost failovers). */
  readonly leaderAfter: DirectorName | 'none';
  readonly leaderChanges: number;
  /** `vip group transition` lines both agents logged during the load (a fenced leader that resumes: two). */
  readonly transitions: number;
}

/** What measureLoad() measures around one wrk run. */
interface LoadMeasure {
  readonly wrk: WrkResult;
  /** Cores per director over the window, and per command name. */
  readonly cpu: Record<DirectorName, { cores: number; byComm: Record<string, number> }>;
  /** What held connections up during the load (stallCounters): the client's retransmissions, conntrack's drops. */
  readonly stalls: string;
  /** The machine's CPUs, all of them, busy over the load (0 to 1). */
  readonly boxBusy: number;
}

/** The same load unpaced: what the lab's 2 CPUs carry, shared by wrk, nginx, etcd and both directors. */
interface CapacityRun extends LoadMeasure {
  readonly sync: boolean;
  readonly leader: DirectorName;
}

interface LoadResult {
  readonly withSync: LoadRun;
  readonly withoutSync: LoadRun;
  readonly capacityWithSync: CapacityRun;
  readonly capacityWithoutSync: CapacityRun;
  readonly conntrackAfter: Record<DirectorName, number>;
}

async function benchLoad(lab: HaLab<AdminApi>, tmp: string, s: Settings): Promise<LoadResult> {
  const script = await writeWrkScript(await mkdtemp(join(tmp, 'wrk-')));
  const url = `http://${VIP}${SMALL_OBJECT}`;
  // Paced at the target's rate by wrk's schedule (wrk.ts), or unpaced for the capacity runs.
  const wrk = (sec: number, rate: number | undefined): Promise<WrkResult> =>
    runWrk(lab.cluster.topology, 'client', script, { url, connections: WRK_CONNECTIONS, durationSec: sec, closeEach: true, rate });

  // Sync is off after the drills: the baseline first.
  await waitSteady(lab);
  const withoutSync = await loadRun(lab, false, s, (sec) => wrk(sec, TARGETS.rate));
  const capacityWithoutSync = await capacityRun(lab, false, s, (sec) => wrk(sec, undefined));
  // The baseline left its entries (TIME_WAIT, 120 s) on the leader: the sync run starts from empty tables
  // (with sync still off, so no removal is sent for them), as the baseline did.
  for (const d of ['dir1', 'dir2'] as const) await lab.cluster.topology.exec(d, 'conntrack', ['-F'], { timeoutMs: 60_000, allowFailure: true });
  await applyConfig(LAB_USER, lab, true);
  await sleep(2000);
  const withSync = await loadRun(lab, true, s, (sec) => wrk(sec, TARGETS.rate));
  const capacityWithSync = await capacityRun(lab, true, s, (sec) => wrk(sec, undefined));
  const conntrackAfter = {
    dir1: await conntrackCount(lab.cluster.topology, 'dir1'), dir2: await conntrackCount(lab.cluster.topology, 'dir2'),
  };
  return { withSync, withoutSync, capacityWithSync, capacityWithoutSync, conntrackAfter };
}

/**
 * The load once more, unpaced, right after the paced run (warm, and with its entries in the tables, sync on
 * and off alike). A figure of its own, not the target's: on this machine what sync takes here comes out of
 * wrk's and nginx's share of the same 2 CPUs, which no director shares with its clients.
 */
async function capacityRun(lab: HaLab<AdminApi>, sync: boolean, s: Settings, wrk: (sec: number) => Promise<WrkResult>): Promise<CapacityRun> {
  const leader = await waitSteady(lab);
  const t = lab.cluster.topology;
  log(`capacity with sync ${sync ? 'on' : 'off'}: ${s.loadSec} s of new connections, unpaced, ${leader} leading`);
  const m = await measureLoad(t, () => wrk(s.loadSec));
  log(`capacity with sync ${sync ? 'on' : 'off'}: ${formatNumber(m.wrk.requestsPerSec)} connections/s, errors ${describeErrors(m.wrk)}, `
    + `CPU dir1 ${m.cpu.dir1.cores.toFixed(2)} dir2 ${m.cpu.dir2.cores.toFixed(2)} cores; ${m.stalls}`);
  return { sync, leader, ...m };
}

/**
 * What every load run measures around its wrk: each director's namespace's CPU, what held connections up
 * (stallCounters) and how busy the machine's CPUs were.
 */
async function measureLoad(t: Topology, load: () => Promise<WrkResult>): Promise<LoadMeasure> {
  const directors = async (): Promise<Record<DirectorName, CpuSample>> => ({ dir1: await cpuSample(t.ns('dir1')), dir2: await cpuSample(t.ns('dir2')) });
  const cpu0 = await directors();
  const stalls0 = await stallCounters(t);
  const box0 = await systemCpuTimes();
  const wrk = await load();
  const boxBusy = busyShare(box0, await systemCpuTimes());
  const stalls = describeStalls(stalls0, await stallCounters(t));
  const cpu1 = await directors();
  return { wrk, cpu: { dir1: cpuDelta(cpu0.dir1, cpu1.dir1), dir2: cpuDelta(cpu0.dir2, cpu1.dir2) }, stalls, boxBusy };
}

async function loadRun(lab: HaLab<AdminApi>, sync: boolean, s: Settings, wrk: (sec: number) => Promise<WrkResult>): Promise<LoadRun> {
  const leader = await waitSteady(lab);
  const standby = other(leader);
  if (sync) {
    await waitFor(`${leader} streaming to ${standby}, caught up`, 30_000, async () => {
      const to = peerOf(await lab.api(leader).getClusterStatus({ timeoutMs: 2000 }), 'to');
      return to?.state === 'streaming' && to.caughtUp;
    }, 100);
  }
  const t = lab.cluster.topology;
  // A warm-up first, with sync on and off alike. The first second of sync in a fresh agent runs code V8 has
  // not compiled yet, on both directors: its round trips took 40-90 ms, and the first 20 or so messages
  // 60-140 ms of lag. That is a figure of its own (coldP99Ms); the load after it measures sync as it runs.
  log(`warm-up: ${WARMUP_SEC} s of the same load, then ${LAG_WINDOW_MS / 1000} s for the sender's lag window to forget it`);
  await wrk(WARMUP_SEC);
  const cold = sync ? peerOf(await lab.api(leader).getClusterStatus({ timeoutMs: 2000 }), 'to') : undefined;
  await sleep(LAG_WINDOW_MS + LAG_SAMPLE_MS);
  const before = await bothStatuses(lab, 10_000);
  const since = new Date().toISOString();
  log(`load with sync ${sync ? 'on' : 'off'}: ${s.loadSec} s of new connections from the client, ${leader} leading`);
  let sampling = true;
  const loadStart = performance.now();
  /** The sender's p99 at each sample, and how far into the load it was taken. */
  const lagSamples: Array<{ intoMs: number; p99Ms: number }> = [];
  let maxQueued = 0;
  let leaderChanges = 0;
  let lastLeader: DirectorName | undefined = leader;
  const sampler = (async () => {
    while (sampling) {
      await sleep(LAG_SAMPLE_MS);
      if (!sampling) break;
      // Both directors: under this load the leader may change (see leaderChanges).
      const all = await bothStatuses(lab);
      const sending = (['dir1', 'dir2'] as const).filter((d) => peerOf(all[d], 'to') !== undefined);
      const now = sending.length === 1 ? sending[0] : undefined;
      if (now !== undefined && now !== lastLeader) leaderChanges++;
      if (now !== undefined) lastLeader = now;
      for (const d of sending) {
        const to = peerOf(all[d], 'to')!;
        lagSamples.push({ intoMs: performance.now() - loadStart, p99Ms: to.lagP99Ms });
        maxQueued = Math.max(maxQueued, Number(to.queued));
      }
    }
  })();
  const measured = await measureLoad(t, async () => {
    try {
      return await wrk(s.loadSec);
    } finally {
      sampling = false;
      await sampler;
    }
  });
  const result = measured.wrk;
  if (sync) log(`lag p99 samples, every ${LAG_SAMPLE_MS} ms (ms): ${lagSamples.map((x) => x.p99Ms.toFixed(0)).join(' ')}`);
  // Samples taken LAG_WINDOW_MS or more into the load are each a p99 over a whole window of it. The earlier
  // ones are over its first seconds only: at 500 ms, a p99 of some 70 messages, which is nearly their maximum.
  const whole = lagSamples.filter((x) => x.intoMs >= LAG_WINDOW_MS);
  const worst = (xs: typeof lagSamples): number => (xs.length > 0 ? Math.max(...xs.map((x) => x.p99Ms)) : Number.NaN);
  // A leader that was fenced for a moment has no sender until it resumes: wait (bounded) for one.
  let end = await bothStatuses(lab, 10_000);
  for (let i = 0; i < 20 && !(['dir1', 'dir2'] as const).some((d) => peerOf(end[d], 'to') !== undefined); i++) {
    await sleep(250);
    end = await bothStatuses(lab, 10_000);
  }
  const sender = (['dir1', 'dir2'] as const).find((d) => peerOf(end[d], 'to') !== undefined);
  const to = sender === undefined ? undefined : peerOf(end[sender], 'to');
  // The standby's counts once the tail has been applied.
  await sleep(1000);
  const after = await bothStatuses(lab, 10_000);
  const leaderAfter = (await lab.leader()) ?? 'none';
  if (leaderAfter !== leader) leaderChanges = Math.max(leaderChanges, 1);
  const total = (st: Record<DirectorName, ClusterStatus__Output | undefined>, f: (x: ClusterStatus__Output) => number): number =>
    (['dir1', 'dir2'] as const).reduce((a, d) => a + (st[d] ? f(st[d]!) : 0), 0);
  const fromSum = (k: 'injected' | 'failed' | 'received') => (x: ClusterStatus__Output): number => Number(peerOf(x, 'from')?.[k] ?? 0);
  const toSum = (k: 'snapshots' | 'resyncs') => (x: ClusterStatus__Output): number => Number(peerOf(x, 'to')?.[k] ?? 0);
  const run: LoadRun = {
    sync, leader, ...measured,
    lagP50Ms: to?.lagP50Ms ?? Number.NaN, lagP99Ms: to?.lagP99Ms ?? Number.NaN, worstP99Ms: worst(lagSamples), samples: lagSamples.length,
    coldP99Ms: cold?.lagP99Ms ?? Number.NaN, worstFullP99Ms: worst(whole), fullSamples: whole.length,
    // Counters restart with a new stream: these are lower bounds when the leader changed.
    injected: Math.max(0, total(after, fromSum('injected')) - total(before, fromSum('injected'))),
    standbyFailed: Math.max(0, total(after, fromSum('failed')) - total(before, fromSum('failed'))),
    messages: Math.max(0, total(after, fromSum('received')) - total(before, fromSum('received'))),
    changesSent: Math.max(0, total(after, (x) => Number(peerOf(x, 'to')?.sent ?? 0)) - total(before, (x) => Number(peerOf(x, 'to')?.sent ?? 0))),
    snapshots: Math.max(0, total(end, toSum('snapshots')) - total(before, toSum('snapshots'))),
    resyncs: Math.max(0, total(end, toSum('resyncs')) - total(before, toSum('resyncs'))),
    lossEvents: total(end, (x) => Number(x.sync?.lossEvents ?? 0)) - total(before, (x) => Number(x.sync?.lossEvents ?? 0)),
    maxQueued, toState: to?.state ?? 'none', leaderAfter, leaderChanges, transitions: transitionsSince(lab, since),
  };
  if (leaderChanges > 0) log(`WARNING: the leader changed during the load (${leader} at the start, ${leaderAfter} at the end)\n${lab.logs(15)}`);
  log(`load with sync ${sync ? 'on' : 'off'}: ${formatNumber(result.requestsPerSec)} connections/s, errors ${describeErrors(result)}, `
    + `lag p50 ${formatMs(run.lagP50Ms)} p99 ${formatMs(run.lagP99Ms)} (worst sampled p99 ${formatMs(run.worstP99Ms)}, over a whole window ${formatMs(run.worstFullP99Ms)}; in the warm-up ${formatMs(run.coldP99Ms)}), injected ${run.injected}, `
    + `event losses ${run.lossEvents}, snapshots ${run.snapshots}, CPU dir1 ${run.cpu.dir1.cores.toFixed(2)} dir2 ${run.cpu.dir2.cores.toFixed(2)} cores`);
  return run;
}

/** Both directors' status; a busy agent may answer late (the bound), or not at all (undefined). */
function transitionsSince(lab: HaLab<AdminApi>, sinceIso: string): number {
  let n = 0;
  for (const d of ['dir1', 'dir2'] as const) {
    for (const line of lab.agentLog(d, 5000).split('\n')) {
      if (!line.includes('"vip group transition"')) continue;
      try {
        if ((JSON.parse(line) as { time?: string }).time! >= sinceIso) n++;
      } catch {
        // not a log line of the agent's
      }
    }
  }
  return n;
}

async function bothStatuses(lab: HaLab<AdminApi>, timeoutMs = 2000): Promise<Record<DirectorName, ClusterStatus__Output | undefined>> {
  const [a, b] = await Promise.all((['dir1', 'dir2'] as const).map((d) => lab.api(d).getClusterStatus({ timeoutMs }).catch(() => undefined)));
  return { dir1: a, dir2: b };
}

// ---- 3. drills --------------------------------------------------------------------------------------

type DrillKind = 'switchover' | 'box-death';

interface DrillOutcome {
  readonly kind: DrillKind;
  readonly sync: boolean;
  readonly from: DirectorName;
  readonly takeoverMs: number;
  readonly streams: number;
  readonly brokenStreams: number;
  readonly udpFlows: number;
  readonly brokenUdp: number;
  /** With sync: the drill's connections the standby's kernel held at the failover (all of them, or the drill fails). */
  readonly copied: number;
  readonly errors: readonly string[];
}

interface DrillFailure {
  readonly kind: DrillKind;
  readonly sync: boolean;
  readonly message: string;
}

interface DrillsResult {
  readonly outcomes: readonly DrillOutcome[];
  /** Drills that could not be run to the end (a wait ran out): each with its reason. */
  readonly failures: readonly DrillFailure[];
}

async function benchDrills(lab: HaLab<AdminApi>, s: Settings): Promise<DrillsResult> {
  const outcomes: DrillOutcome[] = [];
  const failures: DrillFailure[] = [];
  // The lab starts with sync on: those drills first, then the baseline.
  for (const sync of [true, false]) {
    if (!sync) await applyConfig(LAB_USER, lab, false);
    for (const kind of ['switchover', 'box-death'] as const) {
      for (let i = 1; i <= s.count; i++) {
        try {
          const o = await drill(lab, kind, sync);
          outcomes.push(o);
          log(`drill ${kind} sync ${sync ? 'on' : 'off'} ${i}/${s.count}: ${o.from} -> ${other(o.from)} in ${o.takeoverMs} ms; broken `
            + `${o.brokenStreams}/${o.streams} tcp streams, ${o.brokenUdp}/${o.udpFlows} udp flows${o.errors.length ? ` (${o.errors.slice(0, 2).join(' | ')})` : ''}`);
        } catch (e) {
          // Recorded and reported; the next drill starts from a steady cluster again (or the phase ends).
          const message = (e as Error).message;
          failures.push({ kind, sync, message });
          log(`drill ${kind} sync ${sync ? 'on' : 'off'} ${i}/${s.count} FAILED: ${message}`);
          await waitSteady(lab);
        }
      }
    }
  }
  return { outcomes, failures };
}

/** Drills run so far: each drill's UDP connections get source ports of their own (see drill()). */
let drillsRun = 0;

async function drill(lab: HaLab<AdminApi>, kind: DrillKind, sync: boolean): Promise<DrillOutcome> {
  // Fresh source ports per drill: an earlier drill's UDP entries (and their copies) live on for minutes in
  // both kernels, and a connection on the same ports would find its old binding there, sync or not.
  const firstPort = 41_000 + (drillsRun++ % 200) * UDP_CONNECTIONS;
  const leader = await waitSteady(lab);
  const standby = other(leader);
  const t = lab.cluster.topology;
  const streams = spawnTestClient(t, 'client', ['stream', '--target', `${VIP}:9000`, '--connections', String(STREAMS), '--duration-ms', String(DRILL_LOAD_MS), '--stall-ms', '2000']);
  const udp = spawnTestClient(t, 'client', ['udp-flows', '--target', `${VIP}:53`, '--flows', String(UDP_CONNECTIONS), '--interval-ms', '100',
    '--duration-ms', String(DRILL_LOAD_MS), '--timeout-ms', '300', '--first-port', String(firstPort)]);
  const procs: BackgroundProcess[] = [streams, udp];
  try {
    const r1 = await streams.waitForJson<ReadyReport>((v) => 'ready' in v, 20_000);
    const r2 = await udp.waitForJson<UdpFlowsReadyReport>((v) => 'ready' in v, 20_000);
    if (!r1.ready || !r2.ready) throw new Error(`drill: not every connection started (streams ${r1.started}/${r1.connections}, udp ${r2.started}/${r2.flows})`);
    let copied = 0;
    if (sync) {
      // The drill's connections, as the leader's kernel has them (tcp once established, udp once assured: a few
      // exchanges in), all present in the standby's kernel. Read from the kernels, not from sync's counters:
      // earlier drills' connections linger in both tables and would satisfy a count.
      let missing = '';
      await waitFor(`${standby} holding the drill's ${STREAMS} tcp and ${UDP_CONNECTIONS} udp connections`, 30_000, async () => {
        const [lt, st] = await Promise.all([kernelConnections(t, leader), kernelConnections(t, standby)]);
        const want = [...lt.values()].filter((f) => f.vip === `${VIP}:9000` ? f.protocol === 'tcp' && f.state === 'ESTABLISHED'
          : f.protocol === 'udp' && f.vip === `${VIP}:53` && f.assured && f.clientPort >= firstPort && f.clientPort < firstPort + UDP_CONNECTIONS);
        const udpCount = want.filter((f) => f.protocol === 'udp').length;
        const absent = want.filter((f) => !st.has(f.key));
        missing = `leader: ${want.length - udpCount} tcp, ${udpCount} udp; standby lacks ${absent.length}`;
        copied = want.length - absent.length;
        return want.length - udpCount >= STREAMS && udpCount === UDP_CONNECTIONS && absent.length === 0;
      }, 200).catch(async (e: Error) => {
        throw new Error(`${e.message} (${missing})\n${JSON.stringify((await lab.api(leader).getClusterStatus({ timeoutMs: 2000 })).sync)}\n${lab.logs(20)}`);
      });
    }
    await sleep(500);
    const t0 = Date.now();
    if (kind === 'switchover') await lab.api(leader).failover(GROUP, standby, { timeoutMs: 5000 });
    else await lab.cluster.killBox(leader);
    await waitFor(`${standby} leading and holding the vip`, 15_000, async () => (await lab.leader()) === standby && (await lab.holders()).join() === standby, 20)
      .catch((e: Error) => { throw new Error(`${e.message}\n${lab.logs(30)}`); });
    const takeoverMs = Date.now() - t0;
    await sleep(AFTER_TAKEOVER_MS);
    await Promise.all(procs.map((p) => p.stop(5000)));
    const sr = streams.lastJson<StreamResult>();
    const ur = udp.lastJson<UdpFlowsResult>();
    if (!sr || !('perConnection' in sr)) throw new Error(`drill: no stream report: ${streams.stdout.slice(-300)}${streams.stderr.slice(-300)}`);
    if (!ur || !('perFlow' in ur)) throw new Error(`drill: no udp-flows report: ${udp.stdout.slice(-300)}${udp.stderr.slice(-300)}`);
    const errors = [...sr.perConnection.map((c) => c.error), ...ur.perFlow.map((f) => f.error)].filter((e): e is string => e !== null);
    return { kind, sync, from: leader, takeoverMs, streams: sr.connections, brokenStreams: sr.broken, udpFlows: ur.flows, brokenUdp: ur.broken, copied, errors };
  } finally {
    await Promise.all(procs.map((p) => p.stop(2000).catch(() => undefined)));
    if (kind === 'box-death' && !lab.agentRunning(leader)) {
      // Back as after a reboot: links up, an empty connection table, a new agent.
      await lab.cluster.reviveBox(leader);
      await t.exec(leader, 'conntrack', ['-F'], { allowFailure: true });
      await lab.startAgent(leader);
    }
  }
}

interface KernelConnection {
  readonly key: string;
  readonly protocol: string;
  readonly vip: string;
  readonly clientPort: number;
  readonly state: string;
  readonly assured: boolean;
}

/** The host's tcp and udp conntrack entries by original tuple (`conntrack -L`, the plain format). */
async function kernelConnections(t: Topology, host: string): Promise<Map<string, KernelConnection>> {
  const { stdout } = await t.exec(host, 'conntrack', ['-L'], { timeoutMs: 10_000, allowFailure: true });
  const out = new Map<string, KernelConnection>();
  for (const { protocol, original: { src, dst }, state, assured } of parseConntrack(stdout)) {
    const key = `${protocol} ${src.address}:${src.port} ${dst.address}:${dst.port}`;
    out.set(key, { key, protocol, vip: `${dst.address}:${dst.port}`, clientPort: src.port, state, assured });
  }
  return out;
}

// ---- report -----------------------------------------------------------------------------------------

function report(s: Settings, bulk: BulkResult, sp: StandbyPathResult, path: SyncPathResult, load: LoadResult, drills: DrillsResult, quick: boolean, loadAtStart: string): void {
  out(`lbd connection-sync benchmark${quick ? ' (--quick smoke run: small sizes, one drill each; the targets apply to the full run)' : ''}`);
  out(`${cpus().length} CPUs shared by everything (directors, etcd, real servers, client, this process), kernel ${release()}; `
    + `load average at the start ${loadAtStart} (anything above 0 is other work on the machine)`);

  out(`\n== 1. bulk sync of ${formatNumber(bulk.entries)} fullnat tcp connections`);
  const bw = bulk.whole;
  const u = bulk.oneThread;
  const perSec = (ms: number): string => formatNumber(bulk.entries / (ms / 1000));
  out(table(['path', 'time', 'entries/s', 'vs kernel alone', 'in the kernel'], [
    ['kernel alone: ConntrackConnectionTable.apply, one call, fresh namespace', formatMs(bulk.kernelMs), perSec(bulk.kernelMs), '1.00',
      `${formatNumber(bulk.kernelCount)} (inserted ${formatNumber(bulk.kernelInserted)})`],
    ['whole path: setLeading -> standby caught up', formatMs(bw.caughtUpMs), perSec(bw.caughtUpMs), formatRatio(bw.caughtUpMs / bulk.kernelMs), ''],
    ['whole path: setLeading -> standby kernel holds all', formatMs(bw.wholeMs), perSec(bw.wholeMs), formatRatio(bw.wholeMs / bulk.kernelMs),
      `${formatNumber(bw.count)} (inserted ${formatNumber(bw.inserted)}, failed ${bw.failed})`],
    ['the same, both ends on one thread (as measured until 5 December)', formatMs(u.wholeMs), perSec(u.wholeMs), formatRatio(u.wholeMs / bulk.kernelMs),
      `${formatNumber(u.count)} (inserted ${formatNumber(u.inserted)}, failed ${u.failed})`],
  ]));
  out(`whole path: leader FakeConnectionTable -> ConnectionSync -> gRPC, mutual TLS, loopback -> ConnectionSync -> ConntrackConnectionTable (${writesOf(bw.writer)}); `
    + 'the leader in a worker thread of this process (its own event loop and heap, as the leader\'s agent on its own director), the standby on the main thread');
  for (const [name, r] of [['whole path', bw], ['one thread', u]] as const) {
    const sz = [...r.sink.applySizes].sort((a, b) => a - b);
    out(`${name}: the standby's ${r.sink.applies} ConnectionTable.apply calls (changes each: min ${sz[0] ?? 0}, median ${sz[sz.length >> 1] ?? 0}, max ${sz.at(-1) ?? 0}) `
      + `took ${formatMs(r.sink.applyMs)}; ${r.sink.dumps} dump(s) ${formatMs(r.sink.dumpMs)} (overlapping); the standby's own event stream lost events `
      + `${r.lossEvents} time(s) (ENOBUFS: each is a full dump); CPU seconds: ${r.processCpuSec.toFixed(1)} in this process (both ends), ${r.childrenCpuSec.toFixed(1)} in its helper processes (the ctnetlink helper where it writes, conntrack runs)`);
    if (r.warnCount > 0) out(`${name}: ${r.warnCount} sync warning(s), first: ${r.warnings[0] ?? ''}`);
  }
  if (bulk.kernelErrors.length > 0) out(`kernel alone errors: ${bulk.kernelErrors.join(' | ')}`);
  const runs = (ms: readonly number[]): string => (ms.length === 0 ? 'not built' : `${ms.map(formatMs).join(', ')}`);
  const us = (xs: readonly number[]): string => `${xs.map((x) => x.toFixed(2)).join(', ')} µs`;
  out(`the stream's codec, per change (3 runs each, interleaved), serialize / parse: lbd's ${us(bulk.codec.lbd.serializeUs)} / ${us(bulk.codec.lbd.parseUs)}; `
    + `proto-loader's ${us(bulk.codec.protoLoader.serializeUs)} / ${us(bulk.codec.protoLoader.parseUs)}`);
  out(`listing the kernel-alone table back, listed and parsed as the agent does (3 runs each, interleaved): lbd-ctnl dump ${runs(bulk.listing.dumpMs)}; `
    + `the perl helper's dump (without lbd-ctnl) ${runs(bulk.listing.perlMs)}; conntrack -L -o extended ${runs(bulk.listing.conntrackMs)}${bulk.listing.mismatches.length > 0 ? `; MISMATCH: ${bulk.listing.mismatches.join(', ')}` : ''}`);
  const pathTargets = reportSyncPath(path, out, TARGETS);

  out(`\n== 2. incremental sync under new connections (wrk -c${WRK_CONNECTIONS} -H 'Connection: close', paced at ${formatNumber(TARGETS.rate)} requests/s by a schedule, ${s.loadSec} s; then the same unpaced)`);
  const rows: string[][] = [];
  const latency = (r: WrkResult): string => `${formatMs(r.latencyP50Ms)} / ${formatMs(r.latencyP99Ms)}`;
  const wrkCores = (r: WrkResult): string => r.cores.toFixed(2);
  const busy = (x: number): string => `${(x * 100).toFixed(0)}%`;
  for (const r of [load.withSync, load.withoutSync]) {
    rows.push([
      r.sync ? 'sync on' : 'sync off (baseline)', formatNumber(r.wrk.requestsPerSec), String(errorCount(r.wrk)), latency(r.wrk), wrkCores(r.wrk), busy(r.boxBusy),
      r.sync ? formatMs(r.lagP50Ms) : '-', r.sync ? formatMs(r.lagP99Ms) : '-', r.sync ? formatMs(r.worstP99Ms) : '-',
      r.sync ? `${count(r.injected)}${r.leaderChanges > 0 ? ' (at least)' : ''}` : '-', r.cpu.dir1.cores.toFixed(2), r.cpu.dir2.cores.toFixed(2), `${r.leader}${r.leaderChanges > 0 ? ` (changed, ${r.leaderAfter} at the end)` : ''}`,
    ]);
  }
  for (const r of [load.capacityWithSync, load.capacityWithoutSync]) {
    rows.push([
      `${r.sync ? 'sync on' : 'sync off'}, unpaced`, formatNumber(r.wrk.requestsPerSec), String(errorCount(r.wrk)), latency(r.wrk), wrkCores(r.wrk), busy(r.boxBusy),
      '-', '-', '-', '-', r.cpu.dir1.cores.toFixed(2), r.cpu.dir2.cores.toFixed(2), r.leader,
    ]);
  }
  out(table(['run', 'conn/s', 'errors', 'wrk latency p50 / p99', 'wrk cores', 'CPUs busy', 'lag p50', 'lag p99', 'worst p99', 'injected', 'dir1 cores', 'dir2 cores', 'leader'], rows));
  out('wrk latency: from a request\'s write to its response (the connection is opened before; the pace holds the request, not the connect); wrk cores: its own CPU (one thread), user + system; CPUs busy: all of the machine\'s, over the load (/proc/stat)');
  const w = load.withSync;
  const wo = load.withoutSync;
  const cost = (w.cpu.dir1.cores + w.cpu.dir2.cores) - (wo.cpu.dir1.cores + wo.cpu.dir2.cores);
  const ratio = w.wrk.requestsPerSec / wo.wrk.requestsPerSec;
  // The ratio is judged at the offered rate: a baseline that did not reach it measured the lab's capacity, not the rate.
  const baselineReached = wo.wrk.requestsPerSec >= 0.95 * TARGETS.rate;
  const capacityRatio = load.capacityWithSync.wrk.requestsPerSec / load.capacityWithoutSync.wrk.requestsPerSec;
  // Per role, with the leader of the sync-on run (both runs normally have the same one; the row says when not).
  const costOf = {
    leader: w.cpu[w.leader].cores - wo.cpu[w.leader].cores,
    standby: w.cpu[other(w.leader)].cores - wo.cpu[other(w.leader)].cores,
  };
  out(`what sync costs, both directors together: ${cost >= 0 ? '+' : ''}${cost.toFixed(2)} cores (${(w.cpu.dir1.cores + w.cpu.dir2.cores).toFixed(2)} with, `
    + `${(wo.cpu.dir1.cores + wo.cpu.dir2.cores).toFixed(2)} without) at ${formatNumber(w.wrk.requestsPerSec)} / ${formatNumber(wo.wrk.requestsPerSec)} new connections/s`);
  out('  (the baseline disables sync per service: with nothing to copy, the agents do not follow conntrack\'s events either)');
  for (const r of [wo, w]) {
    for (const d of ['dir1', 'dir2'] as const) {
      const parts = Object.entries(r.cpu[d].byComm).filter(([, c]) => c >= 0.005).sort((x, y) => y[1] - x[1]).map(([c, v]) => `${c} ${v.toFixed(2)}`);
      out(`  sync ${r.sync ? 'on ' : 'off'} ${d} (${d === r.leader ? 'leader' : 'standby'} at the start): ${parts.join(', ') || 'idle'}`);
    }
  }
  out(`lag: kernel event on the leader to the standby's ack (over the messages the sender saw acknowledged in the last ${LAG_WINDOW_MS / 1000} s; p50/p99 read right after the load, worst p99 of ${w.samples} samples taken every ${LAG_SAMPLE_MS} ms during it)`);
  out(`each load run came after a ${WARMUP_SEC} s warm-up load and ${LAG_WINDOW_MS / 1000} s for the lag window to forget it; the warm-up is sync's first seconds in fresh agents (lag p99 ${formatMs(w.coldP99Ms)}), a figure of its own`);
  for (const r of [wo, w]) {
    out(`sync ${r.sync ? 'on' : 'off'}: ${formatNumber(r.wrk.requests)} connections (errors: ${describeErrors(r.wrk)}); held up: ${r.stalls}; kernel event losses (ENOBUFS, both directors) ${r.lossEvents}; `
      + `leader changes during the load ${r.leaderChanges}, vip group transitions logged ${r.transitions}${r.sync ? `; ${count(r.injected)} connections injected on the standby${r.leaderChanges > 0 ? ' (at least: the counters restart with a new stream)' : ''}, failed ${r.standbyFailed}; `
      + `${count(r.changesSent)} changes in ${count(r.messages)} messages (${r.messages > 0 ? (r.changesSent / r.messages).toFixed(1) : '-'} each); `
      + `sender snapshots ${r.snapshots}, resyncs ${r.resyncs}, max queued ${count(r.maxQueued)}, sender state at the end ${r.toState}` : ''}`);
  }
  for (const r of [load.capacityWithoutSync, load.capacityWithSync]) out(`sync ${r.sync ? 'on' : 'off'}, unpaced: held up: ${r.stalls}`);
  out(`conntrack entries after the sync-on loads (paced, then unpaced): dir1 ${formatNumber(load.conntrackAfter.dir1)}, dir2 ${formatNumber(load.conntrackAfter.dir2)}`);
  const spRate = sp.fed / (sp.feedMs / 1000);
  out(`\nthe lab's lag (above) next to the standby path alone (no wrk, no lab: section 1d, run before the lab existed, ${s.standbySec} s)`);
  out(table(['incremental lag', 'connections/s', 'lag p50', 'lag p99', 'lag max', 'CPU (cores)', 'in the kernel'], [
    ['lab, sync on: kernel event on the leader -> standby ack', formatNumber(w.wrk.requestsPerSec), formatMs(w.lagP50Ms), formatMs(w.lagP99Ms),
      `${formatMs(w.worstP99Ms)} (worst p99)`, `${w.cpu[other(w.leader)].cores.toFixed(2)} (standby's namespace)`, `${count(w.injected)} injected`],
    ['standby path alone (no wrk, no lab): message due -> ack', formatNumber(spRate), formatMs(sp.lagP50Ms), formatMs(sp.lagP99Ms), formatMs(sp.lagMaxMs),
      `${sp.nodeCores.toFixed(2)} Node + ${sp.kernelIoCores.toFixed(2)} helper`, `${count(sp.kernelCount)} of ${count(sp.fed)} fed`],
  ]));
  out(`standby path alone: SyncReceiver -> ConntrackConnectionTable (${writesOf(sp.writer)}) in a fresh namespace, fed in this process as a sender would: a \`changes\` message of `
    + `${STANDBY_PATH.perMessage} new fullnat tcp connections every ${STANDBY_PATH.periodMs} ms, each through the protobuf serializer and back, at most ${STANDBY_PATH.window} unacknowledged; `
    + `no gRPC, no TLS, no event watch on the standby's own table, nothing else running. Lag is from when each message was due in the pace to its ack `
    + `(${count(sp.acked)} of ${count(sp.messages)} messages acknowledged; ${sp.late} sent more than ${STANDBY_PATH.periodMs} ms late, window full ${sp.windowFull} time(s)); `
    + `CPU over ${formatMs(sp.runMs)}: this process (process.cpuUsage) and its helper processes (the ctnetlink helper where it writes, conntrack runs); inserted ${count(sp.inserted)}, failed ${sp.failed}`
    + `${sp.problem ? `; problem: ${sp.problem}` : ''}`);
  out('the lab runs everything (wrk, nginx, etcd, both agents) on the same 2 CPUs, and its lag also holds the leader\'s side (kernel event, gathering, gRPC + TLS) '
    + 'and the standby\'s own event watch; the path alone is what the standby\'s receive-and-inject costs with the CPUs to itself');

  out(`\n== 3. drills: ${STREAMS} tcp streams + ${UDP_CONNECTIONS} udp connections through round-robin fullnat vips, ${s.count} of each`);
  const drillRows: string[][] = [];
  for (const sync of [true, false]) {
    for (const kind of ['switchover', 'box-death'] as const) {
      const os = drills.outcomes.filter((o) => o.sync === sync && o.kind === kind);
      if (os.length === 0) continue;
      const broken = os.map((o) => o.brokenStreams + o.brokenUdp);
      drillRows.push([
        `${kind}, sync ${sync ? 'on' : 'off'}`, String(os.length),
        `${sum(os.map((o) => o.brokenStreams))}/${sum(os.map((o) => o.streams))}`, `${sum(os.map((o) => o.brokenUdp))}/${sum(os.map((o) => o.udpFlows))}`,
        formatNumber(sum(broken) / os.length), String(Math.max(...broken)), `${Math.max(...os.map((o) => o.takeoverMs))} ms`,
      ]);
    }
  }
  out(table(['drill', 'n', 'tcp broken', 'udp broken', 'broken/failover', 'max', 'takeover max'], drillRows));
  const firstErrors = drills.outcomes.filter((o) => o.sync).flatMap((o) => o.errors).slice(0, 3);
  if (firstErrors.length > 0) out(`with sync, first errors: ${firstErrors.join(' | ')}`);
  for (const f of drills.failures) out(`drill ${f.kind}, sync ${f.sync ? 'on' : 'off'} did not complete: ${f.message.split('\n')[0]}`);

  out('\n== targets');
  const brokenOf = (kind: DrillKind, sync: boolean): number[] => drills.outcomes.filter((o) => o.kind === kind && o.sync === sync).map((o) => o.brokenStreams + o.brokenUdp);
  // A drill with sync that did not complete is a MISS too; none at all is n/a.
  const drillOk = (kind: DrillKind): boolean | undefined => {
    const xs = brokenOf(kind, true);
    const failed = drills.failures.some((f) => f.kind === kind && f.sync);
    return xs.length === 0 && !failed ? undefined : !failed && xs.every((b) => b === TARGETS.brokenWithSync);
  };
  const perFailover = (xs: number[]): string => (xs.length === 0 ? 'n/a' : `${formatNumber(sum(xs) / xs.length)} of ${STREAMS + UDP_CONNECTIONS} (max ${Math.max(...xs)})`);
  out(table(['figure', 'measured', 'target', ''], [
    [`bulk ${formatNumber(bulk.entries)}: inject on the peer (whole path)`, formatMs(bulk.whole.wholeMs), `<= ${formatMs(TARGETS.bulkMs)}`,
      passMiss(bulk.whole.count >= bulk.entries && bulk.whole.wholeMs <= TARGETS.bulkMs)],
    [`bulk ${formatNumber(bulk.entries)}: kernel alone (baseline)`, formatMs(bulk.kernelMs), '-', 'n/a'],
    ['new connections/s reached (sync on)', formatNumber(w.wrk.requestsPerSec), `${formatNumber(TARGETS.rate)}`, passMiss(w.wrk.requestsPerSec >= 0.95 * TARGETS.rate)],
    ['incremental lag p50', formatMs(w.lagP50Ms), '-', 'n/a'],
    ['incremental lag p99 (at the end of the load)', formatMs(w.lagP99Ms), `<= ${TARGETS.lagP99Ms} ms`, passMiss(w.lagP99Ms <= TARGETS.lagP99Ms)],
    [`incremental lag p99 (worst ${LAG_WINDOW_MS / 1000} s window of the load, ${w.fullSamples} samples)`, formatMs(w.worstFullP99Ms), `<= ${TARGETS.lagP99Ms} ms`,
      passMiss(w.fullSamples > 0 ? w.worstFullP99Ms <= TARGETS.lagP99Ms : undefined)],
    [`incremental lag p99 (worst sample, with the load's first ${LAG_WINDOW_MS / 1000} s: shorter windows)`, formatMs(w.worstP99Ms), '-', 'n/a'],
    [`incremental lag p99 in sync's first ${WARMUP_SEC} s (fresh agents, the warm-up)`, formatMs(w.coldP99Ms), '-', 'n/a'],
    ['standby path alone (no wrk, no lab): connections/s fed', formatNumber(spRate), `${formatNumber(TARGETS.rate)}`, passMiss(spRate >= 0.95 * TARGETS.rate)],
    ['standby path alone (no wrk, no lab): ack lag p50', formatMs(sp.lagP50Ms), '-', 'n/a'],
    ['standby path alone (no wrk, no lab): ack lag p99', formatMs(sp.lagP99Ms), `<= ${TARGETS.lagP99Ms} ms`,
      passMiss(sp.problem === '' && sp.acked === sp.messages && sp.lagP99Ms <= TARGETS.lagP99Ms)],
    ['standby path alone (no wrk, no lab): conntrack -C = connections fed', `${count(sp.kernelCount)} / ${count(sp.fed)}`, '=', passMiss(sp.kernelCount === sp.fed)],
    ...pathTargets,
    [`new connections/s through the leader at ${formatNumber(TARGETS.rate)}/s offered, sync on / sync off (same run)`,
      `${formatNumber(w.wrk.requestsPerSec)} / ${formatNumber(wo.wrk.requestsPerSec)} = ${ratio.toFixed(3)}${baselineReached ? '' : ' (the baseline fell short of the rate)'}`,
      `>= ${TARGETS.syncOnOffRatio}`, passMiss(baselineReached && ratio >= TARGETS.syncOnOffRatio)],
    ['the same unpaced: the 2 CPUs wrk, nginx, etcd and both directors share, sync on / off',
      `${formatNumber(load.capacityWithSync.wrk.requestsPerSec)} / ${formatNumber(load.capacityWithoutSync.wrk.requestsPerSec)} = ${capacityRatio.toFixed(3)}`, '-', 'n/a'],
    ['CPU sync costs, both directors (cores)', `${cost >= 0 ? '+' : ''}${cost.toFixed(2)}`, '-', 'n/a'],
    ...(['leader', 'standby'] as const).map((role) => [`CPU sync costs the ${role} (its namespace, sync on less off, cores)`, `${costOf[role] >= 0 ? '+' : ''}${costOf[role].toFixed(2)}`,
      `<= ${TARGETS.coresPerDirector}`, w.leader === wo.leader ? passMiss(costOf[role] <= TARGETS.coresPerDirector) : 'n/a (the leader differed)']),
    ['leader changes caused by the load, sync on / off', `${w.leaderChanges} / ${wo.leaderChanges}`, '0', passMiss(w.leaderChanges === 0 && wo.leaderChanges === 0)],
    ['vip group transitions logged during the load, sync on / off', `${w.transitions} / ${wo.transitions}`, '0', passMiss(w.transitions === 0 && wo.transitions === 0)],
    ['broken per switchover, sync on', perFailover(brokenOf('switchover', true)), '0', passMiss(drillOk('switchover'))],
    ['broken per box death, sync on', perFailover(brokenOf('box-death', true)), '0', passMiss(drillOk('box-death'))],
    ['broken per switchover, sync off', perFailover(brokenOf('switchover', false)), '-', 'n/a'],
    ['broken per box death, sync off', perFailover(brokenOf('box-death', false)), '-', 'n/a'],
  ]));
}
