import { hostPort, serviceKey, type Config, type Service } from '@lbd/config';
import { wireProblem } from '@lbd/operator-surfaces';
import type { Connection, Counters, ObservedRealServer, ObservedService, ObservedState } from '@lbd/dataplane';
import { describeTarget, type SchedulerStats } from '@lbd/health-checker';
import type {
  ApplyRecord as WireApplyRecord, Connection as WireConnection, GetHealthResponse, HealthEvent as WireHealthEvent, RealServerHealth,
  RealServerStats, RealServerStatus, ServiceStats, ServiceStatus,
} from '@lbd/proto';
import type { ApplyRecord } from './apply-record.js';
import type { Merge, MergedRealServer } from './desired.js';
import { targetText, type HealthEntry, type HealthEvent } from './health.js';

/**
 * The admin API's views, built from the running config, what the kernel has (observe) and conntrack.
 * Pure, so the joins (a configured service the kernel lacks, a kernel service the config no longer has)
 * are tested without a data plane. The config decides names and weights; the kernel decides counters
 * and whether a real server can take new connections.
 */

interface ConnCounts { active: number; inactive: number }

/** Per `service key|real server` counts: ESTABLISHED is active (IPVS ActiveConn), everything else inactive. */
function countConnections(conns: readonly Connection[]): Map<string, ConnCounts> {
  const counts = new Map<string, ConnCounts>();
  for (const c of conns) {
    if (c.service === null) continue;
    const k = `${c.service}|${hostPort(c.realServer.address, c.realServer.port)}`;
    const n = counts.get(k) ?? { active: 0, inactive: 0 };
    if (c.state === 'ESTABLISHED') n.active++;
    else n.inactive++;
    counts.set(k, n);
  }
  return counts;
}

const ZERO: Counters = { packets: 0, bytes: 0 };

interface JoinedService {
  readonly key: string;
  readonly configured: Service | undefined;
  readonly observed: ObservedService | undefined;
  readonly realServers: readonly JoinedRealServer[];
}

interface JoinedRealServer {
  readonly address: string;
  readonly port: number;
  readonly weight: number | undefined;
  /** Drained by the operator (its weight is then 0). */
  readonly drained?: boolean;
  readonly observed: ObservedRealServer | undefined;
}

/** Config order first (operators recognise their file), then what only the kernel has. */
function join(config: Config, observed: ObservedState): JoinedService[] {
  const byKey = new Map(observed.services.map((s) => [s.key, s]));
  const out: JoinedService[] = [];
  for (const svc of config.services) {
    const key = serviceKey(svc);
    const obs = byKey.get(key);
    byKey.delete(key);
    const obsRs = new Map((obs?.realServers ?? []).map((r) => [hostPort(r.address, r.port), r]));
    const realServers: JoinedRealServer[] = svc.realServers.map((rs) => {
      const k = hostPort(rs.address, rs.port);
      const o = obsRs.get(k);
      obsRs.delete(k);
      return { address: rs.address, port: rs.port, weight: rs.weight, drained: rs.drained === true, observed: o };
    });
    for (const o of obsRs.values()) realServers.push({ address: o.address, port: o.port, weight: undefined, observed: o });
    out.push({ key, configured: svc, observed: obs, realServers });
  }
  for (const obs of byKey.values()) {
    out.push({
      key: obs.key, configured: undefined, observed: obs,
      realServers: obs.realServers.map((o) => ({ address: o.address, port: o.port, weight: undefined, observed: o })),
    });
  }
  return out;
}

function presenceFlags(configured: boolean, inKernel: boolean): string[] {
  if (!configured) return ['not-in-config'];
  if (!inKernel) return ['not-in-kernel'];
  return [];
}

/** Health's words for a real server: down, held-down, removed, kept, ramping. */
export function healthFlags(m: MergedRealServer | undefined): string[] {
  if (m === undefined) return [];
  const flags: string[] = [];
  if (m.health === 'down') flags.push('down');
  if (m.heldDown) flags.push('held-down');
  if (m.removed) flags.push('removed');
  if (m.kept) flags.push('kept');
  if (m.ramping) flags.push('ramping');
  return flags;
}

/**
 * `merge`: the config merged with health (what the agent programs); without it, real servers are shown
 * as configured, with no health.
 */
export function serviceStatuses(config: Config, observed: ObservedState, conns: readonly Connection[], merge?: Merge): ServiceStatus[] {
  const counts = countConnections(conns);
  return join(config, observed).map((j) => {
    const svc = j.configured;
    const flags = presenceFlags(svc !== undefined, j.observed !== undefined);
    if (svc?.expireOnRemove) flags.unshift('expire-on-remove');
    const merged = merge?.byKey.get(j.key);
    if (merged?.allDown) flags.push('all-down', `fallback-${merged.fallback}`);
    return {
      name: svc?.name ?? '',
      key: j.key,
      vip: svc?.vip ?? j.observed?.vip ?? '',
      port: svc?.port ?? j.observed?.port ?? 0,
      protocol: svc?.protocol ?? j.observed?.protocol ?? '',
      mode: svc?.mode ?? '',
      scheduler: svc?.scheduler ?? '',
      persistenceSec: svc?.persistenceSec ?? 0,
      localAddresses: svc?.localAddresses ? { ...svc.localAddresses } : null,
      flags,
      synProxy: svc?.synProxy ?? false,
      connectionLimit: svc?.connectionLimit ?? 0,
      limitDrops: j.observed?.limitDrops.packets ?? 0,
      realServers: j.realServers.map((rs): RealServerStatus => {
        const server = hostPort(rs.address, rs.port);
        const n = counts.get(`${j.key}|${server}`) ?? { active: 0, inactive: 0 };
        const counters = rs.observed?.counters ?? ZERO;
        const m = rs.weight === undefined ? undefined : merged?.realServers.get(server);
        // A server left out on purpose (down, onDown remove) is not "missing" from the kernel.
        const presence = presenceFlags(rs.weight !== undefined, rs.observed !== undefined || m?.removed === true);
        return {
          address: rs.address,
          port: rs.port,
          weight: rs.weight ?? 0,
          // Only the kernel can say whether new connections go there; a server it lacks gets none.
          quiescent: rs.observed?.quiescent ?? true,
          // Deprecated (admin.proto): the opposite, for clients of before.
          eligible: rs.observed?.quiescent === false,
          activeConnections: n.active,
          inactiveConnections: n.inactive,
          packets: counters.packets,
          bytes: counters.bytes,
          flags: [...(rs.drained ? ['drained'] : []), ...healthFlags(m), ...presence],
          health: m?.health ?? '',
          effectiveWeight: m?.weight ?? rs.weight ?? 0,
        };
      }),
    };
  });
}

export function serviceStats(config: Config, observed: ObservedState, conns: readonly Connection[]): ServiceStats[] {
  const counts = countConnections(conns);
  return join(config, observed).map((j) => {
    const realServers = j.realServers.map((rs): RealServerStats => {
      const n = counts.get(`${j.key}|${hostPort(rs.address, rs.port)}`) ?? { active: 0, inactive: 0 };
      const c = rs.observed?.counters ?? ZERO;
      return { address: rs.address, port: rs.port, counters: { packets: c.packets, bytes: c.bytes, connections: n.active + n.inactive } };
    });
    const c = j.observed?.counters ?? ZERO;
    const connections = realServers.reduce((sum, rs) => sum + (rs.counters?.connections as number), 0);
    return { name: j.configured?.name ?? '', key: j.key, counters: { packets: c.packets, bytes: c.bytes, connections }, realServers };
  });
}

export function toWireConnection(c: Connection): WireConnection {
  return {
    protocol: c.protocol,
    state: c.state,
    client: { ...c.client },
    vip: { ...c.vip },
    localAddress: c.localAddress ? { ...c.localAddress } : null,
    realServer: { ...c.realServer },
    expiresInSec: Math.max(0, Math.round(c.expiresInSec)),
    unreplied: c.unreplied,
    realServerId: c.realServerId,
    service: c.service ?? '',
  };
}

/** A service key or name from a caller, as the key the data plane filters by; null when neither matches. */
export function resolveService(config: Config, keyOrName: string): string | null {
  for (const svc of config.services) {
    const key = serviceKey(svc);
    if (key === keyOrName || svc.name === keyOrName) return key;
  }
  return null;
}


/** GetHealth's answer: every checked (service, real server), with what the agent programs for it. */
export function healthResponse(entries: readonly HealthEntry[], merge: Merge, stats: SchedulerStats, now: number): GetHealthResponse {
  return {
    sampledAtUnixMs: Math.round(now),
    realServers: entries.map((e): RealServerHealth => {
      const server = hostPort(e.rs.address, e.rs.port);
      const m = merge.byKey.get(e.serviceKey)?.realServers.get(server);
      const r = e.record;
      const held = r.holdDownUntil !== null && r.holdDownUntil > now ? r.holdDownUntil : 0;
      return {
        service: e.serviceKey,
        serviceName: e.service.name,
        address: e.rs.address,
        port: e.rs.port,
        check: {
          kind: e.check.kind, target: targetText(e.target), description: describeTarget(e.target), key: e.key,
          intervalMs: e.check.intervalMs, timeoutMs: e.check.timeoutMs, rise: e.check.rise, fall: e.check.fall,
        },
        state: r.state,
        sinceUnixMs: Math.round(r.since),
        successes: r.successes,
        failures: r.failures,
        lastResult: r.lastResult
          ? { ok: r.lastResult.ok, reason: r.lastResult.reason, message: r.lastResult.message, latencyMs: r.lastResult.durationMs }
          : null,
        heldDownUntilUnixMs: Math.round(held),
        flags: healthFlags(m),
        weight: e.rs.weight,
        effectiveWeight: m?.weight ?? e.rs.weight,
      };
    }),
    scheduler: {
      checks: stats.checks, running: stats.running, waiting: stats.waiting, started: stats.started, completed: stats.completed,
      timedOut: stats.timedOut, late: stats.late, skipped: stats.skipped, askedAgain: stats.askedAgain,
      startDelayP50Ms: stats.dueToStartDelayMs.p50, startDelayP99Ms: stats.dueToStartDelayMs.p99, startDelayMaxMs: stats.dueToStartDelayMs.max,
    },
  };
}

export function wireHealthEvent(e: HealthEvent): WireHealthEvent {
  return {
    seq: e.seq, timeUnixMs: Math.round(e.time), service: e.service, serviceName: e.serviceName, address: e.address, port: e.port,
    checkKind: e.checkKind, from: e.from, to: e.to, reason: e.reason, probeReason: e.probeReason, latencyMs: e.latencyMs,
    heldDownUntilUnixMs: e.heldDownUntil === null ? 0 : Math.round(e.heldDownUntil), action: e.action,
  };
}

export function wireApplyRecord(r: ApplyRecord): WireApplyRecord {
  return {
    time: r.time.toISOString(), trigger: r.trigger, result: r.result, error: r.error, problems: r.problems.map(wireProblem),
    operations: r.operations, fullRebuild: r.fullRebuild, durationMs: r.durationMs, source: r.source, configSha256: r.sha256,
  };
}
