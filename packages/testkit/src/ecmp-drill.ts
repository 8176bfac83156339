import { readFile } from 'node:fs/promises';
import type { HaAdmin } from './ha-lab.js';
import { waitFor } from './ha-lab.js';
import { ECMP_SPARE, ECMP_VIP, ecmpFabricAddress, type EcmpDirector, type EcmpLab, type RouterMode } from './ecmp-lab.js';
import { namespacePids } from './netns.js';
import { movedShare } from './resilient-mirror.js';
import { spawnTestClient } from './processes.js';
import type { HttpPacedResult } from './testclient.js';

/**
 * Failure drills on the ECMP tier's lab (`deploy/lab/lab drill --scenario ...` with `lab up --ecmp`, and
 * `pnpm bench ecmp`): a fault under load, what the clients felt, and whether the router moved any flow.
 *
 * The load: 200 long-lived TCP streams through the vip (sequence-checked; broken when one errors or gets no
 * line for 3 s) and a new connection every 5 ms. The faults:
 * - box-death: the victim's box dies (processes frozen, links down, killed); its slots' standbys take them;
 *   the box comes back and takes its slots back after their sync;
 * - gobgpd-kill: the victim's gobgpd is SIGKILLed; its session and paths go, the agent starts it again;
 * - bgp-reset: the router resets its BGP session with the victim (`clear bgp`);
 * - scale-out: ECMP_SPARE joins (its slots move to it after their bulk sync), then leaves.
 * A drill passes when no stream broke, the router's forwarding (route, or resilient buckets) never
 * changed, and every slot is led by the director that led it before.
 */
export const ECMP_DRILL_SCENARIOS = ['box-death', 'gobgpd-kill', 'bgp-reset', 'scale-out'] as const;
export type EcmpDrillScenario = (typeof ECMP_DRILL_SCENARIOS)[number];

export interface EcmpDrillResult {
  readonly scenario: EcmpDrillScenario;
  readonly router: RouterMode;
  readonly victim: EcmpDirector;
  /** Slots the victim led before (box-death), or took (scale-out). */
  readonly victimSlots: number;
  /** Unix ms when the fault was caused. */
  readonly failedAt: number;
  readonly streams: number;
  readonly brokenStreams: number;
  readonly streamErrors: readonly string[];
  readonly requests: number;
  readonly failedRequests: number;
  /**
   * The fault's outage for new connections: from the first failed one's start to the last one's, plus one
   * interval, among those that started before the repair began (0: none failed).
   */
  readonly noServiceMs: number;
  /** New connections that failed after the repair began (a revived box taking its slots back, a scale-in). */
  readonly failedDuringRepair: number;
  /** The router's forwarding (routerRoute) was the same at every look during the drill. */
  readonly routeUnchanged: boolean;
  readonly routeChanges: readonly string[];
  /** Resilient router: share of buckets whose next hop changed; null on hash-threshold. */
  readonly bucketsMoved: number | null;
  /** Every slot is led again by the director that led it before the drill. */
  readonly slotsBack: boolean;
  readonly durationMs: number;
}

const STREAMS = 200;
const STALL_MS = 3000;
const INTERVAL_MS = 5;
/** One drill's load: the fault, its repair and the slots' moves back fit well inside it. */
const LOAD_MS = 45_000;
const STEADY_MS = 120_000;
const SYNCED_MS = 120_000;

/**
 * Runs one drill on a steady lab. `victim`: the director the fault hits (default: the first that leads a
 * slot; scale-out always adds ECMP_SPARE, which needs a lab with `spare` and that director stopped).
 */
export async function runEcmpDrill<A extends HaAdmin>(lab: EcmpLab<A>, scenario: EcmpDrillScenario,
  opts: { victim?: EcmpDirector; router?: RouterMode; log?: (line: string) => void } = {}): Promise<EcmpDrillResult> {
  const log = opts.log ?? (() => undefined);
  const router = opts.router ?? 'hash-threshold';
  const t = lab.topology;
  const started = Date.now();
  await lab.routerMode(router);
  try {
    const owners = await lab.waitSteady(STEADY_MS);
    const victim = scenario === 'scale-out' ? ECMP_SPARE : (opts.victim ?? [...owners.values()][0]!);
    if (scenario === 'scale-out' && lab.running().includes(ECMP_SPARE)) throw new Error(`scale-out adds ${ECMP_SPARE}, which runs already (lab scale-in first)`);
    if (scenario !== 'scale-out' && !lab.running().includes(victim)) throw new Error(`${victim} is not running`);
    const route = await lab.routerRoute();
    const buckets = router === 'resilient' ? await lab.routerBuckets() : [];
    const routeChanges: string[] = [];
    const lookAtRoute = async (when: string): Promise<void> => {
      const now = await lab.routerRoute();
      if (now !== route) routeChanges.push(`${when}: ${now || 'no route'}`);
    };
    log(`${scenario} of ${victim} on the router's ${router} group: starting ${STREAMS} streams and a new connection every ${INTERVAL_MS} ms`);
    const streams = spawnTestClient(t, 'client', ['stream', '--target', `${ECMP_VIP}:9000`, '--connections', String(STREAMS), '--duration-ms', String(LOAD_MS), '--stall-ms', String(STALL_MS)]);
    const paced = spawnTestClient(t, 'client', ['http-paced', '--url', `http://${ECMP_VIP}/`, '--interval-ms', String(INTERVAL_MS), '--timeout-ms', '1000', '--duration-ms', String(LOAD_MS - 2 * STALL_MS)]);
    try {
      const ready = await streams.waitForJson<{ ready: boolean }>((v) => 'ready' in v, 20_000);
      if (!ready.ready) throw new Error(`not every stream started: ${JSON.stringify(ready)}`);
      await paced.waitForJson((v) => 'started' in v, 10_000);
      // After a box's return its slots move back, each move a snapshot of the slot's connections (the earlier
      // drills' closing ones too): on this 2-core lab that took over 30 s after the fifth of ten drills. Sync's
      // throughput is issue 15's; a drill waits for it, bounded.
      await lab.waitSynced(SYNCED_MS);
      const failedAt = Date.now();
      let repairAt = Number.POSITIVE_INFINITY;
      let victimSlots = [...owners.values()].filter((o) => o === victim).length;
      log(`${scenario} of ${victim}: the fault now`);
      switch (scenario) {
        case 'box-death': {
          const slots = [...owners].filter(([, d]) => d === victim).map(([s]) => s);
          await lab.killBox(victim);
          await waitFor(`the slots of ${victim} (${slots.join(', ')}) taken over`, 30_000, async () => {
            const now = await lab.slotOwners();
            return slots.every((s) => now.get(s) !== undefined && now.get(s) !== victim) ? true : undefined;
          }, 250);
          await lookAtRoute(`${victim}'s slots taken over`);
          repairAt = Date.now();
          await lab.reviveBox(victim);
          break;
        }
        case 'gobgpd-kill': {
          const pids: number[] = [];
          for (const pid of await namespacePids(t.ns(victim))) {
            if ((await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')).trim() === 'gobgpd') pids.push(pid);
          }
          if (pids.length !== 1) throw new Error(`one gobgpd in ${victim}'s namespace expected, found ${pids.length}`);
          process.kill(pids[0]!, 'SIGKILL');
          await waitFor(`the router to drop ${victim}'s session`, 15_000, async () => (!(await lab.routerPaths()).has(victim) ? true : undefined), 100);
          await lookAtRoute(`${victim}'s session gone`);
          await waitFor(`${victim}'s paths back at the router`, 40_000, async () => ((await lab.routerPaths()).get(victim) === lab.pathsPerDirector ? true : undefined), 250);
          break;
        }
        case 'bgp-reset': {
          await lab.router.vtysh(`clear bgp ipv4 unicast ${ecmpFabricAddress(victim)}`);
          await waitFor(`the router to drop ${victim}'s paths`, 15_000, async () => ((await lab.routerPaths()).get(victim) !== lab.pathsPerDirector ? true : undefined), 50);
          await lookAtRoute(`${victim}'s session reset`);
          await waitFor(`${victim}'s paths back at the router`, 40_000, async () => ((await lab.routerPaths()).get(victim) === lab.pathsPerDirector ? true : undefined), 250);
          break;
        }
        case 'scale-out': {
          await lab.startDirector(ECMP_SPARE);
          const out = await lab.waitSteady(STEADY_MS);
          victimSlots = [...out.values()].filter((o) => o === ECMP_SPARE).length;
          await lookAtRoute(`${ECMP_SPARE} joined`);
          repairAt = Date.now();
          await lab.stopDirector(ECMP_SPARE);
          break;
        }
      }
      const after = await lab.waitSteady(STEADY_MS);
      await lookAtRoute('after');
      const slotsBack = [...owners].every(([s, d]) => after.get(s) === d);
      const bucketsMoved = router === 'resilient' ? movedShare(buckets, await lab.routerBuckets()) : null;
      log(`${scenario} of ${victim}: repaired; waiting for the load's end`);
      await Promise.all([streams.exited, paced.exited]);
      const s = streams.lastJson<{ connections: number; broken: number; perConnection: Array<{ error: string | null }> }>();
      const p = paced.lastJson<HttpPacedResult>();
      if (s === undefined || p === undefined) throw new Error('the clients did not report');
      const failed = p.records.filter(([, , ok]) => ok === 0).map(([start]) => p.t0 + start);
      const fault = failed.filter((at) => at < repairAt);
      return {
        scenario, router, victim, victimSlots, failedAt,
        streams: s.connections, brokenStreams: s.broken, streamErrors: s.perConnection.map((c) => c.error).filter((e): e is string => e !== null).slice(0, 5),
        requests: p.records.length, failedRequests: failed.length,
        noServiceMs: fault.length === 0 ? 0 : Math.max(...fault) - Math.min(...fault) + INTERVAL_MS,
        failedDuringRepair: failed.length - fault.length,
        routeUnchanged: routeChanges.length === 0, routeChanges, bucketsMoved, slotsBack, durationMs: Date.now() - started,
      };
    } finally {
      await Promise.all([streams.stop(2000).catch(() => undefined), paced.stop(2000).catch(() => undefined)]);
    }
  } finally {
    await lab.routerMode('hash-threshold').catch(() => undefined);
  }
}

/** Why a drill failed; [] when it passed. */
export function ecmpDrillProblems(r: EcmpDrillResult): string[] {
  const out: string[] = [];
  if (r.brokenStreams > 0) out.push(`${r.brokenStreams} of ${r.streams} streams broken (${r.streamErrors[0] ?? 'no error text'})`);
  if (!r.routeUnchanged) out.push(`the router's forwarding changed (${r.routeChanges[0]})`);
  if (r.bucketsMoved !== null && r.bucketsMoved > 0) out.push(`${(r.bucketsMoved * 100).toFixed(1)} % of the router's buckets moved`);
  if (!r.slotsBack) out.push('the slots did not all go back to the directors that led them before');
  return out;
}

/** One line about one drill. */
export function ecmpDrillSummary(r: EcmpDrillResult): string {
  const what = r.scenario === 'scale-out' ? `${r.victim} joined (took ${r.victimSlots} slots) and left` : `${r.scenario} of ${r.victim} (${r.victimSlots} slots)`;
  return `${what}, router ${r.router}: ${r.brokenStreams}/${r.streams} streams broken, `
    + `${r.failedRequests}/${r.requests} new connections failed (no service ${r.noServiceMs} ms`
    + `${r.failedDuringRepair === 0 ? '' : `; ${r.failedDuringRepair} of them during the repair`}), `
    + `route ${r.routeUnchanged ? 'unchanged' : 'CHANGED'}${r.bucketsMoved === null ? '' : `, ${(r.bucketsMoved * 100).toFixed(1)} % buckets moved`}, `
    + `slots ${r.slotsBack ? 'back with their owners' : 'NOT back'}; ${(r.durationMs / 1000).toFixed(0)} s`;
}

/** The drill as an event (RecordDrill): `lbadm events --kind drill` and the dashboard show it. */
export function ecmpDrillRecord(r: EcmpDrillResult): { scenario: string; result: 'pass' | 'fail'; reason: string; fields: Record<string, string> } {
  const problems = ecmpDrillProblems(r);
  return {
    scenario: `ecmp ${r.scenario}`,
    result: problems.length === 0 ? 'pass' : 'fail',
    reason: problems.length === 0 ? ecmpDrillSummary(r) : `${problems.join('; ')}. ${ecmpDrillSummary(r)}`,
    fields: {
      failedAt: new Date(r.failedAt).toISOString(), victim: r.victim, router: r.router, victimSlots: String(r.victimSlots),
      streams: String(r.streams), brokenConnections: String(r.brokenStreams), requests: String(r.requests), failedRequests: String(r.failedRequests),
      noServiceMs: String(r.noServiceMs), failedDuringRepair: String(r.failedDuringRepair), routeUnchanged: String(r.routeUnchanged), slotsBack: String(r.slotsBack),
      ...(r.bucketsMoved === null ? {} : { bucketsMoved: r.bucketsMoved.toFixed(3) }),
    },
  };
}
