import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { constants } from 'node:os';

export interface CommandResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs kernel commands (`nft`, `conntrack`, `sysctl`). Injected so that the same data-plane code runs
 * in the agent's own network namespace (`localRunner`) or, from tests and benchmarks, in another one
 * (`netnsRunner`): Node cannot enter a namespace itself.
 */
export interface CommandRunner {
  run(command: string, args: readonly string[]): Promise<CommandResult>;
  /** A long-running process with pipes (for `nft -i`); runners without it make every change start nft. */
  spawn?(command: string, args: readonly string[]): ChildProcessWithoutNullStreams;
  /**
   * The network namespace the commands run in: null for this process's own, a name under /run/netns for
   * `ip netns exec`'s. What runs inside this process on the runner's behalf (the connection table's in-process
   * writer) opens its socket there. Absent: not known (a test's fake), so everything goes through commands.
   */
  readonly netns?: string | null;
}

const MAX_OUTPUT = 512 * 1024 * 1024;

function execRun(command: string, args: readonly string[]): Promise<CommandResult> {
  return new Promise((resolve) => {
    execFile(command, args, { maxBuffer: MAX_OUTPUT, encoding: 'utf8' }, (err, stdout, stderr) => {
      const e = err as (Error & { code?: unknown; signal?: NodeJS.Signals | null }) | null;
      if (e && e.code === 'ENOENT') {
        resolve({ code: 127, stdout: stdout ?? '', stderr: `${command}: command not found` });
        return;
      }
      // Killed by a signal (nft aborting on an assertion, say): 128 + the signal's number, as a shell says,
      // and the signal in the text. Not 127, which reads as "not installed".
      const signal = e?.signal ?? null;
      const code = !e ? 0 : typeof e.code === 'number' ? e.code : signal ? 128 + (constants.signals[signal] ?? 0) : 1;
      const text = (stderr ?? '').replace(/\n$/, '');
      resolve({ code, stdout: stdout ?? '', stderr: signal ? `${text}${text ? '\n' : ''}${command} was killed by ${signal}` : stderr ?? '' });
    });
  });
}

export function localRunner(): CommandRunner {
  return { run: execRun, spawn: (command, args) => spawn(command, [...args], { stdio: 'pipe' }), netns: null };
}

export function netnsRunner(namespace: string): CommandRunner {
  return {
    run: (command, args) => execRun('ip', ['netns', 'exec', namespace, command, ...args]),
    spawn: (command, args) => spawn('ip', ['netns', 'exec', namespace, command, ...args], { stdio: 'pipe' }),
    netns: namespace,
  };
}
