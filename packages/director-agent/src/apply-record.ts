import type { ApplyResultWord, Config, Problem } from '@lbd/config';
import type { Caller } from '@lbd/operator-surfaces';

/** What one apply attempt is and says, shared by the reconciler that makes it and the views that report it. */

export type Trigger = 'start' | 'sighup' | 'file-change' | 'apply-rpc' | 'cluster';

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

/** One apply of health changes (config applies are ApplyRecords). */
export interface HealthApplyRecord {
  /** applied: the data plane changed; unchanged: it already matched; skipped: the desired state was what was last applied. */
  readonly result: 'applied' | 'unchanged' | 'skipped' | 'failed';
  readonly error: string;
  readonly operations: number;
}

/** The config the data plane was last programmed with. */
export interface RunningConfig {
  readonly config: Config;
  readonly sha256: string;
  readonly source: string;
  /** 0 until the first apply succeeds. */
  readonly revision: number;
}

/** Who asked for a config and what it changes, for its event. */
export interface ApplyContext {
  readonly author?: string;
  /** Cluster mode: what the writer said of the revision (its comment in etcd: the lbadm command, the file). */
  readonly comment?: string;
  readonly caller?: Caller;
  /** The services it changes, in words ('' when none). */
  readonly changes?: string;
  /** The revision it would become (cluster) when the attempt fails. */
  readonly revision?: number;
}

/** A config's sha256 as logs and events show it. */
export function shortSha(sha: string): string {
  return sha.slice(0, 12);
}
