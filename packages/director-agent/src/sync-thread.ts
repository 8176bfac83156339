import { Worker } from 'node:worker_threads';
import type { EcmpTier, Service } from '@lbd/config';
import type { GroupHolding, GroupState } from '@lbd/connsync';
import type { CtnlHelper, CtnlWriterKind } from '@lbd/dataplane-nft';
import { errorField, type LogFields, type LogLevel } from '@lbd/log';
import type { SyncHost, SyncHostCallbacks, SyncHostFactory, SyncHostOptions, SyncReport } from './sync-host.js';

/** What the sync thread is started with: the host's options and how its table talks ctnetlink. */
export interface SyncWorkerData extends SyncHostOptions {
  /** `native` (lbd-ctnl) or `perl`; absent: the table's default. */
  readonly ctnlHelper?: CtnlHelper;
  /** `in-process` or `helper`; absent: the table's default. */
  readonly ctnlWriter?: CtnlWriterKind;
}

/** Requests to the sync thread (answered with a reply of the same id), one-way updates (id 0), and answers to its asks. */
export type SyncRequest =
  | { readonly id: number; readonly op: 'start' }
  | { readonly id: number; readonly op: 'setConfig'; readonly services: readonly Service[]; readonly ecmp: EcmpTier | null }
  | { readonly id: 0; readonly op: 'setMarks'; readonly marks: ReadonlyMap<string, number> }
  | { readonly id: number; readonly op: 'setLeading'; readonly groups: ReadonlySet<string> }
  | { readonly id: number; readonly op: 'report'; readonly groups: readonly string[] }
  | { readonly id: number; readonly op: 'handOverYoung'; readonly group: string }
  | { readonly id: number; readonly op: 'drain'; readonly peer: string; readonly timeoutMs: number }
  | { readonly id: number; readonly op: 'holding'; readonly group: string; readonly countersOnly: boolean }
  | { readonly id: number; readonly op: 'peerHolding'; readonly peer: string; readonly group: string; readonly timeoutMs: number; readonly countersOnly: boolean }
  | { readonly id: number; readonly op: 'close' }
  | { readonly answer: number; readonly ok: true; readonly state: GroupState }
  | { readonly answer: number; readonly ok: false; readonly error: string };

/** From the sync thread: replies, its log lines, and its asks (the agent's state of a group). */
export type SyncThreadMessage =
  | { readonly reply: number; readonly ok: true; readonly value?: unknown }
  | { readonly reply: number; readonly ok: false; readonly error: string }
  | { readonly log: { readonly level: LogLevel; readonly msg: string; readonly fields: Readonly<Record<string, unknown>> } }
  | { readonly ask: number; readonly group: string };

type Call = SyncRequest extends infer R ? (R extends { id: number; op: string } ? R : never) : never;
type CallBody = Call extends infer R ? (R extends { id: number } ? Omit<R, 'id'> : never) : never;

/**
 * A log line's fields as they cross from the sync thread to the main thread's log: what structured clone cannot
 * carry as it is goes as the main logger writes it, an Error as errorField (its message, with its kind), a
 * function as text.
 */
export function crossableLogFields(fields: LogFields): LogFields {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) out[k] = v instanceof Error ? errorField(v) : typeof v === 'function' ? String(v) : v;
  return out;
}

export interface SyncThreadOptions {
  readonly ctnlHelper?: CtnlHelper;
  readonly ctnlWriter?: CtnlWriterKind;
  /** The thread's program (tests: a fixture around sync-worker.js). */
  readonly workerUrl?: URL;
}

/** A thread that ended is started again after this long, doubling while it keeps ending soon after a start. */
const RESTART_FIRST_MS = 1000;
const RESTART_MAX_MS = 30_000;
/** A thread that ran this long before it ended starts the doubling afresh. */
const RESTART_RESET_MS = 60_000;

/** Sync in a worker thread running sync-worker.ts, which makes the kernel's connection table with `ctnlHelper` and `ctnlWriter`. */
export function syncThread(o: SyncThreadOptions = {}): SyncHostFactory {
  const url = o.workerUrl ?? new URL('./sync-worker.js', import.meta.url);
  const ctnl = { ...(o.ctnlHelper === undefined ? {} : { ctnlHelper: o.ctnlHelper }), ...(o.ctnlWriter === undefined ? {} : { ctnlWriter: o.ctnlWriter }) };
  return (host, c) => new SyncThread(url, { ...host, ...ctnl }, c);
}

/**
 * The main thread's side of the sync thread. A thread that ends on its own (a bug in sync: an exception nothing
 * caught) is started again, with what it was last told (started, the config, the marks, the groups led): the
 * election and the data path run on meanwhile, and the standbys' copies are rebuilt by the snapshot every new
 * stream begins with. Until then calls fail, and status says why.
 */
class SyncThread implements SyncHost {
  private worker!: Worker;
  private readonly calls = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private nextId = 1;
  private closing = false;
  /** Why calls fail now: the thread ended and has not been started again yet. */
  private gone: Error | null = null;
  /** What a new thread is told first, as the last one was. */
  private started = false;
  private config: { services: readonly Service[]; ecmp: EcmpTier | null } | null = null;
  private marks: ReadonlyMap<string, number> | null = null;
  private leading: ReadonlySet<string> | null = null;
  private restartMs = RESTART_FIRST_MS;
  private startedAt = 0;
  private restartTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly url: URL, private readonly data: SyncWorkerData, private readonly c: SyncHostCallbacks) {
    this.spawn();
  }

  private spawn(): void {
    this.startedAt = performance.now();
    const worker = new Worker(this.url, { workerData: this.data });
    this.worker = worker;
    worker.on('message', (m: SyncThreadMessage) => {
      if ('log' in m) {
        this.c.log[m.log.level](m.log.msg, m.log.fields);
      } else if ('ask' in m) {
        this.c.groupState(m.group).then(
          (state) => this.post({ answer: m.ask, ok: true, state }),
          (err: unknown) => this.post({ answer: m.ask, ok: false, error: err instanceof Error ? err.message : String(err) }),
        );
      } else {
        const call = this.calls.get(m.reply);
        if (!call) return;
        this.calls.delete(m.reply);
        if (m.ok) call.resolve(m.value);
        else call.reject(new Error(m.error));
      }
    });
    let ended = false;
    const fail = (why: string): void => {
      if (ended) return;
      ended = true;
      this.gone = new Error(`the connection-sync thread ${why}`);
      for (const call of this.calls.values()) call.reject(this.gone);
      this.calls.clear();
      if (this.closing) return;
      // Sync stops until the restart; the election and the data path do not depend on it.
      if (performance.now() - this.startedAt >= RESTART_RESET_MS) this.restartMs = RESTART_FIRST_MS;
      this.c.log.error('the connection-sync thread ended; starting it again', { why, inMs: this.restartMs });
      this.restartTimer = setTimeout(() => { this.restartTimer = undefined; void this.restart(); }, this.restartMs);
      this.restartMs = Math.min(RESTART_MAX_MS, this.restartMs * 2);
    };
    worker.on('error', (e) => fail(`failed: ${e.message}`));
    worker.on('exit', (code) => fail(`exited (${code})`));
  }

  /** A new thread, told what the last one was; a failure there ends it, and the next restart follows. */
  private async restart(): Promise<void> {
    if (this.closing) return;
    this.spawn();
    this.gone = null;
    try {
      // In the order the agent's start tells them.
      if (this.started) await this.call({ op: 'start' });
      if (this.marks !== null) this.post({ id: 0, op: 'setMarks', marks: this.marks });
      if (this.config !== null) await this.call({ op: 'setConfig', services: this.config.services, ecmp: this.config.ecmp });
      if (this.leading !== null) await this.call({ op: 'setLeading', groups: this.leading });
      this.c.log.info('the connection-sync thread started again', { leading: [...(this.leading ?? [])] });
    } catch (err) {
      this.c.log.error('the connection-sync thread did not start again', { error: err });
      if (this.gone === null) await this.worker.terminate();
    }
  }

  async start(): Promise<void> {
    await this.call({ op: 'start' });
    this.started = true;
  }

  setConfig(services: readonly Service[], ecmp: EcmpTier | null): Promise<void> {
    this.config = { services, ecmp };
    return this.call({ op: 'setConfig', services, ecmp }) as Promise<void>;
  }

  setMarks(marks: ReadonlyMap<string, number>): void {
    this.marks = marks;
    this.post({ id: 0, op: 'setMarks', marks });
  }

  setLeading(groups: ReadonlySet<string>): Promise<void> {
    this.leading = new Set(groups);
    return this.call({ op: 'setLeading', groups }) as Promise<void>;
  }

  report(groups: readonly string[]): Promise<SyncReport> { return this.call({ op: 'report', groups }) as Promise<SyncReport>; }
  handOverYoung(group: string): Promise<number> { return this.call({ op: 'handOverYoung', group }) as Promise<number>; }
  drain(peer: string, timeoutMs: number): Promise<boolean> { return this.call({ op: 'drain', peer, timeoutMs }) as Promise<boolean>; }
  holding(group: string, countersOnly: boolean): Promise<GroupHolding> { return this.call({ op: 'holding', group, countersOnly }) as Promise<GroupHolding>; }
  peerHolding(peer: string, group: string, timeoutMs: number, countersOnly: boolean): Promise<GroupHolding> {
    return this.call({ op: 'peerHolding', peer, group, timeoutMs, countersOnly }) as Promise<GroupHolding>;
  }

  async close(): Promise<void> {
    this.closing = true;
    if (this.restartTimer !== undefined) clearTimeout(this.restartTimer);
    if (this.gone === null) await this.call({ op: 'close' }).catch(() => { /* the thread is ending anyway: terminate() below */ });
    await this.worker.terminate();
  }

  private post(m: SyncRequest): void {
    if (this.gone === null) this.worker.postMessage(m);
  }

  private call(body: CallBody): Promise<unknown> {
    if (this.gone !== null) return Promise.reject(this.gone);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.calls.set(id, { resolve, reject });
      this.worker.postMessage({ ...body, id } as SyncRequest);
    });
  }
}
