import { performance } from 'node:perf_hooks';
import * as grpc from '@grpc/grpc-js';
import type { ClusterSettings, Endpoint, PeerEndpoint } from '@lbd/config';
import {
  Elections, type BeatOutcome, type ElectionsOptions, type GroupSettings, type GroupView, type PeerTransport, type PromiseReply, type PromiseRequest,
  type Transition,
} from '@lbd/coordinator';
import type { AddressOwner, Announce, FloatingAddress } from '@lbd/dataplane';
import {
  bindServer, createPeerClient, peerIdsOfCall, peerServerCredentials, peerServiceDefinition, stopServer, type PeerClient, type PeerHandlers, type PeerSecurity,
} from '@lbd/proto';

/**
 * The election and everything it needs to act at once, in one place that runs apart from the rest of the
 * agent (DESIGN.md: "the election (beats, fence, takeover, claim) runs apart from sync, health, admin and UI
 * work, with its own etcd connection"): @lbd/coordinator's Elections, the kernel lease, the address claim
 * and release, and the peers it asks for promises. The agent's election thread (election-thread.ts) runs
 * one; tests with fake kernels run one in-process. What it knows of the rest of the agent comes in as
 * plain data (the plan, this director's health, how far sync has caught up), and what it did goes out as
 * notices; both cross a thread boundary, so they are structured-clone safe.
 */

/**
 * Everything the election needs at start; plain data (it is sent to the election thread). Etcd's
 * endpoints and prefix, the timing and the version go to Elections as they are.
 */
export interface ElectionCoreOptions extends Pick<ElectionsOptions, 'endpoints' | 'etcdTls' | 'prefix' | 'timing' | 'version'> {
  readonly self: string;
  readonly peers: readonly PeerEndpoint[];
  /**
   * Where this thread serves the peer service (promises and pings): agent.cluster.peerListen. A promise is
   * answered here, never on the agent's main thread, so a busy agent answers a fail-static leader in time.
   */
  readonly listen: Endpoint;
  readonly security: PeerSecurity;
  /** The election thread's SCHED_FIFO priority (0: normal priority). */
  readonly realtimePriority: number;
  /** Where a kernel address owner made by the election thread keeps its state (/run/lbd/<director>). */
  readonly stateDir: string;
  /** The interfaces floating addresses go on: a leader whose link is down resigns (checked here, every LINK_CHECK_MS). */
  readonly interfaces: ClusterSettings['interfaces'];
}

/** One vip group as the election needs it: who leads it how, and what a leader claims. */
export interface GroupPlan {
  readonly settings: GroupSettings;
  readonly addresses: readonly FloatingAddress[];
  readonly announce: Announce;
}

/** What the election did, for the rest of the agent (events, metrics, connection sync, logs). */
export type ElectionNotice =
  | { readonly kind: 'transition'; readonly transition: Transition }
  | { readonly kind: 'beat'; readonly group: string; readonly outcome: BeatOutcome }
  /** One etcd transaction carried `beats` beats (of as many groups). */
  | { readonly kind: 'beatTransaction'; readonly beats: number }
  | { readonly kind: 'fenced'; readonly group: string }
  | { readonly kind: 'promise'; readonly peer: string; readonly result: 'granted' | 'refused' | 'error' }
  /**
   * A planned switchover of `group` to `to` is about to release it: the rest of the agent gets connection
   * sync to the target and answers with handoverReady(id); the election waits at most HANDOVER_WAIT_MS.
   */
  | { readonly kind: 'handover'; readonly id: number; readonly group: string; readonly to: string }
  /** The interfaces that are down now (empty: all up), whenever that changes. */
  | { readonly kind: 'links'; readonly problems: readonly string[] }
  /** atUnixMs: when the addresses were up (wall clock: a drill compares it with another director's release). */
  | { readonly kind: 'claimed'; readonly group: string; readonly addresses: readonly string[]; readonly durationMs: number; readonly again: boolean; readonly announceCount: number; readonly atUnixMs: number }
  /** lateMs: how long before the release the kernel had already ended the lease (null: it had not). atUnixMs: when the addresses were gone. */
  | { readonly kind: 'released'; readonly group: string; readonly lateMs: number | null; readonly atUnixMs: number }
  | { readonly kind: 'log'; readonly level: 'info' | 'warn' | 'error'; readonly msg: string; readonly fields: Readonly<Record<string, unknown>> };

export interface ElectionSnapshot {
  readonly groups: readonly { readonly name: string; readonly view: GroupView; readonly beatAgeMs: number | null; readonly kernelLeaseLeftMs: number | null }[];
  /** How late the election's own timer ran, worst and 99th percentile over its last 4 096 ticks (ms). */
  readonly tickLateMs: { readonly max: number; readonly p99: number };
  /** Where it runs: "election thread, SCHED_FIFO 10 (thread 1234)", or why not at real-time priority. */
  readonly placement: string;
}

/**
 * Longest a planned switchover waits for the rest of the agent before it releases: its own bound on the
 * sync drain (250 ms, cluster.ts) plus a margin for the message round trip.
 */
const HANDOVER_WAIT_MS = 300;
/** How often links are checked: a leader whose vip interface goes down resigns within this. */
const LINK_CHECK_MS = 100;
/** How often the election's timer runs to measure its own lateness (the elections' own checks run on theirs). */
const TICK_PROBE_MS = 10;
const TICK_SAMPLES = 4096;
/** How long calls in flight get to end when the peer service stops. */
const SHUTDOWN_GRACE_MS = 1000;
/** The longest promise granted, whatever a peer asks for. */
const MAX_PROMISE_MS = 10_000;

export class ElectionCore {
  private readonly elections: Elections;
  private readonly peerClients = new Map<string, PeerClient>();
  private plan = new Map<string, GroupPlan>();
  private leading = new Set<string>();
  /** The rest of the agent's verdict (track checks, the data plane), and this thread's own (links). */
  private agentProblems: readonly string[] = ['starting'];
  private linkProblems: readonly string[] = [];
  private linkTimer: ReturnType<typeof setInterval> | undefined;
  private syncState: Readonly<Record<string, string | null>> = {};
  private readonly late = new Float64Array(TICK_SAMPLES);
  private lateCount = 0;
  private probe: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;
  private readonly handovers = new Map<number, () => void>();
  private nextHandover = 1;
  private server: grpc.Server | undefined;

  constructor(private readonly o: ElectionCoreOptions, private readonly owner: AddressOwner, private readonly notify: (n: ElectionNotice) => void,
    private readonly placement: string, transport?: PeerTransport) {
    this.elections = new Elections({
      id: o.self, endpoints: o.endpoints, etcdTls: o.etcdTls ?? null, prefix: o.prefix, timing: o.timing, peers: o.peers.map((p) => p.id),
      peerAddress: `${o.listen.address}:${o.listen.port}`,
      version: o.version, transport: transport ?? this.grpcTransport(),
      hooks: {
        lease: (g, forMs) => this.owner.lease(g, forMs), claim: (g) => this.claim(g), release: (g) => this.release(g),
        beforeHandover: (g, to) => this.handoverGate(g, to),
      },
      health: () => this.health(),
      // A group the agent has not reported on yet is not synced: a director that starts with a higher
      // priority than a group's leader would otherwise preempt (after-sync) before its first sync report,
      // and take the group without its connections (seen in the ECMP scale-out: the new director took
      // its slot at start, and the slot's streams stalled).
      syncedFor: (g) => (g in this.syncState ? this.syncState[g]! : 'connection sync not reported yet'),
      onTransition: (t) => this.notify({ kind: 'transition', transition: t }),
      onBeat: (group, outcome) => this.notify({ kind: 'beat', group, outcome }),
      onFenced: (group) => this.notify({ kind: 'fenced', group }),
      onBeatTransaction: (beats) => this.notify({ kind: 'beatTransaction', beats }),
    });
  }

  async start(): Promise<void> {
    await this.listen();
    this.tickProbe(performance.now() + TICK_PROBE_MS);
    await this.checkLinks();
    this.linkTimer = setInterval(() => { void this.checkLinks(); }, LINK_CHECK_MS);
    await this.elections.start();
  }

  /**
   * The groups to run (every config): the kernel guards their addresses, elections start or stop to match,
   * and groups led here claim their new address sets. The first plan also drops whatever a previous life
   * of this agent left: addresses are only ever held on the election's word.
   */
  async setPlan(groups: readonly GroupPlan[]): Promise<void> {
    const first = this.plan.size === 0;
    this.plan = new Map(groups.map((g) => [g.settings.name, g]));
    await this.owner.guard(new Map(groups.map((g) => [g.settings.name, g.addresses])));
    // A failed release leaves addresses that no kernel lease covers: the guard above keeps them from serving.
    if (first) for (const g of this.plan.keys()) await this.owner.release(g).catch(() => { /* see above */ });
    await this.elections.setGroups(groups.map((g) => g.settings));
    for (const g of [...this.leading]) {
      await this.claim(g).catch((err: unknown) => this.log('error', 're-claim failed', { group: g, error: String(err) }));
    }
  }

  /** The rest of the agent's problems (track checks, the data plane); link problems are this thread's own. */
  setAgentProblems(problems: readonly string[]): void {
    this.agentProblems = problems;
    this.elections.healthChanged();
  }

  setSynced(s: Readonly<Record<string, string | null>>): void {
    this.syncState = s;
  }

  /** The rest of the agent is ready for the switchover the 'handover' notice `id` announced. */
  handoverReady(id: number): void {
    this.handovers.get(id)?.();
  }

  snapshot(): ElectionSnapshot {
    const n = Math.min(this.lateCount, TICK_SAMPLES);
    const sorted = Array.from(this.late.subarray(0, n)).sort((a, b) => a - b);
    const pick = (q: number): number => (n === 0 ? 0 : Math.round(sorted[Math.min(n - 1, Math.floor(q * n))]! * 10) / 10);
    return {
      groups: this.elections.groups().map((g) => ({ ...g, kernelLeaseLeftMs: this.owner.leaseLeftMs(g.name) })),
      tickLateMs: { max: pick(1), p99: pick(0.99) },
      placement: this.placement,
    };
  }

  /** Stops the elections (`vacate`: release and hand the groups over now) and closes the address owner. */
  async stop(opts: { vacate: boolean }): Promise<void> {
    this.stopped = true;
    if (this.probe !== undefined) clearTimeout(this.probe);
    if (this.linkTimer !== undefined) clearInterval(this.linkTimer);
    await this.elections.close(opts);
    await this.owner.close({ releaseAll: opts.vacate });
    for (const c of this.peerClients.values()) c.close();
    await stopServer(this.server, SHUTDOWN_GRACE_MS);
  }

  /**
   * Serves lbd.peer.v1.Peer on agent.cluster.peerListen from this thread: a leader that etcd stopped
   * confirming asks for promises here, and its kernel lease runs on the answers, so they must not wait for
   * connection sync, health checks or the admin API (those stay on the agent's main thread, with
   * connection sync on the next port).
   */
  private async listen(): Promise<void> {
    const known = new Set(this.o.peers.map((p) => p.id));
    const self = this.o.self;
    const handlers: PeerHandlers = {
      RequestPromise: (call, cb) => {
        const r = call.request;
        if (!known.has(r.from)) {
          // Only configured peers may pin this director's takeover: anyone else is refused, loudly.
          cb({ code: grpc.status.PERMISSION_DENIED, details: `${r.from} is not in ${self}'s agent.cluster.peers` });
          return;
        }
        const named = peerIdsOfCall(call as unknown as Parameters<typeof peerIdsOfCall>[0]);
        if (this.o.security.kind === 'tls' && !(named ?? []).includes(r.from)) {
          cb({ code: grpc.status.PERMISSION_DENIED, details: `the client certificate names ${(named ?? []).join(', ') || 'no director'}, not ${r.from}` });
          return;
        }
        const req: PromiseRequest = { from: r.from, group: r.group, term: Number(r.term), beat: Number(r.beat), durationMs: Math.min(r.durationMs, MAX_PROMISE_MS) };
        this.elections.answerPromise(req).then((res) => cb(null, res), (err: unknown) => cb({ code: grpc.status.INTERNAL, details: String(err) }));
      },
      Ping: (_call, cb) => {
        const leases: Record<string, number> = {};
        for (const g of this.elections.groups()) {
          const left = this.owner.leaseLeftMs(g.name);
          if (left !== null) leases[g.name] = Math.max(0, Math.round(left));
        }
        cb(null, { director: self, version: this.o.version, kernelLeaseLeftMs: leases });
      },
    };
    const server = new grpc.Server();
    server.addService(peerServiceDefinition(), handlers);
    await bindServer(server, this.o.listen.address, this.o.listen.port, peerServerCredentials(this.o.security));
    this.server = server;
  }

  private async claim(group: string): Promise<void> {
    const again = this.leading.has(group);
    this.leading.add(group);
    const plan = this.plan.get(group);
    const addresses = plan?.addresses ?? [];
    const announce = plan?.announce ?? { count: 3, intervalMs: 200 };
    const started = performance.now();
    await this.owner.claim(group, addresses, announce);
    this.notify({
      kind: 'claimed', group, addresses: addresses.map((a) => a.address), durationMs: Math.round((performance.now() - started) * 10) / 10, again, atUnixMs: Date.now(),
      announceCount: announce.count,
    });
  }

  private async release(group: string): Promise<void> {
    this.leading.delete(group);
    const left = this.owner.leaseLeftMs(group);
    try {
      await this.owner.release(group);
    } finally {
      this.notify({ kind: 'released', group, lateMs: left !== null && left < 0 ? Math.round(-left) : null, atUnixMs: Date.now() });
    }
  }

  private handoverGate(group: string, to: string): Promise<void> {
    const id = this.nextHandover++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(), HANDOVER_WAIT_MS);
      const done = (): void => {
        clearTimeout(timer);
        this.handovers.delete(id);
        resolve();
      };
      this.handovers.set(id, done);
      this.notify({ kind: 'handover', id, group, to });
    });
  }

  private health(): { ok: boolean; problems: readonly string[] } {
    const problems = [...this.linkProblems, ...this.agentProblems];
    return { ok: problems.length === 0, problems };
  }

  private async checkLinks(): Promise<void> {
    const problems: string[] = [];
    for (const ifname of new Set([this.o.interfaces.vip, this.o.interfaces.local])) {
      const up = await this.owner.linkUp(ifname).catch(() => false);
      if (!up) problems.push(`interface ${ifname} is down`);
    }
    if (this.stopped || problems.join('|') === this.linkProblems.join('|')) return;
    this.linkProblems = problems;
    this.notify({ kind: 'links', problems });
    this.elections.healthChanged();
  }

  /** Measures how late this thread's timers run (what a beat would suffer), every TICK_PROBE_MS. */
  private tickProbe(due: number): void {
    if (this.stopped) return;
    this.probe = setTimeout(() => {
      const now = performance.now();
      this.late[this.lateCount++ % TICK_SAMPLES] = Math.max(0, now - due);
      this.tickProbe(now + TICK_PROBE_MS);
    }, TICK_PROBE_MS);
    this.probe.unref?.();
  }

  private log(level: 'info' | 'warn' | 'error', msg: string, fields: Record<string, unknown>): void {
    this.notify({ kind: 'log', level, msg, fields });
  }

  /** Promise requests to the peers over gRPC, from this thread (a busy main thread must not delay them). */
  private grpcTransport(): PeerTransport {
    for (const p of this.o.peers) this.peerClients.set(p.id, createPeerClient(p.address, p.port, this.o.security, p.id));
    return {
      requestPromise: (peerId, req, timeoutMs) => new Promise<PromiseReply>((resolve, reject) => {
        const client = this.peerClients.get(peerId);
        if (!client) return reject(new Error(`unknown peer ${peerId}`));
        client.RequestPromise({ from: req.from, group: req.group, term: req.term, beat: req.beat, durationMs: req.durationMs }, { deadline: Date.now() + timeoutMs }, (err, res) => {
          this.notify({ kind: 'promise', peer: peerId, result: err || !res ? 'error' : res.granted ? 'granted' : 'refused' });
          if (err || !res) return reject(err ?? new Error('no reply'));
          resolve({ granted: res.granted, etcdReachable: res.etcdReachable, reason: res.reason });
        });
      }),
    };
  }
}
