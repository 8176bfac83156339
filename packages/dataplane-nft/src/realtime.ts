import { readlinkSync } from 'node:fs';
import { DataPlaneError } from '@lbd/dataplane';
import { localRunner, type CommandRunner } from './runner.js';

/**
 * Puts the calling thread (not the process: Linux schedules threads) under SCHED_FIFO at `priority`, as
 * keepalived does for its VRRP process (vrrp_rt_priority), so that a busy box (a flood through the
 * director, connection sync, health checks) cannot delay what runs on it. Processes the thread starts
 * afterwards inherit the policy (fork copies it), so its `nft -i` and `ip -batch` run at the same priority.
 *
 * Uses `chrt` (util-linux, Essential in Debian) on the thread id read from /proc/thread-self; needs
 * CAP_SYS_NICE (or an RLIMIT_RTPRIO that allows the priority). Resolves with what was set, e.g.
 * "SCHED_FIFO 10 (thread 1234)".
 */
export async function raiseThreadToRealtime(priority: number, runner: CommandRunner = localRunner()): Promise<string> {
  if (!Number.isInteger(priority) || priority < 1 || priority > 99) throw new RangeError(`real-time priority ${priority}: must be a whole number from 1 to 99`);
  // Synchronously, on this thread: an async read runs on a libuv pool thread, whose link names that thread.
  const self = readlinkSync('/proc/thread-self'); // "<pid>/task/<tid>"
  const tid = /\/task\/(\d+)$/.exec(self)?.[1];
  if (tid === undefined) throw new DataPlaneError('Unknown', 'real-time priority', { detail: `cannot tell this thread's id from /proc/thread-self (${self})` });
  const r = await runner.run('chrt', ['--fifo', '--pid', String(priority), tid]);
  if (r.code === 127) throw new DataPlaneError('CommandMissing', 'real-time priority (chrt)', { detail: r.stderr.trim() });
  if (r.code !== 0) {
    const detail = r.stderr.trim().split('\n')[0] ?? '';
    throw new DataPlaneError(/not permitted/i.test(detail) ? 'PermissionDenied' : 'Unknown', 'real-time priority', { detail: `${detail}; it needs CAP_SYS_NICE` });
  }
  return `SCHED_FIFO ${priority} (thread ${tid})`;
}
