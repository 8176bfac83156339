import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { ConfigError, formatProblem, hostPort, parseConfig, type Config, type Problem } from '@lbd/config';
import type { StoredConfig } from '@lbd/coordinator';
import { backendName } from '@lbd/connsync';
import { DataPlaneError, type AddressOwner, type ApplyResult, type DataPlane, type FlowTable, type ObservedState } from '@lbd/dataplane';
import { ProberSet, systemClock, type Clock, type FlapPolicy, type Prober } from '@lbd/health-checker';
import type {
  ApplyRecord as WireApplyRecord, ClusterStatus, ConfigHistoryResponse, Connection as WireConnection, FailoverResponse,
  Finding as WireFinding, GetConfigResponse, GetHealthResponse, GetStatsResponse, GetStatusResponse,
} from '@lbd/proto';
import {
  AdminServer, UNIX_SOCKET_CALLER, type AdminBackend, type ApplyOptions, type ApplyOutcome, type DrillRecord, type EventQuery, type EventSink, type HealthSink,
} from './admin-server.js';
import { ClusterMember } from './cluster.js';
import { inProcessElection, type ElectionHostFactory } from './election-thread.js';
import { readConfigText, sha256, stageFile } from './config-file.js';
import { AgentError } from './errors.js';
import type { Merge } from './desired.js';
import { diagnose, probeTargets } from './doctor.js';
import { EventLog, isLbdEvent, summarizeServiceChanges } from './events.js';
import { HealthManager, type HealthEvent } from './health.js';
import { silentLogger, type Logger } from './log.js';
import { OpsHttpServer, healthzRoute, type Liveness, type OpsLimits } from './ops-http.js';
import type { Caller, LbdEvent, OpsSurfaces } from './ops-types.js';
import { readTlsFiles } from './tls-files.js';
import {
  healthResponse, resolveService, serviceStats, serviceStatuses, toWireConnection, wireHealthEvent, wireProblem,
} from './views.js';
import { watchConfigFile, type ConfigWatcher } from './watch.js';

/**
 * The director agent: keeps the data plane programmed to the config file, takes new configs from the
 * file (on change or SIGHUP) and from the Apply RPC, and answers the admin API. It decides what the
 * kernel should have; the DataPlane decides how to get there and re-adopts what the kernel already has,
 * so the agent never flushes or starts from empty: it only ever asks for the whole desired state.
 *
 * A config that fails validation is rejected whole and the running one stays; an apply the data plane
 * refuses leaves the previous state (its apply is one transaction). Stopping the agent never touches
 * the data plane: the kernel keeps forwarding without it.
 *
 * Health: what it applies is the config merged with health (HealthManager, desired.ts). Transitions are
 * batched (those within `batchMs`) into one apply of the whole desired state, serialised with config
 * applies; a failed one is logged and retried on the next change, or after a backoff if none comes.
 */

export type Trigger = 'start' | 'sighup' | 'file-change' | 'apply-rpc' | 'cluster';
export type ApplyResultWord = 'applied' | 'unchanged' | 'rejected' | 'failed';

/** One apply attempt, as logged and as status reports it. */
export interface ApplyRecord {
  readonly time: Date;
  readonly trigger: Trigger;
  readonly result: ApplyResultWord;
  /** For `failed`: the data plane's error. */
  readonly error: string;
  /** For `rejected`: every problem. */
  readonly problems: readonly Problem[];
  readonly operations: number;
  readonly fullRebuild: boolean;
  readonly durationMs: number;
  readonly source: string;
  readonly sha256: string;
}

interface Running {
  readonly config: Config;
  readonly sha256: string;
  readonly source: string;
  readonly revision: number;
}

export interface AgentOptions {
  /** The config file: read at start, watched, and where applied configs are persisted. */
  readonly configPath: string;
  readonly dataPlane: DataPlane;
  /** The admin socket; default: `agent.adminSocket` from the config. */
  readonly adminSocket?: string;
  /** Serve the admin API (default true). */
  readonly serve?: boolean;
  /** Re-apply when the config file changes (default true). */
  readonly watch?: boolean;
  /** Quiet time after the last file event before the file is read (default 200 ms). */
  readonly debounceMs?: number;
  readonly log?: Logger;
  readonly now?: () => Date;
  /** The config text and its validated form, when the caller has already read it (lbd-agent's main). */
  readonly initial?: { readonly text: string; readonly config: Config };
  readonly health?: HealthOptions;
  /**
   * Where a clustered director's election runs (required with agent.cluster, one of the two): `election`
   * (lbd-agent's main: electionThread(), which owns the kernel's floating addresses itself), or an
   * `addressOwner` to run it in-process with (tests: a fake kernel).
   */
  readonly election?: ElectionHostFactory;
  readonly addressOwner?: AddressOwner;
  /** Reported to the cluster (default: the package version). */
  readonly version?: string;
  /** The kernel's connection table: connection sync between directors (with agent.cluster.tls). */
  readonly flowTable?: FlowTable;
  /**
   * What the HTTPS listener (agent.admin.httpListen) serves besides GET /healthz (lbd-agent's main:
   * metrics and the dashboard, operator-surfaces.ts); called once the agent exists, closed at stop.
   */
  readonly opsRoutes?: (agent: Agent) => OpsSurfaces;
  /** The HTTPS listener's limits (default OPS_LIMITS); tests shorten its timeouts. */
  readonly opsLimits?: Partial<OpsLimits>;
}

export interface HealthOptions {
  /** Default: the real probers (tcp, http/https, icmp, udp, exec). */
  readonly prober?: Prober;
  /** Health intervals, batching and slow start run on this clock (default: the system's). */
  readonly clock?: Clock;
  /** Probes running at once (default: the scheduler's, 256). */
  readonly maxConcurrent?: number;
  readonly flap?: FlapPolicy;
  /** Transitions within this long are applied together (default 20 ms). */
  readonly batchMs?: number;
  /** Transitions kept for WatchHealth (default 1000). */
  readonly historyLimit?: number;
}

/** Who asked for a config and what it changes, for its event. */
interface ApplyContext {
  readonly author?: string;
  /** Cluster mode: what the writer said of the revision (its comment in etcd: the lbadm command, the file). */
  readonly comment?: string;
  readonly caller?: Caller;
  /** The services it changes, in words ('' when none). */
  readonly changes?: string;
  /** The revision it would become (cluster) when the attempt fails. */
  readonly revision?: number;
}

/** One apply of health changes (config applies are ApplyRecords). */
export interface HealthApplyRecord {
  /** applied: the data plane changed; unchanged: it already matched; skipped: the desired state was what was last applied. */
  readonly result: 'applied' | 'unchanged' | 'skipped' | 'failed';
  readonly error: string;
  readonly operations: number;
}

type AgentEvents = {
  /** Every apply attempt, whatever its result: tests and future metrics wait on it. */
  apply: [ApplyRecord];
  /** Every apply of health changes. */
  healthApply: [HealthApplyRecord];
};

const DEFAULT_BATCH_MS = 20;
const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 30_000;

/** Marks a file state that has no content hash (unreadable), so the same failure is not logged twice. */
const UNREADABLE = 'unreadable:';

export class Agent extends EventEmitter<AgentEvents> implements AdminBackend {
  readonly configPath: string;
  readonly adminSocket: string;
  readonly startedAt: Date;
  /** This agent's version, as reported to the cluster and in metrics. */
  readonly version: string;
  private readonly dataPlane: DataPlane;
  private readonly log: Logger;
  private readonly now: () => Date;
  private running: Running;
  private lastApply: ApplyRecord | null = null;
  /** Hash of the file content last acted on (applied or rejected): a file event with the same content does nothing. */
  private fileSha: string;
  private queue: Promise<unknown> = Promise.resolve();
  private watcher: ConfigWatcher | null = null;
  private admin: AdminServer | null = null;
  /** agent.admin.grpcListen and httpListen, when set. */
  private adminTcp: AdminServer | null = null;
  private ops: OpsHttpServer | null = null;
  private surfaces: OpsSurfaces | null = null;
  private stopped = false;
  readonly health: HealthManager;
  private readonly clock: Clock;
  private readonly batchMs: number;
  private healthTimer: unknown = null;
  /** Whether healthTimer is a retry after a failure (a new change then applies at once instead). */
  private healthTimerRetry = false;
  /** After a failed health apply: the next retry's delay. */
  private retryMs = RETRY_FIRST_MS;
  /** The services last applied successfully: a health apply that would pass the same objects is skipped. */
  private lastApplied: readonly Config['services'][number][] | null = null;
  /** Set when the config file has agent.cluster: the desired config then comes from etcd. */
  readonly cluster: ClusterMember | null = null;
  /** The director's own agent settings (the file's), which cluster configs never change. */
  private readonly fileAgent: Config['agent'];
  private lastHealthApplyFailed: string | null = null;
  /** The data plane's answer to the last config apply (operations included), for the Apply RPC in a cluster. */
  private lastResult: ApplyResult | null = null;
  /** Every transition with its reason: role, vip, health, config, sync, drill, admin (events.ts). */
  readonly events: EventLog;

  private constructor(opts: AgentOptions, config: Config, text: string) {
    super();
    this.configPath = opts.configPath;
    this.dataPlane = opts.dataPlane;
    this.log = opts.log ?? silentLogger;
    this.now = opts.now ?? (() => new Date());
    const h = opts.health ?? {};
    this.clock = h.clock ?? systemClock;
    this.batchMs = h.batchMs ?? DEFAULT_BATCH_MS;
    this.health = new HealthManager({
      prober: h.prober ?? new ProberSet(), clock: this.clock, log: this.log,
      ...(h.maxConcurrent === undefined ? {} : { maxConcurrent: h.maxConcurrent }),
      ...(h.flap === undefined ? {} : { flap: h.flap }),
      ...(h.historyLimit === undefined ? {} : { historyLimit: h.historyLimit }),
    });
    this.health.on('change', () => this.scheduleHealthApply(this.batchMs));
    this.events = new EventLog({
      director: config.agent.cluster?.director ?? (hostname().replace(/[\s/]+/g, '-') || 'lbd'),
      onSubscriberError: (err) => this.log.error('an event subscriber failed', { error: err }),
    });
    this.health.on('event', (e) => this.recordHealth(e));
    this.startedAt = this.now();
    this.version = opts.version ?? '0.1.0';
    this.adminSocket = opts.adminSocket ?? config.agent.adminSocket;
    this.fileSha = sha256(text);
    // Revision 0 until the first apply succeeds; `start` never returns an agent in that state.
    this.running = { config, sha256: this.fileSha, source: opts.configPath, revision: 0 };
    this.fileAgent = config.agent;
    const cluster = config.agent.cluster;
    if (cluster !== null) {
      // A wiring mistake in the caller (lbd-agent's main always passes one), not an operator's.
      const election = opts.election ?? (opts.addressOwner ? inProcessElection(opts.addressOwner) : null);
      if (election === null) throw new Error('AgentOptions.election or addressOwner is required when the config has agent.cluster');
      this.cluster = new ClusterMember({
        settings: cluster, version: opts.version ?? '0.1.0', election, log: this.log, events: this.events,
        onConfig: (c) => { void this.serialize(() => this.applyFromCluster(c)).catch(() => undefined); },
        dataPlaneProblem: () => this.dataPlaneProblem(),
        ...(opts.flowTable ? { flowTable: opts.flowTable } : {}),
        marks: () => this.backendMarks(),
      });
    }
  }

  /** The kernel's ct mark of every real server of every service, for connection sync (marks are each director's own). */
  private async backendMarks(): Promise<Map<string, number>> {
    const observed = await this.dataPlane.observe();
    const out = new Map<string, number>();
    for (const s of observed.services) for (const rs of s.realServers) out.set(backendName(s.key, rs), rs.backendId);
    return out;
  }

  /** Why this director cannot program its kernel right now, or null: a director in that state must not lead. */
  dataPlaneProblem(): string | null {
    if (this.lastApply?.result === 'failed') return `data plane apply failed: ${this.lastApply.error}`;
    return this.lastHealthApplyFailed === null ? null : `data plane apply failed: ${this.lastHealthApplyFailed}`;
  }

  /**
   * Loads and validates the config, applies it, then watches the file and serves the admin API.
   * Throws ConfigError when the config is invalid (nothing is applied), DataPlaneError when the data
   * plane refuses it, AgentError when another agent serves the socket.
   */
  static async start(opts: AgentOptions): Promise<Agent> {
    let initial = opts.initial;
    if (!initial) {
      const text = await readConfigText(opts.configPath);
      initial = { text, config: parseConfig(text, opts.configPath) };
    }
    const agent = new Agent(opts, initial.config, initial.text);
    try {
      // Checked before applying: a second agent must not reprogram the kernel under a running one.
      if (opts.serve !== false) await AdminServer.checkSocketFree(agent.adminSocket);
      await agent.startHealth(initial.config);
      // A clustered director applies nothing until it has the cluster config: an empty file config
      // must not flush a kernel that is forwarding.
      if (agent.cluster === null) await agent.serialize(() => agent.applyConfig(initial.config, agent.fileSha, 'start', opts.configPath));
    } catch (err) {
      agent.health.stop();
      throw err;
    }
    if (opts.watch !== false && agent.cluster === null) {
      agent.watcher = watchConfigFile(opts.configPath, () => {
        agent.reload('file-change').catch((err: unknown) => agent.log.error('reload failed', { trigger: 'file-change', error: err }));
      }, {
        debounceMs: opts.debounceMs ?? 200,
        onError: (err) => agent.log.warn('cannot watch the config file; SIGHUP still reloads it', { path: opts.configPath, error: err }),
      });
    }
    if (opts.serve !== false) {
      try {
        agent.admin = await AdminServer.listen(agent.adminSocket, agent, agent.log);
        await agent.listenTcp(opts);
      } catch (err) {
        agent.watcher?.close();
        agent.health.stop();
        await agent.admin?.close();
        await agent.adminTcp?.close();
        throw err;
      }
    }
    if (agent.cluster !== null) {
      try {
        await agent.cluster.start();
      } catch (err) {
        await agent.stop('cluster start failed');
        throw err;
      }
    }
    agent.log.info('started', {
      config: opts.configPath, adminSocket: opts.serve === false ? null : agent.adminSocket,
      adminListen: agent.adminTcp === null ? null : agent.fileAgent.admin.grpcListen, opsListen: agent.ops === null ? null : agent.fileAgent.admin.httpListen,
      services: initial.config.services.length, pid: process.pid,
      cluster: agent.cluster === null ? null : { director: agent.cluster.settings.director, prefix: agent.cluster.settings.prefix },
    });
    return agent;
  }

  /**
   * The operators' TCP listeners (agent.admin): admin gRPC and HTTPS, both with mutual TLS. Their TLS
   * files are read here, so a missing one stops the start with the setting and the file named.
   */
  private async listenTcp(opts: AgentOptions): Promise<void> {
    const admin = this.fileAgent.admin;
    if (admin.tls === null || (admin.grpcListen === null && admin.httpListen === null)) return;
    const setting = admin.tls === this.fileAgent.cluster?.tls ? 'agent.cluster.tls' : 'agent.admin.tls';
    const tls = await readTlsFiles(admin.tls, setting);
    const { grpcListen, httpListen } = admin;
    if (grpcListen !== null) {
      this.adminTcp = await listening('agent.admin.grpcListen', grpcListen, () => AdminServer.listenTcp({ ...grpcListen, tls, clients: admin.clients }, this, this.log));
    }
    if (httpListen !== null) {
      this.surfaces = opts.opsRoutes?.(this) ?? null;
      const routes = [healthzRoute(() => this.liveness()), ...(this.surfaces?.routes ?? [])];
      const limits = opts.opsLimits ? { limits: opts.opsLimits } : {};
      this.ops = await listening('agent.admin.httpListen', httpListen, () => OpsHttpServer.listen({ ...httpListen, tls, clients: admin.clients, log: this.log, ...limits }, routes));
    }
  }

  /** GET /healthz: up and serving, with what a person checking on it wants to see first. */
  private liveness(): Liveness {
    const last = this.lastApply;
    return {
      ok: !this.stopped && this.running.revision > 0, pid: process.pid, startedAt: this.startedAt.toISOString(),
      configRevision: this.running.revision, services: this.running.config.services.length,
      lastApply: last === null ? null : { time: last.time.toISOString(), trigger: last.trigger, result: last.result },
      director: this.cluster?.settings.director ?? null,
    };
  }

  /** The running config (the last one applied successfully). */
  get config(): Config {
    return this.running.config;
  }

  get revision(): number {
    return this.running.revision;
  }

  get lastApplyRecord(): ApplyRecord | null {
    return this.lastApply;
  }

  /**
   * Re-reads the config file and applies it. `file-change` does nothing when the content is what was
   * last acted on; `sighup` always applies, which also repairs a kernel someone changed by hand (the
   * data plane writes nothing when it already matches). Resolves to the attempt, or null when nothing
   * was attempted. Never throws for a bad config or a refused apply: those are records.
   */
  reload(trigger: 'sighup' | 'file-change'): Promise<ApplyRecord | null> {
    return this.serialize(async () => {
      if (this.stopped) return null;
      if (this.cluster !== null) {
        // The file holds only this director's agent settings (they take effect on restart); SIGHUP
        // re-applies the running cluster config, which repairs a kernel someone changed by hand.
        if (this.running.revision === 0) return null;
        const r = this.running;
        return (await this.applyConfig(r.config, r.sha256, trigger, r.source, r.revision)).record;
      }
      let text: string;
      try {
        text = await readConfigText(this.configPath);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        const marker = `${UNREADABLE}${err.problems[0]?.rule ?? ''}`;
        // A deleted file is not an empty config: keep running, say so once.
        if (trigger === 'file-change' && this.fileSha === marker) return null;
        this.fileSha = marker;
        return this.reject(err, trigger, this.configPath, '');
      }
      const sha = sha256(text);
      if (trigger === 'file-change' && sha === this.fileSha) return null;
      let config: Config;
      try {
        config = parseConfig(text, this.configPath);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        this.fileSha = sha;
        return this.reject(err, trigger, this.configPath, sha);
      }
      try {
        const { record } = await this.applyConfig(config, sha, trigger, this.configPath);
        this.fileSha = sha;
        return record;
      } catch (err) {
        // Leaves fileSha alone, so the next file event or SIGHUP tries again.
        if (err instanceof DataPlaneError) return this.lastApply;
        throw err;
      }
    });
  }

  /**
   * The Apply RPC: validates `text`; on a dry run returns the data plane's diff and changes nothing;
   * otherwise applies it and persists it to the config file (staged before applying, so a config that
   * cannot be persisted is not applied either; renamed into place after). A rejected config applies
   * nothing and is returned, not thrown.
   */
  applyText(text: string, source: string, dryRun: boolean, opts: ApplyOptions = {}): Promise<ApplyOutcome> {
    if (this.cluster !== null) return this.applyToCluster(text, source, dryRun, opts);
    return this.serialize(async (): Promise<ApplyOutcome> => {
      if (this.stopped) throw new AgentError('Stopped', 'the agent is shutting down');
      // The same compare-and-swap as in a cluster, on this director's own revision: an edit of the
      // config read with GetConfig must not undo a change applied since.
      if (!dryRun && opts.expectRevision !== undefined && opts.expectRevision !== this.running.revision) {
        throw new AgentError('Conflict', `the running config is at revision ${this.running.revision}, not ${opts.expectRevision} as this apply expected: it changed in between; look at lbadm status, then apply again`);
      }
      const sha = sha256(text);
      let config: Config;
      try {
        config = parseConfig(text, source);
        this.checkRemoteAgentSettings(config, source, opts.caller);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        // A dry run is a question, not an attempt: it leaves no record and no log line.
        if (!dryRun) this.reject(err, 'apply-rpc', source, sha, opts);
        return { ok: false, error: err, sha256: sha };
      }
      if (dryRun) {
        const result = await this.dataPlane.apply({ services: this.health.merge(config).services }, { dryRun: true });
        return { ok: true, result, serviceCount: config.services.length, sha256: sha };
      }
      let staged: Awaited<ReturnType<typeof stageFile>>;
      try {
        staged = await stageFile(this.configPath, text);
      } catch (cause) {
        const code = (cause as NodeJS.ErrnoException).code ?? (cause as Error).message;
        throw new AgentError('CannotPersist', `cannot write the new config next to ${this.configPath} (${code}); nothing was applied`, { cause });
      }
      let result: ApplyResult;
      try {
        ({ result } = await this.applyConfig(config, sha, 'apply-rpc', source, undefined, opts));
      } catch (err) {
        await staged.discard();
        throw err;
      }
      try {
        await staged.commit();
        // The rename fires a file event; with this hash it is recognised as ours and does nothing.
        this.fileSha = sha;
      } catch (cause) {
        await staged.discard();
        const code = (cause as NodeJS.ErrnoException).code ?? (cause as Error).message;
        this.log.error('config applied but not persisted', { path: this.configPath, error: cause });
        throw new AgentError('NotPersisted', `the config was applied but could not be saved to ${this.configPath} (${code}): a restart would bring back the previous config`, { cause });
      }
      return { ok: true, result, serviceCount: config.services.length, sha256: sha };
    });
  }

  /**
   * Apply in a cluster: validated here (every problem, nothing written), then written to etcd by
   * compare-and-swap on the revision the caller based it on (or the one this director runs). Every
   * director, this one included, applies it from its watch; the answer waits for this director's apply.
   */
  private async applyToCluster(text: string, source: string, dryRun: boolean, opts: ApplyOptions): Promise<ApplyOutcome> {
    const cluster = this.cluster!;
    if (this.stopped) throw new AgentError('Stopped', 'the agent is shutting down');
    const sha = sha256(text);
    let parsed: Config;
    try {
      parsed = parseConfig(text, source, { cluster: true });
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      if (!dryRun) this.reject(err, 'apply-rpc', source, sha, opts);
      return { ok: false, error: err, sha256: sha };
    }
    const config: Config = { ...parsed, agent: this.fileAgent };
    if (dryRun) {
      const result = await this.serialize(() => this.dataPlane.apply({ services: this.health.merge(config).services }, { dryRun: true }));
      return { ok: true, result, serviceCount: config.services.length, sha256: sha, clusterRevision: 0 };
    }
    const expect = opts.expectRevision ?? this.running.revision;
    const noChange: ApplyResult = { changed: false, operations: [], fullRebuild: false, expiredConnections: 0, durationMs: 0 };
    const applied = new Promise<ApplyResult>((resolve) => {
      const onApply = (r: ApplyRecord): void => {
        if (r.trigger !== 'cluster' || r.sha256 !== sha) return;
        this.off('apply', onApply);
        resolve(r.result === 'applied' || r.result === 'unchanged' ? (this.lastResult ?? noChange) : noChange);
      };
      this.on('apply', onApply);
      // The write is done either way; if this director is slow to apply, the answer says what it knows.
      setTimeout(() => { this.off('apply', onApply); resolve(noChange); }, 10_000).unref();
    });
    const author = opts.author ?? 'unknown';
    const changes = summarizeServiceChanges(this.running.config.services, config.services);
    const trail = { author, caller: opts.caller?.name ?? '', source, changes };
    let write;
    try {
      write = await cluster.coordinator.writeConfig({ text, author, at: Date.now(), comment: source }, expect);
    } catch (cause) {
      const err = new AgentError('EtcdUnavailable', `cannot write the cluster config to etcd (${(cause as Error).message}); nothing was changed`, { cause });
      this.events.record('admin', 'apply', '', 'refused', err.message, trail);
      throw err;
    }
    if (!write.ok) {
      const err = new AgentError('Conflict', `the cluster config is at revision ${write.current}, not ${expect} as this apply expected: someone applied in between; look at lbadm config history, then apply again`);
      this.events.record('admin', 'apply', '', 'refused', err.message, trail);
      throw err;
    }
    // Every director records the config event when it applies; this one also says who asked it, and through what.
    this.events.record('admin', 'apply', '', 'done', `cluster config revision ${write.revision} written for ${author} from ${source}: ${changes || 'no service changed'}`,
      { ...trail, revision: write.revision });
    const result = await applied;
    return { ok: true, result, serviceCount: config.services.length, sha256: sha, clusterRevision: write.revision };
  }

  /**
   * A client over the network (a certificate, not root on the unix socket) may change services but not
   * this director's own settings: agent.* decides who may call and how (listeners, TLS, roles), and a
   * writer must not be able to widen its own access, or drop the listeners everyone else uses.
   */
  private checkRemoteAgentSettings(config: Config, source: string, caller: Caller | undefined): void {
    if (caller === undefined || caller === UNIX_SOCKET_CALLER) return;
    if (JSON.stringify(config.agent) === JSON.stringify(this.running.config.agent)) return;
    throw new ConfigError('Invalid', source, [{
      path: 'agent', value: undefined,
      rule: `differs from this director's own agent settings, which a client over the network (here ${caller.name}) may not change`,
      fix: `send the agent: section of ${this.configPath} unchanged with the services, or change it on the director itself (its file, or lbadm on the unix socket)`,
    }]);
  }

  /** A cluster config arrived from etcd: apply it here, then let the cluster member follow it. */
  private async applyFromCluster(c: StoredConfig): Promise<void> {
    if (this.stopped || this.cluster === null) return;
    const sha = sha256(c.text);
    const source = `etcd revision ${c.revision}`;
    let parsed: Config;
    try {
      parsed = parseConfig(c.text, source, { cluster: true });
    } catch (err) {
      // Written by an lbd of another version, or by hand: keep running what runs, and say so.
      if (err instanceof ConfigError) { this.reject(err, 'cluster', source, sha, { author: c.author, comment: c.comment, revision: c.revision }); return; }
      throw err;
    }
    const config: Config = { ...parsed, agent: this.fileAgent };
    try {
      await this.applyConfig(config, sha, 'cluster', source, c.revision, { author: c.author, comment: c.comment });
    } catch (err) {
      this.cluster.healthMayHaveChanged();
      if (err instanceof DataPlaneError) return;
      throw err;
    }
    this.cluster.healthMayHaveChanged();
    await this.cluster.configApplied(config);
  }

  async clusterStatus(): Promise<ClusterStatus> {
    if (this.cluster === null) {
      return {
        clustered: false, self: '', etcdReachable: false, etcdEndpoints: [], worstCaseTakeoverMs: 0, timingProfile: '', beatIntervalMs: 0,
        safetyWindowMs: 0, takeoverAfterMs: 0, directors: [], groups: [], configRevision: this.running.revision,
      };
    }
    return this.cluster.status(this.running.revision);
  }

  async failover(group: string, to: string, author = '', caller?: Caller): Promise<FailoverResponse> {
    const cluster = this.requireCluster('failover');
    const who = { group, author, caller: caller?.name ?? '' };
    const asked = `${author === '' ? 'an operator' : author}${caller ? ` (${caller.name})` : ''}`;
    try {
      const r = await cluster.coordinator.failover(group, to === '' ? undefined : to);
      this.log.info('planned failover', { group, from: r.from, to: r.to, tookMs: r.tookMs, caller: caller?.name });
      this.events.record('admin', 'failover', '', 'done', `${asked} moved vip group ${group} from ${r.from} to ${r.to} in ${Math.round(r.tookMs)} ms`,
        { ...who, from: r.from, to: r.to, tookMs: Math.round(r.tookMs) });
      return { from: r.from, to: r.to, tookMs: r.tookMs };
    } catch (err) {
      const e = new AgentError('Refused', `failover of ${group}: ${(err as Error).message}`, { cause: err });
      this.events.record('admin', 'failover', '', 'refused', `${asked} asked to move vip group ${group}${to === '' ? '' : ` to ${to}`}: ${(err as Error).message}`, { ...who, to });
      throw e;
    }
  }

  async configHistory(): Promise<ConfigHistoryResponse> {
    const cluster = this.requireCluster('config history');
    const versions = await cluster.coordinator.configHistory();
    return {
      current: this.running.revision,
      versions: versions.map((v) => {
        let services = 0;
        try { services = parseConfig(v.text, 'history', { cluster: true }).services.length; } catch { services = 0; }
        return { revision: v.revision, author: v.author, atUnixMs: v.at, comment: v.comment, configSha256: sha256(v.text), serviceCount: services };
      }),
    };
  }

  async rollback(revision: number, author: string, caller?: Caller): Promise<number> {
    const cluster = this.requireCluster('config rollback');
    const trail = { author, caller: caller?.name ?? '', to: revision };
    const old = await cluster.coordinator.configAt(revision);
    if (old === null) {
      const err = new AgentError('NotFound', `revision: ${revision} is not in the cluster config history; see lbadm config history`);
      this.events.record('admin', 'rollback', '', 'refused', err.message, trail);
      throw err;
    }
    const current = (await cluster.coordinator.currentConfig())?.revision ?? 0;
    // The apply records its own admin event (written or refused) with the services it changes.
    const outcome = await this.applyToCluster(old.text, `rollback to revision ${revision}`, false, { expectRevision: current, author, ...(caller ? { caller } : {}) });
    if (!outcome.ok) throw outcome.error;
    this.events.record('admin', 'rollback', '', 'done', `${author || 'an operator'} rolled the cluster config back to revision ${revision}, now revision ${outcome.clusterRevision ?? 0}`,
      { ...trail, revision: outcome.clusterRevision ?? 0 });
    return outcome.clusterRevision ?? 0;
  }

  recordDrill(d: DrillRecord, caller: Caller): string {
    return this.events.record('drill', d.mode, '', d.result, d.reason, { ...d.fields, caller: caller.name }).id;
  }

  /**
   * ListEvents. Local: this director's log. Cluster: etcd's history of every director merged with this
   * director's log (its newest events may not be in etcd yet), then, with follow, etcd's watch and the
   * local log together; an event seen twice (here, then from etcd) is sent once.
   */
  async listEvents(q: EventQuery, sink: EventSink): Promise<() => void> {
    const match = (e: LbdEvent): boolean => (q.kind === '' || e.kind === q.kind) && (q.director === '' || e.director === q.director);
    if (q.scope === 'local' || this.cluster === null) return this.listLocalEvents(q, match, sink);
    const coordinator = this.cluster.coordinator;
    const seen = new SeenIds();
    const buffered: LbdEvent[] = [];
    let live = false;
    const send = (e: LbdEvent): void => {
      if (!match(e) || !seen.add(e.id)) return;
      sink.event(e);
    };
    // Subscribed before reading etcd, so nothing recorded meanwhile is missed; sent after the history.
    const unsubscribe = q.follow ? this.events.subscribe((e) => { if (live) send(e); else buffered.push(e); }) : () => {};
    let listed;
    try {
      // With a kind filter, read more: the limit counts what matches.
      listed = await coordinator.listEvents(q.sinceUnixMs, q.kind === '' ? q.limit : MAX_EVENTS_READ);
    } catch (cause) {
      unsubscribe();
      throw new AgentError('EtcdUnavailable', `cannot read the cluster's event history from etcd (${(cause as Error).message}); lbadm events --local shows this director's`, { cause });
    }
    const merged = new Map<string, LbdEvent>();
    for (const e of listed.events) if (isLbdEvent(e)) merged.set(e.id, e);
    for (const e of this.events.recent(q.sinceUnixMs)) merged.set(e.id, e);
    const history = [...merged.values()].filter(match).sort((a, b) => a.timeUnixMs - b.timeUnixMs || (a.id < b.id ? -1 : 1)).slice(-q.limit);
    for (const e of history) send(e);
    if (!q.follow) { sink.end(); return () => {}; }
    for (const e of buffered.splice(0)) send(e);
    live = true;
    let stopWatch: (() => Promise<void>) | null = null;
    let stopped = false;
    try {
      stopWatch = await coordinator.watchEvents(listed.revision, (e) => { if (isLbdEvent(e)) send(e); }, (err) => {
        sink.fail(new AgentError('EtcdUnavailable', `the cluster's event history cannot be followed: ${err.message}; lbadm events --local --follow follows this director's`, { cause: err }));
      });
    } catch (cause) {
      unsubscribe();
      throw new AgentError('EtcdUnavailable', `cannot follow the cluster's event history in etcd (${(cause as Error).message}); lbadm events --local --follow follows this director's`, { cause });
    }
    return () => {
      if (stopped) return;
      stopped = true;
      unsubscribe();
      void stopWatch?.();
    };
  }

  /** ListEvents of this director's own log: the newest `limit` that match, then, with follow, each new one. */
  private listLocalEvents(q: EventQuery, match: (e: LbdEvent) => boolean, sink: EventSink): () => void {
    for (const e of this.events.recent(q.sinceUnixMs).filter(match).slice(-q.limit)) sink.event(e);
    if (!q.follow) { sink.end(); return () => {}; }
    return this.events.subscribe((e) => { if (match(e)) sink.event(e); });
  }

  async getConfig(): Promise<GetConfigResponse> {
    if (this.cluster !== null) {
      let cur: StoredConfig | null;
      try {
        cur = await this.cluster.coordinator.currentConfig();
      } catch (cause) {
        throw new AgentError('EtcdUnavailable', `cannot read the cluster config from etcd (${(cause as Error).message})`, { cause });
      }
      return { configText: cur?.text ?? '', revision: cur?.revision ?? 0, clustered: true, source: cur === null ? '' : `etcd revision ${cur.revision}` };
    }
    // The file holds what runs (applies persist to it) unless someone edited it since: an edit of the
    // running config would then overwrite theirs when persisted, so it is refused until the file is settled.
    const r = this.running;
    const text = await readConfigText(this.configPath);
    if (sha256(text) !== r.sha256) {
      throw new AgentError('Refused', `${this.configPath} differs from the config this director runs (revision ${r.revision}): it was edited and not (or not yet) applied; fix the file or apply it (lbadm status shows the last apply), then try again`);
    }
    return { configText: text, revision: r.revision, clustered: false, source: r.source };
  }

  private requireCluster(what: string): ClusterMember {
    if (this.cluster === null) {
      throw new AgentError('NotClustered', `${what} needs a cluster: this director has no agent.cluster in ${this.configPath} (a single director keeps its config in that file)`);
    }
    return this.cluster;
  }

  async status(): Promise<GetStatusResponse> {
    const [observed, conns] = await Promise.all([this.dataPlane.observe(), this.dataPlane.connections()]);
    const r = this.running;
    const merge = this.health.merge(r.config);
    return {
      agent: {
        configPath: this.configPath,
        configSource: r.source,
        configSha256: r.sha256,
        configRevision: r.revision,
        serviceCount: r.config.services.length,
        adminSocket: this.adminSocket,
        pid: process.pid,
        startedAt: this.startedAt.toISOString(),
        lastApply: this.lastApply ? wireApplyRecord(this.lastApply) : null,
      },
      services: serviceStatuses(r.config, observed, conns, merge),
    };
  }

  async stats(): Promise<GetStatsResponse> {
    const [observed, conns] = await Promise.all([this.dataPlane.observe(), this.dataPlane.connections()]);
    return { sampledAtUnixMs: Date.now(), services: serviceStats(this.running.config, observed, conns) };
  }

  async connections(service: string): Promise<WireConnection[]> {
    let key: string | undefined;
    if (service !== '') {
      const resolved = resolveService(this.running.config, service);
      if (resolved === null) {
        throw new AgentError('NotFound', `service: "${service}" is neither the key nor the name of a configured service`);
      }
      key = resolved;
    }
    const conns = await this.dataPlane.connections(key === undefined ? {} : { service: key });
    return conns.map(toWireConnection);
  }

  async healthStatus(service: string): Promise<GetHealthResponse> {
    const config = this.running.config;
    let entries = this.health.entries(config);
    if (service !== '') {
      const key = resolveService(config, service);
      if (key === null) throw new AgentError('NotFound', `service: "${service}" is neither the key nor the name of a configured service`);
      entries = entries.filter((e) => e.serviceKey === key);
    }
    return healthResponse(entries, this.health.merge(config), this.health.stats(), this.health.now());
  }

  watchHealth(sinceUnixMs: number, sink: HealthSink): () => void {
    return this.health.watch(sinceUnixMs, { event: (e) => sink.event(wireHealthEvent(e)), end: () => sink.end() });
  }

  async doctor(): Promise<WireFinding[]> {
    const config = this.running.config;
    const [facts, conns] = await Promise.all([this.dataPlane.kernelFacts(probeTargets(config)), this.dataPlane.connections()]);
    return diagnose(config, facts, conns).map((f) => ({ ...f }));
  }

  /**
   * Stops serving and watching. Never touches the data plane: the kernel keeps forwarding, and the
   * next agent re-adopts what it finds.
   */
  async stop(reason = 'stop requested'): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.log.info('shutting down', {
      reason, note: this.cluster === null ? 'the kernel keeps forwarding; nothing is removed' : 'releasing vip groups to the standbys; the kernel keeps its rules',
    });
    this.watcher?.close();
    await this.cluster?.stop().catch((err: unknown) => this.log.error('leaving the cluster failed', { error: err }));
    if (this.healthTimer !== null) this.clock.clearTimeout(this.healthTimer);
    this.healthTimer = null;
    // Before the admin server: it ends the WatchHealth streams, which would otherwise hold up its shutdown.
    this.health.stop();
    // Ends the dashboard's streams and polling, so the HTTPS listener's close is not held up by them.
    this.surfaces?.close?.();
    await Promise.all([this.admin?.close(), this.adminTcp?.close(), this.ops?.close()]);
    // Let an apply in flight finish: the kernel transaction is atomic, but its record and file rename are not.
    await this.queue.catch(() => {});
  }

  /** Runs `fn` after every earlier apply or reload: applies never interleave. */
  private serialize<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => {});
    return run;
  }

  /**
   * Health at start: the checks of the config, and what the kernel has for them. A restarted agent keeps
   * the kernel's real server states until the first results, so a restart flaps nothing.
   */
  private async startHealth(config: Config): Promise<void> {
    let observed: ObservedState | null = null;
    if (HealthManager.anyChecks(config)) {
      try {
        observed = await this.dataPlane.observe();
      } catch (err) {
        this.log.warn('cannot read the kernel\'s real server states; health checks start in their startState', { error: err });
      }
    }
    this.health.set(config);
    if (observed !== null) this.health.adoptKernel(config, observed);
  }

  /**
   * Applies health changes after `delayMs` (transitions within it are applied together). A change while
   * a retry waits out its backoff applies after the batch delay instead.
   */
  private scheduleHealthApply(delayMs: number, retry = false): void {
    if (this.stopped) return;
    if (this.healthTimer !== null) {
      if (retry || !this.healthTimerRetry) return;
      this.clock.clearTimeout(this.healthTimer);
    }
    this.healthTimerRetry = retry;
    this.healthTimer = this.clock.setTimeout(() => {
      this.healthTimer = null;
      void this.serialize(() => this.applyHealth());
    }, delayMs);
  }

  private async applyHealth(): Promise<void> {
    if (this.stopped || this.running.revision === 0) return;
    const config = this.running.config;
    let merge: Merge;
    let result: ApplyResult;
    try {
      merge = this.health.merge(config);
      const last = this.lastApplied;
      if (last !== null && last.length === merge.services.length && merge.services.every((s, i) => s === last[i])) {
        this.health.commit(config, merge);
        this.emit('healthApply', { result: 'skipped', error: '', operations: 0 });
        return;
      }
      result = await this.dataPlane.apply({ services: merge.services });
    } catch (err) {
      const delay = this.retryMs;
      this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
      this.log.error('health apply failed', {
        error: err, kind: err instanceof DataPlaneError ? err.kind : undefined, retryInMs: delay,
        note: 'the previous state stays in the kernel; retried on the next change',
      });
      this.scheduleHealthApply(delay, true);
      this.lastHealthApplyFailed = err instanceof Error ? err.message : String(err);
      this.cluster?.healthMayHaveChanged();
      this.emit('healthApply', { result: 'failed', error: err instanceof Error ? err.message : String(err), operations: 0 });
      return;
    }
    this.retryMs = RETRY_FIRST_MS;
    this.lastApplied = merge.services;
    this.health.commit(config, merge);
    if (this.lastHealthApplyFailed !== null) { this.lastHealthApplyFailed = null; this.cluster?.healthMayHaveChanged(); }
    this.log.debug('health applied', {
      changed: result.changed, operations: result.operations.length, expiredConnections: result.expiredConnections, durationMs: result.durationMs,
    });
    this.emit('healthApply', { result: result.changed ? 'applied' : 'unchanged', error: '', operations: result.operations.length });
  }

  /** `revision`: the cluster config revision it is (cluster mode); otherwise counted here. */
  private async applyConfig(
    config: Config, sha: string, trigger: Trigger, source: string, revision?: number, who: Pick<ApplyContext, 'author' | 'caller' | 'comment'> = {},
  ): Promise<{ record: ApplyRecord; result: ApplyResult }> {
    const time = this.now();
    let result: ApplyResult;
    const merge = this.health.merge(config);
    const ctx: ApplyContext = {
      ...who, changes: summarizeServiceChanges(this.running.revision === 0 ? [] : this.running.config.services, config.services),
      ...(revision === undefined ? {} : { revision }),
    };
    try {
      result = await this.dataPlane.apply({ services: merge.services });
    } catch (err) {
      if (!(err instanceof DataPlaneError)) throw err;
      this.record({
        time, trigger, result: 'failed', error: err.message, problems: [], operations: 0, fullRebuild: false,
        durationMs: this.now().getTime() - time.getTime(), source, sha256: sha,
      }, ctx);
      this.log.error('apply failed', {
        trigger, source, sha256: short(sha), kind: err.kind, error: err.message, note: 'the previous state stays in the kernel',
      });
      throw err;
    }
    this.lastResult = result;
    const previous = this.running;
    const isNew = previous.revision === 0 || previous.sha256 !== sha;
    this.running = { config, sha256: sha, source, revision: revision ?? (isNew ? previous.revision + 1 : previous.revision) };
    // Checks that stay keep their records; new ones start in the startState the merge assumed.
    this.health.set(config);
    this.lastApplied = merge.services;
    this.retryMs = RETRY_FIRST_MS;
    this.health.commit(config, merge);
    const record = this.record({
      time, trigger, result: result.changed ? 'applied' : 'unchanged', error: '', problems: [],
      operations: result.operations.length, fullRebuild: result.fullRebuild, durationMs: result.durationMs, source, sha256: sha,
    }, ctx);
    this.log.info(result.changed ? 'config applied' : 'config unchanged: the kernel already matches', {
      trigger, source, sha256: short(sha), revision: this.running.revision, services: config.services.length,
      operations: result.operations.length, fullRebuild: result.fullRebuild,
      expiredConnections: result.expiredConnections, durationMs: result.durationMs,
    });
    if (previous.revision > 0 && previous.config.agent.adminSocket !== config.agent.adminSocket) {
      this.log.warn('agent.adminSocket changed; it takes effect when lbd-agent restarts', { serving: this.adminSocket });
    }
    if (previous.revision > 0 && JSON.stringify(this.fileAgent.admin) !== JSON.stringify(config.agent.admin)) {
      // Listeners, their TLS and their clients are read once, at start: a reload must not drop a listener midway.
      this.log.warn('agent.admin changed; it takes effect when lbd-agent restarts', {
        serving: { grpcListen: this.adminTcp === null ? null : this.fileAgent.admin.grpcListen, httpListen: this.ops === null ? null : this.fileAgent.admin.httpListen },
      });
    }
    return { record, result };
  }

  private reject(err: ConfigError, trigger: Trigger, source: string, sha: string, ctx: ApplyContext = {}): ApplyRecord {
    const record = this.record({
      time: this.now(), trigger, result: 'rejected', error: '', problems: err.problems, operations: 0, fullRebuild: false,
      durationMs: 0, source, sha256: sha,
    }, ctx);
    // One line holding every problem, so a log search for the rejection finds all of them.
    this.log.warn('config rejected; the running config stays', {
      trigger, source, kind: err.kind, problems: err.problems.map(formatProblem), runningRevision: this.running.revision,
    });
    return record;
  }

  private record(r: ApplyRecord, ctx: ApplyContext = {}): ApplyRecord {
    const previous = this.lastApply;
    this.lastApply = r;
    this.recordConfigEvent(r, previous, ctx);
    this.emit('apply', r);
    return r;
  }

  /** The config event of an apply attempt: what it changed, who asked, and why it failed if it did. */
  private recordConfigEvent(r: ApplyRecord, previous: ApplyRecord | null, ctx: ApplyContext): void {
    const revision = r.result === 'applied' || r.result === 'unchanged' ? this.running.revision : (ctx.revision ?? 0);
    const by = ctx.author ? ` by ${ctx.author}` : '';
    const origin = `${r.trigger} from ${r.source}${by}`;
    let reason: string;
    switch (r.result) {
      case 'applied':
        reason = `revision ${revision} applied (${origin}): ${ctx.changes || 'no service changed'}; ${r.operations} operation${r.operations === 1 ? '' : 's'}${r.fullRebuild ? ' (full rebuild)' : ''}`;
        break;
      case 'unchanged':
        reason = `revision ${revision} (${origin}): the kernel already matched; ${ctx.changes || 'no service changed'}`;
        break;
      case 'rejected': {
        const n = r.problems.length;
        reason = `rejected (${origin}), ${n} problem${n === 1 ? '' : 's'}: ${r.problems.slice(0, 3).map(formatProblem).join('; ')}${n > 3 ? `; and ${n - 3} more` : ''}; revision ${this.running.revision} keeps running`;
        break;
      }
      case 'failed':
        reason = `the data plane refused (${origin}): ${r.error}; the previous state stays in the kernel`;
        break;
    }
    this.events.record('config', 'config', previous?.result ?? '', r.result, reason, {
      trigger: r.trigger, revision, sha256: short(r.sha256), source: r.source, author: ctx.author ?? '', durationMs: Math.round(r.durationMs * 10) / 10,
      operations: r.operations, services: this.running.config.services.length, changes: ctx.changes ?? '',
      ...(ctx.caller ? { caller: ctx.caller.name } : {}), ...(ctx.comment ? { comment: ctx.comment } : {}),
    });
  }

  /** A real server's health transition: why it left (or came back), and what the agent does about it. */
  private recordHealth(e: HealthEvent): void {
    const held = e.heldDownUntil === null ? '' : `; held down for flapping until ${new Date(e.heldDownUntil).toISOString()}`;
    this.events.record('health', `${e.service} ${e.server}`, e.from, e.to, `${e.reason}${held}; ${e.action}`, {
      service: e.service, name: e.serviceName, server: e.server, check: e.checkKind, probe: e.probeReason, latencyMs: Math.round(e.latencyMs * 10) / 10,
      action: e.action, ...(e.heldDownUntil === null ? {} : { heldDownUntil: new Date(e.heldDownUntil).toISOString() }),
    });
  }
}

/** The most kept events a cluster ListEvents reads from etcd before filtering by kind. */
const MAX_EVENTS_READ = 10_000;

/** Ids already sent on one stream, bounded: a copy arrives from etcd soon after the local one, or never. */
class SeenIds {
  private readonly ids = new Set<string>();
  /** False when `id` was already seen. */
  add(id: string): boolean {
    if (this.ids.has(id)) return false;
    this.ids.add(id);
    if (this.ids.size > 20_000) {
      // Sets iterate in insertion order: forget the oldest half.
      let n = 10_000;
      for (const old of this.ids) { if (n-- <= 0) break; this.ids.delete(old); }
    }
    return true;
  }
}


/** Starts a listener; a failure to bind names the setting and the address (in use, not on this host, ...). */
async function listening<T>(setting: string, at: { address: string; port: number }, start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (cause) {
    const why = (cause as NodeJS.ErrnoException).code ?? (cause as Error).message;
    throw new AgentError('SocketInUse', `${setting}: cannot listen on ${hostPort(at.address, at.port)} (${why}); stop what uses that port, or choose another address or port (the address must be one of this host's)`, { cause });
  }
}

function short(sha: string): string {
  return sha.slice(0, 12);
}

function wireApplyRecord(r: ApplyRecord): WireApplyRecord {
  return {
    time: r.time.toISOString(), trigger: r.trigger, result: r.result, error: r.error, problems: r.problems.map(wireProblem),
    operations: r.operations, fullRebuild: r.fullRebuild, durationMs: r.durationMs, source: r.source, configSha256: r.sha256,
  };
}
