import { BackgroundProcess, runCommand, type ExecOptions, type ExecResult, type SpawnOptions } from './exec.js';

/**
 * Network-namespace topologies for privileged tests, benchmarks and the lab. A `Topology` owns every
 * namespace whose name starts with its prefix and every process it spawned; `destroy()` removes them all.
 *
 * Not for production: the agent never creates namespaces. Everything here shells out to iproute2, because
 * Node cannot enter a namespace itself.
 *
 * Prefixes keep concurrent users apart: tests use `runPrefix('lbdt')` (`lbdt<pid>-`), benchmarks
 * `runPrefix('lbdb')`, the lab the fixed `lbd-`. Interface names are per namespace, so they never collide.
 */

/** Interface name of the bridge inside a switch namespace. */
export const BRIDGE = 'br0';
/** Grace between SIGTERM and SIGKILL when tearing down. */
const STOP_GRACE_MS = 2000;
const PREFIX_PATTERN = /^[A-Za-z0-9_.-]{1,40}$/;
const HOST_PATTERN = /^[A-Za-z0-9_-]{1,12}$/;

export interface HostOptions {
  /** Turn on IPv4 and IPv6 forwarding (a router or director). */
  readonly forwarding?: boolean;
}

/** One end of a veth link. */
export interface LinkEnd {
  readonly host: string;
  readonly ifname: string;
}

export class Topology {
  /** Hosts whose namespace may exist (recorded before creation, so a half-built topology is torn down too). */
  private readonly hosts = new Set<string>();
  private readonly switches = new Set<string>();
  private readonly processes = new Set<BackgroundProcess>();

  constructor(readonly prefix: string) {
    if (!PREFIX_PATTERN.test(prefix)) throw new Error(`namespace prefix ${JSON.stringify(prefix)} must be 1-40 letters, digits, "_", "." or "-"`);
  }

  /** The namespace name of `host`. */
  ns(host: string): string {
    return `${this.prefix}${host}`;
  }

  get hostNames(): string[] {
    return [...this.hosts];
  }

  /** Creates a namespace with loopback up. */
  async addHost(host: string, opts: HostOptions = {}): Promise<void> {
    if (!HOST_PATTERN.test(host)) throw new Error(`host name ${JSON.stringify(host)} must be 1-12 letters, digits, "_" or "-" (it names a switch port too)`);
    if (this.hosts.has(host)) throw new Error(`host ${host} already exists in topology ${this.prefix}`);
    this.hosts.add(host);
    await runCommand('ip', ['netns', 'add', this.ns(host)]);
    await this.ip(host, 'link', 'set', 'lo', 'up');
    // No duplicate address detection on interfaces created from now on: while a link-local address is
    // still tentative (1-2 s) a router cannot send neighbour solicitations for forwarded packets, so the
    // first IPv6 connection through a fresh director would stall for seconds.
    await this.sysctl(host, 'net.ipv6.conf.default.accept_dad', '0');
    await this.sysctl(host, 'net.ipv6.conf.all.accept_dad', '0');
    if (opts.forwarding) await this.setForwarding(host, true);
  }

  /**
   * Records a host whose namespace an earlier process built (the lab bin acting on a running lab), so this
   * topology may address it and `destroy()` removes it. Rejects when the namespace does not exist.
   */
  async adoptHost(host: string, opts: { isSwitch?: boolean } = {}): Promise<void> {
    if (!(await listNamespaces()).includes(this.ns(host))) throw new Error(`namespace ${this.ns(host)} does not exist`);
    this.hosts.add(host);
    if (opts.isSwitch) this.switches.add(host);
  }

  /** Creates a namespace holding one bridge (`br0`): an L2 segment hosts attach to with `attach()`. */
  async addSwitch(name: string): Promise<void> {
    await this.addHost(name);
    this.switches.add(name);
    await this.ip(name, 'link', 'add', BRIDGE, 'type', 'bridge');
    await this.ip(name, 'link', 'set', BRIDGE, 'up');
  }

  /** A veth pair between two hosts, created directly inside both namespaces and brought up. */
  async link(a: LinkEnd, b: LinkEnd): Promise<void> {
    // Created from inside a's namespace with the peer placed in b's: the pair never exists in the root
    // namespace, so concurrent topologies cannot collide on interface names there.
    await this.ip(a.host, 'link', 'add', a.ifname, 'type', 'veth', 'peer', 'name', b.ifname, 'netns', this.ns(b.host));
    await this.setLink(a.host, a.ifname, true);
    await this.setLink(b.host, b.ifname, true);
  }

  /** Plugs `host` into switch `sw`: a veth `host:ifname` <-> `sw:p-<host>`, the latter a bridge port. */
  async attach(host: string, sw: string, ifname = 'eth0'): Promise<void> {
    if (!this.switches.has(sw)) throw new Error(`${sw} is not a switch of topology ${this.prefix}`);
    const port = `p-${host}`;
    await this.link({ host, ifname }, { host: sw, ifname: port });
    await this.ip(sw, 'link', 'set', port, 'master', BRIDGE);
  }

  /**
   * Adds `address/len`; IPv6 addresses skip duplicate address detection so they work at once.
   * `serviceAddress`: a vip or local address the host receives on but must not pick as the source of its
   * own traffic (health checks, ICMP errors). IPv6 would prefer such a /128 over the interface's /64
   * address, so it is added deprecated (`preferred_lft 0`: still answered and routable, never chosen).
   * IPv4 needs nothing: a /32 never becomes a route's preferred source.
   */
  async addAddress(host: string, ifname: string, cidr: string, opts: { serviceAddress?: boolean } = {}): Promise<void> {
    const extra = cidr.includes(':') ? ['nodad', ...(opts.serviceAddress ? ['preferred_lft', '0'] : [])] : [];
    await this.ip(host, 'addr', 'add', cidr, 'dev', ifname, ...extra);
  }

  /**
   * Like addAddress, but a no-op when the address is already there: restoring a link puts back what a
   * link-down removed (Linux drops a link's IPv6 addresses when it is set down) without failing on the rest.
   */
  async ensureAddress(host: string, ifname: string, cidr: string, opts: { serviceAddress?: boolean } = {}): Promise<void> {
    const extra = cidr.includes(':') ? ['nodad', ...(opts.serviceAddress ? ['preferred_lft', '0'] : [])] : [];
    await this.ip(host, 'addr', 'replace', cidr, 'dev', ifname, ...extra);
  }

  async removeAddress(host: string, ifname: string, cidr: string): Promise<void> {
    await this.ip(host, 'addr', 'del', cidr, 'dev', ifname);
  }

  /** Adds or replaces a route to `dest` (a prefix or `default`) via a gateway. */
  async setRoute(host: string, dest: string, via: string): Promise<void> {
    await this.ip(host, ...familyFlag(via), 'route', 'replace', dest, 'via', via);
  }

  /** Adds or replaces the default route of the gateway's family. */
  async setDefaultRoute(host: string, via: string): Promise<void> {
    await this.setRoute(host, 'default', via);
  }

  async setLink(host: string, ifname: string, up: boolean): Promise<void> {
    await this.ip(host, 'link', 'set', ifname, up ? 'up' : 'down');
  }

  /** The MAC address of `ifname` in the host's namespace, lower case. */
  async mac(host: string, ifname: string): Promise<string> {
    const { stdout } = await this.ip(host, '-j', 'link', 'show', 'dev', ifname);
    const [link] = JSON.parse(stdout) as { address?: string }[];
    if (link?.address === undefined) throw new Error(`${this.ns(host)}: ${ifname} has no MAC address`);
    return link.address.toLowerCase();
  }

  async setForwarding(host: string, on: boolean): Promise<void> {
    await this.sysctl(host, 'net.ipv4.ip_forward', on ? '1' : '0');
    await this.sysctl(host, 'net.ipv6.conf.all.forwarding', on ? '1' : '0');
  }

  /**
   * Stops (SIGSTOP) every process in the host's namespace at one instant, and returns that instant
   * (Date.now()). `alongside` starts just before the stop and is not waited for here: a
   * command it spawns acts a few ms after the stop (the time to exec), and, spawned after the pids were
   * read, it is not among them.
   */
  async freeze<T>(host: string, alongside: () => T): Promise<{ stoppedAt: number; alongside: T }> {
    const pids = await namespacePids(this.ns(this.known(host)));
    const started = alongside();
    signalAll(pids, 'SIGSTOP');
    return { stoppedAt: Date.now(), alongside: started };
  }

  /**
   * Sends `sig` to every process in the host's namespace (spawned here or not) and, for SIGKILL, waits
   * (bounded by `timeoutMs`) until none is left. Returns the pids signalled.
   */
  async killAll(host: string, sig: NodeJS.Signals = 'SIGKILL', timeoutMs = STOP_GRACE_MS): Promise<number[]> {
    const ns = this.ns(this.known(host));
    const pids = await namespacePids(ns);
    signalAll(pids, sig);
    if (sig !== 'SIGKILL') return pids;
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline && (await namespacePids(ns)).some((p) => pids.includes(p))) await delay(10);
    return pids;
  }

  /** Writes a sysctl inside the host's namespace (`net.*` keys are per namespace). */
  async sysctl(host: string, key: string, value: string): Promise<void> {
    if (!/^[a-z0-9_]+(\.[A-Za-z0-9_-]+)+$/.test(key)) throw new Error(`sysctl key ${JSON.stringify(key)} is not dotted like net.ipv4.ip_forward`);
    // Through sh rather than sysctl(8): procps is missing from minimal images; /proc/sys is always there.
    await this.exec(host, 'sh', ['-c', 'printf "%s\\n" "$1" > "$2"', 'sh', value, `/proc/sys/${key.replaceAll('.', '/')}`]);
  }

  /** `ip <args>` inside the host's namespace. */
  ip(host: string, ...args: string[]): Promise<ExecResult> {
    return runCommand('ip', ['-n', this.ns(this.known(host)), ...args]);
  }

  /** Runs a command inside the host's namespace; rejects with its stderr on non-zero unless `allowFailure`. */
  exec(host: string, cmd: string, args: readonly string[] = [], opts: ExecOptions = {}): Promise<ExecResult> {
    return runCommand('ip', ['netns', 'exec', this.ns(this.known(host)), cmd, ...args], opts);
  }

  /** Starts a background process inside the host's namespace; `destroy()` stops it if the caller did not. */
  spawn(host: string, cmd: string, args: readonly string[] = [], opts: SpawnOptions & { label?: string } = {}): BackgroundProcess {
    const p = new BackgroundProcess(opts.label ?? `${host}:${cmd}`, 'ip', ['netns', 'exec', this.ns(this.known(host)), cmd, ...args], opts);
    this.processes.add(p);
    void p.exited.then(() => this.processes.delete(p));
    return p;
  }

  /**
   * Stops every spawned process, kills anything else still running in the namespaces, and deletes them.
   * Idempotent, and safe after a half-finished build: missing namespaces are skipped.
   */
  async destroy(): Promise<void> {
    await Promise.all([...this.processes].map((p) => p.stop(STOP_GRACE_MS)));
    const names = [...this.hosts].map((h) => this.ns(h));
    await Promise.all(names.map((ns) => deleteNamespace(ns)));
    this.hosts.clear();
    this.switches.clear();
  }

  private known(host: string): string {
    if (!this.hosts.has(host)) throw new Error(`host ${host} is not part of topology ${this.prefix} (hosts: ${[...this.hosts].join(', ') || 'none'})`);
    return host;
  }
}

function familyFlag(address: string): string[] {
  return address.includes(':') ? ['-6'] : ['-4'];
}

/** Names of all namespaces (`ip netns list`). */
export async function listNamespaces(): Promise<string[]> {
  const { stdout } = await runCommand('ip', ['netns', 'list']);
  return stdout.split('\n').map((l) => l.trim().split(/\s+/)[0] ?? '').filter((n) => n !== '');
}

/** Pids of the processes inside a namespace (empty if it does not exist). */
export async function namespacePids(ns: string): Promise<number[]> {
  const { stdout } = await runCommand('ip', ['netns', 'pids', ns], { allowFailure: true });
  return stdout.split('\n').map((l) => Number(l.trim())).filter((n) => Number.isInteger(n) && n > 0);
}

/**
 * Kills whatever runs in `ns` (SIGTERM, SIGKILL after a grace) and deletes it. A namespace is only really
 * gone once its last process has exited, which is why the processes go first.
 */
export async function deleteNamespace(ns: string, graceMs = STOP_GRACE_MS): Promise<void> {
  const pids = await namespacePids(ns);
  if (pids.length > 0) {
    signalAll(pids, 'SIGTERM');
    const deadline = Date.now() + graceMs;
    while (Date.now() < deadline && (await namespacePids(ns)).length > 0) await delay(50);
    signalAll(await namespacePids(ns), 'SIGKILL');
  }
  const r = await runCommand('ip', ['netns', 'del', ns], { allowFailure: true });
  if (r.code !== 0 && !/No such file/.test(r.stderr)) {
    throw new Error(`ip netns del ${ns}: ${r.stderr.trim()}`);
  }
}

/** Deletes every namespace starting with `prefix` (left over by a crashed run); returns their names. */
export async function removeStale(prefix: string): Promise<string[]> {
  if (!PREFIX_PATTERN.test(prefix)) throw new Error(`namespace prefix ${JSON.stringify(prefix)} is not valid`);
  const stale = (await listNamespaces()).filter((n) => n.startsWith(prefix));
  await Promise.all(stale.map((ns) => deleteNamespace(ns)));
  return stale;
}

/**
 * A prefix unique to this process: `<kind><pid>-`, e.g. `lbdt4242-` for tests, `lbdb4242-` for benchmarks.
 * `tag` separates several topologies of one process.
 */
export function runPrefix(kind = 'lbdt', tag = ''): string {
  // The tag starts with a letter so it cannot run into the pid's digits.
  if (!/^[a-z]+$/.test(kind) || !/^([a-z][a-z0-9]*)?$/.test(tag)) throw new Error('runPrefix: kind is lower-case letters; tag is empty or a letter then letters and digits');
  return `${kind}${process.pid}${tag}-`;
}

/**
 * Deletes namespaces made by `runPrefix(kind)` in processes that no longer exist (a crashed earlier run),
 * leaving those of runs still going. Returns their names.
 */
export async function removeOrphans(kind = 'lbdt'): Promise<string[]> {
  if (!/^[a-z]+$/.test(kind)) throw new Error('removeOrphans: kind is lower-case letters');
  const pattern = new RegExp(`^${kind}(\\d+)([a-z][a-z0-9]*)?-`);
  const orphans = (await listNamespaces()).filter((n) => {
    const m = pattern.exec(n);
    return m !== null && !processAlive(Number(m[1]));
  });
  await Promise.all(orphans.map((ns) => deleteNamespace(ns)));
  return orphans;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function signalAll(pids: readonly number[], sig: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, sig);
    } catch {
      // Already exited.
    }
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
