import assert from 'node:assert/strict';
import { readFileSync, readlinkSync } from 'node:fs';
import { Worker } from 'node:worker_threads';

/**
 * raiseThreadToRealtime against the real scheduler: in a worker thread (as the agent's election thread),
 * it must change that thread alone, not the process's main thread or a libuv pool thread.
 */
describe('raiseThreadToRealtime @privileged', function () {
  this.timeout(20_000);

  before(function () {
    if (process.getuid?.() !== 0) {
      console.warn('    SKIPPED: needs root (CAP_SYS_NICE) to set a real-time priority');
      this.skip();
    }
  });

  const policyOf = (tid: string): { policy: number; prio: number } => {
    const text = readFileSync(`/proc/self/task/${tid}/sched`, 'utf8');
    const field = (name: string): number => Number(new RegExp(`^${name}\\s*:\\s*(-?\\d+)`, 'm').exec(text)?.[1]);
    return { policy: field('policy'), prio: field('prio') };
  };

  it('puts the calling worker thread under SCHED_FIFO and leaves the main thread as it was', async () => {
    const script = `
      const { parentPort } = require('node:worker_threads');
      const { readlinkSync } = require('node:fs');
      import(${JSON.stringify(new URL('./realtime.js', import.meta.url).href)}).then(async ({ raiseThreadToRealtime }) => {
        const said = await raiseThreadToRealtime(7);
        parentPort.postMessage({ said, tid: readlinkSync('/proc/thread-self').split('/').pop() });
      }, (e) => parentPort.postMessage({ error: String(e) }));
      setInterval(() => {}, 1000);`;
    const worker = new Worker(script, { eval: true });
    try {
      const reply = await new Promise<{ said?: string; tid?: string; error?: string }>((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      });
      assert.equal(reply.error, undefined);
      assert.equal(reply.said, `SCHED_FIFO 7 (thread ${reply.tid})`);
      // policy 1 = SCHED_FIFO; the kernel's prio for rt priority p is 99 - p.
      assert.deepEqual(policyOf(reply.tid!), { policy: 1, prio: 92 });
      const main = readlinkSync('/proc/thread-self').split('/').pop()!;
      assert.equal(policyOf(main).policy, 0, 'the main thread stays SCHED_OTHER');
    } finally {
      await worker.terminate();
    }
  });

  it('refuses a priority outside 1..99 before touching anything', async () => {
    const { raiseThreadToRealtime } = await import('./realtime.js');
    await assert.rejects(raiseThreadToRealtime(0), /must be a whole number from 1 to 99/);
    await assert.rejects(raiseThreadToRealtime(100), /must be a whole number from 1 to 99/);
  });
});
