import { mkdtemp } from 'node:fs/promises';
import { cpus, loadavg, release, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AdminApi, Event__Output } from '@lbd/proto';
import { BusyLoops, DIRECTOR_NAMES, privilegeProblem, removeOrphans, runPrefix, waitFor, waitSteady, type DirectorName, type HaLab } from '@lbd/testkit';
import { scrape } from '../ops-lab.js';
import { formatCount as count, formatNumber, formatRatio, passMiss, table } from './report.js';
import { BenchScope } from './scope.js';
import { SMALL_OBJECT } from './servers.js';
import { GROUP, VIP, applyConfig, startLab, type SyncLabUser } from './sync-lab.js';
import { describeErrors, errorCount, runWrk, writeWrkScript, type WrkResult } from './wrk.js';

/**
 * `pnpm bench stability [--minutes N] [--quick]`: does the directors' own traffic move a vip group?
 * DESIGN.md: "A vip moves only when something failed: never because the director was busy forwarding"
 * (issue 11, "No move without a failure"). Progress goes to stderr, the report to stdout; nothing is
 * asserted: each phase is a PASS when the group did not move, a MISS when it did.
 *
 * The HA lab of the connsync bench (sync-lab.ts: two directors, three etcd members, nginx on three real
 * servers, fullnat round robin, tcp health checks every second), then a control and three phases, each a
 * saturating new-connection load from the client namespace through the vip: `wrk -t2 -c50 -H 'Connection:
 * close'` (every request its own connection) on http://<vip>/small (nginx's small object: `/` has no
 * index and would answer 403, which wrk counts as errors).
 *   0. the control: no traffic at all, sync on, for 60 s (--quick: as long as A). The machine is shared
 *      (other people's tests on the same 2 CPUs): what moves the group here is not the load's doing.
 *   A. sync on, for --minutes (default 10; --quick 1).
 *   B. the same with a foreign busy loop on every core (testkit BusyLoops, as the failover bench's loaded
 *      variants): each loop ends by itself with the phase and is killed when it ends, or on any way out.
 *   C. sync off (applied per service, as connsync's baseline), for 60 s (--quick: as long as A), so that
 *      conn/s with and without sync come from the same run.
 * Every phase starts from empty connection tables (B and C flush both directors while sync is off, so no
 * removal is sent for them) with the group steady and, with sync, the leader's stream caught up; when
 * that does not come within its bound (a group that keeps moving after the previous phase), the phase
 * runs anyway and the report marks it.
 *
 * What counts as a move, per phase, from the moment before the load to the moment after it (once the
 * leader has had a beat confirmed after the load, so that a fence the load caused is already recorded):
 *   - transitions: every `role` event (ListEvents, each director's own log, followed live for the whole
 *     run, so a log that trims under a burst of health events loses none) whose role changed (from != to);
 *     role events that keep the role (notes such as "preempt waits") are counted apart, they move nothing;
 *   - the group's term and leader in ClusterStatus before and after (a fenced leader that resumes keeps
 *     its term: the events see it, the term does not);
 *   - fences: lbd_vip_group_fences_total on both directors (scraped from /metrics through the ops host),
 *     next to the role events whose reason starts with "fenced"; failed beats (heartbeat losses) too.
 * Role events between the phases (the applies that switch sync, the flushes, the waits) are reported apart,
 * and so is the machine's load average at the start and end of each phase.
 *
 * Everything is bounded: wrk by its duration (and a kill 20 s after), the loops by their own deadline,
 * every wait by a timeout. The namespaces (`lbdb<pid>st-…`) and every process in them go on every way
 * out, SIGINT included.
 */

export interface StabilityBenchOptions {
  readonly quick: boolean;
  /** Phases A and B last this many minutes (default 10; --quick 1). */
  readonly minutes?: number;
}

const DEFAULT_MINUTES = 10;
export const MAX_MINUTES = 120;
/** Phase C (without sync): conn/s needs no longer a window. */
const BASELINE_SEC = 60;
const WRK = { threads: 2, connections: 50 } as const;
/** The target: no vip group transition caused by load. */
const TARGET_TRANSITIONS = 0;

/** Bounds on the waits before a phase; when one runs out the phase starts anyway, and says so. */
const STEADY_MS = 60_000;
const CAUGHT_UP_MS = 120_000;

/** Transitions listed per phase in the report (the rest are counted). */
const LISTED = 10;

const log = (msg: string): void => { process.stderr.write(`[stability] ${msg}\n`); };
const out = (line = ''): void => { process.stdout.write(`${line}\n`); };
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const LAB_USER: SyncLabUser = { bench: 'stability', log };

interface PhaseSpec {
  readonly id: '0' | 'A' | 'B' | 'C';
  readonly name: string;
  /** false: the control, no traffic at all. */
  readonly load: boolean;
  readonly sync: boolean;
  readonly cpuLoad: boolean;
  /** Starts from empty connection tables (the phases after a load). */
  readonly flush: boolean;
  readonly sec: number;
}

function phasesFor(opts: StabilityBenchOptions): PhaseSpec[] {
  const minutes = opts.minutes ?? (opts.quick ? 1 : DEFAULT_MINUTES);
  if (!Number.isFinite(minutes) || minutes <= 0 || minutes > MAX_MINUTES) throw new Error(`--minutes must be more than 0 and at most ${MAX_MINUTES}`);
  const sec = Math.max(1, Math.round(minutes * 60));
  const short = opts.quick ? sec : Math.min(sec, BASELINE_SEC);
  return [
    { id: '0', name: 'control: no load, sync on', load: false, sync: true, cpuLoad: false, flush: false, sec: short },
    { id: 'A', name: 'sync on', load: true, sync: true, cpuLoad: false, flush: false, sec },
    { id: 'B', name: 'sync on + busy loop on every core', load: true, sync: true, cpuLoad: true, flush: true, sec },
    { id: 'C', name: 'sync off (baseline)', load: true, sync: false, cpuLoad: false, flush: true, sec: short },
  ];
}

interface GroupView {
  readonly leader: string;
  readonly term: number;
}

interface Counters {
  readonly fences: number;
  readonly beatsFailed: number;
  readonly beatsConfirmed: number;
}

interface PhaseResult {
  readonly spec: PhaseSpec;
  /** undefined for the control (no load). */
  readonly wrk: WrkResult | undefined;
  /** A precondition that did not hold when the phase started (it ran anyway), or ''. */
  readonly startProblem: string;
  /** 1-minute load average of the machine at the start and at the end of the load (other work shows here). */
  readonly loadAvg: readonly [number, number];
  readonly before: GroupView;
  readonly after: GroupView;
  /** Role events of the window that changed a role, oldest first. */
  readonly transitions: readonly Event__Output[];
  /** Role events of the window that kept the role. */
  readonly notes: number;
  /** Of the transitions, those whose reason starts with "fenced". */
  readonly fencedEvents: number;
  /** From /metrics, both directors; undefined when a scrape failed. */
  readonly fences: number | undefined;
  readonly beatsFailed: number | undefined;
  /** Real-server state changes (health events) in the window: the load may starve the checks too. */
  readonly healthEvents: number;
  /**
   * How late each director's election thread ran its own timer over its last 4 096 ticks (about 41 s),
   * read as the load ended: what a beat suffered under the load (undefined: the status did not answer).
   */
  readonly electionLate: Readonly<Record<string, { readonly p99: number; readonly max: number; readonly placement: string } | undefined>>;
  /** The window: from just before the load to the sentinel after it; the load ended at loadEndMs. */
  readonly sinceMs: number;
  readonly loadEndMs: number;
  readonly untilMs: number;
  /** Of the transitions, those after the load had ended (in the wait for the sentinel and a steady group). */
  readonly afterLoad: number;
  /** Why the sentinel (a beat confirmed after the load) was not seen, if it was not. */
  readonly sentinelProblem: string;
  readonly conntrackAfter: Record<DirectorName, number | undefined>;
}

interface PhaseOutcome {
  readonly spec: PhaseSpec;
  readonly result?: PhaseResult;
  /** Why the phase could not run (or not to the end). */
  readonly problem?: string;
}

export async function benchStability(opts: StabilityBenchOptions): Promise<number> {
  const problem = await privilegeProblem({ commands: ['nft', 'etcd', 'etcdctl', 'arping', 'conntrack', 'openssl', 'wrk', 'nginx', 'curl'] });
  if (problem !== null) {
    process.stderr.write(`bench stability: ${problem}\n`);
    return 1;
  }
  const specs = phasesFor(opts);
  const stale = await removeOrphans('lbdb');
  if (stale.length > 0) log(`removed namespaces left by an earlier run: ${stale.join(', ')}`);
  const prefix = runPrefix('lbdb', 'st');
  const scope = new BenchScope(prefix, log);
  const load: BusyLoops[] = [];
  scope.onCleanup(() => { void stopLoad(load); });
  const started = performance.now();
  const loadAtStart = loadavg().map((l) => l.toFixed(2)).join(' ');
  const outcomes: PhaseOutcome[] = [];
  let events: EventCollector | undefined;
  let labProblem = '';
  try {
    scope.tmp = await mkdtemp(join(tmpdir(), 'lbd-bench-stability-'));
    const script = await writeWrkScript(scope.tmp);
    let lab: HaLab<AdminApi> | undefined;
    try {
      lab = await startLab(LAB_USER, scope, prefix);
    } catch (e) {
      labProblem = `the lab did not start: ${(e as Error).message.split('\n')[0]}`;
      log(labProblem);
    }
    if (lab !== undefined) {
      events = new EventCollector(lab, Date.now());
      scope.onCleanup(() => events?.close());
      let syncNow = true;
      for (const spec of specs) {
        try {
          const startProblem = await prepare(lab, spec, syncNow);
          syncNow = spec.sync;
          const result = await runPhase(lab, spec, script, events, load, startProblem);
          outcomes.push({ spec, result });
        } catch (e) {
          await stopLoad(load);
          const message = (e as Error).message;
          log(`phase ${spec.id} could not run to the end: ${message}`);
          outcomes.push({ spec, problem: message.split('\n')[0] });
          // Where it stopped, sync may be on or off: the next phase switches it off before its flush either way.
          syncNow = true;
          // The next phase starts from a steady group, or does not start.
          await waitSteady(lab).catch(() => undefined);
        }
      }
      events.close();
    }
    report(specs, outcomes, labProblem, events, opts.quick, loadAtStart);
    out(`\ntotal time ${((performance.now() - started) / 1000).toFixed(0)} s`);
    return 0;
  } finally {
    await stopLoad(load);
    await scope.close();
  }
}

// ---- phases ---------------------------------------------------------------------------------------

/**
 * Empty connection tables on both directors (spec.flush), and the phase's sync setting. The flush runs
 * with sync off (switched off first if it was on), so no removal of the old entries is sent; with sync,
 * the phase waits for the leader's stream to catch up again. Returns what did not hold in time ('' when
 * everything did): the phase runs anyway, the report says so.
 */
async function prepare(lab: HaLab<AdminApi>, spec: PhaseSpec, syncNow: boolean): Promise<string> {
  const t = lab.cluster.topology;
  if (spec.flush) {
    if (syncNow) await applyConfig(LAB_USER, lab, false);
    log(`phase ${spec.id}: flushing both directors' connection tables`);
    for (const d of DIRECTOR_NAMES) await t.exec(d, 'conntrack', ['-F'], { timeoutMs: 60_000, allowFailure: true });
    if (spec.sync) await applyConfig(LAB_USER, lab, true);
    // The agents' own conntrack watches see every flushed entry go: let them work through it first.
    await sleep(3000);
  } else if (spec.sync !== syncNow) {
    await applyConfig(LAB_USER, lab, spec.sync);
  }
  let problem = '';
  await waitSteady(lab, STEADY_MS).catch((e: Error) => { problem = (e.message.split('\n')[0] ?? ''); });
  if (spec.sync) {
    // Whoever leads at the moment (a leader that flaps hands the stream over).
    await waitFor('the leader streaming to its peer, caught up', CAUGHT_UP_MS, async () => {
      const leader = await lab.leader();
      if (leader === undefined) return false;
      const st = await lab.api(leader).getClusterStatus({ timeoutMs: 2000 });
      const to = st.sync?.peers.find((p) => p.direction === 'to');
      return to?.state === 'streaming' && to.caughtUp;
    }, 100).catch((e: Error) => { problem ||= e.message; });
  }
  if (problem !== '') log(`phase ${spec.id}: starting anyway: ${problem}`);
  return problem;
}

async function runPhase(lab: HaLab<AdminApi>, spec: PhaseSpec, script: string, events: EventCollector, load: BusyLoops[], startProblem: string): Promise<PhaseResult> {
  const before = await groupView(lab);
  const counters0 = await counters(lab);
  const url = `http://${VIP}${SMALL_OBJECT}`;
  log(`phase ${spec.id} (${spec.name}): ${spec.sec} s of ${spec.load ? `wrk -t${WRK.threads} -c${WRK.connections} -H 'Connection: close' ${url}` : 'no traffic'}, `
    + `${before.leader} leading (term ${before.term})${spec.cpuLoad ? `, ${cpus().length} busy loops` : ''}`);
  const loadAt0 = loadavg()[0]!;
  const since = Date.now();
  let wrk: WrkResult | undefined;
  try {
    // The loops end by themselves when the load does; stopLoad below is for a wrk that ends early.
    if (spec.cpuLoad) load.push(BusyLoops.start(spec.sec * 1000));
    if (spec.load) wrk = await runWrk(lab.cluster.topology, 'client', script, { url, connections: WRK.connections, threads: WRK.threads, durationSec: spec.sec, closeEach: true });
    else await sleep(spec.sec * 1000);
  } finally {
    await stopLoad(load);
  }
  const loadEndMs = Date.now();
  const loadAvg = [loadAt0, loadavg()[0]!] as const;
  const electionLate: Record<string, { p99: number; max: number; placement: string } | undefined> = {};
  for (const d of DIRECTOR_NAMES) {
    const st = await lab.api(d).getClusterStatus({ timeoutMs: 2000 }).catch(() => undefined);
    electionLate[d] = st === undefined ? undefined : { p99: st.electionTickLateP99Ms, max: st.electionTickLateMaxMs, placement: st.electionPlacement };
  }
  if (wrk !== undefined) log(`phase ${spec.id}: ${formatNumber(wrk.requestsPerSec)} connections/s, errors: ${describeErrors(wrk)}`);
  const conntrackAfter = {
    dir1: await conntrackCount(lab, 'dir1'), dir2: await conntrackCount(lab, 'dir2'),
  };

  // The sentinel: a beat the leader's etcd confirmed after the load. Whatever the load did to the
  // election (a late beat, a fence) happened before it; then the group is steady again.
  let sentinelProblem = '';
  const ended = (await counters(lab)) ?? counters0;
  if (ended === undefined) sentinelProblem = 'no beat count to wait on (/metrics did not answer)';
  else {
    // Once a second: each poll is a curl with a TLS handshake to both agents, work the benchmark must not
    // add to what it measures (Prometheus scrapes every 15 s or so).
    await waitFor('a beat confirmed after the load', 15_000, async () => ((await counters(lab))?.beatsConfirmed ?? 0) > ended.beatsConfirmed, 1000)
      .catch((e: Error) => { sentinelProblem = e.message; });
  }
  await waitSteady(lab).catch((e: Error) => { sentinelProblem ||= `not steady after the load: ${e.message.split('\n')[0]}`; });
  const after = await groupView(lab);
  const counters1 = await counters(lab);
  const until = Date.now();

  const inWindow = await events.between(since, until);
  const role = inWindow.filter((e) => e.kind === 'role');
  const transitions = role.filter((e) => e.from !== e.to);
  const r: PhaseResult = {
    spec, wrk, startProblem, loadAvg, before, after, transitions, notes: role.length - transitions.length,
    fencedEvents: transitions.filter((e) => e.reason.startsWith('fenced')).length,
    fences: counters0 && counters1 ? counters1.fences - counters0.fences : undefined,
    beatsFailed: counters0 && counters1 ? counters1.beatsFailed - counters0.beatsFailed : undefined,
    healthEvents: inWindow.filter((e) => e.kind === 'health').length, electionLate,
    sinceMs: since, loadEndMs, untilMs: until, afterLoad: transitions.filter((e) => e.timeUnixMs > loadEndMs).length, sentinelProblem, conntrackAfter,
  };
  log(`phase ${spec.id}: ${r.transitions.length} vip group transition(s), fences ${r.fences ?? 'n/a'} (role events "fenced" ${r.fencedEvents}), `
    + `failed beats ${r.beatsFailed ?? 'n/a'}, term ${before.term} -> ${after.term}, leader ${before.leader} -> ${after.leader}`
    + `${sentinelProblem ? `; ${sentinelProblem}` : ''}`);
  for (const e of r.transitions.slice(0, 5)) log(`  ${describeEvent(e)}`);
  if (r.transitions.length > 5) log(`  ... and ${r.transitions.length - 5} more (the report lists the first ${LISTED})`);
  return r;
}

/** The group's leader and term, as the director that answers first with a known leader sees it. */
async function groupView(lab: HaLab<AdminApi>): Promise<GroupView> {
  return waitFor('the vip group\'s leader and term', 15_000, async () => {
    for (const d of DIRECTOR_NAMES) {
      const st = await lab.api(d).getClusterStatus({ timeoutMs: 2000 }).catch(() => undefined);
      const g = st?.groups.find((x) => x.name === GROUP);
      if (g !== undefined && g.leader !== '') return { leader: g.leader, term: Number(g.term) };
    }
    return undefined;
  }, 200);
}

/**
 * The election's counters, both directors together, from their /metrics (scraped through the ops host, as
 * Prometheus would); undefined when a director does not answer.
 */
async function counters(lab: HaLab<AdminApi>): Promise<Counters | undefined> {
  try {
    const all = await Promise.all(DIRECTOR_NAMES.map((d) => scrape(lab, d)));
    const sumOf = (name: string, labels: Record<string, string>): number => all.flat()
      .filter((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v)).reduce((a, x) => a + x.value, 0);
    return {
      fences: sumOf('lbd_vip_group_fences_total', { group: GROUP }),
      beatsFailed: sumOf('lbd_vip_group_heartbeats_total', { group: GROUP, result: 'failed' }),
      beatsConfirmed: sumOf('lbd_vip_group_heartbeats_total', { group: GROUP, result: 'confirmed' }),
    };
  } catch (e) {
    log(`/metrics: ${(e as Error).message}`);
    return undefined;
  }
}

async function conntrackCount(lab: HaLab<AdminApi>, d: DirectorName): Promise<number | undefined> {
  const r = await lab.cluster.topology.exec(d, 'conntrack', ['-C'], { timeoutMs: 10_000, allowFailure: true });
  const n = Number(r.stdout.trim());
  return r.code === 0 && Number.isFinite(n) ? n : undefined;
}

// ---- the event logs -------------------------------------------------------------------------------

/**
 * Both directors' event logs (ListEvents, scope local: each director's own), followed from `sinceMs` for
 * the whole run. Following, rather than reading once after each phase, keeps events a director's bounded
 * log may have trimmed meanwhile; a stream that breaks is opened again from its last event, and each
 * read also merges the kept history, so a gap in the stream is filled where the log still holds it.
 */
class EventCollector {
  private readonly events = new Map<string, Event__Output>();
  private readonly abort = new AbortController();
  private readonly lastMs: Record<DirectorName, number>;
  /** Follow streams that broke (each opened again from its last event). */
  readonly streamErrors: string[] = [];
  /** Reads of the kept history that failed (the followed events stand alone then). */
  readonly readErrors: string[] = [];

  constructor(private readonly lab: HaLab<AdminApi>, readonly sinceMs: number) {
    this.lastMs = { dir1: sinceMs, dir2: sinceMs };
    for (const d of DIRECTOR_NAMES) void this.follow(d);
  }

  private async follow(d: DirectorName): Promise<void> {
    while (!this.abort.signal.aborted) {
      try {
        for await (const e of this.lab.api(d).listEvents({ sinceUnixMs: this.lastMs[d], follow: true, scope: 'local', limit: 10_000 }, { signal: this.abort.signal })) {
          this.events.set(e.id, e);
          this.lastMs[d] = Math.max(this.lastMs[d], e.timeUnixMs);
        }
      } catch (e) {
        if (this.abort.signal.aborted) return;
        if (this.streamErrors.length < 10) this.streamErrors.push(`${d}: ${(e as Error).message}`);
      }
      await sleep(500);
    }
  }

  /** Every event from either director in [fromMs, toMs], oldest first, with each log's kept history merged in. */
  async between(fromMs: number, toMs: number): Promise<Event__Output[]> {
    for (const d of DIRECTOR_NAMES) {
      try {
        for await (const e of this.lab.api(d).listEvents({ sinceUnixMs: fromMs, follow: false, scope: 'local', limit: 10_000 }, { timeoutMs: 10_000 })) this.events.set(e.id, e);
      } catch (e) {
        if (this.readErrors.length < 10) this.readErrors.push(`${d}: ${(e as Error).message}`);
      }
    }
    return this.sorted().filter((e) => e.timeUnixMs >= fromMs && e.timeUnixMs <= toMs);
  }

  sorted(): Event__Output[] {
    return [...this.events.values()].sort((a, b) => a.timeUnixMs - b.timeUnixMs || (a.id < b.id ? -1 : 1));
  }

  close(): void {
    this.abort.abort();
  }
}

// ---- report -----------------------------------------------------------------------------------------

function report(specs: readonly PhaseSpec[], outcomes: readonly PhaseOutcome[], labProblem: string, events: EventCollector | undefined, quick: boolean, loadAtStart: string): void {
  out(`lbd stability benchmark: does the directors' own traffic move the vip group?${quick ? ' (--quick: a smoke run with short phases)' : ''}`);
  out(`${cpus().length} CPUs shared by everything (directors, etcd, real servers, client, this process), kernel ${release()}; `
    + `load average at the start ${loadAtStart} (anything above 0 is other work on the machine)`);
  out(`load: wrk -t${WRK.threads} -c${WRK.connections} -H 'Connection: close' http://${VIP}${SMALL_OBJECT} from the client namespace (each request a new connection), `
    + 'fullnat round robin to nginx on 3 real servers, tcp health checks every 1 s, group preempt never');
  if (labProblem !== '') out(`\n${labProblem}: no phase ran`);

  const rows: string[][] = [];
  for (const spec of specs) {
    const r = outcomes.find((x) => x.spec.id === spec.id)?.result;
    if (r === undefined) {
      rows.push([`${spec.id}. ${spec.name}`, `${spec.sec} s`, '-', '-', '-', '-', '-', 'not run']);
      continue;
    }
    const moved = r.transitions.length + (r.after.term !== r.before.term || r.after.leader !== r.before.leader ? 1 : 0);
    const fences = r.fences ?? r.fencedEvents;
    rows.push([
      `${spec.id}. ${spec.name}`, `${r.wrk ? r.wrk.durationSec.toFixed(0) : spec.sec} s`, r.wrk ? formatNumber(r.wrk.requestsPerSec) : '-', r.wrk ? count(errorCount(r.wrk)) : '-',
      `${r.transitions.length - r.afterLoad}${r.afterLoad > 0 ? ` + ${r.afterLoad} after` : ''}${staticOnly(r.transitions)}${r.after.term !== r.before.term ? ` (term ${r.before.term}->${r.after.term})` : ''}`,
      `${fences}${r.fences === undefined ? ' (events)' : ''}`, `${r.loadAvg[0].toFixed(1)} / ${r.loadAvg[1].toFixed(1)}`,
      `${passMiss(moved === TARGET_TRANSITIONS && fences === 0)}${r.startProblem ? ' *' : ''}`,
    ]);
  }
  out('');
  out(table(['phase', 'duration', 'conn/s', 'wrk errors', 'vip group transitions', 'fences', 'machine load', `target ${TARGET_TRANSITIONS}`], rows));
  out('machine load: the 1-minute load average at the start / end of the phase, everything on the machine (other people\'s tests too)');
  if (outcomes.some((o) => o.result?.startProblem)) out('*: the phase started before its preconditions held (see below)');

  const a = outcomes.find((o) => o.spec.id === 'A')?.result?.wrk;
  const c = outcomes.find((o) => o.spec.id === 'C')?.result?.wrk;
  out(`\nconn/s with sync / without sync (A / C): ${a && c ? `${formatRatio(a.requestsPerSec / c.requestsPerSec)} `
    + `(${formatNumber(a.requestsPerSec)} / ${formatNumber(c.requestsPerSec)}; A over ${a.durationSec.toFixed(0)} s, C over ${c.durationSec.toFixed(0)} s)` : 'n/a (a phase did not run)'}`);

  out('\nper phase:');
  for (const o of outcomes) {
    const r = o.result;
    if (r === undefined) {
      out(`${o.spec.id}: could not run: ${o.problem ?? 'unknown'}`);
      continue;
    }
    const load = r.wrk ? `${count(r.wrk.requests)} connections in ${r.wrk.durationSec.toFixed(1)} s (errors: ${describeErrors(r.wrk)})` : `no traffic for ${o.spec.sec} s`;
    out(`${o.spec.id}: ${load}; leader ${r.before.leader} term ${r.before.term} before, ${r.after.leader} term ${r.after.term} after; `
      + `role events: ${r.transitions.length} transitions, ${r.notes} without a change of role, ${r.fencedEvents} "fenced"; `
      + `/metrics: fences ${r.fences ?? 'n/a (scrape failed)'}, failed beats ${r.beatsFailed ?? 'n/a'}; real-server state changes ${r.healthEvents}; `
      + `conntrack entries at the end: dir1 ${r.conntrackAfter.dir1 ?? 'n/a'}, dir2 ${r.conntrackAfter.dir2 ?? 'n/a'}; `
      + `election thread's timer late (last ~41 s of the load) ${DIRECTOR_NAMES.map((d) => { const e = r.electionLate[d]; return e === undefined ? `${d} n/a` : `${d} p99 ${e.p99} ms, max ${e.max} ms`; }).join(', ')}; `
      + `window ${clock(r.sinceMs)} to ${clock(r.untilMs)}, the load ended at ${clock(r.loadEndMs)} (${r.afterLoad} of the transitions after it)`
      + `${r.sentinelProblem ? `; ${r.sentinelProblem}` : ''}${r.startProblem ? `; started before this held: ${r.startProblem}` : ''}`);
    for (const e of r.transitions.slice(0, LISTED)) out(`   ${describeEvent(e)}`);
    if (r.transitions.length > LISTED) out(`   ... and ${r.transitions.length - LISTED} more`);
  }

  if (events !== undefined) {
    // Role events outside every phase's window: the applies that switch sync, the flushes, the waits.
    const windows = outcomes.flatMap((o) => (o.result ? [o.result] : []));
    const outside = events.sorted().filter((e) => e.kind === 'role' && e.from !== e.to && e.timeUnixMs >= events.sinceMs);
    const notIn = outside.filter((e) => !windows.some((r) => r.transitions.some((x) => x.id === e.id)));
    out(`\nvip group transitions between the phases (applies switching sync, flushes, waits for a steady group): ${notIn.length}`);
    for (const e of notIn.slice(0, LISTED)) out(`   ${describeEvent(e)}`);
    if (notIn.length > LISTED) out(`   ... and ${notIn.length - LISTED} more`);
    if (events.streamErrors.length > 0) out(`event streams broke (each opened again from its last event): ${events.streamErrors.slice(0, 3).join(' | ')}`);
    if (events.readErrors.length > 0) out(`reads of a director's kept history failed (its followed events stand alone): ${events.readErrors.slice(0, 3).join(' | ')}`);
  }
  out('\ntransitions: during the load + after it, until a beat confirmed after the load and a steady group; role events with a change of role on either director '
    + '(one move of the group is two: the old leader\'s and the new one\'s; a fenced leader that resumes is two on one director; '
    + 'so is a leader that goes fail-static and back, which moves nothing: counted, and named in brackets); '
    + 'fences: lbd_vip_group_fences_total on both directors (a fence is also a transition). Phase 0 is the control: the same count with no traffic '
    + 'at all, so that what the machine alone does (other people\'s tests on the same 2 CPUs) is not put down to the load');
}

const clock = (ms: number): string => new Date(ms).toISOString().slice(11, 23);

/**
 * ' (N fail-static)' when N of the transitions are a leader going fail-static and back: the leader kept
 * serving (every peer had lost etcd too, so each promised to stay away); they count, but they moved nothing.
 */
function staticOnly(transitions: readonly Event__Output[]): string {
  const n = transitions.filter((e) => (e.from === 'leader' && e.to === 'fail-static') || (e.from === 'fail-static' && e.to === 'leader')).length;
  return n > 0 ? ` (${n} fail-static)` : '';
}

function describeEvent(e: Event__Output): string {
  return `${clock(e.timeUnixMs)} ${e.director}: ${e.from} -> ${e.to}: ${e.reason}`;
}

/** Stops the busy loops (those already ended ignore it) and empties `load`. */
async function stopLoad(load: BusyLoops[]): Promise<void> {
  await Promise.all(load.splice(0).map((l) => l.stop()));
}
