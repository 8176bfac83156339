import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { LineSession } from './line-session.js';

/** Children the tests spawn, killed after each. */
const children: ChildProcessWithoutNullStreams[] = [];
function child(script: string): () => ChildProcessWithoutNullStreams {
  return () => {
    const c = spawn('sh', ['-c', script], { stdio: 'pipe' });
    children.push(c);
    return c;
  };
}

describe('LineSession', () => {
  afterEach(() => {
    for (const c of children.splice(0)) c.kill('SIGKILL');
  });

  it('answers requests in order, one line each, from one child', async () => {
    let spawned = 0;
    const make = child('while read l; do echo "got $l"; done');
    const s = new LineSession(() => { spawned++; return make(); }, 'echo');
    try {
      const answers = await Promise.all(['a', 'b', 'c'].map((x) => s.request(`${x}\n`)));
      assert.deepEqual(answers, ['got a', 'got b', 'got c']);
      assert.equal(spawned, 1);
    } finally {
      s.close();
    }
  });

  it('a child that ends rejects what it had not answered, with its last stderr; rests before it is started again', async () => {
    let spawned = 0;
    const make = child('read l; echo "no kernel here" >&2; exit 3');
    const s = new LineSession(() => { spawned++; return make(); }, 'the writer', { restartAfterMs: 60_000 });
    try {
      await assert.rejects(s.request('x\n'), /^Error: the writer exited \(3\): no kernel here$/);
      await assert.rejects(s.request('y\n'), /the writer ended; not started again for another \d+ ms: no kernel here/);
      assert.equal(spawned, 1, 'resting: not started again');
    } finally {
      s.close();
    }
  });

  it('without a rest, the next request starts a new child', async () => {
    let spawned = 0;
    const make = child('read l; echo "first $l"; exit 0');
    const s = new LineSession(() => { spawned++; return make(); }, 'once');
    try {
      assert.equal(await s.request('a\n'), 'first a');
      // The first child exits after its answer: ask again once it has.
      const first = children[0]!;
      if (first.exitCode === null) await new Promise((r) => first.once('exit', r));
      assert.equal(await s.request('b\n'), 'first b');
      assert.equal(spawned, 2);
    } finally {
      s.close();
    }
  });

  it('a child that does not answer in time is given up: killed, and its request rejects', async () => {
    const make = child('read l; sleep 30');
    const s = new LineSession(make, 'the stuck one', { answerTimeoutMs: 50, restartAfterMs: 60_000 });
    try {
      await assert.rejects(s.request('x\n'), /the stuck one did not answer within 50 ms/);
      const c = children[0]!;
      if (c.exitCode === null && c.signalCode === null) await new Promise((r) => c.once('exit', r));
      assert.equal(c.signalCode, 'SIGKILL');
    } finally {
      s.close();
    }
  });

  it('a child that cannot be started: the request says so, and warm() does not throw', async () => {
    const s = new LineSession(() => { throw new Error('spawn EPERM'); }, 'the announcer', { restartAfterMs: 60_000 });
    s.warm();
    await assert.rejects(s.request('x\n'), /the announcer ended; not started again/);
    const t = new LineSession(() => { throw new Error('spawn EPERM'); }, 'the announcer');
    await assert.rejects(t.request('x\n'), /the announcer could not be started: spawn EPERM/);
  });
});
