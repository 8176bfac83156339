import { Worker } from 'node:worker_threads';

/**
 * The main thread's side of a bench's worker thread (bulk-leader.ts, sync-path-leader.ts): started, it says
 * `{ ready: true }`; at any point it may say `{ error }`, which fails whatever waits and everything after; told
 * `{ close: true }`, it says `{ closed: true, ... }` and is terminated (after 10 s without that answer too).
 */
export class WorkerLink<M extends object> {
  private readonly waiters: Array<(m: M | { readonly error: string }) => boolean> = [];
  private failed: string | null = null;

  private constructor(private readonly worker: Worker) {
    worker.on('message', (m: M) => {
      if ('error' in m) this.failed = String(m.error);
      this.settle(m);
    });
    worker.on('error', (err) => {
      this.failed = String(err);
      this.settle({ error: String(err) });
    });
  }

  /** The worker at `url`, once it said it is ready; terminated when it fails first. */
  static async start<M extends object>(url: URL, workerData: unknown): Promise<WorkerLink<M>> {
    const link = new WorkerLink<M>(new Worker(url, { workerData }));
    try {
      await link.next((m) => 'ready' in m);
    } catch (err) {
      await link.worker.terminate();
      throw err;
    }
    return link;
  }

  /** Why the worker failed, or null while it has not. */
  get failure(): string | null {
    return this.failed;
  }

  /** Sends `request` and waits for the first answer `match` accepts. */
  ask(request: unknown, match: (m: M) => boolean): Promise<M> {
    const answer = this.next(match);
    this.worker.postMessage(request);
    return answer;
  }

  /** Asks the worker to close and terminates it: its `closed` answer, or null when none came within 10 s. */
  async close(): Promise<M | null> {
    const closed = this.ask({ close: true }, (m) => 'closed' in m).catch(() => null);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const m = await Promise.race([closed, new Promise<null>((r) => { timer = setTimeout(() => r(null), 10_000); })]);
    clearTimeout(timer);
    await this.worker.terminate();
    return m;
  }

  /** The next message `match` accepts; rejects on the worker's error. */
  private next(match: (m: M) => boolean): Promise<M> {
    return new Promise((resolve, reject) => {
      if (this.failed !== null) {
        reject(new Error(this.failed));
        return;
      }
      this.waiters.push((m) => {
        if ('error' in m) {
          reject(new Error(String(m.error)));
          return true;
        }
        if (!match(m)) return false;
        resolve(m);
        return true;
      });
    });
  }

  private settle(m: M | { readonly error: string }): void {
    for (const w of [...this.waiters]) if (w(m)) this.waiters.splice(this.waiters.indexOf(w), 1);
  }
}
