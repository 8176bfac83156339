import { EtcdKv, type EtcdTlsMaterial, type Kv } from './kv.js';
import { isConfigRecord, keys, parseJson, type ConfigRecord } from './records.js';

export interface StoredConfig extends ConfigRecord {
  /** The etcd mod revision of the desired key (what the swap compares). */
  readonly etcdRev: string;
}

export type ConfigWrite =
  | { readonly ok: true; readonly revision: number }
  | { readonly ok: false; readonly reason: 'conflict'; readonly current: number };

/**
 * The cluster config in etcd: one `desired` key holding the YAML text, written only by compare-and-swap (so
 * of two concurrent applies one loses cleanly and is told why), and a history entry per accepted write,
 * in the same transaction, named by the config's own revision (1, 2, 3, ...: what `lbadm config history`
 * lists and `rollback` names). Validation happens before, at the edge (the agent that receives the apply);
 * this store never sees an invalid config.
 */
export class ConfigStore {
  constructor(private readonly kv: Kv, private readonly k: { config: string; history(rev: string): string; historyPrefix: string }) {}

  async current(): Promise<StoredConfig | null> {
    const e = await this.kv.get(this.k.config);
    if (e === null) return null;
    const rec = parseJson<ConfigRecord>(e.value, isConfigRecord);
    return rec === null ? null : { ...rec, etcdRev: e.rev };
  }

  /**
   * Writes `rec` as the next revision. `expectRevision`: the config revision the writer based its change on
   * (0: none yet); a different current revision loses with `conflict`.
   */
  async write(rec: Omit<ConfigRecord, 'revision'>, expectRevision: number): Promise<ConfigWrite> {
    const cur = await this.current();
    const curRevision = cur?.revision ?? 0;
    if (curRevision !== expectRevision) return { ok: false, reason: 'conflict', current: curRevision };
    const next: ConfigRecord = { ...rec, revision: curRevision + 1 };
    const text = JSON.stringify(next);
    const res = await this.kv.swap(this.k.config, cur?.etcdRev ?? null, text, undefined, { key: this.k.history(String(next.revision)), value: text });
    if (res.ok) return { ok: true, revision: next.revision };
    const now = res.current ? parseJson<ConfigRecord>(res.current.value, isConfigRecord) : null;
    return { ok: false, reason: 'conflict', current: now?.revision ?? 0 };
  }

  /** Every accepted config, oldest first. */
  async history(): Promise<StoredConfig[]> {
    const all = await this.kv.list(this.k.historyPrefix);
    const out: StoredConfig[] = [];
    for (const e of all) {
      const rec = parseJson<ConfigRecord>(e.value, isConfigRecord);
      if (rec !== null) out.push({ ...rec, etcdRev: e.rev });
    }
    return out.sort((a, b) => a.revision - b.revision);
  }

  async at(revision: number): Promise<ConfigRecord | null> {
    const e = await this.kv.get(this.k.history(String(revision)));
    return e === null ? null : parseJson<ConfigRecord>(e.value, isConfigRecord);
  }

  /** Calls `onChange` with every new config (and once with the current one). Returns a stop function. */
  async watch(onChange: (c: StoredConfig | null) => void): Promise<() => Promise<void>> {
    let last = '';
    const reread = (): void => {
      this.current().then((c) => {
        const id = c?.etcdRev ?? 'none';
        if (id !== last) { last = id; onChange(c); }
      }).catch(() => { /* the next event or reconnection reads again; the last config stays meanwhile */ });
    };
    const w = await this.kv.watchKey(this.k.config, { put: reread, connected: reread, error: () => undefined });
    reread();
    return async () => { await w.cancel().catch(() => { /* a watch on a lost connection has nothing left to stop */ }); };
  }
}

/**
 * The cluster-config half of a Coordinator, answered by a ConfigStore: the etcd coordinator and the fake
 * one (over a MemoryKv) share it, so both behave alike by construction.
 */
export abstract class ConfigStoreCoordinator {
  protected abstract readonly config: ConfigStore;

  currentConfig(): Promise<StoredConfig | null> {
    return this.config.current();
  }

  writeConfig(rec: Omit<ConfigRecord, 'revision'>, expectRevision: number): Promise<ConfigWrite> {
    return this.config.write(rec, expectRevision);
  }

  configHistory(): Promise<StoredConfig[]> {
    return this.config.history();
  }

  configAt(revision: number): Promise<ConfigRecord | null> {
    return this.config.at(revision);
  }

  watchConfig(onChange: (c: StoredConfig | null) => void): Promise<() => Promise<void>> {
    return this.config.watch(onChange);
  }
}

/**
 * The cluster config straight from etcd, for an operator's tool (lbadm's --etcd): where etcd's roles keep
 * the config to operators, a director's certificate cannot write it, so lbadm writes it with the
 * operator's, by the same compare-and-swap and history as the agents. `directors()` lists who is
 * registered under the prefix, so a mistyped prefix is caught before a config is written where no director
 * looks.
 */
export class EtcdConfigClient extends ConfigStoreCoordinator {
  protected readonly config: ConfigStore;
  private readonly kv: EtcdKv;
  private readonly k: ReturnType<typeof keys>;

  constructor(o: { readonly endpoints: readonly string[]; readonly etcdTls: EtcdTlsMaterial | null; readonly prefix: string; readonly callTimeoutMs: number }) {
    super();
    this.kv = new EtcdKv(o.endpoints, o.callTimeoutMs, { tls: o.etcdTls });
    this.k = keys(o.prefix);
    this.config = new ConfigStore(this.kv, this.k);
  }

  async directors(): Promise<string[]> {
    return (await this.kv.list(this.k.directors)).map((e) => e.key.slice(this.k.directors.length));
  }

  close(): void {
    this.kv.close();
  }
}
