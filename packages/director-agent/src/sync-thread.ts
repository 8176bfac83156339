import { Worker } from 'node:worker_threads';
import type { EcmpTier, Service } from '@lbd/config';
import type { GroupHolding, GroupState } from '@lbd/connsync';
import type { LogLevel } from '@lbd/log';
import type { SyncHost, SyncHostCallbacks, SyncHostFactory, SyncHostOptions, SyncReport } from './sync-host.js';

/** What the sync thread is started with: the host's options and which ctnetlink helper its table uses. */
export interface SyncWorkerData extends SyncHostOptions {
  /** `native` (lbd-ctnl) or `perl`; absent: the table's default. */
  readonly ctnlHelper?: 'native' | 'perl';
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

/** Sync in a worker thread running sync-worker.ts, which makes the kernel's connection table with `ctnlHelper`. */
export function syncThread(o: { readonly ctnlHelper?: 'native' | 'perl' } = {}): SyncHostFactory {
  return (host, c) => new SyncThread({ ...host, ...(o.ctnlHelper === undefined ? {} : { ctnlHelper: o.ctnlHelper }) }, c);
}

class SyncThread implements SyncHost {
  private readonly worker: Worker;
  private readonly calls = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private nextId = 1;
  private closing = false;
  private gone: Error | null = null;

  constructor(data: SyncWorkerData, private readonly c: SyncHostCallbacks) {
    this.worker = new Worker(new URL('./sync-worker.js', import.meta.url), { workerData: data });
    this.worker.on('message', (m: SyncThreadMessage) => {
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
    const fail = (why: string): void => {
      this.gone ??= new Error(`the connection-sync thread ${why}`);
      for (const call of this.calls.values()) call.reject(this.gone);
      this.calls.clear();
      // Sync stops; the election and the data path do not depend on it. Status says so through the failed calls.
      if (!this.closing) this.c.log.error('the connection-sync thread ended: no connection is synced until the agent restarts', { why });
    };
    this.worker.on('error', (e) => fail(`failed: ${e.message}`));
    this.worker.on('exit', (code) => fail(`exited (${code})`));
  }

  start(): Promise<void> { return this.call({ op: 'start' }) as Promise<void>; }
  setConfig(services: readonly Service[], ecmp: EcmpTier | null): Promise<void> { return this.call({ op: 'setConfig', services, ecmp }) as Promise<void>; }
  setMarks(marks: ReadonlyMap<string, number>): void { this.post({ id: 0, op: 'setMarks', marks }); }
  setLeading(groups: ReadonlySet<string>): Promise<void> { return this.call({ op: 'setLeading', groups }) as Promise<void>; }
  report(groups: readonly string[]): Promise<SyncReport> { return this.call({ op: 'report', groups }) as Promise<SyncReport>; }
  handOverYoung(group: string): Promise<number> { return this.call({ op: 'handOverYoung', group }) as Promise<number>; }
  drain(peer: string, timeoutMs: number): Promise<boolean> { return this.call({ op: 'drain', peer, timeoutMs }) as Promise<boolean>; }
  holding(group: string, countersOnly: boolean): Promise<GroupHolding> { return this.call({ op: 'holding', group, countersOnly }) as Promise<GroupHolding>; }
  peerHolding(peer: string, group: string, timeoutMs: number, countersOnly: boolean): Promise<GroupHolding> {
    return this.call({ op: 'peerHolding', peer, group, timeoutMs, countersOnly }) as Promise<GroupHolding>;
  }

  async close(): Promise<void> {
    this.closing = true;
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
