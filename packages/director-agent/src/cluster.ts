import { askAgainIfStalled } from '@lbd/clock';
import type { SyncStatus } from '@lbd/connsync';
import {
  DEFAULT_PRIORITY, addressToBigInt, bigIntToAddress, connSyncPort, slotGroup, type ClusterSettings, type Config, type VipGroup,
} from '@lbd/config';
import { TIMING_PROFILES, type BeatOutcome, type Coordinator, type EtcdTlsMaterial, type FailoverResult, type StoredConfig, type Transition } from '@lbd/coordinator';
import type { FloatingAddress } from '@lbd/dataplane';
import { DEFAULT_FLAP_POLICY, HealthScheduler, ProberSet, type CheckSpec, type Prober } from '@lbd/health-checker';
import {
  createPeerClient, type ClusterStatus, type ConnSyncStatus, type DrillResult__Output as DrillResult, type EcmpStatus,
  type PeerClient, type PeerSecurity,
} from '@lbd/proto';
import type { Logger } from '@lbd/log';
import type { ElectionNotice, ElectionSnapshot, GroupPlan } from './election-core.js';
import type { ElectionHost, ElectionHostFactory } from './election-thread.js';
import { runSwitchoverDrill, type DrillDeps } from './drill.js';
import type { EventLog } from './events.js';
import { EcmpSpeaker, slotPlans, type AnnouncerFactory } from './ecmp.js';
import type { SyncHost, SyncHostFactory } from './sync-host.js';
import { readTlsFiles } from './tls-files.js';

/**
 * This director's membership of a cluster: the election (run apart, by an ElectionHost: registration, one
 * election per vip group, the kernel lease, the floating addresses, the peer service that answers promises
 * and pings), the coordinator beside it (the cluster config in etcd, the event history, failovers, status),
 * connection sync and its listener, and this director's own health as the election sees it. The Reconciler stays
 * in charge of the data plane; the member tells the ClusterConfigSource which config to run.
 */

export interface ClusterMemberOptions {
  readonly settings: ClusterSettings;
  /** settings.etcdTls's files, read at start: the election thread's etcd connection uses them. */
  readonly etcdTls?: EtcdTlsMaterial | null;
  readonly version: string;
  /** Where the election runs: electionThread() in lbd-agent, inProcessElection(fakeOwner) in tests. */
  readonly election: ElectionHostFactory;
  readonly log: Logger;
  /** Where this director's transitions are recorded; the member also copies every event to etcd. */
  readonly events: EventLog;
  /** The cluster config, event history, failovers and status; the member closes it when it stops. */
  readonly coordinator: Coordinator;
  /** Called with every cluster config (text and revision) this director should run. */
  onConfig(c: StoredConfig): void;
  /** Whether the last data-plane apply failed (a director that cannot program its kernel must not lead). */
  dataPlaneProblem(): string | null;
  /** Runs track checks (default: the real exec prober). */
  readonly prober?: Prober;
  /** Where connection sync runs (which also needs agent.cluster.tls): lbd-agent's is a thread of its own. */
  readonly connectionSync?: SyncHostFactory;
  /** The kernel lease's drop counter (lease.ts readLeaseDrops): what a drill reads around each move. */
  readonly leaseDrops?: () => Promise<number | null>;
  /** This director's ct mark per real server of each service (keys from connsync's realServerName). */
  marks?(): Promise<ReadonlyMap<string, number>>;
  /** Connects the ECMP tier's BGP speaker (with agent.cluster.ecmp); lbd-agent's drives gobgpd. */
  readonly announcer?: AnnouncerFactory;
}

/**
 * What happened that no status keeps, counted for metrics (monotonic for the member's life): the beats of
 * the groups it led (a lost one is a heartbeat loss), the times it fenced itself, its promise requests to each peer, and the
 * gratuitous ARP / unsolicited NA announcements its claims asked the address owner for.
 */
export interface ClusterCounters {
  /** group → outcome → beats. */
  readonly beats: Map<string, Map<BeatOutcome, number>>;
  /** peer → answer → promise requests (`error`: no answer in time). */
  readonly promiseRequests: Map<string, Map<'granted' | 'refused' | 'error', number>>;
  /** group → address family → announcements (addresses × the group's announce.count, per claim). */
  readonly announcements: Map<string, Map<'ipv4' | 'ipv6', number>>;
  /** group → times this director fenced itself in it. */
  readonly fences: Map<string, number>;
  /** group → times the kernel ended this director's lease before the agent released (it ran late). */
  readonly leaseExpiries: Map<string, number>;
  /** etcd transactions that carried this director's beats, and the beats in them. */
  readonly beatTransactions: { transactions: number; beats: number };
}

function bump<A, B>(m: Map<A, Map<B, number>>, a: A, b: B, by = 1): void {
  let inner = m.get(a);
  if (inner === undefined) m.set(a, (inner = new Map()));
  inner.set(b, (inner.get(b) ?? 0) + by);
}

/** Bound on expanding a local-address range into floating addresses (validation allows bigger IPv6 ranges). */
const MAX_FLOATING_PER_RANGE = 1024;
/** A connection-sync stream's event fields, from its key `<peer> <send|receive>`. */
function streamFields(stream: string): { peer: string; direction: string } {
  const [peer = '', direction = ''] = stream.split(' ');
  return { peer, direction };
}

/** A kernel lease as status shows it: ms left, 0 once ended, -1 when none is held. */
function leaseLeft(ms: number | null): number {
  return ms === null ? -1 : Math.max(0, Math.round(ms));
}

/** The groups this director holds a kernel lease for, with the ms left (what a peer's ping answers). */
function leasesLeft(snap: ElectionSnapshot): Record<string, number> {
  const out: Record<string, number> = {};
  for (const g of snap.groups) if (g.kernelLeaseLeftMs !== null) out[g.name] = leaseLeft(g.kernelLeaseLeftMs);
  return out;
}

/** Longest a drill waits for one director's connections of a group (a dump of its table, streamed). */
const DRILL_SAMPLE_TIMEOUT_MS = 30_000;
/**
 * Longest a drill waits for one director's counters (no dump: milliseconds when it is up). Short, because a
 * move to the best other director reads every peer's first, and a peer that is down (provisioned, not
 * started) must not hold the move up: its figure is unknown, and it cannot be the target anyway.
 */
const DRILL_COUNTERS_TIMEOUT_MS = 2000;
/** Longest a planned switchover waits for the target to acknowledge the connections sent to it. */
const HANDOVER_DRAIN_MS = 250;
/** How often the election hears how far connection sync has caught up, and stream changes are recorded. */
const SYNC_CHECK_MS = 100;
/** How long a status waits for each peer's ping before it shows the peer unreachable. */
const PEER_PING_MS = 300;
/** How long a status call waits for connection sync's report: a sync thread that does not answer must not hang `lbadm cluster status`. */
const SYNC_REPORT_WAIT_MS = 2000;

export class ClusterMember {
  private readonly coordinator: Coordinator;
  readonly counters: ClusterCounters = {
    beats: new Map(), promiseRequests: new Map(), announcements: new Map(), fences: new Map(), leaseExpiries: new Map(), beatTransactions: { transactions: 0, beats: 0 },
  };
  private readonly peers = new Map<string, PeerClient>();
  private election: ElectionHost | null = null;
  /** Interfaces down, as the election thread last said. */
  private linkProblems: readonly string[] = [];
  private lastSynced = '';
  /** The problems the election last heard from here (null: none sent yet). */
  private lastAgentProblems: string | null = null;
  private config: Config | null = null;
  private groups = new Map<string, VipGroup>();
  private readonly leading = new Set<string>();
  private syncTimer: ReturnType<typeof setInterval> | undefined;
  private stopConfigWatch: (() => Promise<void>) | undefined;
  private lastHealthKey = '';
  private closed = false;
  /** Track checks: failing ones by name, with the reason. A director starts unfit until each has risen. */
  private readonly track: HealthScheduler | null;
  private readonly trackDown = new Map<string, string>();
  private security: PeerSecurity = { kind: 'insecure' };
  /** Null when off: then `syncOff` says why. */
  private sync: SyncHost | null = null;
  private syncOff = '';
  /** A report asked of sync and not answered yet: the next check does not ask again meanwhile. */
  private syncReporting = false;
  /** Per vip group: the floating addresses claimed, and why it last changed role (for the vip events). */
  private readonly held = new Map<string, Set<string>>();
  private readonly roleReason = new Map<string, string>();
  /** Per vip group: when this director last claimed and released its addresses (Unix ms), for drills. */
  private readonly claimedAt = new Map<string, number>();
  private readonly releasedAt = new Map<string, number>();
  /** Groups released whose transition (and so whose reason) has not come yet. */
  private readonly releasing = new Set<string>();
  /** Each connection-sync stream's last recorded state, by `<peer> <send|receive>`. */
  private readonly syncStates = new Map<string, string>();
  private readonly stopCopyingEvents: () => void;
  /** The ECMP tier's paths to the routers; null when this director has no agent.cluster.ecmp. */
  private readonly speaker: EcmpSpeaker | null;

  constructor(private readonly o: ClusterMemberOptions) {
    const s = o.settings;
    this.coordinator = o.coordinator;
    if (s.ecmp !== null && o.announcer === undefined) throw new Error('agent.cluster.ecmp is set but no announcer was given to the cluster member');
    this.speaker = s.ecmp === null ? null : new EcmpSpeaker({ director: s.ecmp, connect: o.announcer!, log: o.log, events: o.events, self: s.director });
    // The cluster's history: every event of this director goes to etcd too (queued, never waited for).
    this.stopCopyingEvents = o.events.subscribe((e) => this.coordinator.appendEvent(e));
    this.track = s.track.length === 0 ? null : new HealthScheduler({ prober: o.prober ?? new ProberSet() });
    for (const t of s.track) this.trackDown.set(t.name, 'not checked yet');
    this.track?.on('transition', (e) => {
      if (e.to === 'up') this.trackDown.delete(e.key);
      else this.trackDown.set(e.key, e.reason);
      this.o.log.info(e.to === 'up' ? 'track check ok' : 'track check failing', { check: e.key, reason: e.reason });
      this.o.events.record('health', `track ${e.key}`, e.from, e.to, e.reason, { track: e.key, director: s.director });
      this.healthMayHaveChanged();
    });
  }

  get settings(): ClusterSettings {
    return this.o.settings;
  }

  /** Serves connection sync, starts the election (which serves the peer service), and follows the cluster config. */
  async start(): Promise<void> {
    await this.loadSecurity();
    for (const p of this.o.settings.peers) this.peers.set(p.id, createPeerClient(p.address, p.port, this.security, p.id));
    if (this.security.kind === 'insecure') this.syncOff = 'agent.cluster.tls is not set (connection sync needs mutual TLS)';
    else if (!this.o.connectionSync) this.syncOff = 'no connection sync given to the agent';
    else {
      // Connection sync has a listener of its own (peerListen's port + 1): promises stay on the election's, and a
      // flood of connections there never delays them.
      const { address, port } = this.o.settings.peerListen;
      this.sync = this.o.connectionSync({
        self: this.o.settings.director, peers: this.o.settings.peers.map((p) => ({ ...p, port: connSyncPort(p.port) })), security: this.security,
        listen: { address, port: connSyncPort(port) },
      }, {
        log: this.o.log,
        groupState: async (group) => ({
          role: (await this.snapshot()).groups.find((g) => g.name === group)?.view.role ?? 'none',
          claimedAtUnixMs: this.claimedAt.get(group) ?? 0, releasedAtUnixMs: this.releasedAt.get(group) ?? 0,
          leaseDroppedPackets: (await this.o.leaseDrops?.().catch(() => null)) ?? -1,
        }),
      });
      await this.sync.start();
    }
    this.track?.set(this.o.settings.track.map((t): CheckSpec => ({
      key: t.name, target: { kind: 'exec', address: '127.0.0.1', port: 0, command: t.command },
      intervalMs: t.intervalMs, timeoutMs: t.timeoutMs, jitterMs: 0, thresholds: { rise: t.rise, fall: t.fall },
      flap: DEFAULT_FLAP_POLICY, startState: 'down',
    })));
    const s = this.o.settings;
    this.election = this.o.election({
      self: s.director, endpoints: s.etcd, etcdTls: this.o.etcdTls ?? null, prefix: s.prefix, timing: TIMING_PROFILES[s.timing], peers: s.peers,
      listen: s.peerListen, version: this.o.version, security: this.security,
      realtimePriority: s.realtimePriority, stateDir: `/run/lbd/${s.director}`, interfaces: s.interfaces,
    }, (n) => this.onNotice(n));
    this.healthMayHaveChanged();
    await this.election.start();
    this.syncTimer = setInterval(() => this.syncTick(), SYNC_CHECK_MS);
    this.stopConfigWatch = await this.coordinator.watchConfig((c) => {
      if (c === null) {
        this.o.log.warn('no cluster config in etcd yet; apply one with lbadm apply -f FILE', { prefix: this.o.settings.prefix });
        return;
      }
      this.o.onConfig(c);
    });
  }

  /**
   * The config the agent now runs (after its data-plane apply): elections for its groups start or stop to
   * match, and groups this director leads claim their new address set.
   */
  async configApplied(config: Config): Promise<void> {
    this.config = config;
    this.groups = new Map(config.vipGroups.map((g) => [g.name, g]));
    // The election guards every floating address of every group served here (the kernel lease), starts
    // or stops elections to match, and re-claims the groups it leads with their new addresses.
    const plans: GroupPlan[] = config.vipGroups.map((g) => ({
      settings: { name: g.name, priority: this.o.settings.priorities[g.name] ?? DEFAULT_PRIORITY, preempt: g.preempt, preemptDelayMs: g.preemptDelayMs },
      addresses: this.addressesOf(g.name), announce: g.announce,
    }));
    // The ECMP tier's slots are elected like vip groups (slot-<i>), under the same kernel lease.
    plans.push(...slotPlans(config.ecmp, this.o.settings));
    await this.election?.setPlan(plans);
    void this.speaker?.update(config, this.unfit());
    if (this.sync !== null) {
      this.sync.setMarks(await this.o.marks?.() ?? new Map());
      await this.sync.setConfig(config.services, config.ecmp);
    }
  }

  /** Leaves the cluster: releases every group (the standbys take over at once) and stops serving peers. */
  async stop(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.syncTimer !== undefined) clearInterval(this.syncTimer);
    this.track?.stop();
    await this.stopConfigWatch?.();
    // Paths first: the other directors announce the same next hops, so the routers lose nothing by it.
    await this.speaker?.close();
    // The election releases and vacates every group it leads (its notices arrive before its answer).
    await this.election?.stop({ vacate: true });
    for (const g of this.releasing) this.recordAddresses(g, new Set(), `vip group ${g} released: the director is stopping`);
    this.releasing.clear();
    await this.coordinator.close();
    this.stopCopyingEvents();
    await this.sync?.close();
    for (const c of this.peers.values()) c.close();
  }

  /** A planned switchover of `group` (to `to`, or the best other director), through the coordinator. */
  failover(group: string, to?: string): Promise<FailoverResult> {
    return this.coordinator.failover(group, to);
  }

  /**
   * `lbadm drill switchover`: moves `group` to `to` (or the best other director) and back, measured from the
   * two directors (drill.ts). Connections are read through connection sync (this director's table, a peer's
   * over GroupConnections); without sync only the times are measured. `failover` makes each move (the admin
   * API's, which records it).
   */
  drill(group: string, to: string, failover: DrillDeps['failover']): Promise<DrillResult> {
    const self = this.o.settings.director;
    return runSwitchoverDrill(group, to, {
      leaderOf: async (g) => (await this.coordinator.status([g])).groups.find((x) => x.name === g)?.record?.director ?? null,
      failover,
      holding: (director, g) => {
        if (this.sync === null) return Promise.reject(new Error(`connection sync is off on ${self}`));
        return director === self ? this.sync.holding(g, false) : this.sync.peerHolding(director, g, DRILL_SAMPLE_TIMEOUT_MS, false);
      },
      leaseDrops: async (director, g) => {
        if (this.sync === null) throw new Error(`connection sync is off on ${self}`);
        const h = director === self ? await this.sync.holding(g, true) : await this.sync.peerHolding(director, g, DRILL_COUNTERS_TIMEOUT_MS, true);
        if (h.leaseDroppedPackets < 0) throw new Error(`${director} cannot read its kernel's lease drops`);
        return h.leaseDroppedPackets;
      },
      directors: () => [self, ...this.o.settings.peers.map((p) => p.id)],
      holdingsUnavailable: () => (this.sync === null ? `connection sync is off on ${self}: ${this.syncOff}` : null),
      drServices: (g) => (this.config?.services ?? []).filter((s) => s.vipGroup === g && s.mode === 'dr').map((s) => s.name),
      now: () => Date.now(),
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    });
  }

  /** The ECMP part of the status: the speaker's sessions (as last read) and paths. */
  private ecmpStatusMessage(): EcmpStatus | null {
    if (this.speaker === null) return null;
    const st = this.speaker.status();
    const sessions = this.speaker.sessions();
    return {
      sessions: sessions.map((x) => ({ router: x.address, asn: x.asn, state: x.state, advertised: x.advertised ?? -1 })),
      pathsAnnounced: st.announced.length, withdrawnBecause: st.withdrawnBecause, lastError: st.lastError,
    };
  }

  /** Why this director must not serve (announce the tier's paths), or null when it may. */
  private unfit(): string | null {
    const problems = this.health().problems;
    return problems.length === 0 ? null : problems.join('; ');
  }

  /** The floating addresses of `group` under the running config. */
  addressesOf(group: string): FloatingAddress[] {
    const c = this.config;
    if (c === null) return [];
    const { vip, local } = this.o.settings.interfaces;
    const seen = new Set<string>();
    const out: FloatingAddress[] = [];
    const add = (address: string, ifname: string): void => {
      if (!seen.has(address)) { seen.add(address); out.push({ address, ifname }); }
    };
    for (const s of c.services) {
      if (s.vipGroup !== group) continue;
      add(s.vip, vip);
      if (s.localAddresses) {
        const first = addressToBigInt(s.localAddresses.first);
        const n = Math.min(s.localAddresses.size, MAX_FLOATING_PER_RANGE);
        for (let i = 0; i < n; i++) add(bigIntToAddress(first + BigInt(i), s.family), local);
      }
    }
    for (const gw of this.groups.get(group)?.gateways ?? []) add(gw, local);
    return out;
  }

  async status(configRevision: number): Promise<ClusterStatus> {
    const snap = await this.snapshot();
    const st = await this.coordinator.status(snap.groups.map((g) => g.name));
    const reach = new Map<string, boolean>();
    /** Each director's kernel lease per group: our own, and what each peer's ping answered. */
    const leases = new Map<string, Readonly<Record<string, number>>>([[st.self, leasesLeft(snap)]]);
    await Promise.all([...this.peers].map(async ([id, client]) => {
      const ping = (): Promise<boolean> => new Promise<boolean>((resolve) => {
        client.Ping({ from: this.o.settings.director }, { deadline: Date.now() + PEER_PING_MS }, (err, res) => {
          if (!err && res) leases.set(id, res.kernelLeaseLeftMs);
          resolve(!err);
        });
      });
      reach.set(id, await askAgainIfStalled(ping, PEER_PING_MS));
    }));
    const t = st.timing;
    const ecmp = this.ecmpStatusMessage();
    return {
      ...(ecmp === null ? {} : { ecmp }),
      clustered: true, self: st.self, etcdReachable: st.etcd.reachable, etcdEndpoints: [...st.etcd.endpoints],
      worstCaseTakeoverMs: st.worstCaseTakeoverMs, timingProfile: this.o.settings.timing,
      beatIntervalMs: t.beatIntervalMs, safetyWindowMs: t.safetyWindowMs, takeoverAfterMs: t.takeoverAfterMs,
      configRevision, sync: await this.syncStatus(),
      electionPlacement: snap.placement, electionTickLateP99Ms: snap.tickLateMs.p99, electionTickLateMaxMs: snap.tickLateMs.max,
      directors: st.directors.map((d) => ({
        id: d.id, version: d.version, healthy: d.healthy, problems: [...d.problems], priorities: { ...d.priorities },
        leaseLeftMs: d.leaseLeftMs ?? -1, peerAddress: d.peerAddress, peerReachable: d.id === st.self || reach.get(d.id) === true,
        groups: Object.entries(d.groups).map(([group, v]) => ({
          group, role: v.role, reason: v.lastTransition?.reason ?? '', atUnixMs: v.lastTransition?.at ?? 0,
          kernelLeaseLeftMs: leases.get(d.id)?.[group] ?? -1,
        })),
      })),
      groups: snap.groups.map((g) => {
        const vg = this.groups.get(g.name);
        const record = st.groups.find((x) => x.name === g.name)?.record ?? null;
        return {
          name: g.name, leader: record?.director ?? '', term: record?.term ?? 0, sinceUnixMs: record?.since ?? 0,
          reason: record?.reason ?? '', addresses: this.addressesOf(g.name).map((a) => a.address), role: g.view.role,
          beatAgeMs: g.beatAgeMs === null ? -1 : Math.round(g.beatAgeMs), preempt: vg?.preempt ?? '', preemptDelayMs: vg?.preemptDelayMs ?? 0,
          kernelLeaseLeftMs: leaseLeft(g.kernelLeaseLeftMs),
        };
      }),
    };
  }

  /** The election as it is now (empty before start and after a failed election thread). */
  private async snapshot(): Promise<ElectionSnapshot> {
    const none: ElectionSnapshot = { groups: [], tickLateMs: { max: 0, p99: 0 }, placement: 'not started' };
    if (this.election === null) return none;
    return this.election.snapshot().catch((err: unknown) => ({ ...none, placement: `unavailable: ${err instanceof Error ? err.message : String(err)}` }));
  }

  private async syncStatus(): Promise<ConnSyncStatus> {
    if (this.sync === null) return { enabled: false, disabledReason: this.syncOff, connections: 0, lossEvents: 0, peers: [] };
    let st: SyncStatus;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`connection sync did not answer within ${SYNC_REPORT_WAIT_MS} ms`)), SYNC_REPORT_WAIT_MS);
    });
    try {
      st = (await Promise.race([this.sync.report([]), late])).status;
    } catch (err) {
      return { enabled: false, disabledReason: err instanceof Error ? err.message : String(err), connections: 0, lossEvents: 0, peers: [] };
    } finally {
      clearTimeout(timer);
    }
    return {
      enabled: true, disabledReason: '', connections: st.source.connections, lossEvents: st.source.lossEvents,
      peers: [
        ...st.senders.map((x) => ({
          peer: x.peer, direction: 'to', state: x.state, caughtUp: x.caughtUp, groups: [...st.leading], sent: x.connectionsSent, received: 0,
          injected: x.injected, removed: 0, failed: x.failed, snapshots: x.snapshots, resyncs: x.resyncs, queued: x.queued,
          lagP50Ms: x.lagP50Ms, lagP99Ms: x.lagP99Ms, lastError: x.lastError,
        })),
        ...st.receivers.map((x) => ({
          peer: x.peer, direction: 'from', state: x.state, caughtUp: Object.keys(x.caughtUp).length > 0 && x.state === 'streaming',
          groups: Object.keys(x.caughtUp).sort(), sent: 0, received: x.received, injected: x.inserted + x.replaced + x.refreshed,
          removed: x.removed, failed: x.failed, snapshots: 0, resyncs: x.resyncs, queued: 0, lagP50Ms: 0, lagP99Ms: 0, lastError: x.lastError,
        })),
      ],
    };
  }

  /** Reads agent.cluster.tls's files; a missing or unreadable one stops the start with its path named. */
  private async loadSecurity(): Promise<void> {
    const tls = this.o.settings.tls;
    if (tls === null) return;
    this.security = { kind: 'tls', ...await readTlsFiles(tls, 'agent.cluster.tls') };
  }

  private health(): { ok: boolean; problems: string[] } {
    const problems = [...this.linkProblems, ...this.agentProblems()];
    return { ok: problems.length === 0, problems };
  }

  /** What keeps this director from leading that the election does not check itself (links are its own). */
  private agentProblems(): string[] {
    const problems = [...this.trackDown].map(([name, reason]) => `track check ${name}: ${reason}`);
    const dp = this.o.dataPlaneProblem();
    if (dp !== null) problems.push(dp);
    return problems;
  }

  /**
   * Whether this director may lead, as the events tell it (links from the election thread, track checks and
   * the data plane here); a change is recorded once and the election hears the problems it does not check
   * itself.
   */
  healthMayHaveChanged(): void {
    const agentProblems = this.agentProblems();
    const agentKey = agentProblems.join('|');
    if (this.election !== null && agentKey !== this.lastAgentProblems) {
      this.lastAgentProblems = agentKey;
      this.election.setAgentProblems(agentProblems);
    }
    const key = this.health().problems.join('|');
    if (key === this.lastHealthKey) return;
    if (this.config !== null) void this.speaker?.update(this.config, this.unfit());
    const was = this.lastHealthKey;
    this.lastHealthKey = key;
    this.o.events.record('health', `director ${this.o.settings.director}`, was === '' ? 'healthy' : 'unhealthy', key === '' ? 'healthy' : 'unhealthy',
      key === '' ? 'every check passes: it may lead' : `${key.split('|').join('; ')}: it leads nothing and takes nothing over`);
  }

  /** Every SYNC_CHECK_MS: how far sync has caught up goes to the election (after-sync), stream changes to the events. */
  private syncTick(): void {
    // The data plane's verdict has no event of its own here: look at it as often as at sync.
    this.healthMayHaveChanged();
    const tier = this.o.settings.ecmp === null ? null : this.config?.ecmp ?? null;
    // A slot's connections are its ECMP services' synced ones: with none, there is nothing to wait for.
    const slotsSynced = this.config?.services.some((s) => s.ecmp && s.sync.enabled) ?? false;
    const slots = Array.from({ length: tier?.slots ?? 0 }, (_, i) => slotGroup(i));
    const groups = [...this.groups.keys()];
    const sync = this.sync;
    if (sync === null) {
      this.setSynced(groups, slots, null);
      return;
    }
    if (this.syncReporting) return;
    this.syncReporting = true;
    sync.report(slotsSynced ? [...groups, ...slots] : groups).then((r) => {
      if (this.closed) return;
      this.setSynced(groups, slots, (g) => r.notCaughtUp[g] ?? null, slotsSynced);
      this.recordSyncStates(r.status);
    }, (err: unknown) => {
      if (this.closed) return;
      // The thread is gone (it said so in the log): every group counts as not caught up.
      this.setSynced(groups, slots, () => `connection sync unavailable: ${err instanceof Error ? err.message : String(err)}`, slotsSynced);
    }).finally(() => { this.syncReporting = false; });
  }

  /** Tells the election how far sync has caught up for every group and slot, when that changed. */
  private setSynced(groups: readonly string[], slots: readonly string[], notCaughtUp: ((g: string) => string | null) | null, slotsSynced = false): void {
    // Every group is reported, sync or not (the election counts a group it has no report on as not synced).
    const synced: Record<string, string | null> = {};
    for (const g of groups) synced[g] = notCaughtUp === null ? null : notCaughtUp(g);
    for (const g of slots) synced[g] = notCaughtUp !== null && slotsSynced ? notCaughtUp(g) : null;
    const key = JSON.stringify(synced);
    if (key !== this.lastSynced) {
      this.lastSynced = key;
      this.election?.setSynced(synced);
    }
  }

  /**
   * Connection-sync streams whose state changed since the last look (every link check): one event per
   * change, with the stream's own reason. `connecting` and `waiting` are passing states: a stream that
   * retries a dead peer stays `down` rather than adding an event per retry.
   */
  private recordSyncStates(st: SyncStatus): void {
    const now = new Map<string, { state: string; reason: string }>();
    for (const x of st.senders) {
      const reason = x.state === 'down' ? x.lastError : x.state === 'snapshot' ? `sending a snapshot: ${x.lastSnapshotReason}` : x.state === 'streaming' ? `snapshot sent (${x.lastSnapshotReason}); streaming changes` : '';
      now.set(`${x.peer} send`, { state: x.state, reason });
    }
    for (const x of st.receivers) {
      if (x.peer === '') continue;
      const reason = x.state === 'streaming' ? 'snapshot received; applying changes'
        : x.state === 'snapshot' ? `receiving a snapshot of the groups ${x.peer} leads` : x.lastError || x.state;
      now.set(`${x.peer} receive`, { state: x.state, reason });
    }
    for (const [stream, { state, reason }] of now) {
      const was = this.syncStates.get(stream) ?? '';
      if (state === was || state === 'connecting' || state === 'waiting') continue;
      this.syncStates.set(stream, state);
      this.o.events.record('sync', stream, was, state, reason || state, streamFields(stream));
    }
    for (const [stream, was] of this.syncStates) {
      if (now.has(stream)) continue;
      this.syncStates.delete(stream);
      const fields = streamFields(stream);
      this.o.events.record('sync', stream, was, 'closed', fields.direction === 'send' ? 'this director leads no vip group: nothing to send' : 'the peer\'s stream is gone', fields);
    }
  }

  /** What the election did, in order: counted, logged, recorded, and acted on by connection sync. */
  private onNotice(n: ElectionNotice): void {
    switch (n.kind) {
      case 'transition': return this.onTransition(n.transition);
      case 'beat': return bump(this.counters.beats, n.group, n.outcome);
      case 'beatTransaction':
        this.counters.beatTransactions.transactions += 1;
        this.counters.beatTransactions.beats += n.beats;
        return;
      case 'fenced':
        this.counters.fences.set(n.group, (this.counters.fences.get(n.group) ?? 0) + 1);
        return;
      case 'promise': return bump(this.counters.promiseRequests, n.peer, n.result);
      case 'links':
        this.linkProblems = n.problems;
        this.healthMayHaveChanged();
        return;
      case 'handover':
        void this.drainSync(n.group, n.to).finally(() => this.election?.handoverReady(n.id));
        return;
      case 'log':
        this.o.log[n.level](n.msg, n.fields);
        return;
      case 'claimed': {
        this.leading.add(n.group);
        if (!n.again) this.claimedAt.set(n.group, n.atUnixMs);
        for (const a of n.addresses) bump(this.counters.announcements, n.group, a.includes(':') ? 'ipv6' : 'ipv4', n.announceCount);
        this.o.log.info('claimed vip group', { group: n.group, addresses: n.addresses, durationMs: n.durationMs });
        const why = n.again ? `vip group ${n.group}'s addresses changed with the config` : `vip group ${n.group} led here: ${this.roleReason.get(n.group) ?? 'elected'}`;
        this.recordAddresses(n.group, new Set(n.addresses), why);
        this.syncLeading();
        return;
      }
      case 'released':
        this.leading.delete(n.group);
        this.releasedAt.set(n.group, n.atUnixMs);
        if (n.lateMs !== null) {
          // The kernel ended the lease before the agent let go: the election did not run on time (paused,
          // starved). The lease kept the vip safe; this is the sign that the box is starved.
          this.o.log.warn('kernel lease expired before the agent released', { group: n.group, lateMs: n.lateMs });
          this.counters.leaseExpiries.set(n.group, (this.counters.leaseExpiries.get(n.group) ?? 0) + 1);
          this.o.events.record('vip', n.group, 'leased', 'expired', `lease expired in the kernel: agent late by ${n.lateMs} ms`, { group: n.group, lateMs: n.lateMs });
        }
        // The election says why right after this (its transition): the vip events take that reason.
        this.releasing.add(n.group);
        this.syncLeading();
    }
  }

  /** A `vip` event per floating address of `group` that this director now holds or no longer holds. */
  private recordAddresses(group: string, now: ReadonlySet<string>, reason: string): void {
    const before = this.held.get(group) ?? new Set<string>();
    for (const a of now) if (!before.has(a)) this.o.events.record('vip', a, 'released', 'held', reason, { group });
    for (const a of before) if (!now.has(a)) this.o.events.record('vip', a, 'held', 'released', now.size > 0 ? `no longer in vip group ${group}'s addresses` : reason, { group });
    this.held.set(group, new Set(now));
  }

  /**
   * Before a planned switchover: lets the target acknowledge every connection sent so far, so a connection opened
   * a moment ago survives the move too. Bounded: a slow peer delays the switchover by at most this long.
   */
  private async drainSync(group: string, to: string): Promise<void> {
    if (this.sync === null) return;
    const started = performance.now();
    // Handshakes under way (and UDP flows not yet assured) go too: the target completes them with the same binding.
    const young = await this.sync.handOverYoung(group);
    const drained = await this.sync.drain(to, HANDOVER_DRAIN_MS);
    if (!drained) this.o.log.warn('connection sync: switching over before the target acknowledged every connection', { group, to, young, waitedMs: HANDOVER_DRAIN_MS });
    else this.o.log.info('connection sync: target caught up before the switchover', { group, to, young, waitedMs: Math.round(performance.now() - started) });
  }

  /** Starts or stops sending the groups' connections. Never awaited by a claim: reading the table must not delay it. */
  private syncLeading(): void {
    this.sync?.setLeading(new Set(this.leading)).catch((err: unknown) => this.o.log.error('connection sync: changing the groups sent failed', { error: err }));
  }

  private onTransition(t: Transition): void {
    this.o.log.info('vip group transition', { group: t.group, from: t.from, to: t.to, reason: t.reason });
    if (t.from !== t.to) this.roleReason.set(t.group, t.reason);
    if (this.releasing.delete(t.group)) this.recordAddresses(t.group, new Set(), `vip group ${t.group} released: ${t.reason}`);
    this.o.events.record('role', t.group, t.from, t.to, t.reason, { group: t.group });
  }
}
