import { randomInt } from 'node:crypto';
import { DRILL_MODES, type DrillMode } from '@lbd/config';
import { CLUSTER, DIRECTOR_NAMES, type ClusterTopology, type DirectorName } from './cluster-topology.js';
import { runCommand, type BackgroundProcess } from './exec.js';
import { holdersOf, leaderOf, statuses, waitFor, waitSteady, type ClusterStatusView, type HaAdmin, type SteadyTarget } from './ha-lab.js';
import { spawnTestClient } from './processes.js';
import type { Topology } from './netns.js';
import type { ReadyReport, StreamResult } from './testclient.js';

/**
 * Failure drills on a running active/standby cluster (an HaLab in tests and benchmarks, the lab's
 * namespaces in `deploy/lab/lab drill`): while a client load runs through the vip and both directors are
 * sampled for holding it, one failure is caused on the current leader, measured, and undone.
 *
 * Measures (times relative to `failedAt`, the instant the failure was caused):
 * - noServiceMs: the longest stretch, ending at or after the failure, during which every HTTP request the
 *   client *started* failed: the time between the starts of the two successful requests either side of
 *   it. A request is a fresh TCP connection every `requestIntervalMs` (5 ms) with a `requestTimeoutMs`
 *   (500 ms) deadline, below the 1 s SYN retransmission, so a success means the first SYN was served.
 *   With nothing wrong it is about one request interval; it is the time until the end of the load when
 *   service never came back (`recovered` false).
 * - restoredAfterMs: from the failure to the start of the successful request that ended that stretch,
 *   i.e. when service was back. For failures the old leader keeps serving through (an etcd cut is only
 *   fenced after the safety window) this is larger than noServiceMs by the time it kept serving. With no
 *   real outage (a stretch under ten request intervals) it is the first success after the failure.
 * - failedRequests: every failed request of the drill (baseline included: those should be none);
 *   `failedStartsMs` where they started; `inFlightAtFailure` how many were open when the failure came.
 * - brokenConnections: of `streams` long-lived connections (lbd-testclient stream to vip:9000), those that
 *   broke or stalled. Connections are not synced between directors (not built yet), so an unplanned move
 *   of the vip breaks them; they are reported, not judged.
 * - dualOwnership / dualOwnershipMs / dualIntervals: whether, how long and when both directors held the vip
 *   (the address on eth0, eth0 up with carrier), from the kernel's address and link events (OwnershipWatch),
 *   not from sampling: exact to the order the kernel made the changes, durations to the µs. dualOwnership
 *   counts the intervals. The drill fails (rejects) when the events could not all be read.
 * - releasedAtMs / claimedAtMs / releaseToClaimMs: when the old leader stopped holding the vip, when the
 *   other director started, and the gap between them (negative: an overlap, also counted as dual).
 * - moved / newLeader: whether leadership changed by the end of the observation.
 */

export { DRILL_MODES, type DrillMode };

/** What a drill acts on: an HaLab, or the lab's running processes (deploy/lab/lab drill). */
export interface DrillTarget extends SteadyTarget {
  killAgent(dir: DirectorName, signal?: NodeJS.Signals): Promise<void>;
  startAgent(dir: DirectorName): Promise<void>;
  pauseEtcd(): Promise<void>;
  resumeEtcd(): Promise<void>;
}

export interface DrillOptions {
  /** Load before the failure (default 500 ms). */
  readonly baselineMs?: number;
  /** Watching after the failure (default: worst-case takeover + 1500 ms; etcd-outage: outage + 1500 ms). */
  readonly observeMs?: number;
  /** How long etcd-outage pauses every member (default 3000 ms). */
  readonly etcdOutageMs?: number;
  readonly requestIntervalMs?: number;
  readonly requestTimeoutMs?: number;
  /** Long-lived stream connections (default 10; 0 for none). */
  readonly streams?: number;
  readonly sampleIntervalMs?: number;
  /** Undo the failure and wait until the cluster is steady (default true). */
  readonly restore?: boolean;
  /** Bound on the steady wait (default: the group's preemption delay + 30 s). */
  readonly steadyTimeoutMs?: number;
  /** Progress lines. */
  readonly log?: (line: string) => void;
}

export interface HolderChange {
  /** Relative to the failure. */
  readonly atMs: number;
  readonly holders: readonly DirectorName[];
}

export interface DrillResult {
  readonly mode: DrillMode;
  /** Unix ms when the failure was caused. */
  readonly failedAt: number;
  /** How long causing it took (the failover call, the kill, the cut). */
  readonly injectMs: number;
  readonly oldLeader: DirectorName;
  readonly newLeader: DirectorName | null;
  readonly moved: boolean;
  readonly worstCaseTakeoverMs: number;
  readonly noServiceMs: number;
  readonly restoredAfterMs: number;
  readonly recovered: boolean;
  readonly requests: number;
  readonly failedRequests: number;
  /** Start of each failed request relative to the failure (the first 100). */
  readonly failedStartsMs: readonly number[];
  readonly inFlightAtFailure: number;
  /** Failure kinds (`timeout`, `ECONNRESET`, `HTTP 503`) and their counts. */
  readonly errors: Readonly<Record<string, number>>;
  readonly streams: number;
  readonly brokenConnections: number;
  readonly streamErrors: readonly string[];
  /** Intervals in which both directors held the vip (0: never), from kernel events. */
  readonly dualOwnership: number;
  /** Their total length (ms, µs precision). */
  readonly dualOwnershipMs: number;
  /** The intervals, relative to the failure (ms, µs precision). */
  readonly dualIntervals: readonly RelInterval[];
  /** Start of the first dual interval relative to the failure, null if none. */
  readonly firstDualMs: number | null;
  /** Per director, when it held the vip during the observation, relative to the failure (from kernel events). */
  readonly holdIntervals: Readonly<Record<DirectorName, readonly RelInterval[]>>;
  /** When the old leader stopped holding the vip (the end of its hold at the failure), null if it kept it. */
  readonly releasedAtMs: number | null;
  /** When the other director started holding it after the failure, null if it did not. */
  readonly claimedAtMs: number | null;
  /** claimedAtMs - the end of the old leader's last hold before that claim; null without a claim. */
  readonly releaseToClaimMs: number | null;
  /** Holder samples that showed both directors (read skew of two non-atomic reads; for comparison only). */
  readonly skewedDualSamples: number;
  /** From the last holder sample before the failure, every change of who holds the vip. */
  readonly holderChanges: readonly HolderChange[];
  /** Holder samples taken (to show the sampler ran). */
  readonly holderSamples: number;
  /** Whether any director's last transition (role, time) in the group changed during the observation. */
  readonly transitionsChanged: boolean;
  /** How long the restore and the steady wait took (0 without restore). */
  readonly steadyAfterMs: number;
}

/** An interval relative to the failure, in ms with µs precision. */
export interface RelInterval {
  readonly startMs: number;
  readonly endMs: number;
}

const DEFAULTS = {
  baselineMs: 500, etcdOutageMs: 3000, requestIntervalMs: 5, requestTimeoutMs: 500, streams: 10, sampleIntervalMs: 10,
};
/** Slack of the load client's own deadline beyond the drill's expected length. */
const LOAD_SLACK_MS = 30_000;
const STREAM_READY_MS = 10_000;

export async function runDrill(target: DrillTarget, mode: DrillMode, opts: DrillOptions = {}): Promise<DrillResult> {
  if (!DRILL_MODES.includes(mode)) throw new Error(`drill mode must be one of ${DRILL_MODES.join(', ')} (got ${JSON.stringify(mode)})`);
  const o = { ...DEFAULTS, ...opts };
  const log = opts.log ?? ((): void => undefined);
  const api = (d: DirectorName): HaAdmin => target.api(d);
  const group = target.group;

  const oldLeader = await waitFor('a leader before the drill', 10_000, () => leaderOf(api, group));
  const before = await statuses(target);
  const status = before.get(oldLeader) ?? [...before.values()][0];
  const worstCaseTakeoverMs = status?.worstCaseTakeoverMs ?? 0;
  const observeMs = opts.observeMs ?? (mode === 'etcd-outage' ? o.etcdOutageMs : worstCaseTakeoverMs) + 1500;
  const other = DIRECTOR_NAMES.find((d) => d !== oldLeader)!;
  const expectedMs = o.baselineMs + observeMs + STREAM_READY_MS;

  // ---- load and sampler ----
  const load = target.cluster.topology.spawn('client', process.execPath, ['-e', LOAD_SCRIPT, JSON.stringify({
    url: `http://${target.vip}/`, intervalMs: o.requestIntervalMs, timeoutMs: o.requestTimeoutMs, maxMs: expectedMs + LOAD_SLACK_MS,
    maxInFlight: 200, maxRequests: Math.ceil((expectedMs + LOAD_SLACK_MS) / o.requestIntervalMs) + 10,
  })], { label: 'client:drill-load' });
  let streams: BackgroundProcess | undefined;
  const sampler = new HolderSampler(target.cluster, target.vip, o.sampleIntervalMs, expectedMs + LOAD_SLACK_MS);
  let watch: OwnershipWatch | undefined;
  let failedAt = 0;
  let injectMs = 0;
  let undone = false;
  const undo = async (): Promise<void> => {
    if (undone) return;
    undone = true;
    await restoreFailure(target, mode, oldLeader);
  };
  try {
    await load.waitForJson((v) => 'started' in v, 10_000);
    if (o.streams > 0) {
      streams = spawnTestClient(target.cluster.topology, 'client', ['stream', '--target', `${target.vip}:9000`, '--connections', String(o.streams),
        '--duration-ms', String(expectedMs + LOAD_SLACK_MS), '--stall-ms', '2000']);
      const ready = await streams.waitForJson<ReadyReport>((v) => 'ready' in v, STREAM_READY_MS);
      if (!ready.ready) log(`drill: only ${ready.started} of ${ready.connections} streams started`);
    }
    watch = await OwnershipWatch.start(target.cluster.topology, CLUSTER.hosts.frontSwitch, target.vip, DIRECTOR_NAMES.map((d) => ({
      // Topology.attach names a host's port on a switch p-<host>.
      name: d, host: d, ifname: CLUSTER.interfaces.front, port: `p-${d}`,
    })));
    sampler.start();
    await delay(o.baselineMs);

    // ---- the failure ----
    log(`drill ${mode}: failing ${oldLeader}`);
    failedAt = Date.now();
    switch (mode) {
      case 'switchover': await api(oldLeader).failover(group, '', { timeoutMs: 5000 }); break;
      case 'kill-agent': await target.killAgent(oldLeader, 'SIGKILL'); break;
      case 'box-death': await target.cluster.killBox(oldLeader); break;
      case 'etcd-partition': await target.cluster.cut(oldLeader, 'etcd'); break;
      case 'peer-partition': await target.cluster.cut(oldLeader, 'peer'); break;
      case 'etcd-outage': await target.pauseEtcd(); break;
    }
    injectMs = Date.now() - failedAt;
    if (mode === 'etcd-outage') {
      await delay(Math.max(0, o.etcdOutageMs - injectMs));
      await target.resumeEtcd();
      await delay(observeMs - o.etcdOutageMs);
    } else {
      await delay(Math.max(0, observeMs - injectMs));
    }
  } catch (e) {
    await Promise.all([sampler.stop(), watch?.abort(), load.stop(), streams?.stop()]);
    await undo().catch(() => undefined);
    throw e;
  }

  // ---- results ----
  await sampler.stop();
  // The watch is stopped and reaped here whatever happens; a timeline it could not make exact fails the
  // drill, after the restore below, rather than reporting a guess.
  let ownership: OwnershipTimeline | undefined;
  let ownershipError: unknown;
  try {
    ownership = await watch.stop();
  } catch (e) {
    ownershipError = e;
  }
  const newLeader = (await leaderOf(api, group).catch(() => undefined)) ?? null;
  const after = await statuses(target);
  await Promise.all([load.stop(3000), streams?.stop(3000)]);
  const records = parseLoad(load);
  const streamResult = streams?.lastJson<StreamResult>();
  const m = measure(records, failedAt, o.requestIntervalMs);

  // ---- restore ----
  const restoreStart = Date.now();
  if (opts.restore !== false) {
    await undo();
    await waitSteady(target, opts.steadyTimeoutMs);
  }
  if (ownership === undefined) throw new Error(`drill ${mode}: cannot tell who held the vip: ${(ownershipError as Error)?.message ?? String(ownershipError)}`);
  const result: DrillResult = {
    mode, failedAt, injectMs, oldLeader, newLeader, moved: newLeader !== null && newLeader !== oldLeader, worstCaseTakeoverMs,
    ...m,
    streams: o.streams,
    brokenConnections: streamResult ? streamResult.broken : o.streams,
    streamErrors: streamResult ? streamResult.perConnection.map((c) => c.error).filter((x): x is string => x !== null) : ['no stream report'],
    ...ownershipFigures(ownership, failedAt, oldLeader, other),
    skewedDualSamples: sampler.dual,
    holderChanges: sampler.changesFrom(failedAt),
    holderSamples: sampler.samples,
    transitionsChanged: transitionsDiffer(before, after, group, other, oldLeader),
    steadyAfterMs: opts.restore === false ? 0 : Date.now() - restoreStart,
  };
  log(`drill ${mode}: ${summary(result)}`);
  return result;
}

/** Undoes what `mode` did to `leader`. */
async function restoreFailure(target: DrillTarget, mode: DrillMode, leader: DirectorName): Promise<void> {
  switch (mode) {
    case 'kill-agent': await target.startAgent(leader); break;
    case 'box-death':
      await target.cluster.reviveBox(leader);
      await target.startAgent(leader);
      break;
    case 'etcd-partition': await target.cluster.restore(leader, 'etcd'); break;
    case 'peer-partition': await target.cluster.restore(leader, 'peer'); break;
    case 'etcd-outage': await target.resumeEtcd(); break;
    case 'switchover': break;
  }
}

function transitionsDiffer(before: Map<DirectorName, ClusterStatusView>, after: Map<DirectorName, ClusterStatusView>, group: string, ...dirs: DirectorName[]): boolean {
  const own = (m: Map<DirectorName, ClusterStatusView>, d: DirectorName): string => {
    const g = m.get(d)?.directors.find((x) => x.id === d)?.groups.find((x) => x.group === group);
    return g === undefined ? 'unknown' : `${g.role}@${g.atUnixMs}`;
  };
  return dirs.some((d) => own(before, d) !== own(after, d));
}

/** The drill's figures from the ownership timeline, relative to the failure. */
function ownershipFigures(t: OwnershipTimeline, failedAt: number, oldLeader: DirectorName, other: DirectorName): Pick<DrillResult,
  'dualOwnership' | 'dualOwnershipMs' | 'dualIntervals' | 'firstDualMs' | 'holdIntervals' | 'releasedAtMs' | 'claimedAtMs' | 'releaseToClaimMs'> {
  const failedUs = failedAt * 1000;
  const rel = (us: number): number => (us - failedUs) / 1000;
  const relAll = (xs: readonly UsInterval[] = []): RelInterval[] => xs.map((x) => ({ startMs: rel(x.startUs), endMs: rel(x.endUs) }));
  const old = t.holds[oldLeader] ?? [];
  const held = old.find((x) => x.startUs <= failedUs && x.endUs >= failedUs);
  const released = held !== undefined && held.endUs < t.endUs ? held.endUs : null;
  const claim = (t.holds[other] ?? []).find((x) => x.startUs >= failedUs);
  const before = claim === undefined ? undefined : old.filter((x) => x.startUs < claim.startUs).at(-1);
  const dualIntervals = relAll(t.dual);
  return {
    dualOwnership: t.dual.length, dualOwnershipMs: t.dualMs, dualIntervals,
    firstDualMs: dualIntervals[0]?.startMs ?? null,
    holdIntervals: { dir1: relAll(t.holds.dir1), dir2: relAll(t.holds.dir2) },
    releasedAtMs: released === null ? null : rel(released),
    claimedAtMs: claim === undefined ? null : rel(claim.startUs),
    releaseToClaimMs: claim === undefined || before === undefined ? null : (claim.startUs - before.endUs) / 1000,
  };
}

// ---- the client load ----------------------------------------------------------------------------

/**
 * Runs in the client namespace (node -e): a fresh HTTP connection every intervalMs, each with its own
 * deadline, at most maxInFlight open and maxRequests in all, for at most maxMs; SIGTERM ends it. Prints
 * {"started":t0} at once and, at the end, {"t0":..., "records":[[startOffsetMs, durationMs, ok, error], ...]}.
 */
const LOAD_SCRIPT = String.raw`
const { request } = require('node:http');
const cfg = JSON.parse(process.argv[1]);
const t0 = Date.now();
const records = [];
let inFlight = 0, issued = 0, stopping = false, ended = false;
process.on('SIGTERM', () => { stopping = true; });
process.on('SIGINT', () => { stopping = true; });
function one() {
  const s = Date.now(); inFlight++; issued++;
  let done = false;
  const finish = (ok, err) => {
    if (done) return; done = true; clearTimeout(timer); inFlight--;
    records.push([s - t0, Date.now() - s, ok ? 1 : 0, ok ? '' : String(err)]);
  };
  const req = request(cfg.url, { agent: false, headers: { connection: 'close' } }, (res) => {
    res.resume();
    res.on('end', () => finish(res.statusCode === 200, 'HTTP ' + res.statusCode));
    res.on('error', (e) => finish(false, e.code || e.message));
  });
  const timer = setTimeout(() => { finish(false, 'timeout'); req.destroy(); }, cfg.timeoutMs);
  req.on('error', (e) => finish(false, e.code || e.message));
  req.end();
}
function end() {
  if (ended) return; ended = true;
  const deadline = Date.now() + cfg.timeoutMs + 200;
  const wait = () => {
    if (inFlight > 0 && Date.now() < deadline) return setTimeout(wait, 10);
    process.stdout.write(JSON.stringify({ t0, records }) + '\n', () => process.exit(0));
  };
  wait();
}
function tick() {
  if (stopping || Date.now() - t0 > cfg.maxMs || issued >= cfg.maxRequests) return end();
  if (inFlight < cfg.maxInFlight) one();
  setTimeout(tick, cfg.intervalMs);
}
process.stdout.write(JSON.stringify({ started: t0 }) + '\n');
tick();
`;

/** [start (unix ms), duration ms, ok, error]. */
type RequestRecord = readonly [start: number, durationMs: number, ok: boolean, error: string];

function parseLoad(load: BackgroundProcess): RequestRecord[] {
  const report = load.lastJson<{ t0?: number; records?: [number, number, number, string][] }>();
  if (report?.t0 === undefined || report.records === undefined) throw new Error(`drill load: no report (stderr: ${load.stderr.slice(-500)})`);
  return report.records.map(([s, d, ok, err]) => [report.t0! + s, d, ok === 1, err] as const).sort((a, b) => a[0] - b[0]);
}

function measure(records: readonly RequestRecord[], failedAt: number, intervalMs: number): Pick<DrillResult,
  'noServiceMs' | 'restoredAfterMs' | 'recovered' | 'requests' | 'failedRequests' | 'failedStartsMs' | 'inFlightAtFailure' | 'errors'> {
  const ok = records.filter((r) => r[2]).map((r) => r[0]);
  const failed = records.filter((r) => !r[2]);
  const lastStart = records.at(-1)?.[0] ?? failedAt;
  let noServiceMs = 0;
  let restoredAt = failedAt;
  let recovered = true;
  const lastOkBefore = [...ok].reverse().find((s) => s < failedAt);
  const firstOkAfter = ok.find((s) => s >= failedAt);
  if (firstOkAfter === undefined) {
    recovered = false;
    noServiceMs = lastStart - (lastOkBefore ?? failedAt);
    restoredAt = lastStart;
  } else {
    // Gaps between consecutive successful starts that end at or after the failure.
    for (let i = 0; i < ok.length; i++) {
      if (ok[i]! < failedAt) continue;
      const prev = i > 0 ? ok[i - 1]! : failedAt;
      if (ok[i]! - prev > noServiceMs) {
        noServiceMs = ok[i]! - prev;
        restoredAt = ok[i]!;
      }
    }
    // No real outage (under ten request intervals): service was back with the first request after the failure.
    if (noServiceMs < intervalMs * 10) restoredAt = firstOkAfter;
  }
  const errors: Record<string, number> = {};
  for (const r of failed) errors[r[3]] = (errors[r[3]] ?? 0) + 1;
  return {
    noServiceMs, restoredAfterMs: restoredAt - failedAt, recovered,
    requests: records.length, failedRequests: failed.length,
    failedStartsMs: failed.slice(0, 100).map((r) => r[0] - failedAt),
    inFlightAtFailure: records.filter((r) => r[0] < failedAt && r[0] + r[1] >= failedAt).length,
    errors,
  };
}

// ---- who holds the vip: the 10 ms sampler (the holderChanges timeline only) ---------------------------

/**
 * Samples both directors for the vip every intervalMs (bounded in time and count) until stopped. Its two
 * reads are not atomic (each is an `ip` run taking 3-30 ms under load), so a handover can look like both
 * holding (read skew) or a short overlap can fall between samples: it feeds the coarse `holderChanges`
 * timeline and counts `skewedDualSamples` for comparison, never the dual-ownership judgement, which comes
 * from the kernel's events (OwnershipWatch).
 */
class HolderSampler {
  dual = 0;
  samples = 0;
  private readonly changes: { at: number; holders: DirectorName[] }[] = [];
  private running: Promise<void> | undefined;
  private stopping = false;

  constructor(private readonly cluster: ClusterTopology, private readonly vip: string, private readonly intervalMs: number, private readonly maxMs: number) {}

  start(): void {
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.running;
  }

  changesFrom(failedAt: number): HolderChange[] {
    const i = this.changes.findLastIndex((c) => c.at < failedAt);
    return this.changes.slice(Math.max(0, i)).map((c) => ({ atMs: c.at - failedAt, holders: c.holders }));
  }

  private async loop(): Promise<void> {
    const end = Date.now() + this.maxMs;
    const maxSamples = Math.ceil(this.maxMs / this.intervalMs) + 1;
    let last = '';
    while (!this.stopping && Date.now() < end && this.samples < maxSamples) {
      const t = Date.now();
      const holders = await holdersOf(this.cluster, this.vip);
      this.samples++;
      if (holders.length > 1) this.dual++;
      if (holders.join() !== last) {
        last = holders.join();
        this.changes.push({ at: t, holders });
      }
      await delay(Math.max(0, t + this.intervalMs - Date.now()));
    }
  }
}

// ---- who holds the vip: kernel events ------------------------------------------------------------

/** One host that may hold the watched address, plugged into the watch's switch. */
export interface OwnershipSubject {
  /** How results name it (a director name in drills). */
  readonly name: string;
  /** Its host (namespace) in the topology. */
  readonly host: string;
  /** Where the address counts: a veth whose other end is `port`. */
  readonly ifname: string;
  /** The other end of `ifname`: a port in the watch's switch host (`p-<host>`, see Topology.attach). */
  readonly port: string;
}

/** Microseconds since the Unix epoch, on the host's wall clock (`ip -ts`'s clock). */
export interface UsInterval {
  readonly startUs: number;
  readonly endUs: number;
}

export interface OwnershipTimeline {
  /** The window the timeline covers: from the initial state read to the stop. */
  readonly startUs: number;
  readonly endUs: number;
  /** Per subject, when it held the address (address present, link up at both ends). */
  readonly holds: Readonly<Record<string, readonly UsInterval[]>>;
  /** When two or more subjects held it at once. */
  readonly dual: readonly UsInterval[];
  /** Total length of `dual`, in ms with µs precision. */
  readonly dualMs: number;
  /** Kernel events read (address and link, of every namespace the monitor sees). */
  readonly events: number;
}

/** A parsed `ip -o -ts monitor all-nsid address link` line. */
export interface MonitorEvent {
  readonly atUs: number;
  /** null: the monitor's own namespace (`[nsid current]`). */
  readonly nsid: number | null;
  readonly ifindex: number;
  readonly deleted: boolean;
  /** Link events: the flags between < and >. */
  readonly flags?: readonly string[];
  /** Address events: the address without its prefix length, lower case. */
  readonly address?: string;
}

const MONITOR_LINE = /^\[(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{6})\] \[nsid (current|\d+)\](Deleted )?(\d+): (.*)$/;

/**
 * Parses one monitor line (printed with TZ=UTC, so the timestamp is UTC). Interface names in it are
 * resolved in the monitor's namespace and are wrong for other namespaces' events: only the ifindex counts.
 * Returns undefined for lines that are neither a link nor an address event.
 */
export function parseMonitorLine(line: string): MonitorEvent | undefined {
  const m = MONITOR_LINE.exec(line);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s, us, nsid, deleted, ifindex, rest] = m;
  const atUs = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s)) * 1000 + Number(us);
  const base = { atUs, nsid: nsid === 'current' ? null : Number(nsid), ifindex: Number(ifindex), deleted: deleted !== undefined };
  const link = /^\S+: <([^>]*)>/.exec(rest!);
  if (link) return { ...base, flags: link[1] === '' ? [] : link[1]!.split(',') };
  const addr = /^\S+\s+inet6? ([0-9A-Fa-f:.]+)\/\d+/.exec(rest!);
  if (addr) return { ...base, address: addr[1]!.toLowerCase() };
  return undefined;
}

/** What the initial read found for one subject, and how its events are recognised. */
export interface OwnershipStart {
  readonly name: string;
  /** The subject's namespace id in the monitor's namespace. */
  readonly nsid: number;
  /** ifindex of `ifname` in the subject's namespace, and of its port in the monitor's namespace. */
  readonly ifindex: number;
  readonly portIfindex: number;
  readonly hasAddress: boolean;
  readonly up: boolean;
  readonly portUp: boolean;
}

/**
 * The timeline of who held `address` from kernel events, in the order the monitor's one socket received
 * them. A subject holds while the address is on its interface and the interface is administratively up
 * and its switch port too: for a veth, carrier (LOWER_UP) is exactly "both ends up" and flips in the same
 * call as the admin change, but the kernel reports carrier changes late through linkwatch (and coalesces
 * a quick off/on into nothing), while admin changes are reported at once; so both ends' UP flags give the
 * exact instant LOWER_UP changed. Events received before `readStartUs` are already in the initial state;
 * those received during the read are applied at `readEndUs` (they carry full state: idempotent).
 */
export function ownershipTimeline(address: string, subjects: readonly OwnershipStart[], events: readonly MonitorEvent[],
  readStartUs: number, readEndUs: number, stopUs: number): OwnershipTimeline {
  const want = address.toLowerCase();
  const st = subjects.map((s) => ({ ...s, open: null as number | null, intervals: [] as UsInterval[] }));
  const holds = (s: (typeof st)[number]): boolean => s.hasAddress && s.up && s.portUp;
  const dual: UsInterval[] = [];
  let dualOpen: number | null = null;
  const settle = (t: number): void => {
    for (const s of st) {
      if (holds(s) && s.open === null) s.open = t;
      if (!holds(s) && s.open !== null) {
        s.intervals.push({ startUs: s.open, endUs: t });
        s.open = null;
      }
    }
    const n = st.filter(holds).length;
    if (n >= 2 && dualOpen === null) dualOpen = t;
    if (n < 2 && dualOpen !== null) {
      dual.push({ startUs: dualOpen, endUs: t });
      dualOpen = null;
    }
  };
  settle(readEndUs);
  let last = readEndUs;
  let used = 0;
  for (const e of events) {
    if (e.atUs < readStartUs || e.atUs > stopUs) continue;
    // One socket's receive order is the kernel's order; a wall-clock step back must not reorder it.
    const t = Math.max(e.atUs, last);
    last = t;
    used++;
    for (const s of st) {
      if (e.nsid === s.nsid && e.ifindex === s.ifindex) {
        if (e.flags !== undefined) s.up = !e.deleted && e.flags.includes('UP');
        else if (e.address === want) s.hasAddress = !e.deleted;
      } else if (e.nsid === null && e.ifindex === s.portIfindex && e.flags !== undefined) {
        s.portUp = !e.deleted && e.flags.includes('UP');
      }
    }
    settle(t);
  }
  const end = Math.max(stopUs, last);
  for (const s of st) if (s.open !== null) s.intervals.push({ startUs: s.open, endUs: end });
  if (dualOpen !== null) dual.push({ startUs: dualOpen, endUs: end });
  return {
    startUs: readEndUs, endUs: end,
    holds: Object.fromEntries(st.map((s) => [s.name, s.intervals])),
    dual, dualMs: dual.reduce((a, d) => a + d.endUs - d.startUs, 0) / 1000, events: used,
  };
}

/** Bounds: the monitor's startup, the initial reads, the lines kept. */
const WATCH_READY_MS = 5000;
const WATCH_READ_MS = 5000;
const WATCH_MAX_LINES = 500_000;
/** Events the kernel queued just before the stop get this long to be printed. */
const WATCH_DRAIN_MS = 50;

function wallUs(): number {
  return Math.round((performance.timeOrigin + performance.now()) * 1000);
}

/**
 * Who held an address, exactly: one `ip -o -ts monitor all-nsid address link` in the switch's namespace
 * sees the address and link events of every namespace that has an id there (each subject: its veth's
 * peer, the switch port, lives there) plus the switch's own ports, through one netlink socket, so the
 * events arrive in the order the kernel made the changes, each timestamped (µs) when read.
 *
 * Why one monitor in the switch rather than one per subject namespace: killBox SIGKILLs every process in
 * the box's namespace first, a monitor in there included, before the links go down; a monitor in the
 * switch (which no drill kills) keeps seeing the box's links go down, from the box's side. One socket
 * also orders events of different namespaces exactly, where two monitors' timestamps are each their own
 * process's read time (their scheduling skew would be the error again).
 */
export class OwnershipWatch {
  private readonly lines: string[] = [];
  private overflow = false;
  private stopped: Promise<void> | undefined;

  private constructor(
    private readonly monitor: BackgroundProcess,
    private readonly address: string,
    private starts: readonly OwnershipStart[] = [],
    private readStartUs = 0,
    private readEndUs = 0,
  ) {
    let partial = '';
    monitor.child.stdout!.on('data', (chunk: string) => {
      const parts = (partial + chunk).split('\n');
      partial = parts.pop()!;
      for (const l of parts) {
        if (this.lines.length < WATCH_MAX_LINES) this.lines.push(l);
        else this.overflow = true;
      }
    });
  }

  /**
   * Starts the monitor, waits until it provably receives events (a marker address added and removed on
   * the switch's loopback shows up), then reads the initial state. Stops the monitor again on failure.
   */
  static async start(topology: Topology, switchHost: string, address: string, subjects: readonly OwnershipSubject[]): Promise<OwnershipWatch> {
    const monitor = topology.spawn(switchHost, 'ip', ['-o', '-ts', 'monitor', 'all-nsid', 'address', 'link'], {
      label: `${switchHost}:ip-monitor`, env: { ...process.env, TZ: 'UTC' },
    });
    const watch = new OwnershipWatch(monitor, address);
    try {
      await watch.waitListening(topology, switchHost);
      watch.readStartUs = wallUs() - 1000;
      watch.starts = await Promise.all(subjects.map((s) => readStart(topology, switchHost, s, address)));
      watch.readEndUs = wallUs() + 1000;
    } catch (e) {
      await watch.abort();
      throw e;
    }
    return watch;
  }

  /** Stops and reaps the monitor; the timeline up to now. Rejects when the monitor died or lost events. */
  async stop(): Promise<OwnershipTimeline> {
    const stopUs = wallUs();
    const diedEarly = !this.monitor.running;
    if (!diedEarly) await delay(WATCH_DRAIN_MS);
    await this.abort();
    const problem = diedEarly ? 'the monitor exited before the end of the drill'
      : this.overflow ? `more than ${WATCH_MAX_LINES} monitor lines`
      // iproute2 prints this and carries on when the socket's buffer overflowed: events were lost.
      : /netlink receive error|No buffer space/i.test(this.monitor.stderr) ? 'the monitor lost events (netlink receive buffer overflow)'
      : null;
    if (problem !== null) throw new Error(`ownership watch: ${problem}; stderr: ${this.monitor.stderr.trim().slice(-500) || '(empty)'}`);
    const events = this.lines.map(parseMonitorLine).filter((e): e is MonitorEvent => e !== undefined);
    return ownershipTimeline(this.address, this.starts, events, this.readStartUs, this.readEndUs, stopUs);
  }

  /** Stops and reaps the monitor (idempotent); for error paths. */
  abort(): Promise<void> {
    this.stopped ??= this.monitor.stop(1000).then(() => undefined);
    return this.stopped;
  }

  private async waitListening(topology: Topology, switchHost: string): Promise<void> {
    // A random loopback /32 in the switch's own namespace: harmless, and unique per watch. The monitor
    // subscribes (and asks for every nsid) before its startup dumps, during which it may drop events, so
    // the marker is repeated until one is printed.
    const marker = `127.${1 + randomInt(254)}.${randomInt(256)}.${1 + randomInt(254)}`;
    const deadline = Date.now() + WATCH_READY_MS;
    for (let attempt = 0; Date.now() < deadline && attempt < 100; attempt++) {
      if (!this.monitor.running) break;
      await topology.ip(switchHost, 'addr', 'add', `${marker}/32`, 'dev', 'lo').catch(() => undefined);
      await topology.ip(switchHost, 'addr', 'del', `${marker}/32`, 'dev', 'lo').catch(() => undefined);
      const seen = await this.monitor.waitForLine((l) => l.includes(` inet ${marker}/32 `), 100).then(() => true, () => false);
      if (seen) return;
    }
    throw new Error(`ownership watch: the monitor in ${switchHost} printed no event within ${WATCH_READY_MS} ms; stderr: ${this.monitor.stderr.trim().slice(-500) || '(empty)'}`);
  }
}

interface IpLink {
  readonly ifindex?: number;
  readonly link_index?: number;
  readonly flags?: readonly string[];
  readonly link_netnsid?: number;
  readonly addr_info?: readonly { readonly local?: string }[];
}

async function ipJsonOne(topology: Topology, host: string, args: readonly string[]): Promise<IpLink> {
  const { stdout } = await runCommand('ip', ['-n', topology.ns(host), '-j', ...args], { timeoutMs: WATCH_READ_MS });
  const parsed = JSON.parse(stdout) as IpLink[];
  if (parsed.length !== 1 || parsed[0]!.ifindex === undefined) throw new Error(`ip ${args.join(' ')} in ${topology.ns(host)}: expected one link, got ${stdout.slice(0, 200)}`);
  return parsed[0]!;
}

async function readStart(topology: Topology, switchHost: string, s: OwnershipSubject, address: string): Promise<OwnershipStart> {
  const [dev, port] = await Promise.all([
    ipJsonOne(topology, s.host, ['addr', 'show', 'dev', s.ifname]),
    ipJsonOne(topology, switchHost, ['link', 'show', 'dev', s.port]),
  ]);
  if (port.link_netnsid === undefined || dev.link_index !== port.ifindex) {
    throw new Error(`ownership watch: ${switchHost}:${s.port} is not the peer of ${s.host}:${s.ifname} (or has no namespace id there)`);
  }
  return {
    name: s.name, nsid: port.link_netnsid, ifindex: dev.ifindex!, portIfindex: port.ifindex!,
    hasAddress: (dev.addr_info ?? []).some((a) => a.local?.toLowerCase() === address.toLowerCase()),
    up: (dev.flags ?? []).includes('UP'), portUp: (port.flags ?? []).includes('UP'),
  };
}

// ---- reporting --------------------------------------------------------------------------------------

/** A drill passes when service came back and no two directors ever held the vip at once. */
export function drillPassed(r: DrillResult): boolean {
  return r.recovered && r.dualOwnership === 0;
}

/** A drill's result as the agents' event log stores it (admin RecordDrill: a `drill` event). */
export function drillRecord(r: DrillResult): { mode: string; result: 'pass' | 'fail'; reason: string; fields: Record<string, string> } {
  const fields: Record<string, string> = {
    failedAt: new Date(r.failedAt).toISOString(), oldLeader: r.oldLeader, newLeader: r.newLeader ?? '', moved: String(r.moved),
    noServiceMs: String(r.noServiceMs), restoredAfterMs: String(r.restoredAfterMs), recovered: String(r.recovered),
    requests: String(r.requests), failedRequests: String(r.failedRequests), streams: String(r.streams), brokenConnections: String(r.brokenConnections),
    dualOwnership: String(r.dualOwnership), dualOwnershipMs: r.dualOwnershipMs.toFixed(3), worstCaseTakeoverMs: String(r.worstCaseTakeoverMs),
    releaseToClaimMs: r.releaseToClaimMs === null ? '' : r.releaseToClaimMs.toFixed(3),
  };
  return { mode: r.mode, result: drillPassed(r) ? 'pass' : 'fail', reason: summary(r), fields };
}

/** One line about one drill. */
export function summary(r: DrillResult): string {
  const move = r.moved ? `${r.oldLeader} -> ${r.newLeader}` : `stayed on ${r.newLeader ?? '(none)'}`;
  return `${move}; no service ${r.noServiceMs} ms (restored after ${r.restoredAfterMs} ms${r.recovered ? '' : ', NOT recovered'}), `
    + `${r.failedRequests}/${r.requests} requests failed, ${r.brokenConnections}/${r.streams} streams broken, `
    + `dual ownership ${r.dualOwnership} (${r.dualOwnershipMs.toFixed(3)} ms), `
    + `release->claim ${r.releaseToClaimMs === null ? 'none' : `${r.releaseToClaimMs.toFixed(3)} ms`}`
    + (r.releasedAtMs === null ? '' : ` (released at +${r.releasedAtMs.toFixed(3)} ms)`);
}

function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** A table per mode over repeated drills: p50/p99/max of the no-service time and the other figures. */
export function formatDrill(results: readonly DrillResult[]): string {
  const header = ['mode', 'n', 'moved', 'noService p50', 'p99', 'max', 'restored p50', 'max', 'failed req (max)', 'broken conns', 'release->claim max', 'dual (ms)'];
  const rows: string[][] = [header];
  for (const mode of DRILL_MODES) {
    const rs = results.filter((r) => r.mode === mode);
    if (rs.length === 0) continue;
    const ns = rs.map((r) => r.noServiceMs);
    const ra = rs.map((r) => r.restoredAfterMs);
    rows.push([
      mode, String(rs.length), `${rs.filter((r) => r.moved).length}/${rs.length}`,
      `${percentile(ns, 50)} ms`, `${percentile(ns, 99)} ms`, `${Math.max(...ns)} ms`,
      `${percentile(ra, 50)} ms`, `${Math.max(...ra)} ms`,
      `${sum(rs.map((r) => r.failedRequests))} (${Math.max(...rs.map((r) => r.failedRequests))})`,
      `${sum(rs.map((r) => r.brokenConnections))}/${sum(rs.map((r) => r.streams))}`,
      gapMax(rs),
      `${sum(rs.map((r) => r.dualOwnership))} (${sum(rs.map((r) => r.dualOwnershipMs)).toFixed(3)})`,
    ]);
  }
  const widths = header.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')).join('\n') + '\n';
}

function gapMax(rs: readonly DrillResult[]): string {
  const gaps = rs.map((r) => r.releaseToClaimMs).filter((g): g is number => g !== null);
  return gaps.length === 0 ? '-' : `${Math.max(...gaps).toFixed(3)} ms`;
}

function sum(xs: readonly number[]): number {
  return xs.reduce((a, b) => a + b, 0);
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

