import { Worker } from 'node:worker_threads';
import type { PeerTransport } from '@lbd/coordinator';
import type { AddressOwner } from '@lbd/dataplane';
import { ElectionCore, type ElectionCoreOptions, type ElectionNotice, type ElectionSnapshot, type GroupPlan } from './election-core.js';

/**
 * Where the election runs, as the rest of the agent (ClusterMember) sees it. In production: a thread of its
 * own (`electionThread`), with its own event loop, heap, etcd connection and (where allowed) SCHED_FIFO
 * priority, so that connection sync, health checks, the admin API, metrics and the dashboard on the main
 * thread cannot delay a beat, a fence or a takeover. Measured by this repository's failover bench and
 * `lbadm cluster status` (the election thread's own timer lateness). Tests with fake kernels run the same
 * ElectionCore in-process (`inProcessElection`), with their fakes.
 *
 * Why a thread and not a process: a worker thread needs no second program, socket or supervision, is torn
 * down with the agent, and still has its own event loop and garbage collector; Linux schedules it as a task
 * of its own, so it takes a real-time priority without the rest of the agent. A pause of the whole agent
 * (SIGSTOP) pauses it too: that case is the kernel lease's.
 */
export interface ElectionHost {
  start(): Promise<void>;
  setPlan(groups: readonly GroupPlan[]): Promise<void>;
  /** The rest of the agent's reasons not to lead (track checks, the data plane); links are checked by the election. */
  setAgentProblems(problems: readonly string[]): void;
  setSynced(s: Readonly<Record<string, string | null>>): void;
  /** Answers the 'handover' notice `id`: connection sync has done what it could for the target. */
  handoverReady(id: number): void;
  snapshot(): Promise<ElectionSnapshot>;
  stop(opts: { vacate: boolean }): Promise<void>;
}

export type ElectionHostFactory = (o: ElectionCoreOptions, notify: (n: ElectionNotice) => void) => ElectionHost;

/** The election on the caller's own thread, with the given address owner (tests: a fake kernel). */
export function inProcessElection(owner: AddressOwner, transport?: PeerTransport): ElectionHostFactory {
  return (o, notify) => {
    const core = new ElectionCore(o, owner, notify, 'in the agent\'s main thread', transport);
    return {
      start: () => core.start(),
      setPlan: (groups) => core.setPlan(groups),
      setAgentProblems: (p) => core.setAgentProblems(p),
      setSynced: (s) => core.setSynced(s),
      handoverReady: (id) => core.handoverReady(id),
      snapshot: async () => core.snapshot(),
      stop: (opts) => core.stop(opts),
    };
  };
}

/** The election in a worker thread running election-worker.ts, which makes the kernel's address owner. */
export function electionThread(): ElectionHostFactory {
  return (o, notify) => new ElectionThread(o, notify);
}

/** Requests to the election thread (answered with a reply of the same id) and one-way updates. */
export type ElectionRequest =
  | { readonly id: number; readonly op: 'start' }
  | { readonly id: number; readonly op: 'setPlan'; readonly groups: readonly GroupPlan[] }
  | { readonly id: number; readonly op: 'snapshot' }
  | { readonly id: number; readonly op: 'stop'; readonly vacate: boolean }
  | { readonly id: 0; readonly op: 'setAgentProblems'; readonly problems: readonly string[] }
  | { readonly id: 0; readonly op: 'setSynced'; readonly synced: Readonly<Record<string, string | null>> }
  | { readonly id: 0; readonly op: 'handoverReady'; readonly handover: number };

export type ElectionReply =
  | { readonly reply: number; readonly ok: true; readonly value?: unknown }
  | { readonly reply: number; readonly ok: false; readonly error: string }
  | { readonly notice: ElectionNotice };

type RequestBody = ElectionRequest extends infer R ? (R extends { id: number } ? Omit<R, 'id'> : never) : never;

class ElectionThread implements ElectionHost {
  private readonly worker: Worker;
  private readonly calls = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private nextId = 1;
  private stopping = false;
  private gone: Error | null = null;

  constructor(o: ElectionCoreOptions, private readonly notify: (n: ElectionNotice) => void) {
    this.worker = new Worker(new URL('./election-worker.js', import.meta.url), { workerData: o });
    this.worker.on('message', (m: ElectionReply) => {
      if ('notice' in m) {
        this.notify(m.notice);
        return;
      }
      const call = this.calls.get(m.reply);
      if (!call) return;
      this.calls.delete(m.reply);
      if (m.ok) call.resolve(m.value);
      else call.reject(new Error(m.error));
    });
    const fail = (why: string): void => {
      this.gone ??= new Error(`the election thread ${why}`);
      for (const c of this.calls.values()) c.reject(this.gone);
      this.calls.clear();
      // The kernel lease ends on its own; nothing here can lead again, and the agent must say so loudly.
      if (!this.stopping) this.notify({ kind: 'log', level: 'error', msg: 'the election thread ended: this director leads nothing until the agent restarts', fields: { why } });
    };
    this.worker.on('error', (e) => fail(`failed: ${e.message}`));
    this.worker.on('exit', (code) => fail(`exited (${code})`));
  }

  start(): Promise<void> { return this.call({ op: 'start' }) as Promise<void>; }
  setPlan(groups: readonly GroupPlan[]): Promise<void> { return this.call({ op: 'setPlan', groups }) as Promise<void>; }
  snapshot(): Promise<ElectionSnapshot> { return this.call({ op: 'snapshot' }) as Promise<ElectionSnapshot>; }

  setAgentProblems(problems: readonly string[]): void {
    if (this.gone === null) this.worker.postMessage({ id: 0, op: 'setAgentProblems', problems: [...problems] } satisfies ElectionRequest);
  }

  setSynced(synced: Readonly<Record<string, string | null>>): void {
    if (this.gone === null) this.worker.postMessage({ id: 0, op: 'setSynced', synced: { ...synced } } satisfies ElectionRequest);
  }

  handoverReady(handover: number): void {
    if (this.gone === null) this.worker.postMessage({ id: 0, op: 'handoverReady', handover } satisfies ElectionRequest);
  }

  async stop(opts: { vacate: boolean }): Promise<void> {
    this.stopping = true;
    if (this.gone === null) await this.call({ op: 'stop', vacate: opts.vacate }).catch(() => { /* the thread is ending anyway: terminate() below */ });
    await this.worker.terminate();
  }

  private call(body: RequestBody): Promise<unknown> {
    if (this.gone !== null) return Promise.reject(this.gone);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.calls.set(id, { resolve, reject });
      this.worker.postMessage({ ...body, id } as ElectionRequest);
    });
  }
}
