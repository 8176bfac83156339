import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { LeaseWriter, LeaseWriterUnavailable } from './lease-writer.js';

describe('LeaseWriter without a kernel', () => {
  it('a writer that never answers is given up after its timeout (the caller then writes through nft)', async () => {
    // `sleep` takes the line and never answers: a writer stuck in the kernel, say.
    const children: ChildProcessWithoutNullStreams[] = [];
    const w = new LeaseWriter(() => {
      const c = spawn('sleep', ['5'], { stdio: 'pipe' });
      children.push(c);
      return c;
    }, 50);
    try {
      await assert.rejects(w.write([{ op: 'add', family: 'inet', table: 'lbd', set: 'lease4', address: '198.18.0.10', ms: 100 }]),
        (e: unknown) => e instanceof LeaseWriterUnavailable && /did not answer within 50 ms/.test(e.message));
      // Given up: the next write within the restart delay does not wait on it again.
      await assert.rejects(w.write([{ op: 'add', family: 'inet', table: 'lbd', set: 'lease4', address: '198.18.0.10', ms: 100 }]), LeaseWriterUnavailable);
    } finally {
      w.close();
      for (const c of children) c.kill('SIGKILL');
    }
  });
});
