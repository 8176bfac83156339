import { EventEmitter } from 'node:events';
import { hostPort, serviceKey, type Config, type HealthCheck, type HealthState, type RealServer, type Service } from '@lbd/config';
import type { ObservedState } from '@lbd/dataplane';
import {
  HealthScheduler, checkSpecFor, endpoint, formatDuration, slowStartWeight,
  type CheckSpec, type Clock, type FlapPolicy, type HealthRecord, type ProbeResult, type ProbeTarget, type Prober,
  type ResultEvent, type SchedulerStats, type TransitionEvent,
} from '@lbd/health-checker';
import type { Logger } from '@lbd/log';
import { DesiredState, type AllDownChange, type Merge } from './desired.js';

/**
 * Health checking as the agent sees it: one check per (service, real server) that has one, run by one
 * HealthScheduler; identical checks of the same target in several services share a key (`checkKey`), so
 * they are probed once. It turns the scheduler's transitions into per-(service, real server) events (a
 * bounded history, the log, watchers) and merges health into the desired state (desired.ts).
 *
 * Not here: when the data plane is programmed (the agent batches `change` events into applies), probing
 * and the rise/fall state machine (@lbd/health-checker).
 *
 * Health survives: `set(config)` keeps the records of checks that stay, so a reload does not reset
 * health; and a restarted agent starts from what the kernel has (`adoptKernel`), not from startState, so
 * a restart does not flap anything.
 */

export interface HealthManagerOptions {
  readonly prober: Prober;
  readonly clock: Clock;
  readonly log: Logger;
  /** Probes running at once (the scheduler's default when unset). */
  readonly maxConcurrent?: number;
  readonly flap?: FlapPolicy;
  /** Transitions kept for WatchHealth and `lbadm health` (default 1000). */
  readonly historyLimit?: number;
}

/** One transition of one real server in one service. */
export interface HealthEvent {
  readonly seq: number;
  readonly time: number;
  readonly service: string;
  readonly serviceName: string;
  readonly address: string;
  readonly port: number;
  /** `198.19.1.12:8080` */
  readonly server: string;
  readonly checkKind: HealthCheck['kind'];
  readonly from: HealthState;
  readonly to: HealthState;
  readonly reason: string;
  readonly probeReason: ProbeResult['reason'];
  readonly latencyMs: number;
  readonly heldDownUntil: number | null;
  readonly action: string;
}

/** One probe result, per (service, real server) that uses the check: metrics count latencies from it. */
export interface ProbeEvent {
  readonly service: Service;
  readonly serviceKey: string;
  readonly rs: RealServer;
  readonly checkKind: HealthCheck['kind'];
  readonly result: ProbeResult;
}

export interface HealthWatcher {
  event(e: HealthEvent): void;
  /** The manager stopped (the agent is shutting down). */
  end(): void;
}

/** One checked real server in one service, with everything GetHealth reports. */
export interface HealthEntry {
  readonly service: Service;
  readonly serviceKey: string;
  readonly rs: RealServer;
  readonly check: HealthCheck;
  readonly key: string;
  readonly target: ProbeTarget;
  readonly record: HealthRecord;
}

type HealthManagerEvents = {
  /** Something that changes the desired state happened (a transition, a slow-start step). */
  change: [];
  /** Every transition, per (service, real server), after it is in the history. */
  event: [HealthEvent];
  /** A watcher subscribed (tests wait on it before causing a transition). */
  watch: [];
  /** Every probe result (latency per attempt, which no record keeps), per (service, real server) of its check. */
  probe: [ProbeEvent];
};

interface Binding {
  readonly service: Service;
  readonly serviceKey: string;
  readonly rs: RealServer;
  readonly check: HealthCheck;
  readonly spec: CheckSpec;
}

const DEFAULT_HISTORY_LIMIT = 1000;

export class HealthManager extends EventEmitter<HealthManagerEvents> {
  private readonly scheduler: HealthScheduler;
  private readonly clock: Clock;
  private readonly log: Logger;
  /** Overrides every check's configured flap damping (tests). */
  private readonly flap: FlapPolicy | undefined;
  private readonly historyLimit: number;
  /** Per real-server object: its spec (a RealServer object fully defines its check). */
  private readonly specs = new WeakMap<RealServer, CheckSpec>();
  /** Check key → the (service, real server) pairs that use it, from the last set(). */
  private byKey = new Map<string, Binding[]>();
  /** `service key|server` → its check key, from the last set(). */
  private pairKey = new Map<string, string>();
  /** Check key → when it came up by a transition (slow start ramps from there; a server that started up does not ramp). */
  private readonly upAt = new Map<string, number>();
  private readonly desiredState = new DesiredState();
  private readonly history: HealthEvent[] = [];
  private seq = 0;
  private readonly watchers = new Set<HealthWatcher>();
  private rampTimer: unknown = null;
  private stopped = false;

  constructor(opts: HealthManagerOptions) {
    super();
    this.clock = opts.clock;
    this.log = opts.log;
    this.flap = opts.flap;
    this.historyLimit = Math.max(1, opts.historyLimit ?? DEFAULT_HISTORY_LIMIT);
    this.scheduler = new HealthScheduler({
      prober: opts.prober, clock: opts.clock, ...(opts.maxConcurrent === undefined ? {} : { maxConcurrent: opts.maxConcurrent }),
    });
    this.scheduler.on('transition', (t) => this.onTransition(t));
    this.scheduler.on('result', (r) => this.onResult(r));
  }

  /** Whether `config` has any health check. */
  static anyChecks(config: Config): boolean {
    return config.services.some((s) => s.realServers.some((rs) => rs.healthCheck !== null));
  }

  /**
   * Runs the checks of `config`: checks that stay keep their records (a reload does not reset health);
   * a changed check of a real server (another path, interval, threshold: a new key) starts in the state
   * the old check had, until its first result; a new real server's check starts in its startState.
   */
  set(config: Config): void {
    if (this.stopped) return;
    const byKey = new Map<string, Binding[]>();
    const pairKey = new Map<string, string>();
    const specs: CheckSpec[] = [];
    for (const svc of config.services) {
      const key = serviceKey(svc);
      for (const rs of svc.realServers) {
        if (rs.healthCheck === null) continue;
        const spec = this.specOf(rs);
        let list = byKey.get(spec.key);
        if (list === undefined) {
          list = [];
          byKey.set(spec.key, list);
          specs.push(spec);
        }
        list.push({ service: svc, serviceKey: key, rs, check: rs.healthCheck, spec });
        pairKey.set(pairId(key, rs), spec.key);
      }
    }
    // Before the old checks go: the state each new key inherits (down when any pair of it was down).
    const inherited = new Map<string, HealthState>();
    for (const [pair, key] of pairKey) {
      if (this.scheduler.get(key) !== undefined) continue;
      const old = this.inheritedState(pair);
      if (old !== null && inherited.get(key) !== 'down') inherited.set(key, old);
    }
    const r = this.scheduler.set(specs);
    this.byKey = byKey;
    this.pairKey = pairKey;
    for (const key of r.removed) this.upAt.delete(key);
    for (const [key, state] of inherited) this.scheduler.setInitialState(key, state);
    if (r.added.length > 0 || r.removed.length > 0) {
      const pairs = [...byKey.values()].reduce((n, l) => n + l.length, 0);
      this.log.info('health checks updated', { checks: specs.length, realServers: pairs, added: r.added.length, removed: r.removed.length, kept: r.kept.length });
    }
    if (r.conflicts.length > 0) this.log.error('health check keys collide; the first spec of each is used', { keys: r.conflicts });
  }

  /**
   * For a restarted agent, before the first results: a real server with weight > 0 in the config that the
   * kernel shows as taking new connections starts up, one it shows as quiescent starts down (in a service with
   * onDown remove, one the kernel's service lacks counts as quiescent). A check shared by several services is
   * down when any of them shows it down. Call right after the first set().
   */
  adoptKernel(config: Config, observed: ObservedState): void {
    const kernel = new Map(observed.services.map((s) => [s.key, new Map(s.realServers.map((r) => [endpoint(r.address, r.port), r.quiescent]))]));
    const votes = new Map<string, HealthState>();
    for (const svc of config.services) {
      const servers = kernel.get(serviceKey(svc));
      if (servers === undefined) continue; // a service new to the kernel: nothing to keep
      for (const rs of svc.realServers) {
        if (rs.healthCheck === null || rs.weight === 0) continue;
        const quiescent = servers.get(endpoint(rs.address, rs.port));
        const vote = quiescent === false ? 'up' : quiescent === true || svc.onDown === 'remove' ? 'down' : null;
        if (vote === null) continue;
        const key = this.specOf(rs).key;
        if (votes.get(key) !== 'down') votes.set(key, vote);
      }
    }
    let up = 0;
    let down = 0;
    for (const [key, state] of votes) {
      if (!this.scheduler.setInitialState(key, state)) continue;
      if (state === 'up') up++;
      else down++;
    }
    if (up + down > 0) this.log.info('health state taken from the kernel until the first results', { up, down });
  }

  /** The desired state for `config` merged with health, changing nothing. */
  merge(config: Config): Merge {
    const now = this.clock.now();
    return this.desiredState.merge(config, (svc, rs) => {
      if (rs.healthCheck === null) return null;
      const key = this.specOf(rs).key;
      const record = this.scheduler.get(key);
      // A check not running yet (a config not yet applied): it will start in the state set() gives it.
      if (record === undefined) {
        const state = this.inheritedState(pairId(serviceKey(svc), rs)) ?? rs.healthCheck.startState;
        return { state, upWeight: rs.weight, heldDown: false };
      }
      if (record.state === 'down') return { state: 'down', upWeight: rs.weight, heldDown: isHeld(record, now) };
      const upAt = this.upAt.get(key);
      const upWeight = upAt === undefined ? rs.weight : slowStartWeight(rs.weight, upAt, svc.slowStartMs, now);
      return { state: 'up', upWeight, heldDown: false };
    });
  }

  /**
   * Records `merge` as applied to the data plane: logs services that entered or left the all-down state,
   * and while a server ramps, asks for another apply after the ramp step.
   */
  commit(config: Config, merge: Merge): void {
    for (const c of this.desiredState.commit(config, merge)) this.logAllDown(c);
    if (this.rampTimer !== null) this.clock.clearTimeout(this.rampTimer);
    this.rampTimer = null;
    if (merge.rampStepMs !== null && !this.stopped) {
      this.rampTimer = this.clock.setTimeout(() => {
        this.rampTimer = null;
        this.emit('change');
      }, merge.rampStepMs);
    }
  }

  /** Every checked (service, real server) of `config`, in config order. */
  entries(config: Config): HealthEntry[] {
    const out: HealthEntry[] = [];
    const now = this.clock.now();
    for (const svc of config.services) {
      for (const rs of svc.realServers) {
        if (rs.healthCheck === null) continue;
        const spec = this.specOf(rs);
        const record = this.scheduler.get(spec.key) ?? {
          state: rs.healthCheck.startState, successes: 0, failures: 0, transitions: [], holdDownUntil: null, holdDowns: 0, since: now,
        };
        out.push({ service: svc, serviceKey: serviceKey(svc), rs, check: rs.healthCheck, key: spec.key, target: spec.target, record });
      }
    }
    return out;
  }

  stats(): SchedulerStats {
    return this.scheduler.stats();
  }

  now(): number {
    return this.clock.now();
  }

  /** The kept transitions at or after `since` (clock ms), oldest first. */
  historySince(since: number): HealthEvent[] {
    return this.history.filter((e) => e.time >= since);
  }

  /**
   * Sends the kept transitions at or after `since`, then each new one, to `watcher`, until the returned
   * function is called or the manager stops. History and subscription happen in one turn, so no
   * transition falls between them.
   */
  watch(since: number, watcher: HealthWatcher): () => void {
    if (this.stopped) {
      watcher.end();
      return () => { /* nothing to unsubscribe */ };
    }
    for (const e of this.historySince(since)) watcher.event(e);
    this.watchers.add(watcher);
    this.emit('watch');
    return () => { this.watchers.delete(watcher); };
  }

  get watcherCount(): number {
    return this.watchers.size;
  }

  /** Stops probing, the ramp timer and every watcher. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.scheduler.stop();
    if (this.rampTimer !== null) this.clock.clearTimeout(this.rampTimer);
    this.rampTimer = null;
    for (const w of [...this.watchers]) w.end();
    this.watchers.clear();
  }

  /** The state of the check the last set() gave this (service, real server), if any. */
  private inheritedState(pair: string): HealthState | null {
    const key = this.pairKey.get(pair);
    return key === undefined ? null : (this.scheduler.get(key)?.state ?? null);
  }

  private specOf(rs: RealServer): CheckSpec {
    let spec = this.specs.get(rs);
    if (spec === undefined) {
      spec = checkSpecFor(rs, rs.healthCheck as HealthCheck, this.flap);
      this.specs.set(rs, spec);
    }
    return spec;
  }

  private onTransition(t: TransitionEvent): void {
    if (t.to === 'up') this.upAt.set(t.key, t.at);
    else this.upAt.delete(t.key);
    const held = t.record.holdDownUntil !== null && t.record.holdDownUntil > t.at ? t.record.holdDownUntil : null;
    for (const b of this.byKey.get(t.key) ?? []) {
      const e: HealthEvent = {
        seq: ++this.seq, time: t.at, service: b.serviceKey, serviceName: b.service.name, address: b.rs.address, port: b.rs.port,
        server: hostPort(b.rs.address, b.rs.port), checkKind: b.check.kind, from: t.from, to: t.to, reason: t.reason,
        probeReason: t.result.reason, latencyMs: t.latencyMs, heldDownUntil: held, action: this.action(b, t.to),
      };
      this.history.push(e);
      if (this.history.length > this.historyLimit) this.history.splice(0, this.history.length - this.historyLimit);
      const fields = {
        service: e.service, name: e.serviceName, server: e.server, check: e.checkKind, from: e.from, to: e.to, reason: e.reason,
        probe: e.probeReason, latencyMs: e.latencyMs, action: e.action,
        ...(held === null ? {} : { heldDownUntil: new Date(held).toISOString() }),
      };
      if (e.to === 'down') this.log.warn('real server down', fields);
      else this.log.info('real server up', fields);
      for (const w of this.watchers) w.event(e);
      this.emit('event', e);
    }
    this.emit('change');
  }

  private onResult(r: ResultEvent): void {
    if (this.listenerCount('probe') === 0) return;
    for (const b of this.byKey.get(r.key) ?? []) {
      this.emit('probe', { service: b.service, serviceKey: b.serviceKey, rs: b.rs, checkKind: b.check.kind, result: r.result });
    }
  }

  /** What the agent does about a transition, in words (the transition's own record is already updated). */
  private action(b: Binding, to: HealthState): string {
    const svc = b.service;
    const rs = b.rs;
    if (to === 'up') {
      if (rs.weight === 0) return rs.drained ? 'stays quiescent (drained; lbadm server enable restores its weight)' : 'stays quiescent (configured weight 0)';
      if (svc.slowStartMs > 0) return `ramping to weight ${rs.weight} over ${formatDuration(svc.slowStartMs)}`;
      return `restored (weight ${rs.weight})`;
    }
    const own = svc.onDown === 'remove' ? 'removed, connections expired' : 'quiescent (weight 0)';
    const anyUp = svc.realServers.some((other) => {
      if (other.weight === 0) return false;
      if (other.healthCheck === null) return true;
      return (this.scheduler.get(this.specOf(other).key)?.state ?? other.healthCheck.startState) === 'up';
    });
    if (anyUp) return own;
    if (svc.fallback === 'keep-last' && rs.weight > 0) return `kept at weight ${rs.weight}: all real servers down, fallback keep-last`;
    return `${own}; all real servers down: ${fallbackWords(svc)}`;
  }

  private logAllDown(c: AllDownChange): void {
    if (!c.allDown) {
      this.log.info('real servers up again', { service: c.key, name: c.name });
      return;
    }
    const fields: Record<string, unknown> = { service: c.key, name: c.name, fallback: c.fallback };
    if (c.fallback === 'keep-last') {
      fields.kept = c.kept;
      fields.note = c.kept.length > 0
        ? 'fallback keep-last: the servers that were up last keep their weights'
        : 'fallback keep-last, but no server was up before: new connections are dropped';
    } else {
      fields.note = fallbackWords({ fallback: c.fallback, sorryServer: c.sorryServer });
    }
    this.log.warn('all real servers down', fields);
  }
}

function pairId(service: string, rs: RealServer): string {
  return `${service}|${hostPort(rs.address, rs.port)}`;
}

function isHeld(record: HealthRecord, now: number): boolean {
  return record.holdDownUntil !== null && record.holdDownUntil > now;
}

function fallbackWords(svc: Pick<Service, 'fallback' | 'sorryServer'>): string {
  switch (svc.fallback) {
    case 'drop':
      return 'fallback drop: new connections are dropped';
    case 'reject':
      return 'fallback reject: new connections are reset';
    case 'sorry-server':
      return `fallback sorry-server: new connections go to ${svc.sorryServer ? hostPort(svc.sorryServer.address, svc.sorryServer.port) : 'the sorry server'}`;
    case 'keep-last':
      return 'fallback keep-last: the servers that were up last keep their weights';
  }
}

/** How GetHealth names what is probed: the endpoint, the address for icmp, the command for exec. */
export function targetText(t: ProbeTarget): string {
  if (t.kind === 'icmp') return t.address;
  if (t.kind === 'exec') return (t.command ?? []).join(' ');
  return endpoint(t.address, t.port);
}
