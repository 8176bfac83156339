import { spawn } from 'node:child_process';
import { attempt, describeTarget } from '../attempt.js';
import type { ProbeOptions, ProbeResult, ProbeTarget, Prober } from '../types.js';

/**
 * exec: runs a command (argv, no shell) like keepalived's MISC_CHECK: exit 0 = up, anything else is
 * reason 'exit-code'. The environment adds LBD_RS_ADDRESS and LBD_RS_PORT, so one script serves many
 * servers. stdout is discarded; the first line of stderr is quoted in the message of a failure.
 *
 * Why a process group: a check is often a shell script that starts children (curl, nc, mysql). On timeout
 * or abort we kill the whole group with SIGKILL, so no grandchild outlives its probe and piles up at
 * thousands of probes per second. The command runs in its own session (`detached`), which makes its pid
 * the group id; nothing else is in that group.
 */
export class ExecProber implements Prober {
  constructor(private readonly opts: { env?: NodeJS.ProcessEnv } = {}) {}

  probe(target: ProbeTarget, opts: ProbeOptions): Promise<ProbeResult> {
    const what = describeTarget(target);
    return attempt(target, opts, (ctx) => {
      const [file, ...args] = target.command ?? [];
      if (file === undefined || file === '') {
        ctx.settle('error', `${what}: an exec check needs a command`);
        return;
      }
      ctx.setPhase('still running; killed');
      const child = spawn(file, args, {
        detached: true,
        stdio: ['ignore', 'ignore', 'pipe'],
        env: {
          ...(this.opts.env ?? process.env),
          LBD_RS_ADDRESS: target.address,
          LBD_RS_PORT: String(target.port),
        },
      });
      let exited = false;
      ctx.onCleanup(() => {
        // Only a group that may still have members: a group whose leader exited and was reaped could be
        // reused; the leader's pid is not reused while we have not seen its exit.
        if (!exited && child.pid !== undefined) {
          try {
            process.kill(-child.pid, 'SIGKILL');
          } catch {
            // ESRCH: already gone.
          }
        }
        child.stderr?.destroy();
      });
      let stderr = '';
      child.stderr?.setEncoding('utf8');
      child.stderr?.on('data', (chunk: string) => {
        if (stderr.length < 4096) stderr += chunk;
      });
      child.once('error', (err: NodeJS.ErrnoException) => {
        exited = true; // spawn failed: there is no process to kill
        const why = err.code === 'ENOENT' ? 'no such file' : err.code === 'EACCES' ? 'permission denied' : err.message;
        ctx.settle('error', `${what}: cannot start ${file}: ${why}`);
      });
      const finish = (code: number | null, signal: NodeJS.Signals | null): void => {
        const detail = firstLine(stderr);
        if (code === 0) ctx.settle('ok', `${what}: exit 0`);
        else if (code !== null) ctx.settle('exit-code', `${what}: exit ${code}${detail ? `: ${detail}` : ''}`);
        else ctx.settle('exit-code', `${what}: killed by ${signal ?? 'a signal'}${detail ? `: ${detail}` : ''}`);
      };
      child.once('exit', (code, signal) => {
        exited = true;
        if (code === 0) {
          finish(code, signal);
          return;
        }
        // 'exit' can come before the last of stderr is read; 'close' comes after it, unless a background
        // child of the check still holds stderr open: then the message goes with what arrived so far.
        child.once('close', () => finish(code, signal));
        const grace = setTimeout(() => finish(code, signal), 20);
        ctx.onCleanup(() => clearTimeout(grace));
      });
    });
  }
}

function firstLine(text: string): string {
  const line = text.split('\n').find((l) => l.trim() !== '')?.trim() ?? '';
  return line.length > 120 ? `${line.slice(0, 117)}...` : line;
}
