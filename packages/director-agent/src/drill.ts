import { COPIED_TCP_STATES, ENDED_TCP_STATES, YOUNG_STATES, type GroupHolding } from '@lbd/connsync';
import type { DrillMove__Output as DrillMove, DrillResult__Output as DrillResult } from '@lbd/proto';

/**
 * The drill an operator runs on live directors (`lbadm drill switchover`): a planned move of a vip group (or
 * of an ECMP slot, election group slot-N) to another director and back, measured from the two directors
 * themselves: each one's record of when it released and claimed the group's addresses, and what each holds
 * of the group's connections in its kernel before and after each move. Failure drills (box death, cuts,
 * pauses) need a lab around the directors and stay `deploy/lab/lab drill`.
 *
 * `measureMove` is pure (samples in, figures out); `runSwitchoverDrill` drives the moves through `DrillDeps`.
 */

/** TCP states a synced copy exists for (connsync's copiable), and UDP's assured: a client's flow in progress. */
const ESTABLISHED_STATES: ReadonlySet<string> = new Set([...COPIED_TCP_STATES, 'ASSURED']);

/** One move's samples: the old holder before it, and both directors after it. Null: not readable (why in `notMeasured`). */
export interface MoveSamples {
  readonly from: string;
  readonly to: string;
  readonly tookMs: number;
  /** When the move was asked (Unix ms): claims and releases before it belong to earlier moves. */
  readonly askedAtUnixMs: number;
  readonly before: GroupHolding | null;
  readonly oldAfter: GroupHolding | null;
  readonly newAfter: GroupHolding | null;
  /** Each director's kernel lease drops just before the move (-1: unknown); the after values are in oldAfter and newAfter. */
  readonly dropsBefore: ReadonlyMap<string, number>;
  readonly notMeasured: string;
}

/**
 * A move's figures. Time without a holder: the old holder's release to the new holder's claim, each by its own
 * clock (NTP's error is in it). Established connections missing: the old holder's established ones before the
 * move, still in its table after (not ended), that the new holder does not hold with the same NAT binding (real
 * server, local address): their next packet finds no state, or state the new holder made afresh from a
 * mid-stream packet (conntrack picks those up) for another real server. Young ones caught: the old holder's
 * connections after the move too young to have been copied (a TCP handshake, a UDP flow not yet assured) that
 * the new holder does not hold so: a retried SYN or the flow's next datagram is scheduled afresh there.
 * Packets dropped: what both directors' kernels dropped during the move for an address they held no lease
 * for (the counter after the move less before, on each).
 */
export function measureMove(s: MoveSamples): DrillMove {
  const released = s.oldAfter?.releasedAtUnixMs ?? 0;
  const claimed = s.newAfter?.claimedAtUnixMs ?? 0;
  const holderless = released >= s.askedAtUnixMs && claimed >= s.askedAtUnixMs ? claimed - released : -1;
  let establishedBefore = -1;
  let missing = -1;
  let caught = -1;
  if (s.before !== null && s.oldAfter !== null && s.newAfter !== null) {
    const old = s.oldAfter.connections;
    const now = s.newAfter.connections;
    establishedBefore = 0;
    missing = 0;
    for (const [key, c] of s.before.connections) {
      if (!ESTABLISHED_STATES.has(c.state)) continue;
      establishedBefore++;
      // Ended meanwhile through the old holder (TIME_WAIT or CLOSE there): sync removed its copies on purpose, as
      // soon as the kernel said so. Counted as missing, a short connection that closed during the move failed the
      // drill (suites 48 and 69: 1 of 23 and 2 of 40, with an HTTP probe beside the load).
      const was = old.get(key);
      if (was !== undefined && !ENDED_TCP_STATES.has(was.state) && now.get(key)?.binding !== c.binding) missing++;
    }
    caught = 0;
    for (const [key, c] of old) if (YOUNG_STATES.has(c.state) && now.get(key)?.binding !== c.binding) caught++;
  }
  const why = [s.notMeasured];
  if (holderless < 0) why.push(`no ${released < s.askedAtUnixMs ? `release by ${s.from}` : `claim by ${s.to}`} recorded since the move was asked`);
  let dropped = 0;
  for (const [director, after] of [[s.from, s.oldAfter], [s.to, s.newAfter]] as const) {
    const before = s.dropsBefore.get(director) ?? -1;
    const now = after?.leaseDroppedPackets ?? -1;
    // Lower after than before: the lease tables were made anew (the agent restarted) in between.
    if (before < 0 || now < before) {
      if (dropped >= 0 && after !== null) why.push(`the kernel's lease drops of ${director} could not be read around the move`);
      dropped = -1;
    } else if (dropped >= 0) {
      dropped += now - before;
    }
  }
  return {
    from: s.from, to: s.to, tookMs: s.tookMs, holderlessMs: holderless, establishedBefore, establishedMissing: missing, youngCaught: caught,
    droppedPackets: dropped, notMeasured: [...new Set(why.filter((w) => w !== ''))].join('; '),
  };
}

/** What the drill needs of the cluster, from the director that runs it. */
export interface DrillDeps {
  /** The group's leader now (etcd's record), or null when nobody leads it. */
  leaderOf(group: string): Promise<string | null>;
  /** A planned switchover (admin Failover): `to` empty for the best other director. */
  failover(group: string, to: string): Promise<{ from: string; to: string; tookMs: number }>;
  /** What `director` holds of `group` now (this director's own table, or a peer's over GroupConnections). */
  holding(director: string, group: string): Promise<GroupHolding>;
  /** `director`'s kernel lease drops now (GroupConnections without the connections); rejects when unreadable. */
  leaseDrops(director: string, group: string): Promise<number>;
  /** Every director a move may go to: this one and its peers. */
  directors(): readonly string[];
  /** Why holdings cannot be read at all (connection sync is off here), or null. */
  holdingsUnavailable(): string | null;
  /** The group's dr services: no director holds a connection of theirs, so no figure here counts their flows. */
  drServices(group: string): readonly string[];
  /** Wall clock (Unix ms) and a pause (the wait for the visited director's copy: a bounded poll). */
  now(): number;
  sleep(ms: number): Promise<void>;
}

/** How long the drill waits for the director it moved the group to to copy its connections back before it returns. */
const DRILL_COPY_BACK_WAIT_MS = 15_000;
const COPY_BACK_POLL_MS = 250;
/** How long the drill waits for a move's release and claim to be recorded on the two directors. */
const RECORDED_WAIT_MS = 2000;
const RECORDED_POLL_MS = 50;

/**
 * Moves `group` to `to` (or the best other director) and back to its leader, sampling both directors around
 * each move. Before moving back it waits (bounded) until the leader holds every established connection the
 * visited director holds: an operator's switchover waits for sync the same way (preempt: after-sync).
 * Throws when a move is refused; a sample that cannot be read leaves its figures unmeasured, not the drill failed.
 */
export async function runSwitchoverDrill(group: string, to: string, d: DrillDeps): Promise<DrillResult> {
  const leader = await d.leaderOf(group);
  if (leader === null) throw new Error(`nobody leads ${group} now: there is nothing to move (lbadm cluster status shows why)`);
  if (to === leader) throw new Error(`${to} leads ${group} already: name another director with --to, or leave it out`);
  const unavailable = d.holdingsUnavailable();
  const sample = async (director: string): Promise<{ h: GroupHolding | null; why: string }> => {
    if (unavailable !== null) return { h: null, why: unavailable };
    try {
      return { h: await d.holding(director, group), why: '' };
    } catch (err) {
      return { h: null, why: `the connections on ${director} could not be read: ${err instanceof Error ? err.message : String(err)}` };
    }
  };
  // The kernels' drop counters of every director the move may involve, just before it (a move to the best
  // other director involves one not known until it is made).
  const drops = async (directors: readonly string[]): Promise<Map<string, number>> => new Map(await Promise.all(
    [...new Set(directors)].map(async (x): Promise<[string, number]> => [x, unavailable !== null ? -1 : await d.leaseDrops(x, group).catch(() => -1)]),
  ));
  /**
   * One move to `target` ('' for the best other director), measured from `before` (the old holder's sample),
   * the kernels' drops in `dropsBefore`, and claims and releases since `askedAtUnixMs`. A move back that the
   * group made by itself first (the leader's preemption, after-sync, can be quicker than the drill) is
   * measured all the same, as the move it was.
   */
  const move = async (
    holder: string, target: string, before: { h: GroupHolding | null; why: string }, dropsBefore: ReadonlyMap<string, number>, askedAtUnixMs: number,
  ): Promise<{ m: DrillMove; dropsAfter: Map<string, number>; doneAtUnixMs: number }> => {
    let r: { from: string; to: string; tookMs: number };
    try {
      r = await d.failover(group, target);
    } catch (err) {
      if (target === '' || (await d.leaderOf(group)) !== target) throw err;
      r = { from: holder, to: target, tookMs: -1 };
    }
    const doneAtUnixMs = d.now();
    let [oldAfter, newAfter] = await Promise.all([sample(r.from), sample(r.to)]);
    // Each director records its release and claim when its election thread tells the rest of the agent,
    // which can be a moment after etcd's record moved (the answer above): read again until both are there.
    for (const until = d.now() + RECORDED_WAIT_MS; d.now() < until; ) {
      if ((oldAfter.h?.releasedAtUnixMs ?? askedAtUnixMs) >= askedAtUnixMs && (newAfter.h?.claimedAtUnixMs ?? askedAtUnixMs) >= askedAtUnixMs) break;
      await d.sleep(RECORDED_POLL_MS);
      [oldAfter, newAfter] = await Promise.all([sample(r.from), sample(r.to)]);
    }
    const m = measureMove({
      from: r.from, to: r.to, tookMs: r.tookMs, askedAtUnixMs, before: before.h, oldAfter: oldAfter.h, newAfter: newAfter.h, dropsBefore,
      notMeasured: [...new Set([before.why, oldAfter.why, newAfter.why].filter((w) => w !== ''))].join('; '),
    });
    return { m, dropsAfter: new Map([[r.from, oldAfter.h?.leaseDroppedPackets ?? -1], [r.to, newAfter.h?.leaseDroppedPackets ?? -1]]), doneAtUnixMs };
  };

  const first = await sample(leader);
  const thereDrops = await drops(to === '' ? d.directors() : [leader, to]);
  const there = await move(leader, to, first, thereDrops, d.now());
  const visited = there.m.to;
  // The way back: once the leader holds what the visited director holds (its own connections and those it
  // made meanwhile), or the wait is over (the figures then say what was missing). Its drops count from the
  // way there's readings after that move, so nothing more is read before it (the preemption races it).
  let beforeBack = await sample(visited);
  const deadline = d.now() + DRILL_COPY_BACK_WAIT_MS;
  while (beforeBack.h !== null && d.now() < deadline) {
    const home = await sample(leader);
    if (home.h === null) break;
    const missing = [...beforeBack.h.connections].some(([key, c]) => ESTABLISHED_STATES.has(c.state) && home.h!.connections.get(key)?.binding !== c.binding);
    if (!missing) break;
    await d.sleep(COPY_BACK_POLL_MS);
    beforeBack = await sample(visited);
  }
  // Claims and releases since the group reached the visited director: a preemption may come before the drill asks.
  const back = await move(visited, leader, beforeBack, there.dropsAfter, there.doneAtUnixMs);
  return drillResult(group, leader, visited, [there.m, back.m], d.drServices(group));
}

/**
 * The verdict and the one line: a drill passes when both moves happened and no established connection was
 * missing. The group's dr services are named among what was not measured: their flows are in no director's
 * connection table, and they keep their real servers by the slot table every director computes alike (a flow
 * the old holder's flow memory kept off that table, on a server drained since, moves).
 */
export function drillResult(group: string, leader: string, visited: string, moves: readonly DrillMove[], drServices: readonly string[] = []): DrillResult {
  const missing = moves.reduce((n, m) => n + Math.max(0, m.establishedMissing), 0);
  // Unmeasured is not a pass: a drill that could not see the connections has not shown that they survive.
  const pass = moves.length === 2 && moves.every((m) => m.establishedMissing === 0);
  const figure = (n: number, unit = ''): string => (n < 0 ? 'not measured' : `${n}${unit}`);
  const words = moves.map((m) => `${m.from} -> ${m.to} ${m.tookMs < 0 ? 'by preemption, before the drill asked' : `in ${Math.round(m.tookMs)} ms`}: ${figure(m.holderlessMs, ' ms')} without a holder, `
    + `${figure(m.establishedMissing)} of ${figure(m.establishedBefore)} established connections missing, ${figure(m.youngCaught)} too young to be copied caught, `
    + `${figure(m.droppedPackets)} packets dropped by the kernels for an address not held`);
  const notMeasured = [...new Set(moves.map((m) => m.notMeasured).filter((w) => w !== ''))];
  if (drServices.length > 0) {
    notMeasured.push(`the flows of dr service${drServices.length === 1 ? '' : 's'} ${drServices.join(', ')}: no director holds a connection of theirs, `
      + 'and every director sends them to the real server its slot table hashes them to');
  }
  const summary = `switchover of ${group}: ${pass ? 'pass' : 'FAIL'}; ${words.join('; back ')}${notMeasured.length > 0 ? ` (not measured: ${notMeasured.join('; ')})` : ''}`;
  const fields: Record<string, string> = { group, oldLeader: leader, newLeader: visited, brokenConnections: String(missing) };
  if (drServices.length > 0) fields.drServices = drServices.join(',');
  moves.forEach((m, i) => {
    const p = i === 0 ? 'there' : 'back';
    fields[`${p}TookMs`] = String(Math.round(m.tookMs));
    fields[`${p}NoHolderMs`] = String(m.holderlessMs);
    fields[`${p}EstablishedBefore`] = String(m.establishedBefore);
    fields[`${p}EstablishedMissing`] = String(m.establishedMissing);
    fields[`${p}YoungCaught`] = String(m.youngCaught);
    fields[`${p}DroppedPackets`] = String(m.droppedPackets);
  });
  return { scenario: 'switchover', group, leader, visited, result: pass ? 'pass' : 'fail', summary, moves: [...moves], fields };
}
