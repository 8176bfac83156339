import { formatProblem, hostPort, serviceKey, type Config, type Problem, type Service } from '@lbd/config';
import type { Connection, Counters, ObservedRealServer, ObservedService, ObservedState } from '@lbd/dataplane';
import type {
  Connection as WireConnection, Problem as WireProblem, RealServerStats, RealServerStatus, ServiceStats, ServiceStatus,
} from '@lbd/proto';

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
      return { address: rs.address, port: rs.port, weight: rs.weight, observed: o };
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

export function serviceStatuses(config: Config, observed: ObservedState, conns: readonly Connection[]): ServiceStatus[] {
  const counts = countConnections(conns);
  return join(config, observed).map((j) => {
    const svc = j.configured;
    const flags = presenceFlags(svc !== undefined, j.observed !== undefined);
    if (svc?.expireOnRemove) flags.unshift('expire-on-remove');
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
      realServers: j.realServers.map((rs): RealServerStatus => {
        const n = counts.get(`${j.key}|${hostPort(rs.address, rs.port)}`) ?? { active: 0, inactive: 0 };
        const counters = rs.observed?.counters ?? ZERO;
        return {
          address: rs.address,
          port: rs.port,
          weight: rs.weight ?? 0,
          // Only the kernel can say whether new connections go there; a server it lacks gets none.
          eligible: rs.observed?.eligible ?? false,
          activeConnections: n.active,
          inactiveConnections: n.inactive,
          packets: counters.packets,
          bytes: counters.bytes,
          flags: presenceFlags(rs.weight !== undefined, rs.observed !== undefined),
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
    backendId: c.backendId,
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

/** A config problem on the wire: its parts, and the one-line text lbadm and the logs print. */
export function wireProblem(p: Problem): WireProblem {
  return {
    path: p.path,
    value: p.value === undefined ? '' : (JSON.stringify(p.value) ?? String(p.value)),
    rule: p.rule,
    fix: p.fix,
    text: formatProblem(p),
  };
}
