import { hostPort, serviceKey, type Config, type HealthState, type RealServer, type Service } from '@lbd/config';

/**
 * The desired data-plane state: the running config merged with health. Pure apart from a memo of what
 * was last committed (applied), which gives two things the data plane and operators rely on:
 * - identity: a service whose merged result did not change is handed to the data plane as the very same
 *   object as last time, so an apply after one transition touches one service, not ten thousand;
 * - keep-last: which real servers were up last, so fallback keep-last can keep them when all are down.
 *
 * What a real server becomes:
 * - no health check, or up: its configured weight; while ramping after coming up (slowStartMs), the
 *   slow-start weight the caller computes;
 * - down, onDown quiesce: weight 0 (established connections continue);
 * - down, onDown remove: left out, and the service copy gets expireOnRemove so the data plane expires its
 *   connections. (So while a server is removed, a real server the operator removes from the config in the
 *   same apply has its connections expired as well.)
 * When no real server of the service may take new connections and at least one is down by health, the
 * service's fallback decides: keep-last keeps the servers that were up last at their configured weights;
 * drop, reject and sorry-server are the data plane's business (it sees no real server with weight > 0), so
 * the service is passed through.
 *
 * Not here: when to apply, batching, timers (the agent), probing and thresholds (the health checker).
 */

export interface ServerHealth {
  readonly state: HealthState;
  /** The weight to program while up: the configured one, or less while ramping after slow start. */
  readonly upWeight: number;
  readonly heldDown: boolean;
}

/** A real server's health; null for a real server without a check (always up at its weight). */
export type HealthLookup = (service: Service, rs: RealServer) => ServerHealth | null;

export interface MergedRealServer {
  readonly server: string;
  readonly health: HealthState | null;
  /** The weight programmed now (0 when removed). */
  readonly weight: number;
  readonly removed: boolean;
  readonly ramping: boolean;
  /** Down, but kept at its weight by fallback keep-last. */
  readonly kept: boolean;
  readonly heldDown: boolean;
}

export interface MergedService {
  readonly key: string;
  readonly name: string;
  /** No real server may take new connections, and at least one is down by health. */
  readonly allDown: boolean;
  readonly fallback: Service['fallback'];
  /** The servers fallback keep-last keeps (in config order). */
  readonly kept: readonly string[];
  /** What the data plane gets. */
  readonly service: Service;
  readonly realServers: ReadonlyMap<string, MergedRealServer>;
  /** Servers with weight > 0 by their own health (not kept): what keep-last remembers. */
  readonly upServers: ReadonlySet<string>;
}

export interface Merge {
  readonly services: readonly Service[];
  readonly byKey: ReadonlyMap<string, MergedService>;
  /** Whether any real server is ramping (slow start): the caller re-applies on a timer while so. */
  readonly ramping: boolean;
  /** The shortest re-apply step of the ramping services: max(100 ms, slowStartMs / 20). */
  readonly rampStepMs: number | null;
}

/** A service entering or leaving the all-down state, as a commit saw it (for the log). */
export interface AllDownChange {
  readonly key: string;
  readonly name: string;
  readonly allDown: boolean;
  readonly fallback: Service['fallback'];
  readonly sorryServer: Service['sorryServer'];
  readonly kept: readonly string[];
}

interface Memo {
  readonly source: Service;
  readonly signature: string;
  readonly applied: Service;
  /** The servers up (weight > 0 by their own health) when the service last had any. */
  readonly lastUp: ReadonlySet<string>;
  readonly allDown: boolean;
}

const MIN_RAMP_STEP_MS = 100;

export class DesiredState {
  private memo = new Map<string, Memo>();

  /** The merged state for `config`; changes nothing (a dry run, a status view, or before applying). */
  merge(config: Config, lookup: HealthLookup): Merge {
    const services: Service[] = [];
    const byKey = new Map<string, MergedService>();
    let rampStepMs: number | null = null;
    for (const svc of config.services) {
      const m = this.mergeService(svc, lookup);
      services.push(m.service);
      byKey.set(m.key, m);
      for (const rs of m.realServers.values()) {
        if (!rs.ramping) continue;
        const step = Math.max(MIN_RAMP_STEP_MS, svc.slowStartMs / 20);
        rampStepMs = rampStepMs === null ? step : Math.min(rampStepMs, step);
      }
    }
    return { services, byKey, ramping: rampStepMs !== null, rampStepMs };
  }

  /** Records `merge` as applied; returns the services that entered or left the all-down state. */
  commit(config: Config, merge: Merge): AllDownChange[] {
    const changes: AllDownChange[] = [];
    const next = new Map<string, Memo>();
    for (const svc of config.services) {
      const key = serviceKey(svc);
      const m = merge.byKey.get(key);
      if (m === undefined) continue;
      const prev = this.memo.get(key);
      const lastUp = m.upServers.size > 0 ? m.upServers : (prev?.lastUp ?? new Set<string>());
      next.set(key, { source: svc, signature: signature(m), applied: m.service, lastUp, allDown: m.allDown });
      if ((prev?.allDown ?? false) !== m.allDown) {
        changes.push({ key, name: svc.name, allDown: m.allDown, fallback: svc.fallback, sorryServer: svc.sorryServer, kept: m.kept });
      }
    }
    this.memo = next;
    return changes;
  }

  private mergeService(svc: Service, lookup: HealthLookup): MergedService {
    const key = serviceKey(svc);
    const memo = this.memo.get(key);
    const out = new Map<string, MergedRealServer>();
    const upServers = new Set<string>();
    let anyDown = false;
    for (const rs of svc.realServers) {
      const server = hostPort(rs.address, rs.port);
      const h = lookup(svc, rs);
      if (h === null || h.state === 'up') {
        const weight = h === null ? rs.weight : h.upWeight;
        if (weight > 0) upServers.add(server);
        out.set(server, { server, health: h?.state ?? null, weight, removed: false, ramping: weight < rs.weight, kept: false, heldDown: false });
        continue;
      }
      anyDown = true;
      const removed = svc.onDown === 'remove';
      out.set(server, { server, health: 'down', weight: 0, removed, ramping: false, kept: false, heldDown: h.heldDown });
    }
    const allDown = anyDown && upServers.size === 0;
    const kept: string[] = [];
    if (allDown && svc.fallback === 'keep-last' && memo !== undefined) {
      for (const rs of svc.realServers) {
        const server = hostPort(rs.address, rs.port);
        const m = out.get(server);
        if (m === undefined || m.health !== 'down' || rs.weight === 0 || !memo.lastUp.has(server)) continue;
        out.set(server, { ...m, weight: rs.weight, removed: false, kept: true });
        kept.push(server);
      }
    }
    const merged: MergedService = {
      key, name: svc.name, allDown, fallback: svc.fallback, kept, service: svc, realServers: out, upServers,
    };
    const sig = signature(merged);
    let service: Service;
    if (memo !== undefined && memo.source === svc && memo.signature === sig) {
      service = memo.applied;
    } else if (svc.realServers.every((rs) => { const m = out.get(hostPort(rs.address, rs.port))!; return !m.removed && m.weight === rs.weight; })) {
      // Health changes nothing: the config's own object.
      service = svc;
    } else {
      const realServers: RealServer[] = [];
      let removedAny = false;
      for (const rs of svc.realServers) {
        const m = out.get(hostPort(rs.address, rs.port))!;
        if (m.removed) {
          removedAny = true;
          continue;
        }
        realServers.push(m.weight === rs.weight ? rs : { ...rs, weight: m.weight });
      }
      service = { ...svc, realServers, expireOnRemove: svc.expireOnRemove || removedAny };
    }
    return { ...merged, service };
  }
}

/** What distinguishes one merged result of a service from another. */
function signature(m: MergedService): string {
  let s = '';
  for (const rs of m.realServers.values()) s += `${rs.server}=${rs.removed ? 'x' : rs.weight},`;
  return s;
}
