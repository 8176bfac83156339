import { DEFAULT_ADMIN_SOCKET, EVENT_KINDS, FORWARDING_MODES, MAX_CONNECTION_LIMIT, MAX_SLOTS, MAX_WEIGHT, nearestName, PROTOCOLS, SCHEDULERS, slotGroup } from '@lbd/config';
import { DEFAULT_EVENTS_LIMIT, MAX_EVENTS_LIMIT } from '@lbd/proto';

/**
 * lbadm's command line: a command and flags, in any order. Every mistake is a UsageError naming the
 * flag and the fix; nothing here touches the agent.
 */

/** How often `drill --probe` opens a connection to its URL. */
export const PROBE_INTERVAL_MS = 20;

export const COMMANDS = [
  'status', 'stats', 'conns', 'health', 'validate', 'apply', 'doctor', 'cluster', 'failover', 'slot', 'drill', 'config', 'events', 'server', 'service', 'etcd', 'completion',
] as const;
export type Command = (typeof COMMANDS)[number];

/** The agent's admin API over TCP (agent.admin.grpcListen), with mutual TLS: PEM file paths. */
interface TcpServer {
  readonly address: string;
  readonly port: number;
  readonly ca: string;
  readonly cert: string;
  readonly key: string;
  /** The name the agent's certificate must have; default: `address`. */
  readonly serverName: string | undefined;
}

/**
 * etcd itself, with an operator's client certificate (--etcd ...): where etcd's roles keep the cluster config
 * to operators, lbadm writes it there (apply, config rollback, server, service), not through an agent.
 */
export interface EtcdTarget {
  readonly endpoints: readonly string[];
  readonly ca: string;
  readonly cert: string;
  readonly key: string;
  /** The cluster's prefix (the directors' agent.cluster.prefix). */
  readonly prefix: string;
}

export interface Invocation {
  readonly command: Command | 'help' | 'version';
  readonly socket: string;
  /** Set with --server (or LBADM_SERVER): the TCP admin API instead of the unix socket. */
  readonly server: TcpServer | undefined;
  /** Set with --etcd (or LBADM_ETCD) on a command that writes the cluster config. */
  readonly etcd: EtcdTarget | undefined;
  /** etcd roles: the cluster prefix, its directors' ids and its operators' names. */
  readonly roles: { readonly prefix: string; readonly directors: readonly string[]; readonly operators: readonly string[] } | undefined;
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
  /** Words after the command: `cluster status`, `config history`, `config rollback 3`. */
  readonly args: readonly string[];
  /** failover, drill: the vip group to move; slot move, drill --slot: the slot's election group (slot-N) */
  readonly vipGroup: string | undefined;
  /** drill: a URL lbadm requests on a fresh connection every PROBE_INTERVAL_MS while the drill runs */
  readonly probe: URL | undefined;
  readonly to: string | undefined;
  /** apply (cluster): the config revision the change is based on */
  readonly expectRevision: number | undefined;
  /** service add|edit: the forwarding mode */
  readonly mode: string | undefined;
  /** events: keep streaming new ones */
  readonly follow: boolean;
  /** events: from when (a duration before now, or a time) */
  readonly since: Since | undefined;
  /** events: filters, and this director's history only */
  readonly director: string | undefined;
  readonly kind: string | undefined;
  readonly local: boolean;
  readonly limit: number | undefined;
  /** server add|edit: the real server's settings to write; service add|edit: the service's. */
  readonly serverFields: ServerFields;
  readonly serviceFields: ServiceFields;
  /** service list: names only, one a line (shell completion reads them). */
  readonly names: boolean;
}

export interface ServerFields {
  readonly weight?: number;
  /** Health-check this port instead of the real server's own (its healthCheck.port override). */
  readonly healthPort?: number;
}

export interface ServiceFields {
  readonly vip?: string;
  readonly port?: number;
  readonly protocol?: string;
  readonly mode?: string;
  readonly scheduler?: string;
  /** null: remove them (`--local-addresses none`, e.g. when the service becomes nat). */
  readonly localAddresses?: readonly string[] | null;
  readonly vipGroup?: string;
  /** `--syn-proxy on|off`. */
  readonly synProxy?: boolean;
  /** null: no limit (`--connection-limit none`). */
  readonly connectionLimit?: number | null;
}

/** `--since`: a duration before now (`10m`), or an absolute time (RFC 3339). */
export type Since = { readonly agoMs: number } | { readonly unixMs: number };

export const USAGE = `usage: lbadm [--socket PATH | --server HOST:PORT --ca F --cert F --key F] [--json] COMMAND [flags]   (COMMAND: ${COMMANDS.join(', ')})`;

export const HELP = `${USAGE}

Operates the lbd-agent of this director through its admin socket, or any director's through
its admin API over mutual TLS (--server).

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
  apply -f FILE [--dry-run] [--expect-revision N]
                                  sends a config to the agent, which applies and saves it;
                                  prints the rule diff. --dry-run applies nothing. In a cluster the
                                  agent writes it to etcd (swapped on revision N, default the one it
                                  runs) and every director applies it
  doctor                          looks for known misconfigurations and says how to fix them
  cluster status                  directors, their health and role per vip group, who leads each
                                  group and why, etcd health, worst-case takeover
  failover --vip-group G [--to D] planned switchover of vip group G (to D, or the best other director)
  drill switchover --vip-group G|--slot N [--to D] [--probe URL]
                                  a drill that is safe on live directors: moves vip group G (or ECMP
                                  slot N) to D (or the best other director) and back, and measures each
                                  move from both directors: time without a holder, established
                                  connections the new holder lacked, young ones caught (a TCP
                                  handshake, a UDP flow not yet assured: not copied yet), packets
                                  the two kernels dropped for an address not held. --probe: lbadm
                                  also requests URL on a fresh connection every ${PROBE_INTERVAL_MS} ms meanwhile.
                                  Prints one result line and records a drill event; exit 1 on fail.
                                  Failure drills (box death, cuts, pauses) are the lab's: deploy/lab/lab drill
  slot move SLOT [--to D]         ECMP tier: planned move of slot SLOT (0, 1, ...; election group
                                  slot-SLOT) to D, or to the best other director; its connections go
                                  to D before the move, as in a failover
  config show                     the running config's text as applied (cluster: etcd's), to bring a file
                                  up to date after server / service edits (--json: with its revision)
  config history                  every cluster config applied, with its revision and author
  config rollback REV             applies cluster config revision REV again, as a new revision
  etcd roles --etcd-prefix P --directors ID,ID.. [--operators NAME,..]
                                  prints the etcdctl script that sets up etcd's role-based access for
                                  the cluster under P: each director (its certificate's common name is
                                  its id) writes its own registration, probe and events and the shared
                                  elections; only operators write the config. Run it with etcd's root
                                  certificate in etcdctl's environment (it enables authentication)
  server add SERVICE ADDR:PORT [--weight N] [--health-port P] [--dry-run]
  server edit SERVICE ADDR:PORT [--weight N] [--health-port P] [--dry-run]
  server drain|enable|remove SERVICE ADDR:PORT [--dry-run]
                                  changes one real server of SERVICE (a name or key) in the running
                                  config: drain sets drained: true (weight 0, established connections
                                  live on, no new ones; the weight stays in the config), enable
                                  removes it again. The agent applies it (in a cluster: every
                                  director), swapped on the revision read (retried if it moved)
  service add NAME --vip A --port P --mode fullnat|nat|dr [--protocol tcp|udp] [--scheduler S]
              [--local-addresses A,B|FIRST-LAST] [--vip-group G] [--syn-proxy on|off]
              [--connection-limit N|none] [--dry-run]
  service edit NAME [the same flags; --local-addresses none removes them] [--dry-run]
                                  --syn-proxy on answers the service's SYNs with syncookies
  service remove NAME [--dry-run]
  service list [--names]          the services of the running config (--names: names only)
                                  --dry-run (server, service) prints the config diff and the rule
                                  changes the agent would make, and changes nothing
  completion bash|zsh             prints a shell completion script, e.g.
                                  lbadm completion bash > /etc/bash_completion.d/lbadm
  events [--since DURATION|TIME] [--follow] [--kind K] [--director D] [--local] [--limit N]
                                  the event log: every transition (vip group role, vip, health,
                                  config, sync, drill, admin, bgp) with its reason, oldest first; in a
                                  cluster every director's (from etcd), with --local this one's.
                                  --since 10m, 2h, 1d or 2026-12-01T10:00:00Z; --follow prints
                                  new events until Ctrl-C; --kind one of ${EVENT_KINDS.join(', ')};
                                  --limit the newest N kept (default ${DEFAULT_EVENTS_LIMIT}); --json: one document,
                                  with --follow one JSON event per line

global flags:
  --socket PATH   the agent's admin socket (default $LBD_ADMIN_SOCKET, else ${DEFAULT_ADMIN_SOCKET})
  --server HOST:PORT
                  the agent's admin API over TCP (agent.admin.grpcListen) instead of the socket,
                  with mutual TLS: --ca FILE (the CA that signed the agent's certificate),
                  --cert FILE and --key FILE (this client's, a name agent.admin.clients lists);
                  --server-name NAME when the agent's certificate names it, not HOST (e.g. dir1).
                  Defaults: $LBADM_SERVER, $LBADM_CA, $LBADM_CERT, $LBADM_KEY, $LBADM_SERVER_NAME
  --etcd URL,URL.. --etcd-prefix P --etcd-ca F --etcd-cert F --etcd-key F
                  (apply, config rollback, server, service) write the cluster config to etcd
                  directly with an operator's certificate, for etcd with role-based access
                  (lbadm etcd roles), where a director's certificate may not write it. The
                  agent, when reachable, still answers --dry-run and says when it applied.
                  Defaults: $LBADM_ETCD, $LBADM_ETCD_PREFIX, $LBADM_ETCD_CA, $LBADM_ETCD_CERT,
                  $LBADM_ETCD_KEY
  --json          machine-readable output
  --help          this text
  --version       lbadm's version (lbd-agent --version: the agent's)

exit codes:
  0   ok (doctor: no errors and no warnings)
  1   failure (doctor: at least one error or warning; apply: the data plane refused;
      server, service: the config kept changing under the edit, 3 times)
  64  bad usage
  69  the agent is unreachable (not running, or another --socket / --server)
  77  permission denied: on the socket (run as root), or this certificate's role
  78  invalid config (validate, apply; server, service: an unknown service or real server, a
      duplicate, or a change that would make the config invalid; nothing was applied)`;

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/**
 * What `lbadm drill ...` answers. A failure drill breaks a cluster on purpose (freezes an agent, kills a
 * director's box, cuts its links, pauses etcd) from outside the directors, which only the lab can do, so
 * drills are the lab's command; lbadm works on an installed director and offers what can be done there.
 * `rest`: the words after `drill`, echoed as the lab command (without the old `failover` word, and with
 * --scenario for the old --mode, which the lab still reads).
 */
function labDrillOnly(rest: readonly string[]): string {
  const words = rest.filter((w, i) => !(i === 0 && w === 'failover')).map((w) => w.replace(/^--mode(?==|$)/, '--scenario'));
  // `lbadm drill box-death`: the lab names the scenario with --scenario.
  if (words[0] !== undefined && !words[0].startsWith('-')) words.unshift('--scenario');
  return 'failure drills break a cluster on purpose and run in the lab, from the lbd repository: '
    + `deploy/lab/lab drill ${words.length > 0 ? words.join(' ') : '--scenario SCENARIO [--count N] [--pause-ms MS]'} (deploy/lab/lab help lists the scenarios, and those of the ECMP lab: box-death, gobgpd-kill, bgp-reset, scale-out). `
    + 'On live directors, lbadm drill switchover --vip-group G (or --slot N) moves a vip group or slot and back and measures it, and lbadm events --kind drill lists the drills\' results';
}

const DEFAULT_INTERVAL_MS = 1000;
const MIN_INTERVAL_MS = 100;
const MAX_INTERVAL_MS = 60_000;

interface FlagSpec {
  readonly value: boolean;
  /** Commands that take the flag; undefined = every command (global). */
  readonly commands?: readonly Command[];
  /**
   * An old name kept for scripts: parsed as that flag (for `commands` only), shown in no help, usage
   * message or completion.
   */
  readonly aliasOf?: string;
}

/** Commands that write the cluster config, and so may write it to etcd directly (--etcd). */
const CONFIG_WRITERS: readonly Command[] = ['apply', 'config', 'server', 'service'];

/** Where etcd is and the operator's certificate for it: flag, then environment variable. */
const ETCD_FLAGS = [['--etcd', 'LBADM_ETCD'], ['--etcd-prefix', 'LBADM_ETCD_PREFIX'], ['--etcd-ca', 'LBADM_ETCD_CA'], ['--etcd-cert', 'LBADM_ETCD_CERT'], ['--etcd-key', 'LBADM_ETCD_KEY']] as const;

const FLAGS: Readonly<Record<string, FlagSpec>> = {
  '--socket': { value: true },
  '--server': { value: true },
  '--server-name': { value: true },
  '--ca': { value: true },
  '--cert': { value: true },
  '--key': { value: true },
  '--json': { value: false },
  '--help': { value: false },
  '--version': { value: false },
  '--file': { value: true, commands: ['validate', 'apply'] },
  '--dry-run': { value: false, commands: ['apply', 'server', 'service'] },
  '--rate': { value: false, commands: ['stats'] },
  '--interval-ms': { value: true, commands: ['stats'] },
  '--service': { value: true, commands: ['conns', 'health'] },
  '--watch': { value: false, commands: ['health'] },
  '--group': { value: true, commands: ['failover', 'drill'], aliasOf: '--vip-group' },
  '--to': { value: true, commands: ['failover', 'slot', 'drill'] },
  '--slot': { value: true, commands: ['drill'] },
  '--probe': { value: true, commands: ['drill'] },
  '--expect-revision': { value: true, commands: ['apply'] },
  '--follow': { value: false, commands: ['events'] },
  '--since': { value: true, commands: ['events'] },
  '--director': { value: true, commands: ['events'] },
  '--kind': { value: true, commands: ['events'] },
  '--local': { value: false, commands: ['events'] },
  '--limit': { value: true, commands: ['events'] },
  '--weight': { value: true, commands: ['server'] },
  '--health-port': { value: true, commands: ['server'] },
  '--vip': { value: true, commands: ['service'] },
  '--port': { value: true, commands: ['service'] },
  '--protocol': { value: true, commands: ['service'] },
  '--mode': { value: true, commands: ['service'] },
  '--scheduler': { value: true, commands: ['service'] },
  '--local-addresses': { value: true, commands: ['service'] },
  '--vip-group': { value: true, commands: ['service', 'failover', 'drill'] },
  '--syn-proxy': { value: true, commands: ['service'] },
  '--connection-limit': { value: true, commands: ['service'] },
  '--names': { value: false, commands: ['service'] },
  '--etcd': { value: true, commands: CONFIG_WRITERS },
  '--etcd-prefix': { value: true, commands: [...CONFIG_WRITERS, 'etcd'] },
  '--etcd-ca': { value: true, commands: CONFIG_WRITERS },
  '--etcd-cert': { value: true, commands: CONFIG_WRITERS },
  '--etcd-key': { value: true, commands: CONFIG_WRITERS },
  '--directors': { value: true, commands: ['etcd'] },
  '--operators': { value: true, commands: ['etcd'] },
};

/** Commands that take words after them, and what those may be. */
export const SUBCOMMANDS: Partial<Record<Command, readonly string[]>> = {
  cluster: ['status'], config: ['show', 'history', 'rollback'], slot: ['move'], drill: ['switchover'], etcd: ['roles'],
  server: ['add', 'edit', 'drain', 'enable', 'remove'], service: ['add', 'edit', 'remove', 'list'], completion: ['bash', 'zsh'],
};

const SERVICE_FLAGS = ['--vip', '--port', '--protocol', '--mode', '--scheduler', '--local-addresses', '--vip-group', '--syn-proxy', '--connection-limit'] as const;

/** The words after `server|service SUB`, and the flags each management subcommand takes (beyond the global ones). */
const MANAGE: Readonly<Record<string, { readonly words: readonly string[]; readonly flags: readonly string[] }>> = {
  'server add': { words: ['SERVICE', 'ADDR:PORT'], flags: ['--weight', '--health-port', '--dry-run'] },
  'server edit': { words: ['SERVICE', 'ADDR:PORT'], flags: ['--weight', '--health-port', '--dry-run'] },
  'server drain': { words: ['SERVICE', 'ADDR:PORT'], flags: ['--dry-run'] },
  'server enable': { words: ['SERVICE', 'ADDR:PORT'], flags: ['--dry-run'] },
  'server remove': { words: ['SERVICE', 'ADDR:PORT'], flags: ['--dry-run'] },
  'service add': { words: ['NAME'], flags: [...SERVICE_FLAGS, '--dry-run'] },
  'service edit': { words: ['NAME'], flags: [...SERVICE_FLAGS, '--dry-run'] },
  'service remove': { words: ['NAME'], flags: ['--dry-run'] },
  'service list': { words: [], flags: ['--names'] },
};

/** Flags every command takes. */
export const GLOBAL_FLAGS: readonly string[] = Object.entries(FLAGS).filter(([, spec]) => spec.commands === undefined).map(([name]) => name);

/** The flags that say where the agent (--socket, --server and its TLS files) or etcd (--etcd ...) is and how to reach it. */
export const CONNECTION_FLAGS: readonly string[] = [...GLOBAL_FLAGS.filter((name) => FLAGS[name]!.value), ...ETCD_FLAGS.map(([f]) => f)];

/** Flags that `lbadm COMMAND [SUB]` takes, the global ones last: for shell completion. */
export function flagsOf(command: Command, sub?: string): string[] {
  const manage = sub === undefined ? undefined : MANAGE[`${command} ${sub}`];
  const own = manage ? manage.flags : Object.entries(FLAGS).filter(([, spec]) => spec.commands?.includes(command) && spec.aliasOf === undefined).map(([name]) => name);
  return [...own, ...GLOBAL_FLAGS];
}

/** Flags that take a value: for shell completion, which must skip their values when it counts words. */
export const VALUE_FLAGS: readonly string[] = [...Object.entries(FLAGS).filter(([, spec]) => spec.value).map(([name]) => name), '-f'];
const ALIASES: Readonly<Record<string, string>> = { '-f': '--file', '-h': '--help' };

export function parseArgs(argv: readonly string[], env: Readonly<Record<string, string | undefined>> = {}): Invocation {
  let command: Command | undefined;
  const words: string[] = [];
  const seen = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('-')) {
      if (command !== undefined && SUBCOMMANDS[command] !== undefined) {
        words.push(arg);
        continue;
      }
      if (command !== undefined) throw new UsageError(`unexpected argument "${arg}" after command ${command}`);
      // `drill switchover` runs on live directors; every other drill is the lab's.
      if (arg === 'drill' && command === undefined && argv[i + 1] !== 'switchover') throw new UsageError(labDrillOnly(argv.slice(i + 1)));
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
    if (!spec) {
      const nearest = nearestName(raw, [...Object.keys(FLAGS), ...Object.keys(ALIASES)]);
      throw new UsageError(`unknown flag ${raw}${nearest === undefined ? '' : `; did you mean ${nearest}?`}`);
    }
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
  if (seen.has('--version')) return invocation('version', seen, env);
  if (command === undefined) throw new UsageError('no command given');
  for (const name of seen.keys()) {
    const allowed = FLAGS[name]!.commands;
    if (allowed && !allowed.includes(command)) {
      throw new UsageError(`${name} is not a flag of "lbadm ${command}" (it belongs to ${allowed.map((c) => `lbadm ${c}`).join(', ')})`);
    }
  }
  for (const [name, value] of [...seen]) {
    const to = FLAGS[name]!.aliasOf;
    if (to === undefined) continue;
    if (seen.has(to)) throw new UsageError(`${name} is the old name of ${to}; give ${to} once`);
    seen.delete(name);
    seen.set(to, value);
  }
  if ((command === 'validate' || command === 'apply') && !seen.has('--file')) {
    throw new UsageError(`lbadm ${command} needs -f FILE`);
  }
  if (seen.has('--interval-ms') && !seen.has('--rate')) throw new UsageError('--interval-ms only makes sense with --rate');
  const subs = SUBCOMMANDS[command];
  if (subs !== undefined) {
    const sub = words[0];
    if (sub === undefined || !subs.includes(sub)) {
      throw new UsageError(`lbadm ${command} needs one of: ${subs.map((x) => `${command} ${x}`).join(', ')}${sub === undefined ? '' : ` (not "${sub}")`}`);
    }
    const wantsRev = command === 'config' && sub === 'rollback';
    const manage = MANAGE[`${command} ${sub}`];
    if (wantsRev && (words.length !== 2 || !/^[1-9]\d{0,15}$/.test(words[1]!))) {
      throw new UsageError(`lbadm config rollback needs one revision number (see lbadm config history), not ${words.length === 1 ? 'none' : `"${words.slice(1).join(' ')}"`}`);
    }
    if (command === 'slot' && (words.length !== 2 || !/^\d{1,2}$/.test(words[1]!) || Number(words[1]) >= MAX_SLOTS)) {
      throw new UsageError(`lbadm slot move needs one slot number from 0 to ${MAX_SLOTS - 1} (lbadm cluster status lists the slots as groups slot-N), not ${words.length === 1 ? 'none' : `"${words.slice(1).join(' ')}"`}`);
    }
    if (command === 'config' && sub !== 'rollback' && ETCD_FLAGS.some(([f]) => seen.has(f))) {
      throw new UsageError(`lbadm config ${sub} reads through the agent; the --etcd flags are for the commands that write the config (apply, config rollback, server, service)`);
    }
    if (command === 'etcd' && words.length > 1) throw new UsageError(`unexpected argument "${words[1]}" after lbadm etcd roles`);
    if (command === 'config' && sub !== 'rollback' && words.length > 1) {
      throw new UsageError(`unexpected argument "${words[1]}" after lbadm config ${sub}`);
    }
    if (manage) {
      const want = manage.words;
      if (words.length - 1 < want.length) throw new UsageError(`lbadm ${command} ${sub} needs ${want.join(' ')}${want[0] === 'SERVICE' ? ' (SERVICE: a service name or key; lbadm service list shows them)' : ''}`);
      if (words.length - 1 > want.length) throw new UsageError(`unexpected argument "${words[want.length + 1]}" after lbadm ${command} ${sub} ${want.join(' ')}`);
      const etcdFlags: readonly string[] = sub === 'list' ? [] : ETCD_FLAGS.map(([f]) => f);
      for (const name of seen.keys()) {
        if (FLAGS[name]!.commands !== undefined && !manage.flags.includes(name) && !etcdFlags.includes(name)) {
          throw new UsageError(`${name} is not a flag of "lbadm ${command} ${sub}"${manage.flags.length > 0 ? ` (its flags: ${manage.flags.join(', ')})` : ''}`);
        }
      }
      if (`${command} ${sub}` === 'service add') {
        const missing = ['--vip', '--port', '--mode'].filter((f) => !seen.has(f));
        if (missing.length > 0) throw new UsageError(`lbadm service add needs ${missing.join(', ')} (e.g. --vip 198.18.0.10 --port 80 --mode fullnat --local-addresses 198.18.2.10)`);
      }
      if (sub === 'edit' && !manage.flags.some((f) => f !== '--dry-run' && seen.has(f))) {
        throw new UsageError(`lbadm ${command} edit needs at least one of ${manage.flags.filter((f) => f !== '--dry-run').join(', ')}: what to change`);
      }
    } else if (!wantsRev && command !== 'slot' && words.length > 1) throw new UsageError(`unexpected argument "${words[1]}" after lbadm ${command} ${sub}`);
  }
  if (command === 'failover' && !seen.has('--vip-group')) throw new UsageError('lbadm failover needs --vip-group G (lbadm cluster status lists the vip groups)');
  if (command === 'drill' && seen.has('--vip-group') === seen.has('--slot')) {
    throw new UsageError('lbadm drill switchover needs --vip-group G or --slot N, one of them (lbadm cluster status lists the vip groups and slots)');
  }
  return invocation(command, seen, env, words);
}

function invocation(command: Command | 'help' | 'version', seen: ReadonlyMap<string, string | true>, env: Readonly<Record<string, string | undefined>>, args: readonly string[] = []): Invocation {
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
  const server = tcpServer(str, env, seen.has('--socket'));
  const writesConfig = (CONFIG_WRITERS as readonly string[]).includes(command) && !(command === 'config' && args[0] !== 'rollback') && args[0] !== 'list';
  const etcd = writesConfig ? etcdTarget(str, env) : undefined;
  const expect = str('--expect-revision');
  if (expect !== undefined && !/^\d{1,15}$/.test(expect)) throw new UsageError(`--expect-revision: "${expect}" is not a config revision (0 or more)`);
  const mode = str('--mode');
  if (mode !== undefined && !(FORWARDING_MODES as readonly string[]).includes(mode)) throw new UsageError(`--mode: "${mode}" is not one of ${FORWARDING_MODES.join(', ')}`);
  const kind = str('--kind');
  if (kind !== undefined && !(EVENT_KINDS as readonly string[]).includes(kind)) throw new UsageError(`--kind: "${kind}" is not one of ${EVENT_KINDS.join(', ')}`);
  const director = str('--director');
  if (director !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/.test(director)) {
    throw new UsageError(`--director: "${director}" is not a director id (letters, digits, ".", "_", "-"; lbadm cluster status lists them)`);
  }
  const limitText = str('--limit');
  const limit = limitText === undefined ? undefined : Number(limitText);
  if (limitText !== undefined && (!/^\d+$/.test(limitText) || limit! < 1 || limit! > MAX_EVENTS_LIMIT)) {
    throw new UsageError(`--limit: "${limitText}" is not a whole number from 1 to ${MAX_EVENTS_LIMIT}`);
  }
  const sinceText = str('--since');
  const since = sinceText === undefined ? undefined : parseSince(sinceText);
  return {
    command, socket, server, etcd, roles: command === 'etcd' ? rolesOf(str) : undefined, json: seen.has('--json'), file: str('--file'), dryRun: seen.has('--dry-run'),
    rate: seen.has('--rate'), intervalMs, service: str('--service'), watch: seen.has('--watch'), args,
    vipGroup: groupOf(command, args, str), probe: probeUrl(str('--probe')), to: str('--to'), expectRevision: expect === undefined ? undefined : Number(expect), mode,
    follow: seen.has('--follow'), since, director, kind, local: seen.has('--local'), limit,
    serverFields: serverFields(str), serviceFields: command === 'service' ? serviceFields(str, mode) : {}, names: seen.has('--names'),
  };
}

/** The election group a failover, slot move or drill names. */
function groupOf(command: Command | 'help' | 'version', args: readonly string[], str: (name: string) => string | undefined): string | undefined {
  if (command === 'failover') return str('--vip-group');
  if (command === 'slot') return slotGroup(Number(args[1]));
  if (command !== 'drill') return undefined;
  const slot = str('--slot');
  if (slot === undefined) return str('--vip-group');
  if (!/^\d{1,2}$/.test(slot) || Number(slot) >= MAX_SLOTS) {
    throw new UsageError(`--slot: "${slot}" is not a slot number from 0 to ${MAX_SLOTS - 1} (lbadm cluster status lists the slots as groups slot-N)`);
  }
  return slotGroup(Number(slot));
}

/** `--probe`: an http URL (lbadm requests it during a drill). */
function probeUrl(text: string | undefined): URL | undefined {
  if (text === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`--probe: "${text}" is not a URL; give one such as http://198.18.0.10/`);
  }
  if (url.protocol !== 'http:') throw new UsageError(`--probe: "${text}" is not an http:// URL (the probe speaks plain HTTP to the vip)`);
  return url;
}

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/** `--since`: `10m`, `2h`, `1h30m`, `90s`, `1d` (before now), or an RFC 3339 time with its offset. */
export function parseSince(text: string): Since {
  if (/^(\d+(ms|s|m|h|d))+$/.test(text)) {
    let agoMs = 0;
    for (const [, n, unit] of text.matchAll(/(\d+)(ms|s|m|h|d)/g)) agoMs += Number(n) * UNIT_MS[unit!]!;
    return { agoMs };
  }
  if (RFC3339.test(text)) {
    const unixMs = Date.parse(text);
    if (Number.isFinite(unixMs)) return { unixMs };
  }
  throw new UsageError(`--since: "${text}" is neither a duration before now (10m, 2h, 1h30m, 90s, 1d) nor an RFC 3339 time with its offset (2026-12-01T10:00:00Z, 2026-12-01T11:00:00+01:00)`);
}

/** `HOST:PORT` or `[IPV6]:PORT` (1 to 5 digits), split; undefined when it is not of that form. */
export function splitHostPort(text: string): { host: string; port: number } | undefined {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(text);
  return m ? { host: m[1] ?? m[2]!, port: Number(m[3]) } : undefined;
}

const TLS_FLAGS = [['--ca', 'LBADM_CA'], ['--cert', 'LBADM_CERT'], ['--key', 'LBADM_KEY']] as const;

/**
 * --server and its TLS files, flags before the environment. An explicit --socket wins over
 * LBADM_SERVER (a script that names the socket means it); with --server too, it is a mistake.
 */
function tcpServer(str: (name: string) => string | undefined, env: Readonly<Record<string, string | undefined>>, socketFlag: boolean): TcpServer | undefined {
  const flag = str('--server');
  if (flag !== undefined && socketFlag) throw new UsageError('--socket and --server name two ways to the agent; give one');
  const text = flag ?? (socketFlag ? undefined : env.LBADM_SERVER || undefined);
  if (text === undefined) {
    const stray = [...TLS_FLAGS.map(([f]) => f), '--server-name'].find((f) => str(f) !== undefined);
    if (stray !== undefined) throw new UsageError(`${stray} only makes sense with --server HOST:PORT`);
    return undefined;
  }
  const from = flag !== undefined ? '--server' : 'LBADM_SERVER';
  const hp = splitHostPort(text);
  if (hp === undefined || hp.port < 1 || hp.port > 65535) throw new UsageError(`${from}: "${text}" is not HOST:PORT (e.g. 198.18.3.1:7412, [fd00::1]:7412 or dir1.example.org:7412)`);
  const files: Record<string, string> = {};
  const missing: string[] = [];
  for (const [f, e] of TLS_FLAGS) {
    const v = str(f) ?? (env[e] || undefined);
    if (v === undefined) missing.push(`${f} (or ${e})`);
    else files[f] = v;
  }
  if (missing.length > 0) throw new UsageError(`${from} needs mutual TLS files: missing ${missing.join(', ')}`);
  return {
    address: hp.host, port: hp.port, ca: files['--ca']!, cert: files['--cert']!, key: files['--key']!,
    serverName: str('--server-name') ?? (env.LBADM_SERVER_NAME || undefined),
  };
}

const PREFIX = /^\/[A-Za-z0-9_.\/-]*[A-Za-z0-9_.-]$/;
const PREFIX_RULE = 'an etcd key prefix such as /lbd/prod (the directors\' agent.cluster.prefix)';

/**
 * --etcd and the operator's certificate, flags before the environment (LBADM_ETCD alone, set for a
 * workstation, turns every config write into a direct one). All or nothing: a half-given target is a mistake.
 */
function etcdTarget(str: (name: string) => string | undefined, env: Readonly<Record<string, string | undefined>>): EtcdTarget | undefined {
  const flag = str('--etcd');
  const text = flag ?? (env.LBADM_ETCD || undefined);
  if (text === undefined) {
    const stray = ETCD_FLAGS.slice(1).map(([f]) => f).find((f) => str(f) !== undefined);
    if (stray !== undefined) throw new UsageError(`${stray} only makes sense with --etcd URL (or LBADM_ETCD)`);
    return undefined;
  }
  const from = flag !== undefined ? '--etcd' : 'LBADM_ETCD';
  const endpoints = text.split(',').map((u) => u.trim()).filter((u) => u !== '');
  for (const u of endpoints) {
    let url: URL | undefined;
    try { url = new URL(u); } catch { url = undefined; }
    if (url === undefined || url.protocol !== 'https:' || url.port === '' || url.pathname !== '/') {
      throw new UsageError(`${from}: "${u}" is not an https:// etcd endpoint with its port (e.g. https://10.0.3.11:2379); an operator writes the config over TLS with its client certificate`);
    }
  }
  if (endpoints.length === 0) throw new UsageError(`${from}: give one or more etcd endpoints, comma-separated (e.g. https://10.0.3.11:2379,https://10.0.3.12:2379)`);
  const values: Record<string, string> = {};
  const missing: string[] = [];
  for (const [f, e] of ETCD_FLAGS.slice(1)) {
    const v = str(f) ?? (env[e] || undefined);
    if (v === undefined) missing.push(`${f} (or ${e})`);
    else values[f] = v;
  }
  if (missing.length > 0) throw new UsageError(`${from} needs the cluster prefix and the operator's etcd certificate: missing ${missing.join(', ')}`);
  const prefix = values['--etcd-prefix']!;
  if (!PREFIX.test(prefix)) throw new UsageError(`--etcd-prefix: "${prefix}" is not ${PREFIX_RULE}`);
  return { endpoints, prefix, ca: values['--etcd-ca']!, cert: values['--etcd-cert']!, key: values['--etcd-key']! };
}

const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

/** etcd roles: --etcd-prefix, --directors (at least one) and --operators (default: operator). */
function rolesOf(str: (name: string) => string | undefined): Invocation['roles'] {
  const prefix = str('--etcd-prefix');
  if (prefix === undefined) throw new UsageError(`lbadm etcd roles needs --etcd-prefix P: ${PREFIX_RULE}`);
  if (!PREFIX.test(prefix)) throw new UsageError(`--etcd-prefix: "${prefix}" is not ${PREFIX_RULE}`);
  const list = (flag: string, fallback: string | undefined): string[] => {
    const text = str(flag) ?? fallback;
    if (text === undefined) throw new UsageError(`lbadm etcd roles needs ${flag} ID,ID,...: the cluster's director ids (each director's agent.cluster.director, the common name of its etcd certificate)`);
    const names = text.split(',').map((x) => x.trim());
    const bad = names.find((n) => !ID.test(n));
    if (bad !== undefined) throw new UsageError(`${flag}: "${bad}" is not a name etcd knows a certificate by here (1 to 63 letters, digits, ".", "_", "-", starting with a letter or digit)`);
    const dup = names.find((n, i) => names.indexOf(n) !== i);
    if (dup !== undefined) throw new UsageError(`${flag}: "${dup}" is given twice`);
    return names;
  };
  const directors = list('--directors', undefined);
  const operators = list('--operators', 'operator');
  const both = operators.find((o) => directors.includes(o));
  if (both !== undefined) throw new UsageError(`--operators: "${both}" is also a director: a director's certificate must not write the config; give the operator another name`);
  if (operators.includes('root') || directors.includes('root')) throw new UsageError('--directors, --operators: "root" is etcd\'s own administrator; give another name');
  return { prefix, directors, operators };
}

function wholeNumber(flag: string, text: string | undefined, min: number, max: number, what: string): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!/^\d{1,6}$/.test(text) || n < min || n > max) throw new UsageError(`${flag}: "${text}" is not ${what} (a whole number from ${min} to ${max}); give a whole number from ${min} to ${max}`);
  return n;
}

function serverFields(str: (name: string) => string | undefined): ServerFields {
  const weight = wholeNumber('--weight', str('--weight'), 0, MAX_WEIGHT, 'a weight');
  const healthPort = wholeNumber('--health-port', str('--health-port'), 1, 65535, 'a port');
  return { ...(weight === undefined ? {} : { weight }), ...(healthPort === undefined ? {} : { healthPort }) };
}

function oneOf(flag: string, text: string | undefined, allowed: readonly string[], what: string): string | undefined {
  if (text !== undefined && !allowed.includes(text)) throw new UsageError(`${flag}: "${text}" is not a supported ${what}; use one of: ${allowed.join(', ')}`);
  return text;
}

function serviceFields(str: (name: string) => string | undefined, mode: string | undefined): ServiceFields {
  const out: { -readonly [K in keyof ServiceFields]: ServiceFields[K] } = {};
  const vip = str('--vip');
  if (vip !== undefined) out.vip = vip;
  const port = wholeNumber('--port', str('--port'), 1, 65535, 'a port');
  if (port !== undefined) out.port = port;
  const protocol = oneOf('--protocol', str('--protocol'), PROTOCOLS, 'protocol');
  if (protocol !== undefined) out.protocol = protocol;
  if (mode !== undefined) out.mode = mode;
  const scheduler = oneOf('--scheduler', str('--scheduler'), SCHEDULERS, 'scheduler');
  if (scheduler !== undefined) out.scheduler = scheduler;
  const lips = str('--local-addresses');
  if (lips !== undefined) out.localAddresses = lips === 'none' ? null : lips.split(',').map((x) => x.trim()).filter((x) => x !== '');
  const group = str('--vip-group');
  if (group !== undefined) out.vipGroup = group;
  const proxy = oneOf('--syn-proxy', str('--syn-proxy'), ['on', 'off'], 'setting');
  if (proxy !== undefined) out.synProxy = proxy === 'on';
  const limit = str('--connection-limit');
  if (limit !== undefined && limit !== 'none' && !(/^\d{1,10}$/.test(limit) && Number(limit) >= 1 && Number(limit) <= MAX_CONNECTION_LIMIT)) {
    throw new UsageError(`--connection-limit: "${limit}" is not a connection limit (a whole number from 1 to ${MAX_CONNECTION_LIMIT}); give the most connections the service may hold on a director, or none to remove the limit`);
  }
  if (limit !== undefined) out.connectionLimit = limit === 'none' ? null : Number(limit);
  return out;
}
