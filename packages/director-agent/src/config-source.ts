import { AgentError, type ApplyOptions, type ApplyOutcome, type Caller } from '@lbd/operator-surfaces';
import type { ConfigHistoryResponse, GetConfigResponse } from '@lbd/proto';
import type { ApplyRecord } from './apply-record.js';

/**
 * Where a director's desired config comes from, and where an applied one goes: the config file
 * (FileConfigSource: a single director) or the cluster's config in etcd (ClusterConfigSource: agent.cluster
 * in the file). Either hands configs to the Reconciler, which alone programs the data plane.
 */
export interface ConfigSource {
  /** Before the admin API serves: applies what there is to apply at start, and starts watching for changes. */
  start(): Promise<void>;
  /** Once the admin API serves: joins where configs come from (the cluster); nothing for a file. */
  join(): Promise<void>;
  /** Stops following changes, and leaves the cluster once join was called. Never touches the data plane. */
  stop(): Promise<void>;
  /** What stopping does, for the shutdown log line. */
  readonly stopNote: string;
  /**
   * SIGHUP or a file event. `file-change` does nothing when the content is what was last acted on; `sighup`
   * always applies, which also repairs a kernel someone changed by hand (the data plane writes nothing when
   * it already matches). Resolves to the attempt, or null when nothing was attempted. Never throws for a bad
   * config or a refused apply: those are records.
   */
  reload(trigger: 'sighup' | 'file-change'): Promise<ApplyRecord | null>;
  /**
   * The Apply RPC: validates `text`; on a dry run returns the data plane's diff and changes nothing;
   * otherwise applies it where this source keeps configs. A rejected config applies nothing and is
   * returned, not thrown.
   */
  apply(text: string, source: string, dryRun: boolean, opts: ApplyOptions): Promise<ApplyOutcome>;
  /** The running config's text and revision, for edits applied by compare-and-swap. */
  read(): Promise<GetConfigResponse>;
  history(): Promise<ConfigHistoryResponse>;
  /** Applies an earlier revision again; returns the new revision. */
  rollback(revision: number, author: string, caller?: Caller): Promise<number>;
  /** The last data-plane apply failed, or succeeded again: a director that cannot program its kernel must not lead. */
  dataPlaneProblemChanged(): void;
}

/** What only a cluster has (a history of configs, other directors to fail over to), asked of a single director. */
export function notClustered(what: string, configPath: string): AgentError {
  return new AgentError('NotClustered', `${what} needs a cluster: this director has no agent.cluster in ${configPath} (a single director keeps its config in that file)`);
}
