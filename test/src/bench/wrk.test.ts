import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ExecOptions, ExecResult } from '@lbd/testkit';
import { runWrk, writeWrkScript, type CommandHost } from './wrk.js';

/** A host that records the command it is given and answers with `stdout`, as wrk under bash would print it. */
function fakeHost(stdout: string): CommandHost & { calls: Array<{ host: string; cmd: string; args: readonly string[] }> } {
  const calls: Array<{ host: string; cmd: string; args: readonly string[] }> = [];
  return {
    calls,
    exec: async (host: string, cmd: string, args: readonly string[] = [], _opts?: ExecOptions): Promise<ExecResult> => {
      calls.push({ host, cmd, args });
      return { stdout, stderr: '', code: 0 };
    },
  };
}

// wrk's own lines, the hook's summary (duration µs, requests, bytes, connect/read/write/status/timeout errors,
// latency p50 and p99 in µs), then bash's `times`: the shell's CPU, then its children's (wrk's).
const OUTPUT = 'Running 2s test @ http://198.18.0.10/\n  1 threads and 200 connections\n'
  + 'LBDBENCH 2000000 10000 1234567 0 1 0 2 0 512 9876\n0m0.010s 0m0.020s\n0m1.250s 0m0.250s\n';

describe('bench: wrk driver', () => {
  it('paces a run through the environment, each thread its share of the rate, and reads the totals, latency and wrk\'s CPU exactly', async () => {
    const host = fakeHost(OUTPUT);
    const r = await runWrk(host, 'client', '/tmp/s.lua', { url: 'http://198.18.0.10/', connections: 200, durationSec: 2, closeEach: true, rate: 5000, threads: 2 });
    const { host: where, cmd, args } = host.calls[0]!;
    assert.equal(where, 'client');
    assert.deepEqual([cmd, ...args.slice(0, 4)], ['env', 'LBD_WRK_RATE=2500', 'bash', '-c', 'wrk "$@"; status=$?; times; exit $status']);
    assert.deepEqual(args.slice(4), ['wrk', '-t2', '-c200', '-d2s', '--timeout', '2s', '-s', '/tmp/s.lua', '-H', 'Connection: close', 'http://198.18.0.10/']);
    assert.deepEqual(r, {
      requests: 10_000, bytes: 1_234_567, durationSec: 2, errors: { connect: 0, read: 1, write: 0, status: 2, timeout: 0 },
      requestsPerSec: 5000, mibPerSec: 1_234_567 / 2 ** 20 / 2, latencyP50Ms: 0.512, latencyP99Ms: 9.876, cores: 0.75,
    });
  });

  it('runs unpaced without the rate in its environment, pinned where asked', async () => {
    const host = fakeHost(OUTPUT);
    await runWrk(host, 'client', '/tmp/s.lua', { url: 'http://198.18.0.10/', connections: 8, durationSec: 2, closeEach: false, cpus: '1' });
    const { cmd, args } = host.calls[0]!;
    assert.deepEqual([cmd, ...args.slice(0, 4)], ['taskset', '-c', '1', 'bash', '-c']);
    assert.ok(!args.some((a) => a.startsWith('LBD_WRK_RATE')), 'an unpaced run carries a rate');
    assert.ok(!args.includes('Connection: close'));
  });

  it('refuses a rate that is not a positive number, and says so when wrk printed no summary', async () => {
    const host = fakeHost(OUTPUT);
    for (const rate of [0, -5, Number.NaN]) {
      await assert.rejects(runWrk(host, 'client', '/tmp/s.lua', { url: 'http://x/', connections: 1, durationSec: 1, closeEach: true, rate }),
        new RegExp(`wrk rate ${rate}: must be a positive number of requests/s`));
    }
    assert.equal(host.calls.length, 0, 'a refused run was started');
    await assert.rejects(runWrk(fakeHost('unable to connect to 198.18.0.10:80 Connection refused\n'), 'client', '/tmp/s.lua', { url: 'http://x/', connections: 1, durationSec: 1, closeEach: true }),
      /no summary line in its output: unable to connect/);
  });

  it('writes a script whose delay hook exists only when a rate is set (wrk defers every request when it does)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lbd-wrk-'));
    try {
      const text = await readFile(await writeWrkScript(dir), 'utf8');
      const paced = text.indexOf('if rate > 0 then');
      assert.ok(paced > 0 && text.indexOf('delay = function') > paced, 'the delay hook is defined outside the rate\'s guard');
      assert.match(text, /os\.getenv\("LBD_WRK_RATE"\)/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
