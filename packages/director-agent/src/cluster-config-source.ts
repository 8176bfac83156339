import { ConfigError, configSha256, parseConfig, type Config } from '@lbd/config';
import type { Coordinator, StoredConfig } from '@lbd/coordinator';
import { DataPlaneError, type ApplyResult } from '@lbd/dataplane';
import type { ConfigHistoryResponse, GetConfigResponse } from '@lbd/proto';
import { AgentError, type ApplyOptions, type ApplyOutcome, type Caller } from '@lbd/operator-surfaces';
import type { Logger } from '@lbd/log';
import type { ApplyRecord } from './apply-record.js';
import { ClusterMember, type ClusterMemberOptions } from './cluster.js';
import type { ConfigSource } from './config-source.js';
import { summarizeServiceChanges, type EventLog } from './events.js';
import type { Reconciler } from './reconciler.js';

/** A failed apply of the cluster's config is tried again after this, doubling up to RETRY_MAX_MS. */
const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 30_000;

export interface ClusterConfigSourceOptions {
  readonly reconciler: Reconciler;
  readonly coordinator: Coordinator;
  /** This director's membership, but for what the source gives it: the coordinator, and the configs it watches. */
  readonly member: Omit<ClusterMemberOptions, 'coordinator' | 'onConfig'>;
  /** The director's own agent settings (the file's), which cluster configs never change. */
  readonly fileAgent: Config['agent'];
  readonly events: EventLog;
  readonly log: Logger;
}

/**
 * A clustered director's config: the cluster's, in etcd. Every director applies each revision from its
 * watch; the Apply RPC validates a config here and writes it by compare-and-swap on the revision it was
 * based on, and every director (this one included) applies it from the watch. The file holds only this
 * director's agent settings, which cluster configs never change. Nothing is applied at start until the
 * cluster config arrives: an empty file config must not flush a kernel that is forwarding.
 */
export class ClusterConfigSource implements ConfigSource {
  readonly stopNote = 'releasing vip groups to the standbys; the kernel keeps its rules';
  /** This director's membership of the cluster: it follows the cluster config and tells this source. */
  readonly member: ClusterMember;
  private joined = false;
  private stopped = false;
  /** The newest cluster config seen: the one a retry applies (an older one's retry is dropped). */
  private latest: StoredConfig | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private retryMs = RETRY_FIRST_MS;

  constructor(private readonly o: ClusterConfigSourceOptions) {
    this.member = new ClusterMember({
      ...o.member, coordinator: o.coordinator,
      onConfig: (c) => {
        this.latest = c;
        if (this.retryTimer !== null) clearTimeout(this.retryTimer);
        this.retryTimer = null;
        this.retryMs = RETRY_FIRST_MS;
        this.applyLatest(c);
      },
    });
  }

  private applyLatest(c: StoredConfig): void {
    this.o.reconciler.serialize(() => this.applyFromCluster(c)).catch((err: unknown) => this.o.log.error('applying the cluster config failed', { error: err }));
  }

  /**
   * The cluster's config failed to apply here (the kernel refused it; the previous rules stay, and the
   * director, unfit, leads nothing and announces nothing): try it again, with backoff, until it applies or
   * a newer one arrives. What refused it may be gone by then (a hand-made change someone undid, a module
   * loaded), and without a retry the director would stay unfit, or run an older config than the cluster's,
   * until the next change.
   */
  private scheduleRetry(c: StoredConfig): void {
    if (this.stopped || this.latest !== c) return;
    const delay = this.retryMs;
    this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
    this.o.log.info('cluster config: the failed apply is tried again', { revision: c.revision, retryInMs: delay });
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      if (!this.stopped && this.latest === c) this.applyLatest(c);
    }, delay);
    this.retryTimer.unref();
  }

  async start(): Promise<void> {}

  async join(): Promise<void> {
    this.joined = true;
    await this.member.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    if (!this.joined) return;
    await this.member.stop().catch((err: unknown) => this.o.log.error('leaving the cluster failed', { error: err }));
  }

  dataPlaneProblemChanged(): void {
    this.member.healthMayHaveChanged();
  }

  /**
   * The file holds only this director's agent settings (they take effect on restart); SIGHUP re-applies
   * the running cluster config, which repairs a kernel someone changed by hand.
   */
  reload(trigger: 'sighup' | 'file-change'): Promise<ApplyRecord | null> {
    const r = this.o.reconciler;
    return r.serialize(async () => {
      if (r.isStopped) return null;
      if (r.running.revision === 0) return null;
      const run = r.running;
      return (await r.applyConfig(run.config, run.sha256, trigger, run.source, run.revision)).record;
    });
  }

  /** A cluster config arrived from etcd: apply it here, then let the cluster member follow it. */
  async applyFromCluster(c: StoredConfig): Promise<void> {
    const r = this.o.reconciler;
    if (r.isStopped) return;
    const sha = configSha256(c.text);
    const source = `etcd revision ${c.revision}`;
    let parsed: Config;
    try {
      parsed = parseConfig(c.text, source, { cluster: true });
    } catch (err) {
      // Written by an lbd of another version, or by hand: keep running what runs, and say so.
      if (err instanceof ConfigError) { r.reject(err, 'cluster', source, sha, { author: c.author, comment: c.comment, revision: c.revision }); return; }
      throw err;
    }
    const config: Config = { ...parsed, agent: this.o.fileAgent };
    try {
      await r.applyConfig(config, sha, 'cluster', source, c.revision, { author: c.author, comment: c.comment });
    } catch (err) {
      this.member.healthMayHaveChanged();
      if (err instanceof DataPlaneError) {
        this.scheduleRetry(c);
        return;
      }
      throw err;
    }
    this.retryMs = RETRY_FIRST_MS;
    this.member.healthMayHaveChanged();
    await this.member.configApplied(config);
  }

  /**
   * Validated here (every problem, nothing written), then written to etcd by compare-and-swap on the
   * revision the caller based it on (or the one this director runs). The answer waits for this director's
   * apply.
   */
  async apply(text: string, source: string, dryRun: boolean, opts: ApplyOptions): Promise<ApplyOutcome> {
    const r = this.o.reconciler;
    const events = this.o.events;
    if (r.isStopped) throw new AgentError('Stopped', 'the agent is shutting down');
    const sha = configSha256(text);
    let parsed: Config;
    try {
      parsed = parseConfig(text, source, { cluster: true });
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      if (!dryRun) r.reject(err, 'apply-rpc', source, sha, opts);
      return { ok: false, error: err, sha256: sha };
    }
    const config: Config = { ...parsed, agent: this.o.fileAgent };
    if (dryRun) {
      const result = await r.serialize(() => r.dryRun(config));
      return { ok: true, result, serviceCount: config.services.length, sha256: sha, clusterRevision: 0 };
    }
    const expect = opts.expectRevision ?? r.running.revision;
    const noChange: ApplyResult = { changed: false, operations: [], fullRebuild: false, expiredConnections: 0, durationMs: 0 };
    const applied = new Promise<ApplyResult>((resolve) => {
      const onApply = (a: ApplyRecord): void => {
        if (a.trigger !== 'cluster' || a.sha256 !== sha) return;
        r.off('apply', onApply);
        resolve(a.result === 'applied' || a.result === 'unchanged' ? (r.lastApplyResult ?? noChange) : noChange);
      };
      r.on('apply', onApply);
      // The write is done either way; if this director is slow to apply, the answer says what it knows.
      setTimeout(() => { r.off('apply', onApply); resolve(noChange); }, 10_000).unref();
    });
    const author = opts.author ?? 'unknown';
    const changes = summarizeServiceChanges(r.running.config.services, config.services);
    const trail = { author, caller: opts.caller?.name ?? '', source, changes };
    let write;
    try {
      write = await this.o.coordinator.writeConfig({ text, author, at: Date.now(), comment: source }, expect);
    } catch (cause) {
      const message = (cause as Error).message;
      const err = /permission denied/i.test(message)
        ? new AgentError('EtcdDenied', `etcd refused this director's certificate the write of the cluster config (${message}): with etcd's roles (lbadm etcd roles) only an operator's certificate writes it; `
          + 'write it with lbadm\'s --etcd flags and the operator\'s etcd certificate (lbadm apply -f FILE --etcd https://HOST:2379 --etcd-prefix P --etcd-ca F --etcd-cert F --etcd-key F); nothing was changed', { cause })
        : new AgentError('EtcdUnavailable', `cannot write the cluster config to etcd (${message}); nothing was changed`, { cause });
      events.record('admin', 'apply', '', 'refused', err.message, trail);
      throw err;
    }
    if (!write.ok) {
      const err = new AgentError('Conflict', `the cluster config is at revision ${write.current}, not ${expect} as this apply expected: someone applied in between; look at lbadm config history, then apply again`);
      events.record('admin', 'apply', '', 'refused', err.message, trail);
      throw err;
    }
    // Every director records the config event when it applies; this one also says who asked it, and through what.
    events.record('admin', 'apply', '', 'done', `cluster config revision ${write.revision} written for ${author} from ${source}: ${changes || 'no service changed'}`,
      { ...trail, revision: write.revision });
    const result = await applied;
    return { ok: true, result, serviceCount: config.services.length, sha256: sha, clusterRevision: write.revision };
  }

  async read(): Promise<GetConfigResponse> {
    let cur: StoredConfig | null;
    try {
      cur = await this.o.coordinator.currentConfig();
    } catch (cause) {
      throw new AgentError('EtcdUnavailable', `cannot read the cluster config from etcd (${(cause as Error).message})`, { cause });
    }
    return { configText: cur?.text ?? '', revision: cur?.revision ?? 0, clustered: true, source: cur === null ? '' : `etcd revision ${cur.revision}` };
  }

  async history(): Promise<ConfigHistoryResponse> {
    const versions = await this.o.coordinator.configHistory();
    return {
      current: this.o.reconciler.running.revision,
      versions: versions.map((v) => {
        let services = 0;
        try { services = parseConfig(v.text, 'history', { cluster: true }).services.length; } catch { services = 0; }
        return { revision: v.revision, author: v.author, atUnixMs: v.at, comment: v.comment, configSha256: configSha256(v.text), serviceCount: services };
      }),
    };
  }

  async rollback(revision: number, author: string, caller?: Caller): Promise<number> {
    const trail = { author, caller: caller?.name ?? '', to: revision };
    const old = await this.o.coordinator.configAt(revision);
    if (old === null) {
      const err = new AgentError('NotFound', `revision: ${revision} is not in the cluster config history; see lbadm config history`);
      this.o.events.record('admin', 'rollback', '', 'refused', err.message, trail);
      throw err;
    }
    const current = (await this.o.coordinator.currentConfig())?.revision ?? 0;
    // The apply records its own admin event (written or refused) with the services it changes.
    const outcome = await this.apply(old.text, `rollback to revision ${revision}`, false, { expectRevision: current, author, ...(caller ? { caller } : {}) });
    if (!outcome.ok) throw outcome.error;
    this.o.events.record('admin', 'rollback', '', 'done', `${author || 'an operator'} rolled the cluster config back to revision ${revision}, now revision ${outcome.clusterRevision ?? 0}`,
      { ...trail, revision: outcome.clusterRevision ?? 0 });
    return outcome.clusterRevision ?? 0;
  }
}
