import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';

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
}

const MAX_OUTPUT = 512 * 1024 * 1024;

function execRun(command: string, args: readonly string[]): Promise<CommandResult> {
  return new Promise((resolve) => {
    execFile(command, args, { maxBuffer: MAX_OUTPUT, encoding: 'utf8' }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as NodeJS.ErrnoException & { code?: unknown }).code === 'number' ? (err as unknown as { code: number }).code : 127) : 0;
      const missing = err && (err as NodeJS.ErrnoException).code === 'ENOENT';
      resolve({ code: missing ? 127 : code, stdout: stdout ?? '', stderr: missing ? `${command}: command not found` : stderr ?? '' });
    });
  });
}

export function localRunner(): CommandRunner {
  return { run: execRun, spawn: (command, args) => spawn(command, [...args], { stdio: 'pipe' }) };
}

export function netnsRunner(namespace: string): CommandRunner {
  return {
    run: (command, args) => execRun('ip', ['netns', 'exec', namespace, command, ...args]),
    spawn: (command, args) => spawn('ip', ['netns', 'exec', namespace, command, ...args], { stdio: 'pipe' }),
  };
}
