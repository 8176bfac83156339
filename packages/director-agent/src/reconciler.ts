import { EventEmitter } from 'node:events';
import { formatProblem, type Config, type ConfigError } from '@lbd/config';
import { realServerName } from '@lbd/connsync';
import {
  DataPlaneError, type DesiredSlot, type ApplyResult, type ArpProbe, type Connection, type ConnectionFilter, type DataPlane, type Endpoint, type KernelFacts, type ObservedState,
} from '@lbd/dataplane';
import type { Clock } from '@lbd/health-checker';
import type { Logger } from '@lbd/log';
import { recordConfigEvent } from './agent-events.js';
import { shortSha, type ApplyContext, type ApplyRecord, type HealthApplyRecord, type RunningConfig, type Trigger } from './apply-record.js';
import type { Merge } from './desired.js';
import { desiredSlots } from './ecmp.js';
import { summarizeServiceChanges, type EventLog } from './events.js';
import { HealthManager } from './health.js';

/**
 * The reconcile loop, and the only holder of the DataPlane: it merges the running config with health
 * (HealthManager, desired.ts) into the whole desired state and asks the data plane for it. It decides
 * what the kernel should have; the DataPlane decides how to get there and re-adopts what the kernel already
 * has, so nothing here flushes or starts from empty. It does not decide which config runs (a ConfigSource
 * does) and never touches the data plane when stopping: the kernel keeps forwarding without it.
 *
 * Applies never interleave (`serialize`). Health transitions are batched (those within `batchMs`) into one
 * apply, serialised with config applies; a failed one is logged and retried on the next change, or after a
 * backoff if none comes. An apply the data plane refuses leaves the previous state (its apply is one
 * transaction).
 */

type ReconcilerEvents = {
  /** Every config apply attempt, whatever its result: tests and metrics wait on it. */
  apply: [ApplyRecord];
  /** Every apply of health changes. */
  healthApply: [HealthApplyRecord];
};

export interface ReconcilerOptions {
  readonly dataPlane: DataPlane;
  readonly health: HealthManager;
  /** Health batching and retries run on this clock. */
  readonly clock: Clock;
  /** Transitions within this long are applied together. */
  readonly batchMs: number;
  readonly events: EventLog;
  readonly log: Logger;
  readonly now: () => Date;
  /** The config to start from (revision 0: nothing applied yet). */
  readonly initial: RunningConfig;
  /** After a config apply succeeded and was logged: what ran before and what runs now. */
  onConfigApplied?(previous: RunningConfig, running: RunningConfig): void;
  /** Whether the data plane can be programmed may have changed (a health apply failed, or succeeded again). */
  onDataPlaneProblemChange?(): void;
  /**
   * The fabric interface the ECMP tier's slot interfaces hang from (agent.cluster.ecmp.interface); null or
   * absent: this director is not in the tier, and a config's slots are not programmed here.
   */
  readonly slotParent?: string | null;
}

const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 30_000;

export class Reconciler extends EventEmitter<ReconcilerEvents> {
  private runningConfig: RunningConfig;
  private lastApply: ApplyRecord | null = null;
  /** The data plane's answer to the last config apply (operations included), for the Apply RPC in a cluster. */
  private lastResult: ApplyResult | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private stopped = false;
  /** The connection listing in flight, shared by the callers that ask meanwhile (connections()). */
  private listing: Promise<Connection[]> | null = null;
  private healthTimer: unknown = null;
  /** Whether healthTimer is a retry after a failure (a new change then applies at once instead). */
  private healthTimerRetry = false;
  /** After a failed health apply: the next retry's delay. */
  private retryMs = RETRY_FIRST_MS;
  /** The services last applied successfully: a health apply that would pass the same objects is skipped. */
  private lastApplied: readonly Config['services'][number][] | null = null;
  private lastHealthApplyFailed: string | null = null;

  constructor(private readonly o: ReconcilerOptions) {
    super();
    this.runningConfig = o.initial;
    o.health.on('change', () => this.scheduleHealthApply(o.batchMs));
  }

  /** The config last applied successfully (revision 0 before the first). */
  get running(): RunningConfig {
    return this.runningConfig;
  }

  get lastApplyRecord(): ApplyRecord | null {
    return this.lastApply;
  }

  /** The data plane's answer to the last config apply that succeeded. */
  get lastApplyResult(): ApplyResult | null {
    return this.lastResult;
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  /** Why this director cannot program its kernel right now, or null: a director in that state must not lead. */
  dataPlaneProblem(): string | null {
    if (this.lastApply?.result === 'failed') return `data plane apply failed: ${this.lastApply.error}`;
    return this.lastHealthApplyFailed === null ? null : `data plane apply failed: ${this.lastHealthApplyFailed}`;
  }

  /** Runs `fn` after every earlier apply or reload: applies never interleave. */
  serialize<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => { /* the caller hears it through run; the queue only orders */ });
    return run;
  }

  /**
   * Health at start: the checks of the config, and what the kernel has for them. A restarted agent keeps
   * the kernel's real server states until the first results, so a restart flaps nothing.
   */
  async startHealth(config: Config): Promise<void> {
    let observed: ObservedState | null = null;
    if (HealthManager.anyChecks(config)) {
      try {
        observed = await this.o.dataPlane.observe();
      } catch (err) {
        this.o.log.warn('cannot read the kernel\'s real server states; health checks start in their startState', { error: err });
      }
    }
    this.o.health.set(config);
    if (observed !== null) this.o.health.adoptKernel(config, observed);
  }

  /**
   * Applies `config` merged with health. `revision`: the cluster config revision it is (cluster mode);
   * otherwise counted here. Throws DataPlaneError (recorded) when the data plane refuses it.
   */
  async applyConfig(
    config: Config, sha: string, trigger: Trigger, source: string, revision?: number, who: Pick<ApplyContext, 'author' | 'caller' | 'comment'> = {},
  ): Promise<{ record: ApplyRecord; result: ApplyResult }> {
    const time = this.o.now();
    let result: ApplyResult;
    const merge = this.o.health.merge(config);
    const ctx: ApplyContext = {
      ...who, changes: summarizeServiceChanges(this.runningConfig.revision === 0 ? [] : this.runningConfig.config.services, config.services),
      ...(revision === undefined ? {} : { revision }),
    };
    try {
      const slots = this.slotsOf(config);
      // Also with no slots: a tier the cluster config dropped leaves no slot interface behind.
      if (this.o.slotParent) await this.o.dataPlane.prepareSlots(this.o.slotParent, slots.length);
      result = await this.o.dataPlane.apply({ services: merge.services, slots });
    } catch (err) {
      if (!(err instanceof DataPlaneError)) throw err;
      this.record({
        time, trigger, result: 'failed', error: err.message, problems: [], operations: 0, fullRebuild: false,
        durationMs: this.o.now().getTime() - time.getTime(), source, sha256: sha,
      }, ctx);
      this.o.log.error('apply failed', {
        trigger, source, sha256: shortSha(sha), kind: err.kind, error: err.message, note: 'the previous state stays in the kernel',
      });
      throw err;
    }
    this.lastResult = result;
    const previous = this.runningConfig;
    const isNew = previous.revision === 0 || previous.sha256 !== sha;
    this.runningConfig = { config, sha256: sha, source, revision: revision ?? (isNew ? previous.revision + 1 : previous.revision) };
    // Checks that stay keep their records; new ones start in the startState the merge assumed.
    this.o.health.set(config);
    this.lastApplied = merge.services;
    this.retryMs = RETRY_FIRST_MS;
    this.o.health.commit(config, merge);
    const record = this.record({
      time, trigger, result: result.changed ? 'applied' : 'unchanged', error: '', problems: [],
      operations: result.operations.length, fullRebuild: result.fullRebuild, durationMs: result.durationMs, source, sha256: sha,
    }, ctx);
    this.o.log.info(result.changed ? 'config applied' : 'config unchanged: the kernel already matches', {
      trigger, source, sha256: shortSha(sha), revision: this.runningConfig.revision, services: config.services.length,
      operations: result.operations.length, fullRebuild: result.fullRebuild,
      expiredConnections: result.expiredConnections, durationMs: result.durationMs,
    });
    this.o.onConfigApplied?.(previous, this.runningConfig);
    return { record, result };
  }

  /** Records a config that failed validation: nothing is applied, the running config stays. */
  reject(err: ConfigError, trigger: Trigger, source: string, sha: string, ctx: ApplyContext = {}): ApplyRecord {
    const record = this.record({
      time: this.o.now(), trigger, result: 'rejected', error: '', problems: err.problems, operations: 0, fullRebuild: false,
      durationMs: 0, source, sha256: sha,
    }, ctx);
    // One line holding every problem, so a log search for the rejection finds all of them.
    this.o.log.warn('config rejected; the running config stays', {
      trigger, source, kind: err.kind, problems: err.problems.map(formatProblem), runningRevision: this.runningConfig.revision,
    });
    return record;
  }

  /** What applying `config` would change, changing nothing. */
  dryRun(config: Config): Promise<ApplyResult> {
    return this.o.dataPlane.apply({ services: this.o.health.merge(config).services, slots: this.slotsOf(config) }, { dryRun: true });
  }

  /** What the kernel has now. */
  observe(): Promise<ObservedState> {
    return this.o.dataPlane.observe();
  }

  /**
   * The kernel's connections (one service's with a filter). Callers that ask while a listing runs share it:
   * a listing reads the whole table (conntrack -L, both families), which with tens of thousands of
   * connections on a loaded box takes seconds, and status calls that their callers retried after a
   * deadline (which does not stop the work here) queued listing after listing without bound. A shared
   * listing began at most one listing before the call.
   */
  async connections(filter: ConnectionFilter = {}): Promise<Connection[]> {
    this.listing ??= this.o.dataPlane.connections().finally(() => { this.listing = null; });
    const all = await this.listing;
    return filter.service === undefined ? all : all.filter((c) => c.service === filter.service);
  }

  kernelFacts(probeRealServers: readonly Endpoint[], arpProbes: readonly ArpProbe[] = []): Promise<KernelFacts> {
    return this.o.dataPlane.kernelFacts(probeRealServers, arpProbes);
  }

  /** The ct mark of every real server of every service, for connection sync (marks are each director's own): as the data plane last wrote them, without a kernel read after an apply of its own. */
  async realServerMarks(): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    for (const rs of await this.o.dataPlane.realServerIds()) out.set(realServerName(rs.service, rs), rs.realServerId);
    return out;
  }

  /** No more health applies from now on. Never touches the data plane. */
  stop(): void {
    this.stopped = true;
  }

  /** Drops a health apply that waits for its batch or its retry. */
  cancelHealthApply(): void {
    if (this.healthTimer !== null) this.o.clock.clearTimeout(this.healthTimer);
    this.healthTimer = null;
  }

  /** Resolves once the apply in flight (if any) has finished: the kernel transaction is atomic, but its record and file rename are not. */
  async settled(): Promise<void> {
    await this.queue.catch(() => { /* an apply's failure is its caller's; this only waits for it to end */ });
  }

  /**
   * Applies health changes after `delayMs` (transitions within it are applied together). A change while
   * a retry waits out its backoff applies after the batch delay instead.
   */
  private scheduleHealthApply(delayMs: number, retry = false): void {
    if (this.stopped) return;
    if (this.healthTimer !== null) {
      if (retry || !this.healthTimerRetry) return;
      this.o.clock.clearTimeout(this.healthTimer);
    }
    this.healthTimerRetry = retry;
    this.healthTimer = this.o.clock.setTimeout(() => {
      this.healthTimer = null;
      void this.serialize(() => this.applyHealth());
    }, delayMs);
  }

  private async applyHealth(): Promise<void> {
    if (this.stopped || this.runningConfig.revision === 0) return;
    const config = this.runningConfig.config;
    const health = this.o.health;
    let merge: Merge;
    let result: ApplyResult;
    try {
      merge = health.merge(config);
      const last = this.lastApplied;
      if (last !== null && last.length === merge.services.length && merge.services.every((s, i) => s === last[i])) {
        health.commit(config, merge);
        this.emit('healthApply', { result: 'skipped', error: '', operations: 0 });
        return;
      }
      result = await this.o.dataPlane.apply({ services: merge.services, slots: this.slotsOf(config) });
    } catch (err) {
      const delay = this.retryMs;
      this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
      this.o.log.error('health apply failed', {
        error: err, kind: err instanceof DataPlaneError ? err.kind : undefined, retryInMs: delay,
        note: 'the previous state stays in the kernel; retried on the next change',
      });
      this.scheduleHealthApply(delay, true);
      this.lastHealthApplyFailed = err instanceof Error ? err.message : String(err);
      this.o.onDataPlaneProblemChange?.();
      this.emit('healthApply', { result: 'failed', error: err instanceof Error ? err.message : String(err), operations: 0 });
      return;
    }
    this.retryMs = RETRY_FIRST_MS;
    this.lastApplied = merge.services;
    health.commit(config, merge);
    if (this.lastHealthApplyFailed !== null) { this.lastHealthApplyFailed = null; this.o.onDataPlaneProblemChange?.(); }
    this.o.log.debug('health applied', {
      changed: result.changed, operations: result.operations.length, expiredConnections: result.expiredConnections, durationMs: result.durationMs,
    });
    this.emit('healthApply', { result: result.changed ? 'applied' : 'unchanged', error: '', operations: result.operations.length });
  }

  /** The tier's slots to program here: none unless both the config and this director are in the tier. */
  private slotsOf(config: Config): DesiredSlot[] {
    return this.o.slotParent ? desiredSlots(config.ecmp) : [];
  }

  private record(r: ApplyRecord, ctx: ApplyContext = {}): ApplyRecord {
    const previous = this.lastApply;
    this.lastApply = r;
    recordConfigEvent(this.o.events, r, previous, ctx, this.runningConfig.revision, this.runningConfig.config.services.length);
    this.emit('apply', r);
    return r;
  }
}
