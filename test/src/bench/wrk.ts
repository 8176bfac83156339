import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ExecOptions, ExecResult } from '@lbd/testkit';

/** Where wrk runs: a Topology, or anything that can run a command in a host the same way. */
export interface CommandHost {
  exec(host: string, cmd: string, args?: readonly string[], opts?: ExecOptions): Promise<ExecResult>;
}

/**
 * wrk as the benchmarks' load generator. A Lua `done` hook prints exact totals (requests, bytes, duration
 * in microseconds, errors, latency p50 and p99) on one line, so nothing is parsed from wrk's rounded human units.
 *
 * A run with a `rate` is paced by a schedule, as wrk2 paces (wrk itself only offers a `delay` hook): request
 * n of a thread is due n / rate seconds after its first, and `delay` returns the time until it is due, read
 * from CLOCK_MONOTONIC through LuaJIT's ffi (Lua's own clocks are seconds or CPU time). A thread behind its
 * schedule sends as fast as its connections let it until it has caught up, so a run reaches the rate unless
 * the path cannot carry it, and never exceeds it. A delay of a fixed length per request, which this replaced,
 * made the rate depend on the round trip: a slower path was offered less.
 */

const MARK = 'LBDBENCH';
const RATE_ENV = 'LBD_WRK_RATE';

const SCRIPT = `-- written by lbd's benchmark: exact totals on one line; paced when ${RATE_ENV} is set
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("${MARK} %d %d %d %d %d %d %d %d %d %d\\n",
    summary.duration, summary.requests, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end

local rate = tonumber(os.getenv("${RATE_ENV}") or "0")
if rate > 0 then
  local ffi = require("ffi")
  ffi.cdef[[
    typedef struct { long tv_sec; long tv_nsec; } lbd_timespec;
    int clock_gettime(int clk_id, lbd_timespec *tp);
  ]]
  local CLOCK_MONOTONIC = 1
  local ts = ffi.new("lbd_timespec")
  local function now_ms()
    ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
    return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
  end
  local interval_ms = 1000 / rate
  local due = nil
  -- wrk waits a whole number of milliseconds; the schedule is absolute, so what one wait rounds off the next makes up.
  delay = function()
    local now = now_ms()
    if due == nil then due = now end
    local wait = due - now
    due = due + interval_ms
    if wait < 1 then return 0 end
    return math.floor(wait)
  end
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
  /** wrk's latency percentiles (from a request's write to its response), in ms. */
  readonly latencyP50Ms: number;
  readonly latencyP99Ms: number;
  /** CPU wrk used (user + system), in cores over its run: whether the load generator itself was the limit. */
  readonly cores: number;
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
  /** Requests/s to pace the run at (all threads together), or undefined for as fast as it goes. */
  readonly rate?: number;
}

/** Writes the Lua hook into `dir` and returns its path. */
export async function writeWrkScript(dir: string): Promise<string> {
  const path = join(dir, 'wrk-bench.lua');
  await writeFile(path, SCRIPT, { mode: 0o644 });
  return path;
}

/**
 * One bounded wrk run (1 thread unless `run.threads` says otherwise: the machine's 2 cores are shared by
 * client, director and servers) from `host`. wrk stops itself after `durationSec`; the command is killed if it overruns by 20 s.
 */
export async function runWrk(topology: CommandHost, host: string, script: string, run: WrkRun): Promise<WrkResult> {
  const threads = run.threads ?? 1;
  if (run.rate !== undefined && !(run.rate > 0 && Number.isFinite(run.rate))) throw new Error(`wrk rate ${run.rate}: must be a positive number of requests/s`);
  const args = [`-t${threads}`, `-c${run.connections}`, `-d${run.durationSec}s`, '--timeout', '2s', '-s', script];
  if (run.closeEach) args.push('-H', 'Connection: close');
  args.push(run.url);
  // bash's `times` reports its children's CPU, wrk's, after wrk has exited.
  let argv = ['bash', '-c', 'wrk "$@"; status=$?; times; exit $status', 'wrk', ...args];
  if (run.cpus !== undefined) argv = ['taskset', '-c', run.cpus, ...argv];
  // Each thread runs the script in a Lua state of its own and keeps its own schedule: its share of the rate.
  if (run.rate !== undefined) argv = ['env', `${RATE_ENV}=${run.rate / threads}`, ...argv];
  const { stdout } = await topology.exec(host, argv[0]!, argv.slice(1), { timeoutMs: (run.durationSec + 20) * 1000 });
  const line = stdout.split('\n').find((l) => l.startsWith(`${MARK} `));
  if (line === undefined) throw new Error(`wrk ${args.join(' ')}: no summary line in its output: ${stdout.slice(-500)}`);
  const [durationUs, requests, bytes, connect, read, write, status, timeout, p50Us, p99Us] = line.slice(MARK.length + 1).trim().split(/\s+/).map(Number) as
    [number, number, number, number, number, number, number, number, number, number];
  const durationSec = durationUs / 1e6;
  // The last line of `times`: the children's user and system time, as 0m1.234s 0m0.567s.
  const times = stdout.trimEnd().split('\n').at(-1) ?? '';
  const cpuSec = [...times.matchAll(/(\d+)m([\d.]+)s/g)].reduce((sum, m) => sum + Number(m[1]) * 60 + Number(m[2]), 0);
  return {
    requests, bytes, durationSec, errors: { connect, read, write, status, timeout },
    requestsPerSec: requests / durationSec, mibPerSec: bytes / 2 ** 20 / durationSec, latencyP50Ms: p50Us / 1000, latencyP99Ms: p99Us / 1000,
    cores: cpuSec / durationSec,
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
