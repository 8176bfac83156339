import { randomInt } from 'node:crypto';
import { DRILL_SCENARIOS, DRILL_PAUSE_MS, PAUSE_DRILL_SCENARIOS, type DrillResultWord, type DrillScenario } from '@lbd/config';
import { BusyLoops } from './busy-loops.js';
import { CLUSTER, DIRECTOR_NAMES, type ClusterTopology, type DirectorName } from './cluster-topology.js';
import { runCommand, type BackgroundProcess } from './exec.js';
import { holdersOf, leaderOf, statuses, waitFor, waitSteady, type ClusterStatusView, type HaAdmin, type SteadyTarget } from './ha-lab.js';
import { spawnTestClient } from './processes.js';
import type { Topology } from './netns.js';
import type { HttpPacedResult, ReadyReport, StreamResult } from './testclient.js';
import { ArpProbe, VipCapture, dualFigures, sentFigures, type SentFigures, type VipCaptureResult } from './vip-capture.js';

/**
 * Failure drills on a running active/standby cluster (an HaLab in tests and benchmarks, the lab's
 * namespaces in `deploy/lab/lab drill`): while a client load runs through the vip, one failure is caused
 * (on the current leader; pause-standby: on the standby), measured, and undone. The scenarios are
 * @lbd/config's DRILL_SCENARIOS.
 *
 * Forwarding and answering, the measure a drill passes or fails on (VipCapture, on the router's front
 * interface; times relative to `failedAt`, the instant the failure was caused):
 * - forwarded / arpSent: per director, the IPv4 packets from the vip (replies to clients, after de-NAT)
 *   and the ARP packets naming the vip as sender (answers, announcements) that reached the router after
 *   the failure, told apart by source MAC: count, first and last.
 * - dualForwarding / dualForwardingMs: packets the old leader still forwarded at or after the other
 *   director's first, and the span from that first to the old leader's last (0 and 0: a clean handover,
 *   or no move). dualAnswering / dualAnsweringMs: the same for ARP. A broadcast ARP request for the vip
 *   every `arpProbeIntervalMs` from the router (ArpProbe) makes answering observable at all.
 * - leaderChanges: how often the group's leader changed during the observation (its term, before and
 *   after); `flapped` when it changed more than once, unless the second change was the preemption back
 *   that the group's preempt delay schedules (see leaderFigures).
 *
 * Service:
 * - noServiceMs: the longest stretch, ending at or after the failure, during which every HTTP request the
 *   client *started* failed: the time between the starts of the two successful requests either side of
 *   it. A request is a fresh TCP connection every `requestIntervalMs` (5 ms) with a `requestTimeoutMs`
 *   (500 ms) deadline, below the 1 s SYN retransmission, so a success means the first SYN was served.
 *   With nothing wrong it is about one request interval; it is the time until the end of the load when
 *   service never came back (`recovered` false).
 * - restoredAfterMs: from the failure to the start of the successful request that ended that stretch,
 *   i.e. when service was back (judged on outageEndMs: the end of the last real outage that began within
 *   the worst-case takeover + SERVICE_BACK_SLACK_MS, not a later hiccup). For failures the old leader keeps serving through (an etcd cut is only
 *   fenced after the safety window) this is larger than noServiceMs by the time it kept serving. With no
 *   real outage (a stretch under ten request intervals) it is the first success after the failure.
 * - failedRequests: every failed request of the drill (baseline included: those should be none);
 *   `failedStartsMs` where they started; `inFlightAtFailure` how many were open when the failure came.
 * - brokenConnections: of `streams` long-lived connections (lbd-testclient stream to vip:9000), those that
 *   broke or stalled. Reported, not judged here: a drill judges forwarding and service, while whether
 *   connection sync keeps streams whole across a move is test/src/connsync.privileged.test.ts's to judge
 *   (the HA test asserts none break where nothing moves).
 * - brokenDrStreams: of `drStreams` long-lived connections through the dr vip (`drTarget`, the lab's
 *   198.18.0.13:9000), those that broke or stalled. Judged: a director keeps nothing of a dr flow and every
 *   director hashes it to the same real server, so a dr stream needs only that somebody serves the vip;
 *   one that breaks in any drill is a failure of the move, with or without connection sync.
 *
 * Address holding (OwnershipWatch: the kernel's address and link events; for comparison, not judged: a
 * director frozen under a kernel lease keeps the address but neither forwards nor answers):
 * - dualHolding / dualHoldingMs / dualHoldingIntervals: whether, how long and when both directors held the
 *   vip address (on eth0, eth0 up with carrier); exact to the order the kernel made the changes, durations
 *   to the µs. dualHolding counts the intervals.
 * - releasedAtMs / claimedAtMs / releaseToClaimMs: when the old leader stopped holding the vip, when the
 *   other director started, and the gap between them (negative: an overlap).
 *
 * The drill rejects when a measure could not be taken exactly (the capture dropped packets, the monitor
 * lost events): a guess is not a result.
 */

/** What a drill acts on: an HaLab, or the lab's running processes (deploy/lab/lab drill). */
export interface DrillTarget extends SteadyTarget {
  /** Signals the director's agent and waits for it to exit (SIGKILL after a bound). */
  killAgent(dir: DirectorName, signal?: NodeJS.Signals): Promise<void>;
  /** Signals the director's agent and returns at once (SIGSTOP, SIGCONT): no-op when it does not run. */
  signalAgent(dir: DirectorName, signal: NodeJS.Signals): Promise<void>;
  startAgent(dir: DirectorName): Promise<void>;
  pauseEtcd(): Promise<void>;
  resumeEtcd(): Promise<void>;
}

export interface DrillOptions {
  /** Load before the failure (default 500 ms). */
  readonly baselineMs?: number;
  /**
   * Watching after the failure (default: worst-case takeover + 1500 ms; etcd-outage: the outage + 1500 ms;
   * pause scenarios: the pause + worst-case takeover + 2000 ms, long enough to see a flap after the thaw).
   */
  readonly observeMs?: number;
  /** How long etcd-outage pauses every member (default 3000 ms). */
  readonly etcdOutageMs?: number;
  /** How long pause-leader and pause-standby freeze the agent (default 3000 ms). */
  readonly pauseMs?: number;
  /** Busy loops in the root namespace, one per core asked for, from the baseline to the end of the observation (default 0). */
  readonly busyCores?: number;
  /** A broadcast ARP request for the vip from the router every this many ms (default 250; 0: none). */
  readonly arpProbeIntervalMs?: number;
  readonly requestIntervalMs?: number;
  readonly requestTimeoutMs?: number;
  /** Long-lived stream connections (default 10; 0 for none). */
  readonly streams?: number;
  /** Long-lived stream connections through a dr vip (default 10; 0 for none): the lab's config serves one. */
  readonly drStreams?: number;
  /** Where they go (default the lab's dr vip, CLUSTER.drVip, port 9000: lbd-testserver's stream port). */
  readonly drTarget?: string;
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
  readonly scenario: DrillScenario;
  /** Pause scenarios: how long the agent was frozen (asked for); null for the other scenarios. */
  readonly pauseMs: number | null;
  /** Pause scenarios: when the agent was thawed, relative to the failure; null for the other scenarios. */
  readonly thawedAtMs: number | null;
  /** Busy loops that ran beside the drill (one per core). */
  readonly busyCores: number;
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
  /**
   * The end of the last stretch without service (ten request intervals or more) that began within the
   * worst-case takeover + SERVICE_BACK_SLACK_MS, relative to the failure; null when there was none. What
   * "service back in time" is judged on: the longest stretch (restoredAfterMs) can be a later hiccup of a
   * loaded machine, long after service was back.
   */
  readonly outageEndMs: number | null;
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
  /** Streams through the dr vip (0: none ran), those of them that broke or stalled, and their errors. */
  readonly drStreams: number;
  readonly brokenDrStreams: number;
  readonly drStreamErrors: readonly string[];
  /** Per director, IPv4 packets from the vip that reached the router after the failure. */
  readonly forwarded: Readonly<Record<DirectorName, SentFigures>>;
  /** Per director, ARP packets with the vip as sender that reached the router after the failure. */
  readonly arpSent: Readonly<Record<DirectorName, SentFigures>>;
  /** Packets the old leader forwarded at or after the other director's first (0: never both). */
  readonly dualForwarding: number;
  /** From the other director's first forwarded packet to the old leader's last of those (ms; 0 when none). */
  readonly dualForwardingMs: number;
  /** The same for ARP packets: the old leader still answering once the other had started to. */
  readonly dualAnswering: number;
  readonly dualAnsweringMs: number;
  /** Packets the capture saw in all (baseline included), and those from a MAC that is no director's. */
  readonly capturedPackets: number;
  readonly unattributedPackets: number;
  /** How often the group's leader changed during the observation (term after - term before); null if unknown. */
  readonly leaderChanges: number | null;
  /** The leader changed more than once, and not by the scheduled preemption back. */
  readonly flapped: boolean;
  /** Address holding: intervals in which both directors held the vip address (0: never), from kernel events. */
  readonly dualHolding: number;
  /** Their total length (ms, µs precision). */
  readonly dualHoldingMs: number;
  /** The intervals, relative to the failure (ms, µs precision). */
  readonly dualHoldingIntervals: readonly RelInterval[];
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
interface RelInterval {
  readonly startMs: number;
  readonly endMs: number;
}

const DEFAULTS = {
  baselineMs: 500, etcdOutageMs: 3000, pauseMs: DRILL_PAUSE_MS.default, busyCores: 0, arpProbeIntervalMs: 250,
  requestIntervalMs: 5, requestTimeoutMs: 500, streams: 10, drStreams: 10, drTarget: `${CLUSTER.drVip.ipv4}:9000`, sampleIntervalMs: 10,
};
/** Watching after a timed failure (etcd outage, agent pause) ends, or after the worst-case takeover. */
const OBSERVE_AFTER_MS = 1500;
/** After a thaw: a flap (a frozen agent acting on what it knew before the pause) shows within this. */
const OBSERVE_AFTER_THAW_MS = 2000;
/** Service must be back within the worst-case takeover plus this (announcements, a loaded machine). */
export const SERVICE_BACK_SLACK_MS = 1000;
/** Slack of the load client's own deadline beyond the drill's expected length. */
const LOAD_SLACK_MS = 30_000;
const STREAM_READY_MS = 10_000;
/** Bound on the wait for the standby's copy of the connections before a drill (a whole snapshot, loaded). */
const SYNC_CATCH_UP_MS = 60_000;
/** Bound on seeing the leader's first forwarded packet in the capture before the failure. */
const CAPTURE_SIGN_MS = 5000;

export async function runDrill(target: DrillTarget, scenario: DrillScenario, opts: DrillOptions = {}): Promise<DrillResult> {
  if (!DRILL_SCENARIOS.includes(scenario)) throw new Error(`drill scenario must be one of ${DRILL_SCENARIOS.join(', ')} (got ${JSON.stringify(scenario)})`);
  const o = { ...DEFAULTS, ...opts };
  const log = opts.log ?? ((): void => undefined);
  const api = (d: DirectorName): HaAdmin => target.api(d);
  const group = target.group;
  const topology = target.cluster.topology;
  const pause = PAUSE_DRILL_SCENARIOS.includes(scenario);

  // A drill starts from a steady cluster: a leader no registered peer would preempt, and, where connection
  // sync is on, its copy to its peer caught up. After a box death the revived director registers, takes a
  // whole snapshot (seconds of work with the drills' tens of thousands of connections) and then takes the
  // group back (after-sync); a failure meanwhile breaks connections sync keeps once it has, or fails a
  // leader that is about to hand over: neither is what a drill measures.
  const oldLeader = await waitFor('a steady leader, its copy of the connections caught up', SYNC_CATCH_UP_MS, async () => {
    const leader = await leaderOf(api, group);
    if (leader === undefined) return undefined;
    const st = await api(leader).getClusterStatus({ timeoutMs: 2000 }).catch(() => null);
    if (st === null) return undefined;
    const prio = (d: string): number | undefined => st.directors.find((x) => x.id === d)?.priorities[group];
    const preempt = st.groups.find((g) => g.name === group)?.preempt ?? '';
    if (preempt !== 'never' && DIRECTOR_NAMES.some((d) => d !== leader && (prio(d) === undefined || prio(d)! > (prio(leader) ?? 0)))) return undefined;
    const sync = st.sync;
    return sync === undefined || sync === null || !sync.enabled || sync.peers.some((p) => p.direction === 'to' && p.caughtUp) ? leader : undefined;
  }, 50);
  const before = await statuses(target);
  const status = before.get(oldLeader) ?? [...before.values()][0];
  const worstCaseTakeoverMs = status?.worstCaseTakeoverMs ?? 0;
  const other = DIRECTOR_NAMES.find((d) => d !== oldLeader)!;
  // A timed failure (etcd paused, an agent frozen) is undone by the drill itself after heldMs.
  const heldMs = scenario === 'etcd-outage' ? o.etcdOutageMs : pause ? o.pauseMs : null;
  const observeMs = opts.observeMs ?? (scenario === 'etcd-outage' ? o.etcdOutageMs + OBSERVE_AFTER_MS
    : pause ? o.pauseMs + worstCaseTakeoverMs + OBSERVE_AFTER_THAW_MS
    : worstCaseTakeoverMs + OBSERVE_AFTER_MS);
  const expectedMs = o.baselineMs + observeMs + STREAM_READY_MS;
  const paused = scenario === 'pause-standby' ? other : oldLeader;
  const macs = await Promise.all(DIRECTOR_NAMES.map(async (d) => ({ name: d, mac: await topology.mac(d, CLUSTER.interfaces.front) })));

  // ---- load, sampler, watch, capture ----
  let busy: BusyLoops | undefined;
  let load: BackgroundProcess | undefined;
  let streams: BackgroundProcess | undefined;
  let drStreams: BackgroundProcess | undefined;
  const sampler = new HolderSampler(target.cluster, target.vip, o.sampleIntervalMs, expectedMs + LOAD_SLACK_MS);
  let watch: OwnershipWatch | undefined;
  let capture: VipCapture | undefined;
  let probe: ArpProbe | undefined;
  let failedAt = 0;
  let injectMs = 0;
  let thawedAt: number | null = null;
  let undone = false;
  const undo = async (): Promise<void> => {
    if (undone) return;
    undone = true;
    await restoreFailure(target, scenario, oldLeader, paused);
  };
  /** Ends what runs beside the drill (idempotent), whatever happened. */
  const stopAside = async (): Promise<void> => {
    await Promise.all([sampler.stop(), probe?.stop(), busy?.stop()]);
  };
  try {
    load = spawnTestClient(topology, 'client', ['http-paced', '--url', `http://${target.vip}/`,
      '--interval-ms', String(o.requestIntervalMs), '--timeout-ms', String(o.requestTimeoutMs), '--duration-ms', String(expectedMs + LOAD_SLACK_MS),
      '--max-in-flight', '200', '--max-requests', String(Math.ceil((expectedMs + LOAD_SLACK_MS) / o.requestIntervalMs) + 10)], 'client:drill-load');
    await load.waitForJson((v) => 'started' in v, 10_000);
    const startStreams = async (to: string, n: number, what: string): Promise<BackgroundProcess> => {
      const p = spawnTestClient(topology, 'client', ['stream', '--target', to, '--connections', String(n),
        '--duration-ms', String(expectedMs + LOAD_SLACK_MS), '--stall-ms', '2000'], `client:drill-${what}`);
      const ready = await p.waitForJson<ReadyReport>((v) => 'ready' in v, STREAM_READY_MS);
      if (!ready.ready) log(`drill: only ${ready.started} of ${ready.connections} ${what} started`);
      return p;
    };
    if (o.streams > 0) streams = await startStreams(`${target.vip}:9000`, o.streams, 'streams');
    if (o.drStreams > 0) drStreams = await startStreams(o.drTarget, o.drStreams, 'dr streams');
    watch = await OwnershipWatch.start(topology, CLUSTER.hosts.frontSwitch, target.vip, DIRECTOR_NAMES.map((d) => ({
      // Topology.attach names a host's port on a switch p-<host>.
      name: d, host: d, ifname: CLUSTER.interfaces.front, port: `p-${d}`,
    })));
    const router = CLUSTER.router;
    capture = await VipCapture.start(topology, router.host, router.frontIf, target.vip, macs);
    if (o.arpProbeIntervalMs > 0) probe = ArpProbe.start(topology, router.host, router.frontIf, router.frontIpv4, target.vip, o.arpProbeIntervalMs, expectedMs + LOAD_SLACK_MS);
    sampler.start();
    // The busy loops start once the drill's own processes run (a starved start-up is not what is measured)
    // and cover the baseline, the failure and the observation.
    if (o.busyCores > 0) busy = BusyLoops.start(expectedMs + LOAD_SLACK_MS, o.busyCores);
    await delay(o.baselineMs);
    // The capture attributes the leader's replies before anything fails: it runs, and the MACs are right.
    await capture.waitForPacket((p) => p.kind === 'forwarded' && p.from === oldLeader, CAPTURE_SIGN_MS).catch((e: unknown) => {
      const seen = capture!.packets();
      const from = (who: string | null): number => seen.filter((p) => p.from === who).length;
      throw new Error(`drill ${scenario}: the capture on the router saw no packet forwarded by ${oldLeader} before the failure `
        + `(${DIRECTOR_NAMES.map((d) => `${from(d)} from ${d}`).join(', ')}, ${from(null)} from other MACs): ${(e as Error).message}`);
    });

    // ---- the failure ----
    log(`drill ${scenario}: failing ${paused}${pause ? ` for ${o.pauseMs} ms` : ''}`);
    failedAt = Date.now();
    switch (scenario) {
      case 'switchover': await api(oldLeader).failover(group, '', { timeoutMs: 5000 }); break;
      case 'kill-agent': await target.killAgent(oldLeader, 'SIGKILL'); break;
      // The failure is the instant the box stopped (its agent and its front link at once), not the start of
      // the harness's work to stop it.
      case 'box-death': failedAt = await target.cluster.killBox(oldLeader); break;
      case 'etcd-partition': await target.cluster.cut(oldLeader, 'etcd'); break;
      case 'peer-partition': await target.cluster.cut(oldLeader, 'peer'); break;
      case 'etcd-outage': await target.pauseEtcd(); break;
      case 'pause-leader': case 'pause-standby': await target.signalAgent(paused, 'SIGSTOP'); break;
    }
    injectMs = Date.now() - failedAt;
    if (heldMs !== null) {
      await delay(Math.max(0, failedAt + heldMs - Date.now()));
      if (scenario === 'etcd-outage') await target.resumeEtcd();
      else {
        await target.signalAgent(paused, 'SIGCONT');
        thawedAt = Date.now();
      }
    }
    await delay(Math.max(0, failedAt + observeMs - Date.now()));
  } catch (e) {
    await Promise.all([stopAside(), watch?.abort(), capture?.abort(), load?.stop(), streams?.stop(), drStreams?.stop()]);
    await undo().catch(() => undefined);
    throw e;
  }

  // ---- results ----
  await stopAside();
  // The watch and the capture are stopped and reaped here whatever happens; a timeline either could not
  // make exact fails the drill, after the restore below, rather than reporting a guess.
  const [ownership, captured] = await Promise.allSettled([watch.stop(), capture.stop()]);
  let newLeader: DirectorName | null;
  let after: Map<DirectorName, ClusterStatusView>;
  let m: ReturnType<typeof measureLoad>;
  let streamResult: StreamResult | undefined;
  let drStreamResult: StreamResult | undefined;
  try {
    // Asked until the directors agree (bounded): on a busy machine a status call can time out, or the old
    // leader still be between its fence and its release, and a single look would report no leader.
    newLeader = (await waitFor('the leader after the drill', 10_000, () => leaderOf(api, group)).catch(() => undefined)) ?? null;
    after = await statuses(target);
    await Promise.all([load.stop(3000), streams?.stop(3000), drStreams?.stop(3000)]);
    m = measureLoad(parseLoad(load), failedAt, o.requestIntervalMs, worstCaseTakeoverMs + SERVICE_BACK_SLACK_MS);
    streamResult = streams?.lastJson<StreamResult>();
    drStreamResult = drStreams?.lastJson<StreamResult>();
  } catch (e) {
    await undo().catch(() => undefined);
    throw e;
  }

  // ---- restore ----
  const restoreStart = Date.now();
  if (opts.restore !== false) {
    await undo();
    await waitSteady(target, opts.steadyTimeoutMs);
  }
  if (ownership.status === 'rejected') throw new Error(`drill ${scenario}: cannot tell who held the vip: ${(ownership.reason as Error)?.message ?? String(ownership.reason)}`);
  if (captured.status === 'rejected') throw new Error(`drill ${scenario}: cannot tell who forwarded and answered for the vip: ${(captured.reason as Error)?.message ?? String(captured.reason)}`);
  const holding = holdingFigures(ownership.value, failedAt, oldLeader, other);
  const result: DrillResult = {
    scenario, pauseMs: pause ? o.pauseMs : null, thawedAtMs: thawedAt === null ? null : thawedAt - failedAt, busyCores: busy?.count ?? 0,
    failedAt, injectMs, oldLeader, newLeader, moved: newLeader !== null && newLeader !== oldLeader, worstCaseTakeoverMs,
    ...m,
    streams: o.streams,
    brokenConnections: streamResult ? streamResult.broken : o.streams,
    streamErrors: streamErrorsOf(streamResult),
    drStreams: o.drStreams,
    brokenDrStreams: drStreamResult ? drStreamResult.broken : o.drStreams,
    drStreamErrors: o.drStreams === 0 ? [] : streamErrorsOf(drStreamResult),
    ...forwardingFigures(captured.value, failedAt, oldLeader, other),
    ...leaderFigures(before, after, group, oldLeader, newLeader, failedAt,
      preemptFromMs(holding.claimedAtMs, paused === oldLeader && thawedAt !== null ? thawedAt - failedAt : null)),
    ...holding,
    skewedDualSamples: sampler.dual,
    holderChanges: sampler.changesFrom(failedAt),
    holderSamples: sampler.samples,
    transitionsChanged: transitionsDiffer(before, after, group, other, oldLeader),
    steadyAfterMs: opts.restore === false ? 0 : Date.now() - restoreStart,
  };
  log(`drill ${scenario}: ${summary(result)}`);
  return result;
}

function streamErrorsOf(r: StreamResult | undefined): string[] {
  return r ? r.perConnection.map((c) => c.error).filter((x): x is string => x !== null) : ['no stream report'];
}

/** Undoes what `scenario` did to `leader` (pause scenarios: to `paused`). Idempotent. */
async function restoreFailure(target: DrillTarget, scenario: DrillScenario, leader: DirectorName, paused: DirectorName): Promise<void> {
  switch (scenario) {
    case 'kill-agent': await target.startAgent(leader); break;
    case 'box-death':
      await target.cluster.reviveBox(leader);
      await target.startAgent(leader);
      break;
    case 'etcd-partition': await target.cluster.restore(leader, 'etcd'); break;
    case 'peer-partition': await target.cluster.restore(leader, 'peer'); break;
    case 'etcd-outage': await target.resumeEtcd(); break;
    case 'pause-leader': case 'pause-standby': await target.signalAgent(paused, 'SIGCONT'); break;
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

/** Forwarding and answering after the failure, from the router's capture. */
function forwardingFigures(c: VipCaptureResult, failedAt: number, oldLeader: DirectorName, other: DirectorName): Pick<DrillResult,
  'forwarded' | 'arpSent' | 'dualForwarding' | 'dualForwardingMs' | 'dualAnswering' | 'dualAnsweringMs' | 'capturedPackets' | 'unattributedPackets'> {
  const fromUs = failedAt * 1000;
  const per = (kind: 'forwarded' | 'arp'): Record<DirectorName, SentFigures> =>
    ({ dir1: sentFigures(c.packets, kind, 'dir1', fromUs), dir2: sentFigures(c.packets, kind, 'dir2', fromUs) });
  const fwd = dualFigures(c.packets, 'forwarded', oldLeader, other, fromUs);
  const arp = dualFigures(c.packets, 'arp', oldLeader, other, fromUs);
  return {
    forwarded: per('forwarded'), arpSent: per('arp'),
    dualForwarding: fwd.packets, dualForwardingMs: fwd.spanMs, dualAnswering: arp.packets, dualAnsweringMs: arp.spanMs,
    capturedPackets: c.packets.length, unattributedPackets: c.packets.filter((p) => p.from === null).length,
  };
}

/**
 * From when (relative to the failure) the old leader can have been a standby waiting out its preempt
 * delay: once the other director claimed the vip, and, if the old leader was the one frozen, not before
 * its thaw (a frozen agent counts no delay). Null when the other director never claimed the vip.
 */
function preemptFromMs(claimedAtMs: number | null, thawedAtMs: number | null): number | null {
  return claimedAtMs === null ? null : Math.max(claimedAtMs, thawedAtMs ?? claimedAtMs);
}

/**
 * Leader changes during the observation from the group's term (every takeover and handover raises it by
 * one), the highest any answering director reports. A second change is the scheduled preemption back,
 * not a flap, when it returned the group to the old leader at least the group's preempt delay after
 * `preemptFromMs` (relative to the failure, see preemptFromMs): a takeover back sooner is a flap.
 */
export function leaderFigures(before: ReadonlyMap<DirectorName, ClusterStatusView>, after: ReadonlyMap<DirectorName, ClusterStatusView>, group: string,
  oldLeader: DirectorName, newLeader: DirectorName | null, failedAt: number, preemptFromMs: number | null): Pick<DrillResult, 'leaderChanges' | 'flapped'> {
  const groupOf = (m: ReadonlyMap<DirectorName, ClusterStatusView>) => [...m.values()].map((s) => s.groups.find((g) => g.name === group)).filter((g) => g !== undefined);
  const term = (m: ReadonlyMap<DirectorName, ClusterStatusView>): number | null => {
    const terms = groupOf(m).map((g) => Number(g.term)).filter((t) => Number.isFinite(t));
    return terms.length === 0 ? null : Math.max(...terms);
  };
  const [t0, t1] = [term(before), term(after)];
  if (t0 === null || t1 === null) return { leaderChanges: null, flapped: false };
  const changes = t1 - t0;
  const g = groupOf(after).find((x) => x.leader === oldLeader);
  const scheduledBack = changes === 2 && newLeader === oldLeader && g !== undefined && g.preempt !== 'never' && preemptFromMs !== null
    && g.sinceUnixMs - (failedAt + preemptFromMs) >= (g.preemptDelayMs ?? 0);
  return { leaderChanges: changes, flapped: changes > 1 && !scheduledBack };
}

/** The address-holding figures from the ownership timeline, relative to the failure. */
function holdingFigures(t: OwnershipTimeline, failedAt: number, oldLeader: DirectorName, other: DirectorName): Pick<DrillResult,
  'dualHolding' | 'dualHoldingMs' | 'dualHoldingIntervals' | 'holdIntervals' | 'releasedAtMs' | 'claimedAtMs' | 'releaseToClaimMs'> {
  const failedUs = failedAt * 1000;
  const rel = (us: number): number => (us - failedUs) / 1000;
  const relAll = (xs: readonly UsInterval[] = []): RelInterval[] => xs.map((x) => ({ startMs: rel(x.startUs), endMs: rel(x.endUs) }));
  const old = t.holds[oldLeader] ?? [];
  const held = old.find((x) => x.startUs <= failedUs && x.endUs >= failedUs);
  const released = held !== undefined && held.endUs < t.endUs ? held.endUs : null;
  const claim = (t.holds[other] ?? []).find((x) => x.startUs >= failedUs);
  const before = claim === undefined ? undefined : old.filter((x) => x.startUs < claim.startUs).at(-1);
  return {
    dualHolding: t.dual.length, dualHoldingMs: t.dualMs, dualHoldingIntervals: relAll(t.dual),
    holdIntervals: { dir1: relAll(t.holds.dir1), dir2: relAll(t.holds.dir2) },
    releasedAtMs: released === null ? null : rel(released),
    claimedAtMs: claim === undefined ? null : rel(claim.startUs),
    releaseToClaimMs: claim === undefined || before === undefined ? null : (claim.startUs - before.endUs) / 1000,
  };
}

// ---- the client load (lbd-testclient http-paced) ------------------------------------------------

/** [start (unix ms), duration ms, ok, error]. */
export type RequestRecord = readonly [start: number, durationMs: number, ok: boolean, error: string];

function parseLoad(load: BackgroundProcess): RequestRecord[] {
  const report = load.lastJson<Partial<HttpPacedResult>>();
  if (report?.t0 === undefined || report.records === undefined) throw new Error(`drill load: no report (stderr: ${load.stderr.slice(-500)})`);
  return report.records.map(([s, d, ok, err]) => [report.t0! + s, d, ok === 1, err] as const).sort((a, b) => a[0] - b[0]);
}

/**
 * The load's figures around the failure at `failedAt`. A stretch without a successful start counts as lost
 * service only when a request started in it and failed: a stretch in which the client started nothing is
 * the client's own stall (a loaded box, the killed box's teardown), not the vip's.
 */
export function measureLoad(records: readonly RequestRecord[], failedAt: number, intervalMs: number, boundMs: number): Pick<DrillResult,
  'noServiceMs' | 'restoredAfterMs' | 'outageEndMs' | 'recovered' | 'requests' | 'failedRequests' | 'failedStartsMs' | 'inFlightAtFailure' | 'errors'> {
  const ok = records.filter((r) => r[2]).map((r) => r[0]);
  const failed = records.filter((r) => !r[2]);
  const lastStart = records.at(-1)?.[0] ?? failedAt;
  let noServiceMs = 0;
  let restoredAt = failedAt;
  let outageEnd: number | null = null;
  let recovered = true;
  const lastOkBefore = [...ok].reverse().find((s) => s < failedAt);
  const firstOkAfter = ok.find((s) => s >= failedAt);
  if (firstOkAfter === undefined) {
    recovered = false;
    noServiceMs = lastStart - (lastOkBefore ?? failedAt);
    restoredAt = lastStart;
    outageEnd = lastStart;
  } else {
    const failedStarts = failed.map((r) => r[0]);
    // Gaps between consecutive successful starts that end at or after the failure, with a failed start inside.
    for (let i = 0; i < ok.length; i++) {
      if (ok[i]! < failedAt) continue;
      const prev = i > 0 ? ok[i - 1]! : failedAt;
      if (!failedStarts.some((f) => f > prev && f < ok[i]!)) continue;
      if (ok[i]! - prev > noServiceMs) {
        noServiceMs = ok[i]! - prev;
        restoredAt = ok[i]!;
      }
      // A real outage (ten request intervals or more) that began within the bound is the failure's.
      if (ok[i]! - prev >= intervalMs * 10 && prev < failedAt + boundMs) outageEnd = ok[i]!;
    }
    // No real outage (under ten request intervals): service was back with the first request after the failure.
    if (noServiceMs < intervalMs * 10) restoredAt = firstOkAfter;
  }
  const errors: Record<string, number> = {};
  for (const r of failed) errors[r[3]] = (errors[r[3]] ?? 0) + 1;
  return {
    noServiceMs, restoredAfterMs: restoredAt - failedAt, outageEndMs: outageEnd === null ? null : outageEnd - failedAt, recovered,
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
 * timeline and counts `skewedDualSamples` for comparison, never the address-holding figures, which come
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
interface UsInterval {
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
function ownershipTimeline(address: string, subjects: readonly OwnershipStart[], events: readonly MonitorEvent[],
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

/**
 * The wall clock in µs, as the kernel stamps the monitor's events (`ip -ts`: gettimeofday). Not
 * performance.timeOrigin + performance.now(): that is the monotonic clock from the process's start, which a
 * step of the wall clock since leaves behind (in one full suite every HA drill's events came about 1.4 s
 * before the window this clock gave, so no release or claim was seen, and a drill failed on it). Milliseconds are enough for the
 * window's bounds, which have a millisecond of slack each.
 */
function wallUs(): number {
  return Date.now() * 1000;
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

/** One reason a drill failed: a short code (the event log's `failedOn` field) and the words. */
interface DrillProblem {
  readonly code: 'dual-forwarding' | 'dual-answering' | 'no-service' | 'service-late' | 'dr-streams' | 'leader-unknown' | 'flap';
  readonly text: string;
}

function problemsOf(r: DrillResult): DrillProblem[] {
  const out: DrillProblem[] = [];
  const other = r.oldLeader === 'dir1' ? 'dir2' : 'dir1';
  if (r.dualForwarding > 0) {
    out.push({ code: 'dual-forwarding', text: `both directors forwarded for the vip: ${r.oldLeader} still ${r.dualForwarding} packets over ${r.dualForwardingMs.toFixed(1)} ms after ${other}'s first` });
  }
  if (r.dualAnswering > 0) {
    out.push({ code: 'dual-answering', text: `both directors answered ARP for the vip: ${r.oldLeader} still ${r.dualAnswering} ARP packets over ${r.dualAnsweringMs.toFixed(1)} ms after ${other}'s first` });
  }
  if (!r.recovered) out.push({ code: 'no-service', text: 'service did not come back' });
  else if (r.outageEndMs !== null && r.outageEndMs > r.worstCaseTakeoverMs + SERVICE_BACK_SLACK_MS) {
    out.push({ code: 'service-late', text: `service back after ${r.outageEndMs} ms, beyond the worst-case takeover ${r.worstCaseTakeoverMs} ms + ${SERVICE_BACK_SLACK_MS} ms` });
  }
  if (r.brokenDrStreams > 0) {
    out.push({ code: 'dr-streams', text: `${r.brokenDrStreams} of ${r.drStreams} streams through the dr vip broke (the first: ${r.drStreamErrors[0] ?? 'no error text'})` });
  }
  if (r.leaderChanges === null) out.push({ code: 'leader-unknown', text: 'no director reported the group\'s term: leader changes unknown' });
  else if (r.flapped) out.push({ code: 'flap', text: `the leader changed ${r.leaderChanges} times during the observation (a flap)` });
  return out;
}

/**
 * Why a drill failed, in words; empty when it passed. A drill passes on forwarding and answering: at no
 * instant did two directors forward or answer ARP for the vip, service was back within the worst-case
 * takeover plus SERVICE_BACK_SLACK_MS, no stream through the dr vip broke, and the leader did not flap. Address holding is not judged (a
 * frozen director under a kernel lease keeps the address, harmlessly).
 */
export function drillProblems(r: DrillResult): string[] {
  return problemsOf(r).map((p) => p.text);
}

/** A drill passes when drillProblems finds nothing. */
export function drillPassed(r: DrillResult): boolean {
  return drillProblems(r).length === 0;
}

/** `pause-leader 3 s`: the scenario, and the pause where there is one. */
export function drillLabel(r: Pick<DrillResult, 'scenario' | 'pauseMs'>): string {
  return r.pauseMs === null ? r.scenario : `${r.scenario} ${r.pauseMs % 1000 === 0 ? `${r.pauseMs / 1000} s` : `${r.pauseMs} ms`}`;
}

/** A drill's result as the agents' event log stores it (admin RecordDrill: a `drill` event). */
export function drillRecord(r: DrillResult): { scenario: string; result: DrillResultWord; reason: string; fields: Record<string, string> } {
  const problems = problemsOf(r);
  const fields: Record<string, string> = {
    failedAt: new Date(r.failedAt).toISOString(), oldLeader: r.oldLeader, newLeader: r.newLeader ?? '', moved: String(r.moved),
    noServiceMs: String(r.noServiceMs), restoredAfterMs: String(r.restoredAfterMs), recovered: String(r.recovered),
    requests: String(r.requests), failedRequests: String(r.failedRequests), streams: String(r.streams), brokenConnections: String(r.brokenConnections),
    ...(r.drStreams === 0 ? {} : { drStreams: String(r.drStreams), brokenDrStreams: String(r.brokenDrStreams) }),
    dualForwarding: String(r.dualForwarding), dualForwardingMs: r.dualForwardingMs.toFixed(3),
    dualAnswering: String(r.dualAnswering), dualAnsweringMs: r.dualAnsweringMs.toFixed(3),
    leaderChanges: r.leaderChanges === null ? '' : String(r.leaderChanges),
    dualHolding: String(r.dualHolding), dualHoldingMs: r.dualHoldingMs.toFixed(3), worstCaseTakeoverMs: String(r.worstCaseTakeoverMs),
    releaseToClaimMs: r.releaseToClaimMs === null ? '' : r.releaseToClaimMs.toFixed(3),
    ...(r.pauseMs === null ? {} : { pauseMs: String(r.pauseMs) }),
    ...(r.busyCores === 0 ? {} : { busyCores: String(r.busyCores) }),
    // The event log bounds a field's length: the codes here, the figures in the other fields and the reason.
    ...(problems.length === 0 ? {} : { failedOn: problems.map((p) => p.code).join(',') }),
  };
  // A failed drill's reason starts with why it failed (the log bounds a reason at 2000 characters: ample).
  const reason = problems.length === 0 ? summary(r) : `${problems.map((p) => p.text).join('; ')}. ${summary(r)}`;
  return { scenario: r.scenario, result: problems.length === 0 ? 'pass' : 'fail', reason, fields };
}

/** One line about one drill. */
export function summary(r: DrillResult): string {
  const move = r.moved ? `${r.oldLeader} -> ${r.newLeader}` : `stayed on ${r.newLeader ?? '(none)'}`;
  const f = r.forwarded;
  const a = r.arpSent;
  return `${move}${r.pauseMs === null ? '' : ` (paused ${r.pauseMs} ms)`}${r.busyCores > 0 ? ` [${r.busyCores} busy cores]` : ''}; `
    + `no service ${r.noServiceMs} ms (restored after ${r.restoredAfterMs} ms${r.recovered ? '' : ', NOT recovered'}), `
    + `${r.failedRequests}/${r.requests} requests failed, ${r.brokenConnections}/${r.streams} streams broken`
    + `${r.streamErrors.length === 0 ? '' : ` (the first: ${r.streamErrors[0]})`}, `
    + (r.drStreams === 0 ? '' : `${r.brokenDrStreams}/${r.drStreams} dr streams broken${r.drStreamErrors.length === 0 ? '' : ` (the first: ${r.drStreamErrors[0]})`}, `)
    + `dual forwarding ${r.dualForwarding} (${r.dualForwardingMs.toFixed(1)} ms), dual ARP ${r.dualAnswering} (${r.dualAnsweringMs.toFixed(1)} ms), `
    + `after the failure forwarded dir1 ${f.dir1.packets} dir2 ${f.dir2.packets}, ARP dir1 ${a.dir1.packets} dir2 ${a.dir2.packets}, `
    + `leader changes ${r.leaderChanges ?? '?'}${r.flapped ? ' (FLAP)' : ''}; `
    + `address holding: dual ${r.dualHolding} (${r.dualHoldingMs.toFixed(3)} ms), `
    + `release->claim ${r.releaseToClaimMs === null ? 'none' : `${r.releaseToClaimMs.toFixed(3)} ms`}`
    + (r.releasedAtMs === null ? '' : ` (released at +${r.releasedAtMs.toFixed(3)} ms)`);
}

function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/**
 * A table per drill (scenario, and pause) over repeated drills: p50/p99/max of the no-service time, the other
 * figures, dual forwarding and dual ARP answering (packets, and the longest span), address holding.
 */
export function formatDrill(results: readonly DrillResult[]): string {
  const header = ['drill', 'n', 'pass', 'moved', 'noService p50', 'p99', 'max', 'restored p50', 'max', 'failed req (max)', 'broken conns', 'broken dr',
    'fwd dual', 'fwd dual ms', 'arp dual', 'arp dual ms', 'flaps', 'holding dual (ms)', 'release->claim max'];
  const rows: string[][] = [header];
  const labels = [...new Set(results.map(drillLabel))].sort((x, y) => order(x) - order(y) || x.localeCompare(y, 'en', { numeric: true }));
  for (const label of labels) {
    const rs = results.filter((r) => drillLabel(r) === label);
    const ns = rs.map((r) => r.noServiceMs);
    const ra = rs.map((r) => r.restoredAfterMs);
    rows.push([
      label, String(rs.length), `${rs.filter(drillPassed).length}/${rs.length}`, `${rs.filter((r) => r.moved).length}/${rs.length}`,
      `${percentile(ns, 50)} ms`, `${percentile(ns, 99)} ms`, `${Math.max(...ns)} ms`,
      `${percentile(ra, 50)} ms`, `${Math.max(...ra)} ms`,
      `${sum(rs.map((r) => r.failedRequests))} (${Math.max(...rs.map((r) => r.failedRequests))})`,
      `${sum(rs.map((r) => r.brokenConnections))}/${sum(rs.map((r) => r.streams))}`,
      `${sum(rs.map((r) => r.brokenDrStreams))}/${sum(rs.map((r) => r.drStreams))}`,
      String(sum(rs.map((r) => r.dualForwarding))), Math.max(...rs.map((r) => r.dualForwardingMs)).toFixed(1),
      String(sum(rs.map((r) => r.dualAnswering))), Math.max(...rs.map((r) => r.dualAnsweringMs)).toFixed(1),
      String(rs.filter((r) => r.flapped).length),
      `${sum(rs.map((r) => r.dualHolding))} (${sum(rs.map((r) => r.dualHoldingMs)).toFixed(3)})`,
      gapMax(rs),
    ]);
  }
  const widths = header.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')).join('\n') + '\n';
}

/** Rows in DRILL_SCENARIOS order. */
function order(label: string): number {
  return DRILL_SCENARIOS.indexOf(label.split(' ')[0] as DrillScenario);
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
