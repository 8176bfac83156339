import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { LeaseWriter, LeaseWriterUnavailable, refusals, type LeaseWord } from './lease-writer.js';

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

  it('tells lbd-nfbatch\'s answer in words: each refused message by its word, a batch refused whole, EPERM', () => {
    const words: LeaseWord[] = [
      { op: 'add', family: 'inet', table: 'lbd', set: 'lease4', address: '198.18.0.20', ms: 5000.5 },
      { op: 'delete', family: 'arp', table: 'lbd', set: 'lease4', address: '198.18.0.21' },
    ];
    assert.equal(refusals('ok', words, [8, 9], 7), null);
    assert.deepEqual(refusals('failed 9:2:No_such_file_or_directory', words, [8, 9], 7),
      { detail: 'D/arp/lbd/lease4/198.18.0.21: No such file or directory', denied: false });
    assert.deepEqual(refusals('failed 8:2:No_such_file_or_directory 9:2:No_such_file_or_directory', words, [8, 9], 7),
      { detail: 'A/inet/lbd/lease4/198.18.0.20/5000: No such file or directory, D/arp/lbd/lease4/198.18.0.21: No such file or directory', denied: false });
    assert.deepEqual(refusals('failed 7:1:Operation_not_permitted', words, [8, 9], 7), { detail: 'batch: Operation not permitted', denied: true });
    assert.deepEqual(refusals('what', words, [8, 9], 7), { detail: 'unexpected answer "what"', denied: false });
  });
});
