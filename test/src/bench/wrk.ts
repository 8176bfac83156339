import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ExecOptions, ExecResult } from '@lbd/testkit';

/** Where wrk runs: a Topology, or anything that can run a command in a host the same way. */
export interface CommandHost {
  exec(host: string, cmd: string, args?: readonly string[], opts?: ExecOptions): Promise<ExecResult>;
}

/**
 * wrk as the benchmarks' load generator. A Lua `done` hook prints exact totals (requests, bytes, duration
 * in microseconds, errors) on one line, so nothing is parsed from wrk's rounded human units.
 */

const MARK = 'LBDBENCH';

const DONE_SCRIPT = `-- written by lbd's benchmark: exact totals on one line
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("${MARK} %d %d %d %d %d %d %d %d\\n",
    summary.duration, summary.requests, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout))
end
`;

interface WrkErrors {
  readonly connect: number;
  readonly read: number;
  readonly write: number;
  /** Responses with a status other than 2xx/3xx. */
  readonly status: number;
  readonly timeout: number;
}

export interface WrkResult {
  readonly requests: number;
  readonly bytes: number;
  readonly durationSec: number;
  readonly errors: WrkErrors;
  readonly requestsPerSec: number;
  readonly mibPerSec: number;
}

export interface WrkRun {
  readonly url: string;
  readonly connections: number;
  readonly durationSec: number;
  /** One request per connection: `Connection: close` on every request. */
  readonly closeEach: boolean;
  /** CPU list to pin wrk to (taskset -c), or undefined to leave placement to the scheduler. */
  readonly cpus?: string;
  /** wrk threads (-t); default 1. */
  readonly threads?: number;
}

/** Writes the Lua hook into `dir` and returns its path. */
export async function writeWrkScript(dir: string): Promise<string> {
  const path = join(dir, 'wrk-done.lua');
  await writeFile(path, DONE_SCRIPT, { mode: 0o644 });
  return path;
}

/**
 * One bounded wrk run (1 thread unless `run.threads` says otherwise: the machine's 2 cores are shared by
 * client, director and servers) from `host`. wrk stops itself after `durationSec`; the command is killed if it overruns by 20 s.
 */
export async function runWrk(topology: CommandHost, host: string, script: string, run: WrkRun): Promise<WrkResult> {
  const args = [`-t${run.threads ?? 1}`, `-c${run.connections}`, `-d${run.durationSec}s`, '--timeout', '2s', '-s', script];
  if (run.closeEach) args.push('-H', 'Connection: close');
  args.push(run.url);
  const [cmd, argv] = run.cpus === undefined ? ['wrk', args] : ['taskset', ['-c', run.cpus, 'wrk', ...args]];
  const { stdout } = await topology.exec(host, cmd, argv, { timeoutMs: (run.durationSec + 20) * 1000 });
  const line = stdout.split('\n').find((l) => l.startsWith(`${MARK} `));
  if (line === undefined) throw new Error(`wrk ${args.join(' ')}: no summary line in its output: ${stdout.slice(-500)}`);
  const [durationUs, requests, bytes, connect, read, write, status, timeout] = line.slice(MARK.length + 1).trim().split(/\s+/).map(Number) as
    [number, number, number, number, number, number, number, number];
  const durationSec = durationUs / 1e6;
  return {
    requests, bytes, durationSec, errors: { connect, read, write, status, timeout },
    requestsPerSec: requests / durationSec, mibPerSec: bytes / 2 ** 20 / durationSec,
  };
}

export function errorCount(r: WrkResult): number {
  const e = r.errors;
  return e.connect + e.read + e.write + e.status + e.timeout;
}

export function describeErrors(r: WrkResult): string {
  const e = r.errors;
  return Object.entries(e).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`).join(', ') || 'none';
}
