import { DIRECTOR_NAMES, type ClusterTopology, type DirectorName } from './cluster-topology.js';
import type { BackgroundProcess } from './exec.js';
import { holdersOf, leaderOf, statuses, waitFor, waitSteady, type ClusterStatusView, type HaAdmin, type SteadyTarget } from './ha-lab.js';
import { spawnTestClient } from './processes.js';
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
 * - dualOwnership: holder samples (every `sampleIntervalMs`) in which both directors held the vip.
 * - moved / newLeader: whether leadership changed by the end of the observation.
 */

export type DrillMode = 'switchover' | 'kill-agent' | 'box-death' | 'etcd-partition' | 'peer-partition' | 'etcd-outage';
export const DRILL_MODES: readonly DrillMode[] = ['switchover', 'kill-agent', 'box-death', 'etcd-partition', 'peer-partition', 'etcd-outage'];

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
  readonly dualOwnership: number;
  /** First dual-ownership sample relative to the failure, null if none. */
  readonly firstDualMs: number | null;
  /** From the last holder sample before the failure, every change of who holds the vip. */
  readonly holderChanges: readonly HolderChange[];
  /** Holder samples taken (to show the sampler ran). */
  readonly holderSamples: number;
  /** Whether any director's last transition (role, time) in the group changed during the observation. */
  readonly transitionsChanged: boolean;
  /** How long the restore and the steady wait took (0 without restore). */
  readonly steadyAfterMs: number;
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
    sampler.stop();
    await Promise.all([load.stop(), streams?.stop()]);
    await undo().catch(() => undefined);
    throw e;
  }

  // ---- results ----
  await sampler.stop();
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
  const result: DrillResult = {
    mode, failedAt, injectMs, oldLeader, newLeader, moved: newLeader !== null && newLeader !== oldLeader, worstCaseTakeoverMs,
    ...m,
    streams: o.streams,
    brokenConnections: streamResult ? streamResult.broken : o.streams,
    streamErrors: streamResult ? streamResult.perConnection.map((c) => c.error).filter((x): x is string => x !== null) : ['no stream report'],
    dualOwnership: sampler.dual,
    firstDualMs: sampler.firstDualAt === null ? null : sampler.firstDualAt - failedAt,
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

// ---- who holds the vip ----------------------------------------------------------------------------

/** Samples both directors for the vip every intervalMs (bounded in time and count) until stopped. */
class HolderSampler {
  dual = 0;
  firstDualAt: number | null = null;
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
      if (holders.length > 1) {
        this.dual++;
        this.firstDualAt ??= t;
      }
      if (holders.join() !== last) {
        last = holders.join();
        this.changes.push({ at: t, holders });
      }
      await delay(Math.max(0, t + this.intervalMs - Date.now()));
    }
  }
}

// ---- reporting --------------------------------------------------------------------------------------

/** One line about one drill. */
export function summary(r: DrillResult): string {
  const move = r.moved ? `${r.oldLeader} -> ${r.newLeader}` : `stayed on ${r.newLeader ?? '(none)'}`;
  return `${move}; no service ${r.noServiceMs} ms (restored after ${r.restoredAfterMs} ms${r.recovered ? '' : ', NOT recovered'}), `
    + `${r.failedRequests}/${r.requests} requests failed, ${r.brokenConnections}/${r.streams} streams broken, dual ownership ${r.dualOwnership}`;
}

function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** A table per mode over repeated drills: p50/p99/max of the no-service time and the other figures. */
export function formatDrill(results: readonly DrillResult[]): string {
  const header = ['mode', 'n', 'moved', 'noService p50', 'p99', 'max', 'restored p50', 'max', 'failed req (max)', 'broken conns', 'dual'];
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
      String(sum(rs.map((r) => r.dualOwnership))),
    ]);
  }
  const widths = header.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')).join('\n') + '\n';
}

function sum(xs: readonly number[]): number {
  return xs.reduce((a, b) => a + b, 0);
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

