import assert from 'node:assert/strict';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { PassThrough } from 'node:stream';
import { NftSession } from './nft-session.js';

const SENTINEL = 'list set inet t schema';

/**
 * A stand-in for `nft -i`: it answers each line it is given only when the test says so (`answer`), the
 * sentinel with a listing that ends in two closing braces and a change line with `error` on stderr.
 */
class FakeNft extends EventEmitter {
  readonly stdin = new PassThrough();
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  readonly lines: string[] = [];
  private waiting: Array<() => void> = [];

  constructor() {
    super();
    let buf = '';
    this.stdin.setEncoding('utf8').on('data', (d: string) => {
      buf += d;
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        this.lines.push(line);
        if (line === SENTINEL) this.waiting.push(() => this.stdout.write('table inet t {\n\tset schema {\n\t}\n}\n'));
      }
    });
  }

  /** Answers the oldest sentinel written and not answered yet. */
  answer(): void {
    this.waiting.shift()?.();
  }

  get unanswered(): number {
    return this.waiting.length;
  }

  kill(): boolean {
    this.emit('exit', null);
    return true;
  }
}

/** Resolves once `cond` holds, checking on every turn of the event loop (at most 1 000 turns). */
async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !cond(); i++) await new Promise((r) => setImmediate(r));
  assert.ok(cond(), 'the condition never held');
}

describe('NftSession', () => {
  it('runs one change at a time: a second call waits for the first one\'s sentinel, and both end', async () => {
    const nft = new FakeNft();
    const session = new NftSession(() => nft as unknown as ChildProcessWithoutNullStreams, SENTINEL);
    const first = session.run(['add element inet t lease4 { 198.18.0.10 }']);
    const second = session.run(['add element inet t floating4 { 198.18.0.11 }']);
    await until(() => nft.unanswered === 1);
    // The second change is not written while the first waits for its answer.
    assert.deepEqual(nft.lines, ['add element inet t lease4 { 198.18.0.10 }', SENTINEL]);
    nft.answer();
    assert.equal(await first, '');
    await until(() => nft.unanswered === 1);
    assert.deepEqual(nft.lines.slice(2), ['add element inet t floating4 { 198.18.0.11 }', SENTINEL]);
    nft.answer();
    assert.equal(await second, '');
  });

  it('a call that times out rejects, and the next call runs on a fresh nft', async () => {
    const spawned: FakeNft[] = [];
    const session = new NftSession(() => {
      const n = new FakeNft();
      spawned.push(n);
      return n as unknown as ChildProcessWithoutNullStreams;
    }, SENTINEL);
    const stuck = session.run(['add element inet t lease4 { 198.18.0.10 }'], 20);
    const next = session.run(['add element inet t lease4 { 198.18.0.11 }'], 5000);
    await assert.rejects(stuck, /nft -i did not answer within 20 ms/);
    await until(() => spawned.length === 2 && spawned[1]!.unanswered === 1);
    spawned[1]!.answer();
    assert.equal(await next, '');
  });
});
