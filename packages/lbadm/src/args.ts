import { DEFAULT_ADMIN_SOCKET } from '@lbd/config';

/**
 * lbadm's command line: a command and flags, in any order. Every mistake is a UsageError naming the
 * flag and the fix; nothing here touches the agent.
 */

export const COMMANDS = ['status', 'stats', 'conns', 'health', 'validate', 'apply', 'doctor'] as const;
export type Command = (typeof COMMANDS)[number];

export interface Invocation {
  readonly command: Command | 'help';
  readonly socket: string;
  readonly json: boolean;
  /** validate, apply */
  readonly file: string | undefined;
  /** apply */
  readonly dryRun: boolean;
  /** stats */
  readonly rate: boolean;
  readonly intervalMs: number;
  /** conns, health: a service key or name */
  readonly service: string | undefined;
  /** health: stream transitions until interrupted */
  readonly watch: boolean;
}

export const USAGE = 'usage: lbadm [--socket PATH] [--json] COMMAND [flags]   (COMMAND: status, stats, conns, health, validate, apply, doctor)';

export const HELP = `${USAGE}

Operates the lbd-agent of this director through its admin socket.

commands:
  status                          services and real servers, ipvsadm -Ln style
  stats [--rate] [--interval-ms N]
                                  packets, bytes and connections per service and real server;
                                  --rate samples twice, N ms apart (default 1000), and prints rates
  conns [--service KEY|NAME]      connections from conntrack, ipvsadm -Lnc style
  health [--service KEY|NAME] [--watch]
                                  each checked real server: its check, state, since when, the last
                                  result and its latency. --watch prints each transition as it
                                  happens (with --json: one JSON event per line) until Ctrl-C
  validate -f FILE                checks a config file locally (no agent needed)
  apply -f FILE [--dry-run]       sends a config to the agent, which applies and saves it;
                                  prints the rule diff. --dry-run applies nothing
  doctor                          looks for known misconfigurations and says how to fix them

global flags:
  --socket PATH   the agent's admin socket (default $LBD_ADMIN_SOCKET, else ${DEFAULT_ADMIN_SOCKET})
  --json          machine-readable output
  --help          this text

exit codes:
  0   ok (doctor: no errors and no warnings)
  1   failure (doctor: at least one error or warning; apply: the data plane refused)
  64  bad usage
  69  the agent is unreachable (not running, or another --socket)
  77  permission denied on the socket (run as root)
  78  invalid config (validate, apply)`;

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export const DEFAULT_INTERVAL_MS = 1000;
const MIN_INTERVAL_MS = 100;
const MAX_INTERVAL_MS = 60_000;

interface FlagSpec {
  readonly value: boolean;
  /** Commands that take the flag; undefined = every command (global). */
  readonly commands?: readonly Command[];
}

const FLAGS: Readonly<Record<string, FlagSpec>> = {
  '--socket': { value: true },
  '--json': { value: false },
  '--help': { value: false },
  '--file': { value: true, commands: ['validate', 'apply'] },
  '--dry-run': { value: false, commands: ['apply'] },
  '--rate': { value: false, commands: ['stats'] },
  '--interval-ms': { value: true, commands: ['stats'] },
  '--service': { value: true, commands: ['conns', 'health'] },
  '--watch': { value: false, commands: ['health'] },
};
const ALIASES: Readonly<Record<string, string>> = { '-f': '--file', '-h': '--help' };

export function parseArgs(argv: readonly string[], env: Readonly<Record<string, string | undefined>> = {}): Invocation {
  let command: Command | undefined;
  const seen = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('-')) {
      if (command !== undefined) throw new UsageError(`unexpected argument "${arg}" after command ${command}`);
      if (!(COMMANDS as readonly string[]).includes(arg)) {
        throw new UsageError(`unknown command "${arg}"; commands: ${COMMANDS.join(', ')}`);
      }
      command = arg as Command;
      continue;
    }
    const eq = arg.startsWith('--') ? arg.indexOf('=') : -1;
    const raw = eq > 0 ? arg.slice(0, eq) : arg;
    const name = ALIASES[raw] ?? raw;
    const spec = FLAGS[name];
    if (!spec) throw new UsageError(`unknown flag ${raw}`);
    if (!spec.value) {
      if (eq > 0) throw new UsageError(`${name} takes no value`);
      seen.set(name, true);
      continue;
    }
    const value = eq > 0 ? arg.slice(eq + 1) : argv[++i];
    if (value === undefined || value === '') throw new UsageError(`${raw} needs a value`);
    seen.set(name, value);
  }
  if (seen.has('--help')) return invocation('help', seen, env);
  if (command === undefined) throw new UsageError('no command given');
  for (const name of seen.keys()) {
    const allowed = FLAGS[name]!.commands;
    if (allowed && !allowed.includes(command)) {
      throw new UsageError(`${name} is not a flag of "lbadm ${command}" (it belongs to ${allowed.map((c) => `lbadm ${c}`).join(', ')})`);
    }
  }
  if ((command === 'validate' || command === 'apply') && !seen.has('--file')) {
    throw new UsageError(`lbadm ${command} needs -f FILE`);
  }
  if (seen.has('--interval-ms') && !seen.has('--rate')) throw new UsageError('--interval-ms only makes sense with --rate');
  return invocation(command, seen, env);
}

function invocation(command: Command | 'help', seen: ReadonlyMap<string, string | true>, env: Readonly<Record<string, string | undefined>>): Invocation {
  const str = (name: string): string | undefined => {
    const v = seen.get(name);
    return typeof v === 'string' ? v : undefined;
  };
  let intervalMs = DEFAULT_INTERVAL_MS;
  const interval = str('--interval-ms');
  if (interval !== undefined) {
    intervalMs = Number(interval);
    if (!/^\d+$/.test(interval) || intervalMs < MIN_INTERVAL_MS || intervalMs > MAX_INTERVAL_MS) {
      throw new UsageError(`--interval-ms: "${interval}" is not a whole number of milliseconds from ${MIN_INTERVAL_MS} to ${MAX_INTERVAL_MS}`);
    }
  }
  const socket = str('--socket') ?? (env.LBD_ADMIN_SOCKET || DEFAULT_ADMIN_SOCKET);
  return {
    command, socket, json: seen.has('--json'), file: str('--file'), dryRun: seen.has('--dry-run'),
    rate: seen.has('--rate'), intervalMs, service: str('--service'), watch: seen.has('--watch'),
  };
}
