import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { AdminApi } from '@lbd/proto';
import {
  ECMP_DIRECTORS, ECMP_DR_VIP, ECMP_SPARE, ECMP_VIP, ecmpClusterConfig, ecmpFabricAddress, ecmpNextHop, ecmpSlotOfLocalAddress, namespacePids, removeOrphans, requireRoot, runPrefix, runTestClient, spawnTestClient,
  movedShare, startEcmpLab, waitFor, type BackgroundProcess, type EcmpDirector, type EcmpLab, type HttpResult,
} from '@lbd/testkit';

const LBADM_BIN = fileURLToPath(new URL('../../packages/lbadm/dist/bin/lbadm.js', import.meta.url));

/** The tier's slots in this suite (see before()). */
const SUITE_SLOTS = 8;

/**
 * The ECMP tier end to end (issue 13): three fullnat directors active for one vip behind a real FRR router,
 * each announcing the vip once per slot through its gobgpd, slots elected in etcd and synced owner to
 * peers. The figures the issue names are the benchmark's; here each promise is checked once. Beside every
 * load through the fullnat vip run streams through the tier's dr vip (issue 16: "failover and ECMP for
 * free"), which no fault may break either, sync or no sync.
 */

interface StreamReport { connections: number; intact: number; broken: number; perConnection: Array<{ error: string | null; server?: string | null; port: number | null }> }
interface UdpReport { flows: number; intact: number; broken: number; perFlow: Array<{ error: string | null }> }

describe('ECMP tier: active fullnat directors behind a BGP router @privileged', function () {
  this.timeout(300_000);
  let lab: EcmpLab<AdminApi>;

  before(async function () {
    this.timeout(150_000);
    await requireRoot(this, { commands: ['nft', 'ip', 'etcd', 'conntrack', 'openssl', 'gobgpd', 'vtysh'] });
    await removeOrphans('lbdt');
    // The issue's 8 slots: a director's beats for all its slots are one etcd write (coordinator beat-batch.ts).
    // Two full suites at 8 once saw a drill's streams fail to start after the previous drill; the causes
    // found (a drill starting mid-apply; ghost copies of ended connections, connsync source.ts) are fixed,
    // and a stream that fails to start is named by port in every director's conntrack (underLoad).
    // dir4 is provisioned (every director's peer) for the scale-out; its agent starts only there.
    lab = await startEcmpLab({ prefix: runPrefix('lbdt', 'ecmp'), slots: SUITE_SLOTS, spare: true, admin: (socket) => new AdminApi(socket) });
  });
  after(async function () {
    this.timeout(60_000);
    await lab?.destroy();
  });

  it('announces every slot\'s next hop, and spreads new connections over the directors as the slots they own', async () => {
    assert.deepEqual((await lab.routerNextHops()).sort(), Array.from({ length: lab.slots }, (_, i) => ecmpNextHop(i)).sort());
    const owners = await lab.waitSteady();
    const slotsOf = new Map<EcmpDirector, number>(ECMP_DIRECTORS.map((d) => [d, [...owners.values()].filter((o) => o === d).length]));
    const total = 3000;
    const r = await runTestClient<HttpResult>(lab.topology, 'client', ['http', '--url', `http://${ECMP_VIP}/`, '--count', String(total), '--concurrency', '16', '--new-connection']);
    assert.equal(r.ok, total, `every request answered: ${JSON.stringify(r.errors)}\n${lab.logs(15)}`);
    const byDirector = new Map<EcmpDirector, number>(ECMP_DIRECTORS.map((d) => [d, 0]));
    for (const [peer, n] of Object.entries(r.peers)) {
      const slot = ecmpSlotOfLocalAddress(peer, lab.slots);
      assert.notEqual(slot, null, `the real servers saw ${peer}, which is no slot's local address`);
      const owner = owners.get(slot!)!;
      byDirector.set(owner, byDirector.get(owner)! + n);
    }
    for (const d of ECMP_DIRECTORS) {
      const want = (total * slotsOf.get(d)!) / lab.slots;
      const got = byDirector.get(d)!;
      assert.ok(Math.abs(got - want) <= total * 0.1 / 3 + want * 0.1,
        `${d} owns ${slotsOf.get(d)} of ${lab.slots} slots: expected about ${want} connections, got ${got} (${JSON.stringify([...byDirector])})`);
    }
  });

  it('a director\'s box dies, then comes back and takes its slots back after their sync: every synced TCP stream and UDP flow lives on, the router keeps every next hop', async function () {
    const r = await boxDeath(lab, 'dir2', { revive: true });
    await assertNoneBroken(r, lab);
  });

  it('double fault, on the router\'s resilient group: a slot\'s owner and the director ranked next for it die together: the last director holds every slot\'s connections too (each slot is copied to every peer), so nothing breaks and no bucket moves', async function () {
    await lab.routerMode('resilient');
    let moved = -1;
    const r = await underLoad(lab, async (owners) => {
      const route = await lab.routerRoute();
      const buckets = await lab.routerBuckets();
      assert.equal(new Set(buckets).size, lab.slots, `the resilient group spreads its buckets over every slot's next hop: ${buckets.join(',')}`);
      const st = await lab.api('dir1').getClusterStatus({ timeoutMs: 2000 });
      const prio = (d: EcmpDirector, slot: number): number => st.directors.find((x) => x.id === d)?.priorities[`slot-${slot}`] ?? 0;
      const owner = owners.get(0)!;
      const next = ECMP_DIRECTORS.filter((d) => d !== owner).sort((a, b) => prio(b, 0) - prio(a, 0))[0]!;
      const last = ECMP_DIRECTORS.find((d) => d !== owner && d !== next)!;
      await Promise.all([lab.killBox(owner), lab.killBox(next)]);
      await waitFor(`${last} leading every slot`, 30_000, async () => {
        const now = await lab.slotOwners();
        return [...now.values()].every((d) => d === last) ? true : undefined;
      }, 250).catch((e: Error) => { throw new Error(`${e.message}\n${lab.logs(30)}`); });
      moved = movedShare(buckets, await lab.routerBuckets());
      assert.equal(await lab.routerRoute(), route, 'the router\'s route and buckets did not change');
      await Promise.all([lab.reviveBox(owner), lab.reviveBox(next)]);
      assert.deepEqual([...await lab.waitSteady()], [...owners], 'the slots went back to their owners after their sync');
    }).finally(() => lab.routerMode('hash-threshold'));
    process.stdout.write(`      share of the router's buckets that moved: ${(moved * 100).toFixed(1)} %\n`);
    await assertNoneBroken(r, lab);
  });

  it('BGP faults: gobgpd killed on a director that owns slots (its session and paths go, the others keep every slot in the router\'s group; the agent starts gobgpd again and announces again), then the router resets another director\'s session: nothing breaks, the route never changes', async function () {
    const r = await underLoad(lab, async (owners) => {
      const victim = [...owners.values()][0]!;
      assert.equal((await lab.routerPaths()).get(victim), lab.pathsPerDirector, `the router has ${victim}'s paths before`);
      const route = await lab.routerRoute();
      const pids: number[] = [];
      for (const pid of await namespacePids(lab.topology.ns(victim))) {
        if ((await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')).trim() === 'gobgpd') pids.push(pid);
      }
      assert.equal(pids.length, 1, `one gobgpd in ${victim}'s namespace (found ${pids.join(', ') || 'none'})`);
      process.kill(pids[0]!, 'SIGKILL');
      // The router notices the session gone (the TCP connection closed with the process), then, once the
      // agent's gobgpd is back and set up again, the paths return. Every slot stays in the group throughout,
      // announced by the other directors.
      await waitFor(`the router to drop ${victim}'s session`, 15_000, async () => (!(await lab.routerPaths()).has(victim) ? true : undefined), 100);
      assert.equal(await lab.routerRoute(), route, 'the router\'s route did not change without the victim\'s session');
      await waitFor(`${victim}'s paths back at the router`, 40_000, async () => ((await lab.routerPaths()).get(victim) === lab.pathsPerDirector ? true : undefined), 250)
        .catch((e: Error) => { throw new Error(`${e.message}\n${lab.agentLog(victim, 30)}`); });
      assert.equal(await lab.routerRoute(), route, 'the router\'s route did not change when the session came back');
      // The router resets a session (as an operator's `clear bgp`, or a policy change): the router drops
      // that director's paths at once and the director's gobgpd connects again.
      const other = ECMP_DIRECTORS.find((d) => d !== victim)!;
      await lab.router.vtysh(`clear bgp ipv4 unicast ${ecmpFabricAddress(other)}`);
      await waitFor(`the router to drop ${other}'s paths`, 15_000, async () => ((await lab.routerPaths()).get(other) !== lab.pathsPerDirector ? true : undefined), 50);
      assert.equal(await lab.routerRoute(), route, 'the router\'s route did not change during the session reset');
      await waitFor(`${other}'s paths back at the router`, 40_000, async () => ((await lab.routerPaths()).get(other) === lab.pathsPerDirector ? true : undefined), 250)
        .catch((e: Error) => { throw new Error(`${e.message}\n${lab.agentLog(other, 30)}`); });
      assert.equal(await lab.routerRoute(), route, 'the router\'s route did not change when the reset session came back');
      assert.deepEqual([...await lab.waitSteady()], [...owners], 'no slot moved');
    });
    await assertNoneBroken(r, lab);
  });

  it('a director whose kernel refuses the config withdraws its paths and hands its slots over before it could blackhole; once the refusal is gone it applies the config by itself and takes them back: nothing breaks, the route never changes', async function () {
    const r = await underLoad(lab, async (owners) => {
      const victim = [...owners.values()][0]!;
      const other = ECMP_DIRECTORS.find((d) => d !== victim)!;
      const route = await lab.routerRoute();
      // An element lbd did not write, where the next config puts a new service: the victim's kernel refuses
      // lbd's transaction (File exists), and lbd, which does not guess what someone else's element meant,
      // fails every apply until it is gone. The other directors apply the config.
      const foreign = `${ECMP_VIP} . tcp . 8443`;
      await lab.topology.exec(victim, 'nft', ['add', 'element', 'ip', 'lbd', 'dispatch', `{ ${foreign} : drop }`]);
      const extra = `  - { name: extra, vip: ${ECMP_VIP}, port: 8443, mode: fullnat, scheduler: mh, ecmp: true, realServers: [{ address: 198.19.1.11, port: 8080 }] }\n`;
      await lab.api(other).apply({ configText: ecmpClusterConfig({ slots: lab.slots }) + extra, source: 'ecmp test', author: 'ecmp test' }, { timeoutMs: 30_000 });
      await waitFor(`${victim} unfit: its paths withdrawn, its slots led by others`, 30_000, async () => {
        const paths = (await lab.routerPaths()).get(victim);
        const now = await lab.slotOwners();
        return paths === 0 && ![...now.values()].includes(victim) && [...now.values()].every((d) => d !== undefined) ? true : undefined;
      }, 100).catch((e: Error) => { throw new Error(`${e.message}\n${lab.agentLog(victim, 30)}`); });
      assert.equal(await lab.routerRoute(), route, 'the router\'s route did not change when the victim withdrew');
      await lab.topology.exec(victim, 'nft', ['delete', 'element', 'ip', 'lbd', 'dispatch', `{ ${foreign} }`]);
      // Its retry (backoff from 1 s) applies the cluster's config; fit again, it announces, and its slots
      // come back after their sync.
      assert.deepEqual([...await lab.waitSteady(60_000)], [...owners], `${victim} leads its slots again`);
      await waitFor(`${victim}'s paths back at the router`, 30_000, async () => ((await lab.routerPaths()).get(victim) === lab.pathsPerDirector ? true : undefined), 250);
      assert.equal(await lab.routerRoute(), route, 'the router\'s route did not change when the victim came back');
      await lab.api(other).apply({ configText: ecmpClusterConfig({ slots: lab.slots }), source: 'ecmp test', author: 'ecmp test' }, { timeoutMs: 30_000 });
    });
    await assertNoneBroken(r, lab);
  });

  it('lbadm drill switchover --slot N, as an operator runs it on live directors: the slot goes to another director and back, each move measured from both; the streams live on', async function () {
    interface Move { from: string; to: string; holderlessMs: number; establishedBefore: number; establishedMissing: number; youngCaught: number; droppedPackets: number }
    let drill: { result: string; summary: string; moves: Move[]; event: string; probe: { requests: number; failed: number } } | undefined;
    const r = await underLoad(lab, async (owners) => {
      const owner = owners.get(0)!;
      // From the owner's own lbadm, with a probe beside it (the client's address is the lab's; lbadm runs in the client's namespace).
      const out = await lab.topology.exec('client', process.execPath, [LBADM_BIN, '--socket', lab.socket(owner), 'drill', 'switchover', '--slot', '0', '--probe', `http://${ECMP_VIP}/`, '--json'], { timeoutMs: 150_000, allowFailure: true });
      // Exit 1 is a drill that ran and failed: its JSON says how (asserted below, with the summary).
      assert.ok(out.code === 0 || out.code === 1, `lbadm drill exit ${out.code}: ${out.stderr}${out.stdout}`);
      try {
        drill = JSON.parse(out.stdout) as typeof drill;
      } catch {
        assert.fail(`lbadm drill exit ${out.code} without its JSON: ${out.stderr}${out.stdout}`);
      }
      assert.deepEqual([...await lab.waitSteady()], [...owners], 'the slot is back with its owner');
      // The drill event carries the directors' figures and the probe's.
      const events = [];
      for await (const e of lab.api(owner).listEvents({ sinceUnixMs: 0, follow: false, scope: 'local', limit: 50, kind: 'drill', director: '' })) events.push(e);
      assert.ok(events.some((e) => e.id === drill!.event && e.fields.brokenConnections === '0' && e.fields.probeRequests !== undefined), JSON.stringify(events.slice(-2)));
    });
    process.stdout.write(`      ${drill!.summary}\n`);
    assert.equal(drill!.result, 'pass', drill!.summary);
    assert.equal(drill!.moves.length, 2);
    for (const m of drill!.moves) {
      // The load's streams and flows cross every slot: the owner held some of slot 0's, and the other director all of them.
      assert.ok(m.establishedBefore > 0 && m.establishedMissing === 0, JSON.stringify(m));
      assert.ok(m.holderlessMs >= 0 && m.holderlessMs < 5000, `time without a holder measured from both directors: ${JSON.stringify(m)}`);
      assert.ok(m.droppedPackets >= 0, `the kernels' lease drops read on both directors around the move: ${JSON.stringify(m)}`);
    }
    await assertNoneBroken(r, lab);
  });

  for (const mode of ['hash-threshold', 'resilient'] as const) {
    it(`scale-out and scale-in on the router's ${mode} group: a fourth director takes the slots it owns after their bulk sync, then leaves; every synced TCP stream and UDP flow lives on`, async function () {
      await lab.routerMode(mode);
      const before = await lab.waitSteady();
      let spareCopies = '';
      const r = await underLoad(lab, async () => {
        // Not only the same next hops: the same route, order and weights (or buckets), or the router's hash would move flows between slots.
        const route = await lab.routerRoute();
        await lab.startDirector(ECMP_SPARE);
        const out = await lab.waitSteady(90_000);
        const taken = [...out].filter(([, o]) => o === ECMP_SPARE).map(([i]) => i);
        // dir4 is a member from the start (every director's peer): with 8 slots over 4 members it owns two
        // (packages/director-agent/src/ecmp.ts, slotRanks), which dir1..3 cover while it is away.
        assert.ok(taken.length > 0, `${ECMP_SPARE} took no slot: a scale-out that moves nothing proves nothing (${JSON.stringify([...out])})`);
        await waitFor(`the router to receive ${ECMP_SPARE}'s paths`, 30_000, async () => ((await lab.routerPaths()).get(ECMP_SPARE) === lab.pathsPerDirector ? true : undefined), 250);
        assert.equal(await lab.routerRoute(), route, 'the router\'s route did not change when a director joined');
        // What the joining director failed to inject is gone with it: read while it still answers.
        spareCopies = `\n== copies ${ECMP_SPARE} had not injected before it stopped\n${await copiesNotInjected(lab, [ECMP_SPARE])}`;
        await lab.stopDirector(ECMP_SPARE);
        assert.deepEqual([...await lab.waitSteady()], [...before], 'the slots went back to their owners before the scale-out');
        assert.equal(await lab.routerRoute(), route, 'the router\'s route did not change when a director left');
      }).finally(() => lab.routerMode('hash-threshold'));
      await assertNoneBroken(r, lab, spareCopies);
    });
  }
});

describe('ECMP tier without connection sync: the same box death breaks the dead director\'s share of the fullnat streams, and no dr stream @privileged', function () {
  this.timeout(300_000);
  let lab: EcmpLab<AdminApi>;

  before(async function () {
    this.timeout(150_000);
    await requireRoot(this, { commands: ['nft', 'ip', 'etcd', 'conntrack', 'openssl', 'gobgpd', 'vtysh'] });
    await removeOrphans('lbdt');
    lab = await startEcmpLab({ prefix: runPrefix('lbdt', 'ecmpns'), slots: SUITE_SLOTS, sync: false, admin: (socket) => new AdminApi(socket) });
  });
  after(async function () {
    this.timeout(60_000);
    await lab?.destroy();
  });

  it('breaks about the share of the streams the dead director\'s slots carried (so the synced drill cannot pass by accident)', async function () {
    const r = await boxDeath(lab, 'dir2', { revive: false });
    // A stream's server writes every 50 ms: after the move its next line reaches a director without the
    // connection, which answers with a reset. Streams spread over slots by the router's hash.
    const share = r.streams.connections * r.victimSlots / lab.slots;
    assert.ok(r.streams.broken >= share / 2 && r.streams.broken <= share * 1.5 + 10,
      `expected about ${share} of ${r.streams.connections} streams broken (the dead director led ${r.victimSlots} of ${lab.slots} slots), got ${r.streams.broken}`);
    // dr needs no sync: the survivors hash the dead director's flows to the real servers it chose.
    assertDrIntact(r);
    process.stdout.write(`      (fullnat without sync: ${r.streams.broken} of ${r.streams.connections} streams broken; dr: ${r.drStreams.broken} of ${r.drStreams.connections})\n`);
  });
});

/**
 * Every TCP stream and UDP flow lived on; otherwise the first errors (with the real server each broken
 * stream was on) and the agents' last lines, which time the slot moves.
 */
async function assertNoneBroken(r: LoadResult, lab: EcmpLab<AdminApi>, before = ''): Promise<void> {
  const failed = r.streams.perConnection.filter((c) => c.error !== null).slice(0, 5);
  const broken = failed.map((c) => `client port ${c.port ?? '?'}: ${c.error} (${c.server ?? 'no server yet'})`);
  // Each broken stream's entries on every director (its slot is its local address's) and the agents' last lines.
  const logs = r.streams.broken + r.flows.broken > 0
    ? `\n== conntrack\n${await conntrackOf(lab, failed.flatMap((c) => (c.port === null ? [] : [c.port])))}\n== copies not injected\n${await copiesNotInjected(lab)}${before}`
      + `\n${r.recorder.report(failed.flatMap((c) => (c.port === null ? [] : [c.port])))}\n== the router's route changes\n${lab.routerChanges(30)}\n${lab.logs(25)}` : '';
  assert.equal(r.streams.broken, 0, `TCP streams broken: ${r.streams.broken} of ${r.streams.connections}: ${broken.join('; ')}${logs}`);
  assert.equal(r.flows.broken, 0, `UDP flows broken: ${r.flows.broken} of ${r.flows.flows}: ${r.flows.perFlow.map((c) => c.error).filter((e) => e !== null).slice(0, 5).join('; ')}${logs}`);
  assertDrIntact(r);
}

/** Every stream through the dr vip lived on: each director hashes a flow to the same real server, with nothing copied. */
function assertDrIntact(r: LoadResult): void {
  const failed = r.drStreams.perConnection.filter((c) => c.error !== null).slice(0, 5).map((c) => `client port ${c.port ?? '?'}: ${c.error} (${c.server ?? 'no server yet'})`);
  assert.equal(r.drStreams.broken, 0, `dr streams broken: ${r.drStreams.broken} of ${r.drStreams.connections}: ${failed.join('; ')}`);
}

/**
 * Each running director's receiving streams that failed to inject copies, with the kernel's reason: a copy
 * missing on a director is a connection that breaks when its slot moves there (a broken stream's first
 * suspect). Directors that do not answer are named as such.
 */
async function copiesNotInjected(lab: EcmpLab<AdminApi>, directors: readonly EcmpDirector[] = [...ECMP_DIRECTORS, ECMP_SPARE]): Promise<string> {
  const lines: string[] = [];
  for (const d of directors) {
    try {
      const st = await lab.api(d).getClusterStatus({ timeoutMs: 2000 });
      for (const p of st.sync?.peers ?? []) {
        if (p.direction === 'from' && Number(p.failed) > 0) lines.push(`${d} from ${p.peer}: ${p.failed} failed, last: ${p.lastError}`);
      }
    } catch (e) {
      lines.push(`${d}: no status (${(e as Error).message.split('\n')[0]})`);
    }
  }
  return lines.join('\n') || 'none';
}

/** streams and flows: through the fullnat vip; drStreams: through the dr vip (no state anywhere to copy). */
interface LoadResult { streams: StreamReport; flows: UdpReport; drStreams: StreamReport; recorder: FlightRecorder }

/**
 * For a broken stream's report, what happened to its connection as it happened: every director's conntrack
 * events for the streams' port (new, state changes, destroyed, with the kernel's time; an injected copy is a
 * new one too), and the neighbour entries of the router and the real servers that changed MAC or failed (a
 * next hop or local address answered by a director that does not hold its slot sends the slot's packets
 * where its lease drops them). Runs from the load's start to its end.
 */
class FlightRecorder {
  private constructor(private readonly events: ReadonlyMap<string, BackgroundProcess>, private readonly neighbours: ReadonlyMap<string, BackgroundProcess>) {}

  static start(lab: EcmpLab<AdminApi>): FlightRecorder {
    const t = lab.topology;
    const events = new Map<string, BackgroundProcess>();
    // The spare's box exists only in a lab provisioned with one (the synced lab is, the sync-off lab is not).
    for (const d of [...ECMP_DIRECTORS, ECMP_SPARE].filter((h) => t.hostNames.includes(h))) {
      events.set(d, t.spawn(d, 'conntrack', ['-E', '-p', 'tcp', '--dport', '9000', '-o', 'timestamp'], { label: `${d}:conntrack-events` }));
    }
    const neighbours = new Map<string, BackgroundProcess>();
    for (const h of ['router', 'rs1', 'rs2', 'rs3']) neighbours.set(h, t.spawn(h, 'ip', ['-ts', 'monitor', 'neigh'], { label: `${h}:neigh-monitor` }));
    return new FlightRecorder(events, neighbours);
  }

  /** The events of the client's connections from these ports, and the neighbour changes. */
  report(ports: readonly number[]): string {
    const out = ['== conntrack events of those connections, by director'];
    for (const [d, p] of this.events) {
      for (const line of p.stdout.split('\n')) {
        if (ports.some((port) => line.includes(` sport=${port} `))) out.push(`${d}: ${line.trim()}`);
      }
    }
    out.push('== neighbour entries that changed MAC or failed');
    for (const [h, p] of this.neighbours) {
      const macOf = new Map<string, string>();
      for (const line of p.stdout.split('\n')) {
        const m = /^(?:\[[^\]]*\]\s*)?(Deleted )?(\S+) dev (\S+)(?: lladdr (\S+))?.*?(\S+)$/.exec(line.trim());
        if (m === null) continue;
        const [, deleted, address, , mac, state] = m;
        const before = macOf.get(address!);
        if (mac !== undefined) macOf.set(address!, mac);
        if (deleted !== undefined || state === 'FAILED' || state === 'INCOMPLETE' || (mac !== undefined && before !== undefined && before !== mac)) out.push(`${h}: ${line.trim()}`);
      }
    }
    return out.join('\n');
  }

  async stop(): Promise<void> {
    await Promise.all([...this.events.values(), ...this.neighbours.values()].map((p) => p.stop(2000).catch(() => undefined)));
  }
}

/**
 * How long without a line breaks a stream, and how long the load may run at most: it ends AFTER_MOVES_MS
 * after the last move (the clients are stopped and report), so every stream a move broke or stalled has
 * been silent longer than STALL_MS by then. LOAD_MS bounds a test whose moves overrun (asserted below).
 */
const STALL_MS = 3000;
const AFTER_MOVES_MS = STALL_MS + 1000;
const LOAD_MS = 60_000;
/** Long-lived TCP streams through the dr vip beside the fullnat load. */
const DR_STREAMS = 60;

/**
 * Starts 200 TCP streams and 50 UDP flows through the vip on a steady tier, waits until every slot's
 * connections are copied (when sync is on), kills `victim`'s box and waits for its slots to be taken over;
 * with `revive`, brings the box back and waits until it leads its slots again (they move back after their
 * bulk sync: a planned move, as in a scale-out). Returns the clients' reports at the load's end and how
 * many slots the victim led.
 */
async function boxDeath(lab: EcmpLab<AdminApi>, victim: EcmpDirector, o: { revive: boolean }): Promise<LoadResult & { victimSlots: number }> {
  let victimSlots = 0;
  const r = await underLoad(lab, async (owners) => {
    const slots = [...owners].filter(([, d]) => d === victim).map(([s]) => s);
    victimSlots = slots.length;
    assert.ok(slots.length > 0, `${victim} leads no slot (owners ${JSON.stringify([...owners])}): its death would prove nothing`);
    await lab.killBox(victim);
    await waitFor(`the slots of ${victim} (${slots.join(', ')}) taken over`, 30_000, async () => {
      const now = await lab.slotOwners();
      return slots.every((s) => now.get(s) !== undefined && now.get(s) !== victim) ? true : undefined;
    }, 250).catch((e: Error) => { throw new Error(`${e.message}\n${lab.logs(30)}`); });
    assert.equal((await lab.routerNextHops()).length, lab.slots, 'the router\'s group did not change');
    if (o.revive) {
      await lab.reviveBox(victim);
      const back = await lab.waitSteady();
      assert.deepEqual([...back], [...owners], `${victim} leads its slots again`);
    }
  });
  return { ...r, victimSlots };
}

/**
 * Starts 200 TCP streams and 50 UDP flows through the vip on a steady tier, waits until every slot's
 * connections are copied to the running peers (when sync is on), runs `moves` (given the owners then),
 * and returns the clients' reports at the load's end.
 */
async function underLoad(lab: EcmpLab<AdminApi>, moves: (owners: ReadonlyMap<number, EcmpDirector>) => Promise<void>): Promise<LoadResult> {
  const t = lab.topology;
  // From a steady tier: the spread's connections may have moved slots (after-sync preemption) meanwhile.
  const owners = await lab.waitSteady();
  // A tier no connection has crossed yet resolves every neighbour (router → next hops, directors → real
  // servers, real servers → slot addresses) under the load's first burst of 250 connections: some of
  // those were lost in the sync-off lab, whose box death is its first traffic (the synced lab's spread
  // crosses it first). Cross it once first, and say what that cost.
  const warm = await runTestClient<HttpResult>(t, 'client', ['http', '--url', `http://${ECMP_VIP}/`, '--count', '64', '--concurrency', '16', '--new-connection']);
  if (warm.ok !== 64) process.stderr.write(`      (crossing the tier first: ${64 - warm.ok} of 64 new connections failed: ${JSON.stringify(warm.errors)})\n`);
  // The clients run for a fixed time and report at its end: a stream counts as broken when it errored or
  // got no line for STALL_MS, so the end must come at least that long after the last move (checked below).
  const started = Date.now();
  const streams = spawnTestClient(t, 'client', ['stream', '--target', `${ECMP_VIP}:9000`, '--connections', '200', '--duration-ms', String(LOAD_MS), '--stall-ms', String(STALL_MS)]);
  const flows = spawnTestClient(t, 'client', ['udp-flows', '--target', `${ECMP_VIP}:53`, '--flows', '50', '--interval-ms', '100', '--duration-ms', String(LOAD_MS), '--timeout-ms', '300', '--first-port', '41000']);
  const drStreams = spawnTestClient(t, 'client', ['stream', '--target', `${ECMP_DR_VIP}:9000`, '--connections', String(DR_STREAMS), '--duration-ms', String(LOAD_MS), '--stall-ms', String(STALL_MS)]);
  const loads: BackgroundProcess[] = [streams, flows, drStreams];
  const recorder = FlightRecorder.start(lab);
  try {
    for (const p of loads) {
      const ready = await p.waitForJson<{ ready: boolean; connections?: number; flows?: number; started?: number; failures?: Array<{ port: number | null; error: string }> }>((v) => 'ready' in v, 20_000);
      if (!ready.ready) {
        assert.fail(`not every connection started (load began ${new Date(started).toISOString()}): ${JSON.stringify(ready)}\n`
          + `real servers' entries for slot addresses not on their owner: ${await misdirectedServerEntries(lab, owners)}\n${await neighbours(lab, owners)}\n`
          + `the failed connections in the directors' conntrack:\n${await conntrackOf(lab, (ready.failures ?? []).map((f) => f.port).filter((p): p is number => p !== null))}\n`
          + `the router's route changes:\n${lab.routerChanges(20)}\n${lab.logs(15)}`);
      }
    }
    await lab.waitSynced();
    assert.deepEqual([...await lab.waitSteady()], [...owners], 'no slot moved while the load started');
    await moves(owners);
    const left = started + LOAD_MS - Date.now();
    assert.ok(left > AFTER_MOVES_MS, `the last move came ${LOAD_MS - left} ms into a ${LOAD_MS} ms load: too late to tell a stalled stream (${STALL_MS} ms) from a live one`);
    // A stream the moves broke has errored, or has had no line for more than STALL_MS when its client
    // ends: the clients end now (SIGTERM: each stops and reports), not at LOAD_MS.
    await delay(AFTER_MOVES_MS);
    const exits = await Promise.all(loads.map((p) => p.stop(5000)));
    // A client killed after the grace has printed only its ready line: its verdict would be missing, not clean.
    const names = ['fullnat streams', 'udp flows', 'dr streams'];
    exits.forEach((e, i) => assert.ok(e.code === 0 && e.signal === null, `the ${names[i]} client did not end with its report on SIGTERM: ${JSON.stringify(e)}`));
    return { streams: streams.lastJson<StreamReport>()!, flows: flows.lastJson<UdpReport>()!, drStreams: drStreams.lastJson<StreamReport>()!, recorder };
  } finally {
    await Promise.all(loads.map((p) => p.stop(2000).catch(() => undefined)));
    await recorder.stop();
  }
}

/**
 * For the record when connections fail to start: the real servers' neighbour entries for slot local
 * addresses that name another director's MAC than the slot's owner's (replies sent there are dropped).
 */
async function misdirectedServerEntries(lab: EcmpLab<AdminApi>, owners: ReadonlyMap<number, EcmpDirector>): Promise<string> {
  const t = lab.topology;
  const macOf = new Map<string, EcmpDirector>();
  for (const d of lab.running()) {
    const [link] = JSON.parse((await t.exec(d, 'ip', ['-j', 'link', 'show', 'eth1']).catch(() => ({ stdout: '[]' }))).stdout) as Array<{ address: string }>;
    if (link) macOf.set(link.address, d);
  }
  const out: string[] = [];
  for (const rs of ['rs1', 'rs2', 'rs3']) {
    const entries = JSON.parse((await t.exec(rs, 'ip', ['-j', 'neigh', 'show', 'dev', 'eth0']).catch(() => ({ stdout: '[]' }))).stdout) as Array<{ dst: string; lladdr?: string; state?: string[] }>;
    for (const e of entries) {
      const slot = ecmpSlotOfLocalAddress(e.dst, lab.slots);
      if (slot === null || e.lladdr === undefined) continue;
      const holder = macOf.get(e.lladdr) ?? e.lladdr;
      if (holder !== owners.get(slot)) out.push(`${rs}: ${e.dst} (slot ${slot}, owner ${owners.get(slot)}) -> ${holder} ${(e.state ?? []).join(',')}`);
    }
  }
  return out.length === 0 ? 'none' : out.join('; ');
}

/** For failure messages: each running director's conntrack entries for the client's connections from these ports to the vip. */
async function conntrackOf(lab: EcmpLab<AdminApi>, ports: readonly number[]): Promise<string> {
  const out: string[] = [];
  for (const port of ports.slice(0, 10)) {
    for (const d of lab.running()) {
      const r = await lab.topology.exec(d, 'conntrack', ['-L', '-p', 'tcp', '--orig-dst', ECMP_VIP, '--sport', String(port)]).catch((e: Error) => ({ stdout: `(${e.message})` }));
      for (const line of r.stdout.split('\n').filter((l) => l.trim() !== '')) out.push(`port ${port} on ${d}: ${line.trim()}`);
    }
  }
  return out.length === 0 ? 'none' : out.join('\n');
}

/** For failure messages: which director's slot MAC the router sends each slot's next hop to, against the owners. */
async function neighbours(lab: EcmpLab<AdminApi>, owners: ReadonlyMap<number, EcmpDirector>): Promise<string> {
  const t = lab.topology;
  const macs = new Map<string, string>();
  for (const d of lab.running()) {
    const links = JSON.parse((await t.exec(d, 'ip', ['-j', 'link', 'show']).catch(() => ({ stdout: '[]' }))).stdout) as Array<{ ifname: string; address: string }>;
    for (const l of links) if (l.ifname.startsWith('lbds')) macs.set(l.address, `${d}:${l.ifname}`);
  }
  const neigh = (await t.exec('router', 'ip', ['neigh', 'show', 'dev', 'eth1'])).stdout;
  return Array.from({ length: lab.slots }, (_, i) => {
    const m = new RegExp(`^${ecmpNextHop(i).replaceAll('.', '\\.')} lladdr (\\S+) (\\S+)`, 'm').exec(neigh);
    return `slot ${i}: owner ${owners.get(i)}, router sends to ${m ? `${macs.get(m[1]!) ?? m[1]} (${m[2]})` : 'no entry'}`;
  }).join('\n');
}
