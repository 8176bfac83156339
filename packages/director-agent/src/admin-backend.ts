import type {
  ClusterStatus, ConfigHistoryResponse, Connection as WireConnection, DrillResult, FailoverResponse, Finding as WireFinding, GetConfigResponse,
  GetHealthResponse, GetStatsResponse, GetStatusResponse,
} from '@lbd/proto';
import {
  AgentError, type AdminBackend, type ApplyOptions, type ApplyOutcome, type Caller, type DrillRecord, type EventQuery, type EventSink,
  type HealthSink,
} from '@lbd/operator-surfaces';
import type { ClusterAdmin } from './cluster-admin.js';
import type { ConfigSource } from './config-source.js';
import { arpProbes, diagnose, probeTargets } from './doctor.js';
import type { EventHistory } from './event-query.js';
import type { EventLog } from './events.js';
import type { HealthManager } from './health.js';
import type { Reconciler } from './reconciler.js';
import {
  healthResponse, resolveService, serviceStats, serviceStatuses, toWireConnection, wireApplyRecord, wireHealthEvent,
} from './views.js';

export interface DirectorAdminOptions {
  readonly configPath: string;
  readonly adminSocket: string;
  readonly startedAt: Date;
  readonly reconciler: Reconciler;
  readonly health: HealthManager;
  readonly source: ConfigSource;
  /** Cluster status and failovers: this director's membership, or SingleDirectorAdmin when it is alone. */
  readonly cluster: ClusterAdmin;
  readonly history: EventHistory;
  readonly events: EventLog;
}

/**
 * The admin API's answers for one director (AdminBackend): views of what runs and what the kernel has,
 * applies and config reads (through the ConfigSource), failovers and cluster status (through a ClusterAdmin),
 * and the event history. It reads the data plane only through the Reconciler.
 */
export class DirectorAdmin implements AdminBackend {
  constructor(private readonly o: DirectorAdminOptions) {}

  async status(): Promise<GetStatusResponse> {
    const reconciler = this.o.reconciler;
    const [observed, conns] = await Promise.all([reconciler.observe(), reconciler.connections()]);
    const r = reconciler.running;
    const last = reconciler.lastApplyRecord;
    const merge = this.o.health.merge(r.config);
    return {
      agent: {
        configPath: this.o.configPath,
        configSource: r.source,
        configSha256: r.sha256,
        configRevision: r.revision,
        serviceCount: r.config.services.length,
        adminSocket: this.o.adminSocket,
        pid: process.pid,
        startedAt: this.o.startedAt.toISOString(),
        lastApply: last ? wireApplyRecord(last) : null,
      },
      services: serviceStatuses(r.config, observed, conns, merge),
      synProxy: observed.synProxy ?? null,
    };
  }

  async stats(): Promise<GetStatsResponse> {
    const reconciler = this.o.reconciler;
    const [observed, conns] = await Promise.all([reconciler.observe(), reconciler.connections()]);
    return { sampledAtUnixMs: Date.now(), services: serviceStats(reconciler.running.config, observed, conns) };
  }

  async connections(service: string): Promise<WireConnection[]> {
    let key: string | undefined;
    if (service !== '') {
      const resolved = resolveService(this.o.reconciler.running.config, service);
      if (resolved === null) {
        throw new AgentError('NotFound', `service: "${service}" is neither the key nor the name of a configured service`);
      }
      key = resolved;
    }
    const conns = await this.o.reconciler.connections(key === undefined ? {} : { service: key });
    return conns.map(toWireConnection);
  }

  applyText(text: string, source: string, dryRun: boolean, opts: ApplyOptions = {}): Promise<ApplyOutcome> {
    return this.o.source.apply(text, source, dryRun, opts);
  }

  async doctor(): Promise<WireFinding[]> {
    const config = this.o.reconciler.running.config;
    const [facts, conns] = await Promise.all([this.o.reconciler.kernelFacts(probeTargets(config), arpProbes(config)), this.o.reconciler.connections()]);
    return diagnose(config, facts, conns).map((f) => ({ ...f }));
  }

  async healthStatus(service: string): Promise<GetHealthResponse> {
    const config = this.o.reconciler.running.config;
    const health = this.o.health;
    let entries = health.entries(config);
    if (service !== '') {
      const key = resolveService(config, service);
      if (key === null) throw new AgentError('NotFound', `service: "${service}" is neither the key nor the name of a configured service`);
      entries = entries.filter((e) => e.serviceKey === key);
    }
    return healthResponse(entries, health.merge(config), health.stats(), health.now());
  }

  watchHealth(sinceUnixMs: number, sink: HealthSink): () => void {
    return this.o.health.watch(sinceUnixMs, { event: (e) => sink.event(wireHealthEvent(e)), end: () => sink.end() });
  }

  clusterStatus(): Promise<ClusterStatus> {
    return this.o.cluster.status(this.o.reconciler.running.revision);
  }

  failover(group: string, to: string, author = '', caller?: Caller): Promise<FailoverResponse> {
    return this.o.cluster.failover(group, to, author, caller);
  }

  runDrill(scenario: string, group: string, to: string, author: string, caller?: Caller): Promise<DrillResult> {
    return this.o.cluster.drill(group, to, author, caller);
  }

  configHistory(): Promise<ConfigHistoryResponse> {
    return this.o.source.history();
  }

  rollback(revision: number, author: string, caller?: Caller): Promise<number> {
    return this.o.source.rollback(revision, author, caller);
  }

  listEvents(q: EventQuery, sink: EventSink): Promise<() => void> {
    return this.o.history.list(q, sink);
  }

  recordDrill(d: DrillRecord, caller: Caller): string {
    return this.o.events.record('drill', d.scenario, '', d.result, d.reason, { ...d.fields, caller: caller.name }).id;
  }

  getConfig(): Promise<GetConfigResponse> {
    return this.o.source.read();
  }
}
