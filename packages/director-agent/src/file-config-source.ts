import { ConfigError, configSha256, parseConfig, type Config } from '@lbd/config';
import { DataPlaneError, type ApplyResult } from '@lbd/dataplane';
import type { ConfigHistoryResponse, GetConfigResponse } from '@lbd/proto';
import { AgentError, UNIX_SOCKET_CALLER, type ApplyOptions, type ApplyOutcome, type Caller } from '@lbd/operator-surfaces';
import type { Logger } from '@lbd/log';
import type { ApplyRecord } from './apply-record.js';
import { readConfigText, stageFile } from './config-file.js';
import { notClustered, type ConfigSource } from './config-source.js';
import type { Reconciler } from './reconciler.js';
import { watchConfigFile, type ConfigWatcher } from './watch.js';

/** Marks a file state that has no content hash (unreadable), so the same failure is not logged twice. */
const UNREADABLE = 'unreadable:';

export interface FileConfigSourceOptions {
  readonly path: string;
  readonly reconciler: Reconciler;
  readonly log: Logger;
  /** The file's text and config as read at start. */
  readonly initial: { readonly text: string; readonly config: Config };
  /** Re-apply when the file changes (else only SIGHUP and the Apply RPC apply). */
  readonly watch: boolean;
  /** Quiet time after the last file event before the file is read. */
  readonly debounceMs: number;
}

/**
 * A single director's config: the file, read at start, on SIGHUP and when it changes, and where the Apply
 * RPC persists what it applied (staged before applying, renamed into place after). A config that fails
 * validation is rejected whole and the running one stays.
 */
export class FileConfigSource implements ConfigSource {
  readonly stopNote = 'the kernel keeps forwarding; nothing is removed';
  /** Hash of the file content last acted on (applied or rejected): a file event with the same content does nothing. */
  private fileSha: string;
  private watcher: ConfigWatcher | null = null;

  constructor(private readonly o: FileConfigSourceOptions) {
    this.fileSha = configSha256(o.initial.text);
  }

  private get path(): string {
    return this.o.path;
  }

  async start(): Promise<void> {
    const r = this.o.reconciler;
    await r.serialize(() => r.applyConfig(this.o.initial.config, this.fileSha, 'start', this.path));
    if (!this.o.watch) return;
    this.watcher = watchConfigFile(this.path, () => {
      this.reload('file-change').catch((err: unknown) => this.o.log.error('reload failed', { trigger: 'file-change', error: err }));
    }, {
      debounceMs: this.o.debounceMs,
      onError: (err) => this.o.log.warn('cannot watch the config file; SIGHUP still reloads it', { path: this.path, error: err }),
    });
  }

  async join(): Promise<void> {}

  async stop(): Promise<void> {
    this.watcher?.close();
  }

  dataPlaneProblemChanged(): void {}

  reload(trigger: 'sighup' | 'file-change'): Promise<ApplyRecord | null> {
    const r = this.o.reconciler;
    return r.serialize(async () => {
      if (r.isStopped) return null;
      let text: string;
      try {
        text = await readConfigText(this.path);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        const marker = `${UNREADABLE}${err.problems[0]?.rule ?? ''}`;
        // A deleted file is not an empty config: keep running, say so once.
        if (trigger === 'file-change' && this.fileSha === marker) return null;
        this.fileSha = marker;
        return r.reject(err, trigger, this.path, '');
      }
      const sha = configSha256(text);
      if (trigger === 'file-change' && sha === this.fileSha) return null;
      let config: Config;
      try {
        config = parseConfig(text, this.path);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        this.fileSha = sha;
        return r.reject(err, trigger, this.path, sha);
      }
      try {
        const { record } = await r.applyConfig(config, sha, trigger, this.path);
        this.fileSha = sha;
        return record;
      } catch (err) {
        // Leaves fileSha alone, so the next file event or SIGHUP tries again.
        if (err instanceof DataPlaneError) return r.lastApplyRecord;
        throw err;
      }
    });
  }

  apply(text: string, source: string, dryRun: boolean, opts: ApplyOptions): Promise<ApplyOutcome> {
    const r = this.o.reconciler;
    return r.serialize(async (): Promise<ApplyOutcome> => {
      if (r.isStopped) throw new AgentError('Stopped', 'the agent is shutting down');
      // The same compare-and-swap as in a cluster, on this director's own revision: an edit of the
      // config read with GetConfig must not undo a change applied since.
      if (!dryRun && opts.expectRevision !== undefined && opts.expectRevision !== r.running.revision) {
        throw new AgentError('Conflict', `the running config is at revision ${r.running.revision}, not ${opts.expectRevision} as this apply expected: it changed in between; look at lbadm status, then apply again`);
      }
      const sha = configSha256(text);
      let config: Config;
      try {
        config = parseConfig(text, source);
        this.checkRemoteAgentSettings(config, source, opts.caller);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        // A dry run is a question, not an attempt: it leaves no record and no log line.
        if (!dryRun) r.reject(err, 'apply-rpc', source, sha, opts);
        return { ok: false, error: err, sha256: sha };
      }
      if (dryRun) {
        const result = await r.dryRun(config);
        return { ok: true, result, serviceCount: config.services.length, sha256: sha };
      }
      let staged: Awaited<ReturnType<typeof stageFile>>;
      try {
        staged = await stageFile(this.path, text);
      } catch (cause) {
        const code = (cause as NodeJS.ErrnoException).code ?? (cause as Error).message;
        throw new AgentError('CannotPersist', `cannot write the new config next to ${this.path} (${code}); nothing was applied`, { cause });
      }
      let result: ApplyResult;
      try {
        ({ result } = await r.applyConfig(config, sha, 'apply-rpc', source, undefined, opts));
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
        this.o.log.error('config applied but not persisted', { path: this.path, error: cause });
        throw new AgentError('NotPersisted', `the config was applied but could not be saved to ${this.path} (${code}): a restart would bring back the previous config`, { cause });
      }
      return { ok: true, result, serviceCount: config.services.length, sha256: sha };
    });
  }

  /**
   * The file holds what runs (applies persist to it) unless someone edited it since: an edit of the
   * running config would then overwrite theirs when persisted, so it is refused until the file is settled.
   */
  async read(): Promise<GetConfigResponse> {
    const r = this.o.reconciler.running;
    const text = await readConfigText(this.path);
    if (configSha256(text) !== r.sha256) {
      throw new AgentError('Refused', `${this.path} differs from the config this director runs (revision ${r.revision}): it was edited and not (or not yet) applied; fix the file or apply it (lbadm status shows the last apply), then try again`);
    }
    return { configText: text, revision: r.revision, clustered: false, source: r.source };
  }

  async history(): Promise<ConfigHistoryResponse> {
    throw notClustered('config history', this.path);
  }

  async rollback(): Promise<number> {
    throw notClustered('config rollback', this.path);
  }

  /**
   * A client over the network (a certificate, not root on the unix socket) may change services but not
   * this director's own settings: agent.* decides who may call and how (listeners, TLS, roles), and a
   * writer must not be able to widen its own access, or drop the listeners everyone else uses.
   */
  private checkRemoteAgentSettings(config: Config, source: string, caller: Caller | undefined): void {
    if (caller === undefined || caller === UNIX_SOCKET_CALLER) return;
    if (JSON.stringify(config.agent) === JSON.stringify(this.o.reconciler.running.config.agent)) return;
    throw new ConfigError('Invalid', source, [{
      path: 'agent', value: undefined,
      rule: `differs from this director's own agent settings, which a client over the network (here ${caller.name}) may not change`,
      fix: `send the agent: section of ${this.path} unchanged with the services, or change it on the director itself (its file, or lbadm on the unix socket)`,
    }]);
  }
}
