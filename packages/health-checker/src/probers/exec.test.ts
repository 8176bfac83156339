import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExecProber } from './exec.js';

/**
 * The exec prober with small sh scripts: exit 0, exit 2 (with stderr quoted), the environment it passes,
 * a command that cannot start, a check killed by a signal, and a timeout that must kill the whole process
 * group (the script and the child it started).
 */

const prober = new ExecProber();
const target = (command: string[]) => ({ kind: 'exec' as const, address: '127.0.0.1', port: 8080, command });

describe('ExecProber', () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lbd-hc-exec-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('exit 0 → ok', async () => {
    const r = await prober.probe(target(['sh', '-c', 'exit 0']), { timeoutMs: 5000 });
    assert.deepEqual([r.ok, r.reason, r.message], [true, 'ok', 'exec sh -c exit 0: exit 0']);
  });

  it('exit 2 → exit-code, with the first line of stderr', async () => {
    const r = await prober.probe(target(['sh', '-c', 'echo "replica lag 30 s" >&2; echo more >&2; exit 2']), { timeoutMs: 5000 });
    assert.equal(r.reason, 'exit-code');
    assert.match(r.message, /^exec sh -c echo .*: exit 2: replica lag 30 s$/);
  });

  it('passes the real server as LBD_RS_ADDRESS and LBD_RS_PORT', async () => {
    const r = await prober.probe(target(['sh', '-c', 'test "$LBD_RS_ADDRESS:$LBD_RS_PORT" = 127.0.0.1:8080']), { timeoutMs: 5000 });
    assert.equal(r.reason, 'ok', r.message);
  });

  it('a command that cannot start → error saying why', async () => {
    const r = await prober.probe(target(['/nonexistent/lbd-check']), { timeoutMs: 5000 });
    assert.deepEqual([r.reason, r.message], ['error', 'exec /nonexistent/lbd-check: cannot start /nonexistent/lbd-check: no such file']);
    const empty = await prober.probe(target([]), { timeoutMs: 5000 });
    assert.deepEqual([empty.reason, empty.message], ['error', 'exec : an exec check needs a command']);
  });

  it('killed by a signal → exit-code naming the signal', async () => {
    const r = await prober.probe(target(['sh', '-c', 'kill -TERM $$']), { timeoutMs: 5000 });
    assert.deepEqual([r.reason, r.message], ['exit-code', 'exec sh -c kill -TERM $$: killed by SIGTERM']);
  });

  it('timeout → reason timeout, and the whole process group is killed (the script and its child)', async () => {
    // Both the script and its background `sleep` hold the fifo's write end (fd 3). The read end sees EOF
    // only when every holder is dead: that is the event this test waits for, rather than polling pids.
    const fifo = join(dir, 'alive');
    execFileSync('mkfifo', [fifo]);
    const eof = new Promise<string>((resolve, reject) => {
      const reader = createReadStream(fifo, { encoding: 'utf8' });
      let text = '';
      reader.on('data', (c) => (text += String(c)));
      reader.once('end', () => resolve(text));
      reader.once('error', reject);
    });
    const script = `exec 3>"${fifo}"; echo started >&3; sleep 30 & wait`;
    const r = await prober.probe(target(['sh', '-c', script]), { timeoutMs: 300 });
    assert.equal(r.reason, 'timeout');
    assert.match(r.message, /^exec sh -c exec 3>.*: timeout after 300 ms \(still running; killed\)$/);
    assert.ok(r.durationMs >= 290 && r.durationMs < 2000, `${r.durationMs} ms`);
    assert.equal(await eof, 'started\n', 'every process of the group is gone');
  });

  it('an abort kills the process group too', async () => {
    const controller = new AbortController();
    const p = prober.probe(target(['sh', '-c', 'sleep 30']), { timeoutMs: 30_000, signal: controller.signal });
    controller.abort();
    const r = await p;
    assert.deepEqual([r.reason, r.message], ['error', 'exec sh -c sleep 30: aborted']);
  });
});
