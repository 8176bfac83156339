import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { LBD_VERSION, configSha256, parseConfig, type Config } from '@lbd/config';
import { EtcdCoordinator, TIMING_PROFILES, type Coordinator, type EtcdTlsMaterial } from '@lbd/coordinator';
import type { AddressOwner, DataPlane } from '@lbd/dataplane';
import { ProberSet, systemClock, type FlapPolicy, type Prober, type Clock } from '@lbd/health-checker';
import { silentLogger, type Logger } from '@lbd/log';
import type { Liveness, OpsLimits, OpsSurfaces } from '@lbd/operator-surfaces';
import { DirectorAdmin } from './admin-backend.js';
import { OperatorListeners } from './operator-listeners.js';
import { recordHealthEvent } from './agent-events.js';
import type { ApplyRecord, HealthApplyRecord, RunningConfig } from './apply-record.js';
import { MemberAdmin, SingleDirectorAdmin, type ClusterAdmin } from './cluster-admin.js';
import { ClusterConfigSource } from './cluster-config-source.js';
import type { ClusterMember } from './cluster.js';
import { readConfigText } from './config-file.js';
import type { ConfigSource } from './config-source.js';
import { inProcessElection, type ElectionHostFactory } from './election-thread.js';
import type { SyncHostFactory } from './sync-host.js';
import { ClusterEventHistory, LocalEventHistory, type EventHistory } from './event-query.js';
import { goBgpAnnouncers, type AnnouncerFactory } from './ecmp.js';
import { EventLog } from './events.js';
import { FileConfigSource } from './file-config-source.js';
import { HealthManager } from './health.js';
import { LimitWatch } from './limit-watch.js';
import { Reconciler } from './reconciler.js';
import { readTlsFiles } from './tls-files.js';

/**
 * The director agent: wires one director together and runs its lifecycle. The Reconciler (reconciler.ts)
 * alone programs the data plane; a ConfigSource says which config runs (the file, or in a cluster etcd's,
 * with the ClusterMember that runs the election); DirectorAdmin (admin-backend.ts, `agent.admin`) answers
 * the admin API, with the event log and its history (event-query.ts); OperatorListeners
 * (operator-listeners.ts) serves it on the admin socket and agent.admin's listeners.
 *
 * A config that fails validation is rejected whole and the running one stays; an apply the data plane
 * refuses leaves the previous state. Stopping the agent never touches the data plane: the kernel keeps
 * forwarding without it.
 */

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
  /** The cluster config, event history and failovers (default: EtcdCoordinator on agent.cluster's etcd). */
  readonly coordinator?: Coordinator;
  /** Reported to the cluster (default: the package version). */
  readonly version?: string;
  /**
   * Connection sync between directors (with agent.cluster.tls): where it runs and over which connection table.
   * lbd-agent's main runs it in a thread of its own (`syncThread`); tests in-process over a fake table (`inProcessSync`).
   */
  readonly connectionSync?: SyncHostFactory;
  /** The kernel lease's drop counter, for drills (default: none, the figure unmeasured). */
  readonly leaseDrops?: () => Promise<number | null>;
  /** The ECMP tier's BGP speaker (with agent.cluster.ecmp; default: GoBGP, gobgpd run here if so configured). */
  readonly announcer?: AnnouncerFactory;
  /**
   * What the HTTPS listener (agent.admin.httpListen) serves besides GET /healthz (lbd-agent's main:
   * metrics and the dashboard, operator-surfaces.ts); called once the agent exists, closed at stop.
   */
  readonly opsRoutes?: (agent: Agent) => OpsSurfaces;
  /** The HTTPS listener's limits (default OPS_LIMITS); tests shorten its timeouts. */
  readonly opsLimits?: Partial<OpsLimits>;
  /** How often connection limits' drops are read, and how long without one ends a `reached` (limit-watch.ts). */
  readonly limitWatch?: { readonly intervalMs?: number; readonly quietMs?: number };
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

type AgentEvents = {
  /** Every apply attempt, whatever its result: tests and future metrics wait on it. */
  apply: [ApplyRecord];
  /** Every apply of health changes. */
  healthApply: [HealthApplyRecord];
};

const DEFAULT_BATCH_MS = 20;

export class Agent extends EventEmitter<AgentEvents> {
  readonly configPath: string;
  readonly adminSocket: string;
  readonly startedAt: Date;
  /** This agent's version, as reported to the cluster and in metrics. */
  readonly version: string;
  readonly health: HealthManager;
  /** Every transition with its reason: role, vip, health, config, sync, drill, admin, bgp, limit (events.ts). */
  readonly events: EventLog;
  /** Set when the config file has agent.cluster: the desired config then comes from etcd. */
  readonly cluster: ClusterMember | null = null;
  private readonly log: Logger;
  private readonly reconciler: Reconciler;
  private readonly limitWatch: LimitWatch;
  private readonly source: ConfigSource;
  /**
   * The admin API's answers (what the admin servers serve, and what tests and embedders call): one object,
   * so a test can stand in for one call by replacing it here.
   */
  readonly admin: DirectorAdmin;
  /** The director's own agent settings (the file's), which cluster configs never change. */
  private readonly fileAgent: Config['agent'];
  /** The admin socket and agent.admin's listeners, from start to stop (none with `serve: false`). */
  private operatorListeners: OperatorListeners | null = null;
  private stopped = false;

  private constructor(opts: AgentOptions, config: Config, text: string, etcdTls: EtcdTlsMaterial | null) {
    super();
    this.configPath = opts.configPath;
    this.log = opts.log ?? silentLogger;
    const now = opts.now ?? (() => new Date());
    const h = opts.health ?? {};
    const clock = h.clock ?? systemClock;
    this.health = new HealthManager({
      prober: h.prober ?? new ProberSet(), clock, log: this.log,
      ...(h.maxConcurrent === undefined ? {} : { maxConcurrent: h.maxConcurrent }),
      ...(h.flap === undefined ? {} : { flap: h.flap }),
      ...(h.historyLimit === undefined ? {} : { historyLimit: h.historyLimit }),
    });
    this.events = new EventLog({
      director: config.agent.cluster?.director ?? (hostname().replace(/[\s/]+/g, '-') || 'lbd'),
      onSubscriberError: (err) => this.log.error('an event subscriber failed', { error: err }),
    });
    this.health.on('event', (e) => recordHealthEvent(this.events, e));
    this.startedAt = now();
    this.version = opts.version ?? LBD_VERSION;
    this.adminSocket = opts.adminSocket ?? config.agent.adminSocket;
    this.fileAgent = config.agent;
    // Revision 0 until the first apply succeeds; `start` never returns an agent in that state.
    const initial: RunningConfig = { config, sha256: configSha256(text), source: opts.configPath, revision: 0 };
    this.reconciler = new Reconciler({
      dataPlane: opts.dataPlane, health: this.health, clock, batchMs: h.batchMs ?? DEFAULT_BATCH_MS, events: this.events, log: this.log, now, initial,
      onConfigApplied: (previous, running) => this.warnRestartSettings(previous, running),
      onDataPlaneProblemChange: () => this.source.dataPlaneProblemChanged(),
      slotParent: config.agent.cluster?.ecmp?.interface ?? null,
    });
    this.limitWatch = new LimitWatch({
      drops: () => opts.dataPlane.limitDrops(), config: () => this.reconciler.running.config, events: this.events, clock, log: this.log,
      ...opts.limitWatch,
    });
    this.reconciler.on('apply', (r) => this.emit('apply', r));
    this.reconciler.on('healthApply', (r) => this.emit('healthApply', r));
    const cluster = config.agent.cluster;
    let history: EventHistory;
    let clusterAdmin: ClusterAdmin;
    if (cluster === null) {
      this.source = new FileConfigSource({
        path: opts.configPath, reconciler: this.reconciler, log: this.log, initial: { text, config }, watch: opts.watch !== false, debounceMs: opts.debounceMs ?? 200,
      });
      history = new LocalEventHistory(this.events);
      clusterAdmin = new SingleDirectorAdmin(opts.configPath);
    } else {
      // A wiring mistake in the caller (lbd-agent's main always passes one), not an operator's.
      const election = opts.election ?? (opts.addressOwner ? inProcessElection(opts.addressOwner) : null);
      if (election === null) throw new Error('AgentOptions.election or addressOwner is required when the config has agent.cluster');
      const coordinator = opts.coordinator ?? new EtcdCoordinator({
        id: cluster.director, endpoints: cluster.etcd, etcdTls, prefix: cluster.prefix, timing: TIMING_PROFILES[cluster.timing], events: { log: this.log },
      });
      const source = new ClusterConfigSource({
        reconciler: this.reconciler, coordinator, fileAgent: config.agent, events: this.events, log: this.log,
        member: {
          settings: cluster, etcdTls, version: this.version, election, log: this.log, events: this.events,
          dataPlaneProblem: () => this.reconciler.dataPlaneProblem(),
          ...(opts.connectionSync ? { connectionSync: opts.connectionSync } : {}),
          ...(opts.leaseDrops ? { leaseDrops: opts.leaseDrops } : {}),
          marks: () => this.reconciler.realServerMarks(),
          ...(cluster.ecmp === null ? {} : { announcer: opts.announcer ?? this.defaultAnnouncer() }),
        },
      });
      this.source = source;
      this.cluster = source.member;
      history = new ClusterEventHistory(this.events, coordinator);
      clusterAdmin = new MemberAdmin(source.member, this.events, this.log);
    }
    this.admin = new DirectorAdmin({
      configPath: this.configPath, adminSocket: this.adminSocket, startedAt: this.startedAt, reconciler: this.reconciler, health: this.health,
      source: this.source, cluster: clusterAdmin, history, events: this.events,
    });
  }

  /** Why this director cannot program its kernel right now, or null: a director in that state must not lead. */
  dataPlaneProblem(): string | null {
    return this.reconciler.dataPlaneProblem();
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
    // Read before anything starts: an unreadable certificate names its setting and file, and nothing runs.
    const etcdTlsFiles = initial.config.agent.cluster?.etcdTls ?? null;
    const etcdTls = etcdTlsFiles === null ? null : await readTlsFiles(etcdTlsFiles, 'agent.cluster.etcdTls');
    const agent = new Agent(opts, initial.config, initial.text, etcdTls);
    try {
      // Checked before applying: a second agent must not reprogram the kernel under a running one.
      if (opts.serve !== false) await OperatorListeners.checkSocketFree(agent.adminSocket);
      await agent.reconciler.startHealth(initial.config);
      // A file applies here and is watched from now on; a cluster applies nothing until it has the cluster
      // config (an empty file config must not flush a kernel that is forwarding).
      await agent.source.start();
    } catch (err) {
      agent.health.stop();
      throw err;
    }
    if (opts.serve !== false) {
      try {
        agent.operatorListeners = await OperatorListeners.start({
          socket: agent.adminSocket, settings: agent.fileAgent, admin: agent.admin, liveness: () => agent.liveness(), log: agent.log,
          ...(opts.opsRoutes ? { surfaces: () => opts.opsRoutes!(agent) } : {}), ...(opts.opsLimits ? { limits: opts.opsLimits } : {}),
        });
      } catch (err) {
        await agent.source.stop();
        agent.health.stop();
        throw err;
      }
    }
    try {
      await agent.source.join();
    } catch (err) {
      await agent.stop('cluster start failed');
      throw err;
    }
    agent.limitWatch.start();
    agent.log.info('started', {
      config: opts.configPath, adminSocket: opts.serve === false ? null : agent.adminSocket,
      adminListen: agent.operatorListeners?.serving.grpcListen ?? null, opsListen: agent.operatorListeners?.serving.httpListen ?? null,
      services: initial.config.services.length, pid: process.pid,
      cluster: agent.cluster === null ? null : { director: agent.cluster.settings.director, prefix: agent.cluster.settings.prefix },
    });
    return agent;
  }

  /** GET /healthz: up and serving, with what a person checking on it wants to see first. */
  private liveness(): Liveness {
    const last = this.reconciler.lastApplyRecord;
    const running = this.reconciler.running;
    return {
      ok: !this.stopped && running.revision > 0, pid: process.pid, startedAt: this.startedAt.toISOString(),
      configRevision: running.revision, services: running.config.services.length,
      lastApply: last === null ? null : { time: last.time.toISOString(), trigger: last.trigger, result: last.result },
      director: this.cluster?.settings.director ?? null,
    };
  }

  /** After an apply: settings a reload cannot change are read once, at start, and say so when they differ. */
  private warnRestartSettings(previous: RunningConfig, running: RunningConfig): void {
    const config = running.config;
    if (previous.revision > 0 && previous.config.agent.adminSocket !== config.agent.adminSocket) {
      this.log.warn('agent.adminSocket changed; it takes effect when lbd-agent restarts', { serving: this.adminSocket });
    }
    if (previous.revision > 0 && JSON.stringify(this.fileAgent.admin) !== JSON.stringify(config.agent.admin)) {
      // Listeners, their TLS and their clients are read once, at start: a reload must not drop a listener midway.
      this.log.warn('agent.admin changed; it takes effect when lbd-agent restarts', {
        serving: this.operatorListeners?.serving ?? { grpcListen: null, httpListen: null },
      });
    }
  }

  /** The running config (the last one applied successfully). */
  get config(): Config {
    return this.reconciler.running.config;
  }

  get revision(): number {
    return this.reconciler.running.revision;
  }

  get lastApplyRecord(): ApplyRecord | null {
    return this.reconciler.lastApplyRecord;
  }

  /** SIGHUP or a file event: see ConfigSource.reload. */
  reload(trigger: 'sighup' | 'file-change'): Promise<ApplyRecord | null> {
    return this.source.reload(trigger);
  }

  /**
   * Stops serving and watching. Never touches the data plane: the kernel keeps forwarding, and the
   * next agent re-adopts what it finds.
   */
  async stop(reason = 'stop requested'): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.limitWatch.stop();
    this.reconciler.stop();
    this.log.info('shutting down', { reason, note: this.source.stopNote });
    await this.source.stop();
    this.reconciler.cancelHealthApply();
    // Before the admin server: it ends the WatchHealth streams, which would otherwise hold up its shutdown.
    this.health.stop();
    await this.operatorListeners?.close();
    await this.reconciler.settled();
    await this.stopGobgpd?.();
  }

  /** Stops the gobgpd this agent runs for the ECMP tier (after the cluster member withdrew its paths). */
  private stopGobgpd: (() => Promise<void>) | undefined;

  private defaultAnnouncer(): AnnouncerFactory {
    const speakers = goBgpAnnouncers(this.log);
    this.stopGobgpd = () => speakers.stop();
    return speakers.connect;
  }
}
