import { hostPort } from '@lbd/config';
import type { ClusterStatus, GetHealthResponse, GetStatusResponse, RealServerHealth, RealServerStatus } from '@lbd/proto';

/**
 * The dashboard's picture of one director, as GET /api/state and the SSE stream send it: the admin API's
 * answers (GetStatus, GetHealth, GetClusterStatus) joined and cut down to what the page draws. Pure: the
 * route module (routes.ts) decides when to ask the agent; this file only shapes what it got, so the
 * joins are tested without an agent.
 *
 * Not here: the event timeline and drill results (they come from the EventSource, routes.ts) and any
 * HTML (the page, static/dashboard.js, draws this JSON).
 */

/**
 * How a real server looks on the grid. `drained`: configured weight 0 (quiescent: no new connections,
 * the established ones live on); `held-down`: down and held there for flapping. A server without a
 * health check is `up` (it always is, as far as the agent knows).
 */
export type ServerState = 'up' | 'down' | 'held-down' | 'drained';

/** One probe result of a server's check, for its sparkline. */
export interface LatencySample {
  readonly atUnixMs: number;
  readonly latencyMs: number;
  readonly ok: boolean;
}

export interface DashboardServer {
  /** `198.19.1.12:8080`, `[fd00::12]:8080`. */
  readonly server: string;
  readonly address: string;
  readonly port: number;
  readonly state: ServerState;
  /** As configured. */
  readonly weight: number;
  /** What the agent programs now (0 while down, less while ramping). */
  readonly effectiveWeight: number;
  /** The admin API's words: down, held-down, ramping, removed, kept, not-in-kernel, ... */
  readonly flags: readonly string[];
  readonly activeConnections: number;
  readonly inactiveConnections: number;
  /** Per second since the previous sample; null on the first. */
  readonly packetsPerSec: number | null;
  readonly bytesPerSec: number | null;
  /** Null for a server without a health check. */
  readonly check: {
    readonly kind: string;
    readonly description: string;
    readonly key: string;
    readonly intervalMs: number;
    readonly sinceUnixMs: number;
    readonly heldDownUntilUnixMs: number;
    readonly lastResult: { readonly ok: boolean; readonly message: string; readonly latencyMs: number } | null;
  } | null;
  /** Recent probe latencies of its check, oldest first (empty without a check). */
  readonly latencies: readonly LatencySample[];
}

export interface DashboardService {
  readonly key: string;
  readonly name: string;
  readonly vip: string;
  readonly port: number;
  readonly protocol: string;
  readonly mode: string;
  readonly scheduler: string;
  /** all-down, fallback-*, not-in-kernel, ... */
  readonly flags: readonly string[];
  readonly counts: Readonly<Record<ServerState, number>>;
  readonly realServers: readonly DashboardServer[];
}

export interface DashboardDirector {
  readonly id: string;
  /** The director that serves this page. */
  readonly self: boolean;
  readonly version: string;
  readonly healthy: boolean;
  readonly problems: readonly string[];
  /** Whether this page's director reaches it over the peer link (always true for itself). */
  readonly peerReachable: boolean;
  readonly peerAddress: string;
  readonly leaseLeftMs: number;
  readonly roles: readonly { readonly group: string; readonly role: string; readonly reason: string; readonly atUnixMs: number; readonly priority: number }[];
}

export interface DashboardGroup {
  readonly name: string;
  /** '' while vacant. */
  readonly leader: string;
  readonly term: number;
  readonly sinceUnixMs: number;
  readonly reason: string;
  /** The floating addresses the leader holds: vips, local addresses, gateways. */
  readonly addresses: readonly string[];
  readonly preempt: string;
}

export interface DashboardSyncPeer {
  readonly peer: string;
  readonly direction: string;
  readonly state: string;
  readonly caughtUp: boolean;
  readonly lagP99Ms: number;
  readonly lastError: string;
}

interface DashboardEcmp {
  readonly pathsAnnounced: number;
  /** Why every path is withdrawn (the director is unfit), or ''. */
  readonly withdrawnBecause: string;
  readonly lastError: string;
  readonly sessions: readonly { readonly router: string; readonly asn: number; readonly state: string }[];
}

export interface DashboardState {
  /** The agent's clock when the answers were put together. */
  readonly sampledAtUnixMs: number;
  /** The director serving the page: its cluster id, or `standalone` without a cluster. */
  readonly self: string;
  readonly config: { readonly revision: number; readonly sha256: string; readonly source: string; readonly lastApply: { readonly time: string; readonly result: string; readonly error: string } | null };
  readonly cluster: {
    readonly clustered: boolean;
    readonly etcdReachable: boolean;
    readonly worstCaseTakeoverMs: number;
    readonly timingProfile: string;
    readonly directors: readonly DashboardDirector[];
    readonly groups: readonly DashboardGroup[];
    readonly sync: { readonly enabled: boolean; readonly disabledReason: string; readonly peers: readonly DashboardSyncPeer[] };
    /** This director's side of the ECMP tier (its slots are among `groups`); null when it is not in the tier. */
    readonly ecmp: DashboardEcmp | null;
  };
  readonly services: readonly DashboardService[];
  /** Whether the agent has an event log: without one the page shows no timeline and no drill results. */
  readonly eventLog: boolean;
  /** Parts that could not be read this time, in words ("cluster status: etcd unreachable"); the rest is still shown. */
  readonly problems: readonly string[];
}

/** What one round of asking the agent gave: null for a part whose call failed (its error is in `problems`). */
export interface Answers {
  readonly status: GetStatusResponse | null;
  readonly health: GetHealthResponse | null;
  readonly cluster: ClusterStatus | null;
  /** When `status` was read: rates divide by the time between two status reads. */
  readonly statusAtUnixMs: number;
  /** Whether the agent has an event log (the page then shows the timeline and the drill results). */
  readonly eventLog: boolean;
  readonly problems: readonly string[];
}

/** The previous round's counters, per `service key|server`, for rates. */
export interface CounterSample {
  readonly atUnixMs: number;
  readonly counters: ReadonlyMap<string, { readonly packets: number; readonly bytes: number }>;
}

/** uint64 fields arrive as numbers from the agent and from proto-loader (longs: Number); anything else counts as 0. */
function num(v: unknown): number {
  if (typeof v === 'number') return v;
  if (v === undefined || v === null) return 0;
  const n = Number(String(v));
  return Number.isFinite(n) ? n : 0;
}

/** host:port as lbd writes it everywhere (IPv6 in brackets): @lbd/config's hostPort. */
export const serverName = hostPort;

/** Health's words in RealServerStatus.flags; RealServerHealth.flags has only these. */
const HEALTH_FLAGS = new Set(['down', 'held-down', 'ramping', 'removed', 'kept']);

function serverState(health: string, flags: readonly string[], weight: number): ServerState {
  if (flags.includes('held-down')) return 'held-down';
  if (health === 'down') return 'down';
  if (weight === 0) return 'drained';
  return 'up';
}

function rate(at: number, prev: CounterSample | null, key: string, field: 'packets' | 'bytes', value: number): number | null {
  const before = prev?.counters.get(key);
  if (prev === null || before === undefined || at <= prev.atUnixMs) return null;
  const delta = value - before[field];
  // A counter that went down was reset (a service re-created): no rate rather than a negative one.
  if (delta < 0) return null;
  return Math.round((delta * 1000) / (at - prev.atUnixMs));
}

/**
 * Joins one round of answers into the page's state. `latencies` gives a check's recent probe results by
 * its key; `prev` is the counters of the status read before `a.status` (for rates). Returns the state and
 * the counters of `a.status` (the `prev` once the next status is read).
 *
 * Health comes from GetHealth when it has the server (it may be read more often than GetStatus, so it is
 * the fresher), else from GetStatus; connections and the kernel's words (not-in-kernel) from GetStatus.
 */
export function dashboardState(
  a: Answers, now: number, prev: CounterSample | null, latencies: (checkKey: string) => readonly LatencySample[],
): { state: DashboardState; counters: CounterSample } {
  const healthBy = new Map<string, RealServerHealth>();
  for (const h of a.health?.realServers ?? []) healthBy.set(`${h.service ?? ''}|${serverName(h.address ?? '', h.port ?? 0)}`, h);
  const counters = new Map<string, { packets: number; bytes: number }>();

  const services: DashboardService[] = (a.status?.services ?? []).map((s) => {
    const key = s.key ?? '';
    const counts: Record<ServerState, number> = { up: 0, down: 0, 'held-down': 0, drained: 0 };
    const realServers = (s.realServers ?? []).map((rs: RealServerStatus): DashboardServer => {
      const server = serverName(rs.address ?? '', rs.port ?? 0);
      const id = `${key}|${server}`;
      const packets = num(rs.packets);
      const bytes = num(rs.bytes);
      counters.set(id, { packets, bytes });
      const h = healthBy.get(id);
      const kernelFlags = (rs.flags ?? []).filter((f) => !HEALTH_FLAGS.has(f));
      const flags = h === undefined ? [...(rs.flags ?? [])] : [...(h.flags ?? []), ...kernelFlags];
      const weight = rs.weight ?? 0;
      const state = serverState(h?.state ?? rs.health ?? '', flags, weight);
      counts[state]++;
      const checkKey = h?.check?.key ?? '';
      return {
        server, address: rs.address ?? '', port: rs.port ?? 0, state, weight, effectiveWeight: h?.effectiveWeight ?? rs.effectiveWeight ?? weight, flags,
        activeConnections: num(rs.activeConnections), inactiveConnections: num(rs.inactiveConnections),
        packetsPerSec: rate(a.statusAtUnixMs, prev, id, 'packets', packets), bytesPerSec: rate(a.statusAtUnixMs, prev, id, 'bytes', bytes),
        check: h === undefined ? null : {
          kind: h.check?.kind ?? '', description: h.check?.description ?? '', key: checkKey, intervalMs: h.check?.intervalMs ?? 0,
          sinceUnixMs: num(h.sinceUnixMs), heldDownUntilUnixMs: num(h.heldDownUntilUnixMs),
          lastResult: h.lastResult ? { ok: h.lastResult.ok ?? false, message: h.lastResult.message ?? '', latencyMs: num(h.lastResult.latencyMs) } : null,
        },
        latencies: checkKey === '' ? [] : latencies(checkKey),
      };
    });
    return {
      key, name: s.name ?? '', vip: s.vip ?? '', port: s.port ?? 0, protocol: s.protocol ?? '', mode: s.mode ?? '', scheduler: s.scheduler ?? '',
      flags: [...(s.flags ?? [])], counts, realServers,
    };
  });

  const c = a.cluster;
  const clustered = c?.clustered === true;
  const self = clustered ? (c?.self ?? '') : 'standalone';
  const directors: DashboardDirector[] = (c?.directors ?? []).map((d) => ({
    id: d.id ?? '', self: d.id === self, version: d.version ?? '', healthy: d.healthy ?? false, problems: [...(d.problems ?? [])],
    peerReachable: d.peerReachable ?? false, peerAddress: d.peerAddress ?? '', leaseLeftMs: num(d.leaseLeftMs),
    roles: (d.groups ?? []).map((g) => ({
      group: g.group ?? '', role: g.role ?? '', reason: g.reason ?? '', atUnixMs: num(g.atUnixMs), priority: d.priorities?.[g.group ?? ''] ?? 0,
    })),
  }));
  const groups: DashboardGroup[] = (c?.groups ?? []).map((g) => ({
    name: g.name ?? '', leader: g.leader ?? '', term: num(g.term), sinceUnixMs: num(g.sinceUnixMs), reason: g.reason ?? '',
    addresses: [...(g.addresses ?? [])], preempt: g.preempt ?? '',
  }));
  const sync = c?.sync;
  const e = c?.ecmp;
  const ecmp: DashboardEcmp | null = e === undefined || e === null ? null : {
    pathsAnnounced: num(e.pathsAnnounced), withdrawnBecause: e.withdrawnBecause ?? '', lastError: e.lastError ?? '',
    sessions: (e.sessions ?? []).map((x) => ({ router: x.router ?? '', asn: num(x.asn), state: x.state ?? '' })),
  };
  const agent = a.status?.agent;
  const last = agent?.lastApply;
  return {
    state: {
      sampledAtUnixMs: Math.round(now),
      self,
      config: {
        revision: num(clustered ? c?.configRevision : agent?.configRevision), sha256: agent?.configSha256 ?? '', source: agent?.configSource ?? '',
        lastApply: last ? { time: last.time ?? '', result: last.result ?? '', error: last.error ?? '' } : null,
      },
      cluster: {
        clustered, etcdReachable: c?.etcdReachable ?? false, worstCaseTakeoverMs: c?.worstCaseTakeoverMs ?? 0, timingProfile: c?.timingProfile ?? '',
        directors, groups,
        sync: {
          enabled: sync?.enabled ?? false, disabledReason: sync?.disabledReason ?? '',
          peers: (sync?.peers ?? []).map((p) => ({
            peer: p.peer ?? '', direction: p.direction ?? '', state: p.state ?? '', caughtUp: p.caughtUp ?? false,
            lagP99Ms: num(p.lagP99Ms), lastError: p.lastError ?? '',
          })),
        },
        ecmp,
      },
      services,
      eventLog: a.eventLog,
      problems: [...a.problems],
    },
    counters: { atUnixMs: a.statusAtUnixMs, counters },
  };
}

/**
 * Recent probe results per check key, fed from GetHealth's latest result of each check. A result is new
 * when its counts or latency differ from the one kept last (the admin API gives no probe time), so a
 * round that finds the same result adds nothing: each sample is one real probe, never a repeat. A check
 * probed faster than the health is read loses samples between reads; the sparkline then shows fewer.
 */
export class LatencyRings {
  private readonly rings = new Map<string, { mark: string; samples: LatencySample[] }>();

  constructor(private readonly size = 40) {}

  /** Takes this round's results; forgets checks that are gone. */
  record(health: GetHealthResponse, now: number): void {
    const seen = new Set<string>();
    for (const h of health.realServers ?? []) {
      const key = h.check?.key ?? '';
      const r = h.lastResult;
      if (key === '' || seen.has(key)) continue;
      seen.add(key);
      let ring = this.rings.get(key);
      if (ring === undefined) this.rings.set(key, (ring = { mark: '', samples: [] }));
      if (!r) continue;
      const latencyMs = num(r.latencyMs);
      const mark = `${h.successes ?? 0}/${h.failures ?? 0}/${r.ok ? 1 : 0}/${r.reason ?? ''}/${latencyMs}`;
      if (mark === ring.mark) continue;
      ring.mark = mark;
      ring.samples.push({ atUnixMs: Math.round(now), latencyMs: Math.round(latencyMs * 10) / 10, ok: r.ok ?? false });
      if (ring.samples.length > this.size) ring.samples.splice(0, ring.samples.length - this.size);
    }
    for (const key of this.rings.keys()) if (!seen.has(key)) this.rings.delete(key);
  }

  samples(key: string): readonly LatencySample[] {
    return this.rings.get(key)?.samples ?? [];
  }
}
