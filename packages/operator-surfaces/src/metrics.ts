import { hostname } from 'node:os';
import { GROUP_ROLES, hostPort, serviceKey, type ApplyResultWord, type Config, type LbdEvent, type RealServer, type Service } from '@lbd/config';
import type { ClusterStatus, ConnSyncPeer, GetStatusResponse, ServiceStatus } from '@lbd/proto';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { EventSource, OpsRoute } from './ops-types.js';

/** One probe result of a real server (a check's latency per attempt, which no record keeps). */
export interface ProbeSample {
  readonly service: Service;
  readonly rs: RealServer;
  readonly checkKind: string;
  readonly result: { readonly reason: string; readonly durationMs: number };
}

/** A real server's health transition. */
export interface HealthTransition {
  /** The service's key. */
  readonly service: string;
  readonly address: string;
  readonly port: number;
  readonly to: string;
}

/** One config apply attempt. */
export interface ApplySample {
  readonly trigger: string;
  readonly result: ApplyResultWord;
  readonly durationMs: number;
}

/** One checked real server, as its health record stands. */
export interface CheckedServer {
  readonly service: Service;
  readonly rs: RealServer;
  readonly record: { readonly state: string; readonly holdDownUntil: number | null; readonly transitions: readonly unknown[] };
}

/**
 * What a clustered director counted that no status keeps (monotonic): beats per group and outcome, fences,
 * kernel lease expiries, promise requests per peer and answer, announcements per group and family.
 */
export interface ClusterCounters {
  readonly beats: ReadonlyMap<string, ReadonlyMap<string, number>>;
  readonly promiseRequests: ReadonlyMap<string, ReadonlyMap<string, number>>;
  readonly announcements: ReadonlyMap<string, ReadonlyMap<string, number>>;
  readonly fences: ReadonlyMap<string, number>;
  readonly leaseExpiries: ReadonlyMap<string, number>;
  /** etcd transactions that carried this director's beats, and the beats in them. */
  readonly beatTransactions: { readonly transactions: number; readonly beats: number };
}

/** What the metrics read of one director (lbd-agent's wiring adapts its Agent to it). */
export interface MetricsSource {
  /** Its cluster id; null when alone (the host name labels the series then). */
  readonly director: string | null;
  readonly version: string;
  readonly startedAt: Date;
  /** The running config, its revision, and the last apply attempt. */
  config(): Config;
  revision(): number;
  lastApply(): ApplySample | null;
  /** Why the director cannot program its kernel now, or null. */
  dataPlaneProblem(): string | null;
  status(): Promise<GetStatusResponse>;
  /** The cluster's status and this member's counters; null when alone. */
  cluster(): { status(): Promise<ClusterStatus>; readonly counters: ClusterCounters } | null;
  /** Every checked real server of `config`, the probe scheduler's counts, and the health clock's now. */
  checkedServers(config: Config): readonly CheckedServer[];
  probeStats(): { readonly checks: number; readonly started: number; readonly timedOut: number; readonly late: number; readonly skipped: number; readonly askedAgain: number };
  healthNow(): number;
  /** Calls each handler as it happens; returns the unsubscribe. */
  subscribe(h: {
    probe(e: ProbeSample): void;
    health(e: HealthTransition): void;
    apply(r: ApplySample): void;
    healthApply(r: { readonly result: string }): void;
  }): () => void;
}

/**
 * Prometheus metrics of one agent, in its own Registry (never prom-client's global one: tests and a
 * restarted agent in one process each have their own). Names follow Prometheus conventions: `lbd_`, base
 * units (seconds, bytes), counters end in `_total`. docs/metrics.md lists every one.
 *
 * Most values are read on scrape from what the agent already keeps: its status and health views (the
 * kernel's counters and connections, the check records), the cluster status (roles, beats, connection
 * sync) and the cluster member's counters. Only what nothing keeps is counted as it happens: probe
 * latencies, health transitions and apply durations (MetricsSource `subscribe`) and, from the event log
 * when one is given, role transitions.
 *
 * Not here: serving them (the HTTPS ops listener dispatches `metricsRoutes`).
 */

export interface MetricsOptions {
  /**
   * The event log. Role transitions are counted from it: without one, lbd_vip_group_transitions_total is
   * not registered at all (absent, rather than a counter that never moves).
   */
  readonly events?: EventSource;
  /** Also export prom-client's process and Node.js metrics (lbd_process_*, lbd_nodejs_*); default true. */
  readonly processMetrics?: boolean;
}

/** Every role a director can have in a vip group: one series each, so `role="leader" == 1` alerts are easy. */

/** The labels of a service. */
const SERVICE_LABELS = ['service', 'vip', 'port', 'protocol'] as const;

/** The labels of a real server within a service. */
const RS_LABELS = ['service', 'vip', 'port', 'protocol', 'server'] as const;
type RsLabel = (typeof RS_LABELS)[number];
type RsLabels = Record<RsLabel, string>;

/** 1 ms .. 5 s: a LAN probe answers in about a millisecond, the longest timeout worth having is a few seconds. */
const PROBE_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
/** An nft transaction takes milliseconds for a few services and seconds for tens of thousands of elements. */
const APPLY_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

const num = (v: number | string | { toNumber(): number } | null | undefined): number =>
  v === null || v === undefined ? 0 : typeof v === 'object' ? v.toNumber() : Number(v);

export class Metrics {
  readonly registry = new Registry();
  private readonly unsubscribe: Array<() => void> = [];
  private scraping: Promise<unknown> = Promise.resolve();
  /** Label sets of the event-driven series per `service key|server`, so a removed server's series go. */
  private readonly eventSeries = new Map<string, { rs: RsLabels; probes: Set<string>; changes: Set<string> }>();

  /** Every metric, by what it measures. */
  private readonly m: Defined;

  constructor(private readonly source: MetricsSource, opts: MetricsOptions = {}) {
    this.registry.setDefaultLabels({ director: source.director ?? hostname() });
    if (opts.processMetrics !== false) {
      collectDefaultMetrics({ register: this.registry, prefix: 'lbd_' });
      // Gauges named like counters (the un-suffixed ones say the same): they would break `rate()` habits.
      for (const what of ['resources', 'handles', 'requests']) this.registry.removeSingleMetric(`lbd_nodejs_active_${what}_total`);
    }
    this.m = defineMetrics(this.registry, opts.events !== undefined);
    this.m.buildInfo.set({ version: source.version, node_version: process.version }, 1);
    this.m.startTime.set(source.startedAt.getTime() / 1000);

    this.unsubscribe.push(source.subscribe({
      probe: (e) => this.onProbe(e),
      health: (e) => this.onHealthEvent(e),
      apply: (r) => this.onApply(r),
      healthApply: (r) => this.m.healthApplies.inc({ result: r.result }),
    }));
    if (opts.events) this.unsubscribe.push(opts.events.subscribe((e) => this.onEvent(e)));
    // The apply at the agent's start happened before anyone could listen: counted from its record.
    const last = source.lastApply();
    if (last !== null) this.onApply(last);
  }

  /** Reads the current state and renders the exposition. Scrapes run one at a time. */
  scrape(): Promise<string> {
    const run = this.scraping.then(() => this.collect()).then(() => this.registry.metrics());
    this.scraping = run.catch(() => { /* the caller hears it through run; the next scrape starts afresh */ });
    return run;
  }

  /** Stops counting (the agent's listeners and the event subscription go). */
  close(): void {
    for (const u of this.unsubscribe.splice(0)) u();
  }

  /** Everything read on scrape: all reads first, then every series is replaced at once. */
  private async collect(): Promise<void> {
    const source = this.source;
    const member = source.cluster();
    const [status, cluster] = await Promise.all([source.status(), member === null ? null : member.status()]);
    const config = source.config();
    this.collectRealServers(status.services ?? [], config);
    this.collectSynDefence(status);
    const stats = source.probeStats();
    this.m.checks.set(stats.checks);
    for (const [c, v] of [
      [this.m.probesStarted, stats.started], [this.m.probesTimedOut, stats.timedOut], [this.m.probesLate, stats.late], [this.m.probesSkipped, stats.skipped],
      [this.m.probesAskedAgain, stats.askedAgain],
    ] as const) {
      c.reset();
      c.inc(v);
    }
    this.m.configRevision.set(source.revision());
    // The agent's own verdict: the one that keeps this director from leading.
    this.m.applyFailing.set(source.dataPlaneProblem() === null ? 0 : 1);
    this.collectCluster(cluster, member?.counters ?? null);
  }

  private collectRealServers(services: readonly ServiceStatus[], config: Config): void {
    for (const m of [this.m.connections, this.m.up, this.m.weight, this.m.effectiveWeight, this.m.quiescent, this.m.heldDown, this.m.flapScore]) m.reset();
    this.m.packets.reset();
    this.m.bytes.reset();
    for (const s of services) {
      const key = s.key ?? '';
      const base = { service: s.name || key, vip: s.vip ?? '', port: String(s.port ?? 0), protocol: s.protocol ?? '' };
      for (const r of s.realServers ?? []) {
        const labels: RsLabels = { ...base, server: hostPort(r.address ?? '', r.port ?? 0) };
        this.m.connections.set({ ...labels, state: 'active' }, num(r.activeConnections));
        this.m.connections.set({ ...labels, state: 'inactive' }, num(r.inactiveConnections));
        this.m.packets.inc(labels, num(r.packets));
        this.m.bytes.inc(labels, num(r.bytes));
        this.m.weight.set(labels, r.weight ?? 0);
        this.m.effectiveWeight.set(labels, r.effectiveWeight ?? 0);
        this.m.quiescent.set(labels, r.quiescent === true ? 1 : 0);
      }
    }
    const now = this.source.healthNow();
    for (const e of this.source.checkedServers(config)) {
      const labels = rsLabels(e.service, e.rs);
      const r = e.record;
      this.m.up.set(labels, r.state === 'up' ? 1 : 0);
      this.m.heldDown.set(labels, r.holdDownUntil !== null && r.holdDownUntil > now ? 1 : 0);
      this.m.flapScore.set(labels, r.transitions.length);
    }
  }

  /** Connection limits and their drops per service, and the SYN proxy's counters (the kernel's, per director). */
  private collectSynDefence(status: GetStatusResponse): void {
    for (const m of [this.m.connectionLimit, this.m.limitDrops, this.m.synProxySyns, this.m.synProxyCookies]) m.reset();
    for (const s of status.services ?? []) {
      if (num(s.connectionLimit) === 0) continue;
      const labels = { service: s.name || (s.key ?? ''), vip: s.vip ?? '', port: String(s.port ?? 0), protocol: s.protocol ?? '' };
      this.m.connectionLimit.set(labels, num(s.connectionLimit));
      this.m.limitDrops.inc(labels, num(s.limitDrops));
    }
    const sp = status.synProxy;
    if (sp === null || sp === undefined) return;
    this.m.synProxySyns.inc(num(sp.synReceived));
    this.m.synProxyCookies.inc({ result: 'valid' }, num(sp.cookieValid));
    this.m.synProxyCookies.inc({ result: 'invalid' }, num(sp.cookieInvalid));
  }

  private collectCluster(c: ClusterStatus | null, k: ClusterCounters | null): void {
    const gauges = [
      this.m.role, this.m.term, this.m.leaseRemaining, this.m.kernelLease, this.m.peerReachable, this.m.etcdReachable, this.m.directorHealthy, this.m.directorProblems,
      this.m.registrationLease, this.m.worstCaseTakeover, this.m.syncEnabled, this.m.syncSourceConnections, this.m.syncQueued, this.m.syncLag, this.m.syncCaughtUp,
      this.m.bgpSessionUp, this.m.bgpPathsAnnounced, this.m.bgpWithdrawn,
    ];
    const counters = [
      this.m.heartbeats, this.m.beatTransactions, this.m.fences, this.m.kernelLeaseExpiries, this.m.promiseRequests, this.m.announcements, this.m.syncLossEvents, this.m.syncSent, this.m.syncReceived, this.m.syncInjected,
      this.m.syncRemoved, this.m.syncFailed, this.m.syncSnapshots, this.m.syncResyncs,
    ];
    for (const m of gauges) m.reset();
    for (const m of counters) m.reset();
    if (c === null || k === null) return;
    const self = c.self ?? '';
    const safetyWindowMs = c.safetyWindowMs ?? 0;
    for (const g of c.groups ?? []) {
      const group = g.name ?? '';
      for (const role of GROUP_ROLES) this.m.role.set({ group, role }, g.role === role ? 1 : 0);
      if (num(g.term) > 0) this.m.term.set({ group }, num(g.term));
      const age = num(g.beatAgeMs);
      if (age >= 0) this.m.leaseRemaining.set({ group }, Math.max(0, safetyWindowMs - age) / 1000);
      if (num(g.kernelLeaseLeftMs) >= 0) this.m.kernelLease.set({ group }, num(g.kernelLeaseLeftMs) / 1000);
    }
    this.m.etcdReachable.set(c.etcdReachable === true ? 1 : 0);
    this.m.worstCaseTakeover.set((c.worstCaseTakeoverMs ?? 0) / 1000);
    for (const d of c.directors ?? []) {
      if (d.id === self) {
        this.m.directorHealthy.set(d.healthy === true ? 1 : 0);
        this.m.directorProblems.set(d.problems?.length ?? 0);
        if (num(d.leaseLeftMs) >= 0) this.m.registrationLease.set(num(d.leaseLeftMs) / 1000);
      } else {
        this.m.peerReachable.set({ peer: d.id ?? '' }, d.peerReachable === true ? 1 : 0);
      }
    }
    for (const [group, byResult] of k.beats) for (const [result, n] of byResult) this.m.heartbeats.inc({ group, result }, n);
    this.m.beatTransactions.inc(k.beatTransactions.transactions);
    for (const [group, n] of k.fences) this.m.fences.inc({ group }, n);
    for (const [group, n] of k.leaseExpiries) this.m.kernelLeaseExpiries.inc({ group }, n);
    for (const [peer, byResult] of k.promiseRequests) for (const [result, n] of byResult) this.m.promiseRequests.inc({ peer, result }, n);
    for (const [group, byFamily] of k.announcements) for (const [family, n] of byFamily) this.m.announcements.inc({ group, family }, n);
    const ecmp = c.ecmp;
    if (ecmp !== undefined && ecmp !== null) {
      for (const x of ecmp.sessions ?? []) this.m.bgpSessionUp.set({ router: x.router ?? '' }, x.state === 'established' ? 1 : 0);
      this.m.bgpPathsAnnounced.set(num(ecmp.pathsAnnounced));
      this.m.bgpWithdrawn.set(ecmp.withdrawnBecause ? 1 : 0);
    }
    const sync = c.sync;
    this.m.syncEnabled.set(sync?.enabled === true ? 1 : 0);
    if (sync?.enabled !== true) return;
    this.m.syncSourceConnections.set(num(sync.connections));
    this.m.syncLossEvents.inc(num(sync.lossEvents));
    for (const p of sync.peers ?? []) this.collectSyncPeer(p);
  }

  private collectSyncPeer(p: ConnSyncPeer): void {
    const peer = p.peer ?? '';
    const direction = p.direction ?? '';
    this.m.syncInjected.inc({ peer, direction }, num(p.injected));
    this.m.syncFailed.inc({ peer, direction }, num(p.failed));
    this.m.syncResyncs.inc({ peer, direction }, num(p.resyncs));
    this.m.syncCaughtUp.set({ peer, direction }, p.caughtUp === true ? 1 : 0);
    if (direction === 'to') {
      this.m.syncSent.inc({ peer }, num(p.sent));
      this.m.syncSnapshots.inc({ peer }, num(p.snapshots));
      this.m.syncQueued.set({ peer }, num(p.queued));
      this.m.syncLag.set({ peer, quantile: '0.5' }, num(p.lagP50Ms) / 1000);
      this.m.syncLag.set({ peer, quantile: '0.99' }, num(p.lagP99Ms) / 1000);
    } else {
      this.m.syncReceived.inc({ peer }, num(p.received));
      this.m.syncRemoved.inc({ peer }, num(p.removed));
    }
  }

  private series(service: Service, rs: RealServer): { rs: RsLabels; probes: Set<string>; changes: Set<string> } {
    const id = `${serviceKey(service)}|${hostPort(rs.address, rs.port)}`;
    let s = this.eventSeries.get(id);
    if (s === undefined) this.eventSeries.set(id, (s = { rs: rsLabels(service, rs), probes: new Set(), changes: new Set() }));
    return s;
  }

  private onProbe(e: ProbeSample): void {
    const s = this.series(e.service, e.rs);
    const labels = { ...s.rs, kind: e.checkKind, result: e.result.reason };
    s.probes.add(JSON.stringify(labels));
    this.m.probeDuration.observe(labels, e.result.durationMs / 1000);
  }

  private onHealthEvent(e: HealthTransition): void {
    const svc = this.source.config().services.find((x) => serviceKey(x) === e.service);
    const rs = svc?.realServers.find((x) => x.address === e.address && x.port === e.port);
    if (svc === undefined || rs === undefined) return; // a check of a config replaced in between: its series go anyway
    const s = this.series(svc, rs);
    const labels = { ...s.rs, to: e.to };
    s.changes.add(JSON.stringify(labels));
    this.m.stateChanges.inc(labels);
  }

  private onApply(r: ApplySample): void {
    if (r.result === 'rejected' || r.result === 'failed') this.m.applyFailures.inc({ trigger: r.trigger, result: r.result });
    // A rejected config never reached the data plane: it has no apply duration.
    if (r.result !== 'rejected') this.m.applyDuration.observe({ trigger: r.trigger, result: r.result }, r.durationMs / 1000);
    if (r.result === 'applied' || r.result === 'unchanged') this.pruneEventSeries(this.source.config());
  }

  private onEvent(e: LbdEvent): void {
    if (e.kind !== 'role' || this.m.transitions === null || e.from === e.to) return;
    this.m.transitions.inc({ group: e.subject, from: e.from === '' ? 'none' : e.from, to: e.to });
    // A slot moves to this director when it starts leading the slot, away when it stops.
    if (this.m.slotMoves !== null && /^slot-\d+$/.test(e.subject) && (e.to === 'leader' || e.from === 'leader')) {
      this.m.slotMoves.inc({ slot: e.subject, direction: e.to === 'leader' ? 'in' : 'out' });
    }
  }

  /** A real server (or service) the config no longer has: its probe and transition series go with it. */
  private pruneEventSeries(config: Config): void {
    const keep = new Set<string>();
    for (const svc of config.services) for (const rs of svc.realServers) keep.add(`${serviceKey(svc)}|${hostPort(rs.address, rs.port)}`);
    for (const [id, s] of this.eventSeries) {
      if (keep.has(id)) continue;
      for (const l of s.probes) this.m.probeDuration.remove(JSON.parse(l) as Record<string, string>);
      for (const l of s.changes) this.m.stateChanges.remove(JSON.parse(l) as Record<string, string>);
      this.eventSeries.delete(id);
    }
  }
}

/** Every metric of one registry; `withTransitions`: the event log is there to count role changes from. */
function defineMetrics(registry: Registry, withTransitions: boolean) {
  const registers = [registry];
  const gauge = <L extends string>(name: string, help: string, labelNames: readonly L[] = []): Gauge<L> =>
    new Gauge({ name, help, labelNames, registers });
  const counter = <L extends string>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> =>
    new Counter({ name, help, labelNames, registers });
  const rs = RS_LABELS;
  return {
    buildInfo: gauge('lbd_build_info', 'Always 1; the labels say which lbd-agent and Node.js run.', ['version', 'node_version']),
    startTime: gauge('lbd_agent_start_time_seconds', 'When this lbd-agent started (unix time).'),

    connections: gauge('lbd_real_server_connections', 'Conntrack entries of the service to the real server: active (ESTABLISHED, IPVS ActiveConn) or inactive (every other state).', [...rs, 'state']),
    packets: counter('lbd_real_server_packets_total', 'Packets the kernel forwarded to the real server for the service (its nft counter; restarts from 0 when the table is rebuilt).', rs),
    bytes: counter('lbd_real_server_bytes_total', 'Bytes the kernel forwarded to the real server for the service (its nft counter).', rs),
    connectionLimit: gauge('lbd_service_connection_limit', 'The service\'s connectionLimit: the most conntrack entries its new connections may hold on this director (services without one have no series).', SERVICE_LABELS),
    limitDrops: counter('lbd_service_limit_drops_total', 'Packets of new connections the service\'s connection limit dropped (SYNs and their retransmissions; its nft counter).', SERVICE_LABELS),
    synProxySyns: counter('lbd_synproxy_syns_total', 'SYNs the kernel\'s SYN proxy answered with a syncookie, all SYN-proxied services together (0 while none is).'),
    synProxyCookies: counter('lbd_synproxy_cookies_total', 'ACKs that brought a syncookie back to the SYN proxy: valid (a handshake completed, the connection opened to a real server) or invalid (dropped).', ['result']),
    up: gauge('lbd_real_server_up', 'Health of a checked real server: 1 up, 0 down (servers without a health check have no series).', rs),
    weight: gauge('lbd_real_server_weight', 'The real server\'s configured weight (0: quiescent by the operator\'s choice).', rs),
    effectiveWeight: gauge('lbd_real_server_effective_weight', 'The weight the agent programs now: 0 while down, ramping during slow start.', rs),
    quiescent: gauge('lbd_real_server_quiescent', 'Whether the real server is quiescent: the kernel schedules it no new connections, its established ones live on (1), or not (0).', rs),
    heldDown: gauge('lbd_real_server_held_down', 'Whether flap damping holds the checked real server down (1) whatever its probes say.', rs),
    flapScore: gauge('lbd_real_server_flap_score', 'State changes of the checked real server within its flap window (hold-down starts at the policy\'s maxTransitions).', rs),
    stateChanges: counter('lbd_real_server_state_changes_total', 'Health transitions of the real server in the service, by the state it went to.', [...rs, 'to']),
    probeDuration: new Histogram({
      name: 'lbd_probe_duration_seconds', help: 'Health probe latency per attempt, by check kind and result (ok, timeout, refused, status, ...).',
      labelNames: [...rs, 'kind', 'result'], buckets: PROBE_BUCKETS, registers,
    }),

    checks: gauge('lbd_health_checks', 'Health checks running (identical checks of one target in several services run once).'),
    probesStarted: counter('lbd_health_probes_started_total', 'Health probes started.'),
    probesTimedOut: counter('lbd_health_probes_timed_out_total', 'Health probes that did not answer within their timeout.'),
    probesLate: counter('lbd_health_probes_late_total', 'Health probes that started late because the concurrency limit was reached.'),
    probesSkipped: counter('lbd_health_probes_skipped_total', 'Health probe rounds skipped because the previous probe of the check was still running.'),
    probesAskedAgain: counter('lbd_health_probes_asked_again_total', 'Health probes asked again at once because a held-up event loop (a busy director), not the real server, decided their timeout.'),

    configRevision: gauge('lbd_config_revision', 'Revision of the config this director runs (the cluster config revision in a cluster; 0 before the first apply).'),
    applyDuration: new Histogram({
      name: 'lbd_config_apply_duration_seconds', help: 'Config applies to the data plane (one nft transaction each), by trigger and result (applied, unchanged, failed).',
      labelNames: ['trigger', 'result'], buckets: APPLY_BUCKETS, registers,
    }),
    applyFailures: counter('lbd_config_apply_failures_total', 'Configs not applied: rejected by validation, or failed in the data plane (the previous state stays).', ['trigger', 'result']),
    healthApplies: counter('lbd_health_applies_total', 'Applies of health changes to the data plane, by result (applied, unchanged, skipped, failed).', ['result']),
    applyFailing: gauge('lbd_data_plane_apply_failing', '1 while the last config or health apply failed: the kernel lags the desired state, and the director does not lead.'),

    role: gauge('lbd_vip_group_role', 'This director\'s role in the vip group: 1 for the role it has, 0 for the others.', ['group', 'role']),
    term: gauge('lbd_vip_group_term', 'The vip group\'s leadership term as etcd last showed it (it increases on every change of leader).', ['group']),
    leaseRemaining: gauge('lbd_vip_group_lease_remaining_seconds', 'While this director leads the group: time until it fences itself unless etcd confirms a beat (safety window minus the age of the last confirmed beat).', ['group']),
    kernelLease: gauge('lbd_vip_group_kernel_lease_remaining_seconds', 'Time left on this director\'s kernel lease for the group: the kernel forwards its traffic and answers ARP/ND for its addresses until then, whatever the agent does (absent while it holds none).', ['group']),
    kernelLeaseExpiries: counter('lbd_vip_group_kernel_lease_expiries_total', 'Times the kernel ended this director\'s lease before its agent released the group: the agent ran late (paused or starved); the lease kept the vip safe.', ['group']),
    heartbeats: counter('lbd_vip_group_heartbeats_total', 'Leader beats of groups this director led, by result: confirmed, failed (etcd did not answer: a heartbeat loss), superseded.', ['group', 'result']),
    beatTransactions: counter('lbd_beat_transactions_total', 'etcd transactions that carried this director\'s beats: one per beat interval however many groups (vip groups, ECMP slots) it leads, whose beats share it; lbd_vip_group_heartbeats_total counts the beats.'),
    fences: counter('lbd_vip_group_fences_total', 'Times this director fenced itself in the group: it led, etcd did not confirm its beats within the safety window and not every peer vouched, so it released the vips.', ['group']),
    promiseRequests: counter('lbd_peer_promise_requests_total', 'Fail-static promise requests to a peer while etcd did not confirm beats, by answer: granted, refused, error (no answer: a lost peer exchange).', ['peer', 'result']),
    peerReachable: gauge('lbd_peer_reachable', 'Whether the peer answered a ping over the peer link during this scrape (1) or not (0).', ['peer']),
    announcements: counter('lbd_announcements_total', 'Gratuitous ARP (ipv4) and unsolicited neighbour advertisements (ipv6) for floating addresses, as the claims of this director asked for them.', ['group', 'family']),
    etcdReachable: gauge('lbd_etcd_reachable', 'Whether this director reaches etcd (1) or not (0).'),
    directorHealthy: gauge('lbd_director_healthy', 'Whether this director is fit to lead (1) or not (0: a link down, a track check failing, the data plane not applying), as registered in etcd.'),
    directorProblems: gauge('lbd_director_problems', 'Problems that make this director unfit to lead, as registered in etcd.'),
    registrationLease: gauge('lbd_director_registration_lease_remaining_seconds', 'Time left on this director\'s registration lease in etcd (absent while etcd does not answer).'),
    worstCaseTakeover: gauge('lbd_takeover_worst_case_seconds', 'Worst case from a leader\'s death to a standby leading, from the election timing.'),
    bgpSessionUp: gauge('lbd_bgp_session_up', 'ECMP tier: whether this director\'s BGP session to the router is established (1) or not (0), as its speaker (gobgpd) reports.', ['router']),
    bgpPathsAnnounced: gauge('lbd_bgp_paths_announced', 'ECMP tier: paths this director announces (each ECMP vip once per slot).'),
    bgpWithdrawn: gauge('lbd_bgp_withdrawn', 'ECMP tier: 1 while this director withdraws every path because it is unfit to serve (its data plane failed, a track check fails), else 0.'),
    slotMoves: !withTransitions ? null : counter('lbd_slot_moves_total', 'ECMP tier: slots that moved to this director (direction in: it started leading the slot) or away from it (out), from the event log.', ['slot', 'direction']),
    transitions: !withTransitions ? null : counter('lbd_vip_group_transitions_total', 'Role changes of this director in the vip group (from the event log), by the roles before and after.', ['group', 'from', 'to']),

    syncEnabled: gauge('lbd_sync_enabled', 'Whether connection sync runs (1) or is off (0; see lbadm cluster status for why).'),
    syncSourceConnections: gauge('lbd_sync_source_connections', 'Connections this director copies to its peers now (those of the groups it leads).'),
    syncLossEvents: counter('lbd_sync_loss_events_total', 'Kernel event batches lost (each costs every peer a snapshot).'),
    syncSent: counter('lbd_sync_connections_sent_total', 'Connection changes sent to the peer.', ['peer']),
    syncReceived: counter('lbd_sync_connections_received_total', 'Connection-sync messages received from the peer.', ['peer']),
    syncInjected: counter('lbd_sync_connections_injected_total', 'Connections injected into the receiving kernel (direction to: the peer\'s, as it reports; from: this director\'s).', ['peer', 'direction']),
    syncRemoved: counter('lbd_sync_connections_removed_total', 'Connections removed from this director\'s kernel on the peer\'s word.', ['peer']),
    syncFailed: counter('lbd_sync_connections_failed_total', 'Connections the receiving kernel refused.', ['peer', 'direction']),
    syncSnapshots: counter('lbd_sync_snapshots_total', 'Full snapshots sent to the peer.', ['peer']),
    syncResyncs: counter('lbd_sync_resyncs_total', 'Resyncs after a gap in the stream.', ['peer', 'direction']),
    syncQueued: gauge('lbd_sync_queued_connections', 'Connection changes waiting behind the peer\'s window.', ['peer']),
    syncLag: gauge('lbd_sync_lag_seconds', 'From a kernel event on this director to the peer\'s acknowledgement, over the messages acknowledged in the last 10 s (quantile 0.5 and 0.99; 0 with none).', ['peer', 'quantile']),
    syncCaughtUp: gauge('lbd_sync_caught_up', 'Whether the stream is caught up (to: the peer acknowledged a whole snapshot; from: a group\'s snapshot completed).', ['peer', 'direction']),
  };
}

type Defined = ReturnType<typeof defineMetrics>;

function rsLabels(service: Service, rs: RealServer): RsLabels {
  return {
    service: service.name || serviceKey(service), vip: service.vip, port: String(service.port), protocol: service.protocol,
    server: hostPort(rs.address, rs.port),
  };
}

/** GET /metrics for the ops listener: the Prometheus text format, for any caller with the read role. */
export function metricsRoutes(metrics: Metrics): OpsRoute[] {
  return [{
    method: 'GET',
    path: '/metrics',
    role: 'read',
    async handle(_req, res) {
      let body: string;
      try {
        body = await metrics.scrape();
      } catch (err) {
        res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
        res.end(`lbd-agent: cannot collect metrics: ${err instanceof Error ? err.message : String(err)}\n`);
        return;
      }
      res.writeHead(200, { 'content-type': metrics.registry.contentType });
      res.end(body);
    },
  }];
}
