import { CLIENT_NET, LOCAL_ADDRESSES, SERVER_NET, VIPS, realServer, setUpDrRealServer, type RealServerHost } from './director-topology.js';
import { runCommand } from './exec.js';
import { Topology } from './netns.js';

/**
 * The active/standby cluster topology shared by privileged tests, drills, benchmarks and the lab: two
 * directors behind a router on one front segment, real servers on a server segment, three etcd members on
 * a management segment, and a direct peer link between the directors.
 *
 *   client ──veth── router ──── swf (front switch) ─────┬───────────────────┐
 *   198.18.2.2      eth0 198.18.2.1                      │ eth0              │ eth0
 *   fd00:0:0:4::2   eth1 198.18.0.254, fd00:0:0:1::fe    dir1 ───eth3─────── dir2     peer link 198.18.4.0/30
 *                                                        │ eth1 │ eth2       │ eth1 │ eth2
 *                                  sw (server switch) ───┴──────┼────────────┘      │
 *                                  rs1..rsN                     └── swm (mgmt switch) ┴── etcd1..etcd3, ops
 *
 *   dirK  eth0 198.18.0.K/24  fd00:0:0:1::K/64    default via the router (198.18.0.254 / fd00:0:0:1::fe)
 *         eth1 198.19.1.K/24  fd00:0:0:2::K/64
 *         eth2 198.18.3.K/24  fd00:0:0:3::K/64
 *         eth3 198.18.4.K/30  fd00:0:0:5::K/64    (direct veth dir1 <-> dir2: heartbeats, connection sync)
 *   rsK   eth0 198.19.1.(10+K)/24, fd00:0:0:2::(10+K)/64, default via the floating gateway 198.19.1.250 / fd00:0:0:2::fa;
 *         lo 198.18.0.13/32 (the dr vip; no ARP for it), and what it sends from that vip goes to the router's
 *         leg on sw (198.19.1.254), past the directors, as a dr site's replies do
 *   router eth2 198.19.1.254/24 on sw: the dr vip's way back to the client
 *   etcdK eth0 198.18.3.(10+K)/24, fd00:0:0:3::(10+K)/64, client :2379, peer :2380
 *   ops   eth0 198.18.3.100/24, fd00:0:0:3::64/64 on swm: an operator's box (lbadm --server, curl, a browser)
 *
 * No director holds a vip, local address or the real servers' gateway when the topology is built: those
 * float (FLOATING_ADDRESSES) and the agent of the elected director claims them. Real servers route via the
 * floating gateway so nat-mode replies go through whichever director holds it; fullnat needs no route
 * because the local addresses are on-link.
 *
 * Failure drills (`cut`, `restore`, `killBox`, `reviveBox`) read the link state they need from the kernel,
 * not from memory, so the lab bin (a new process per command) and tests share them.
 */

export type DirectorName = 'dir1' | 'dir2';
/** `etcd`: director <-> etcd (its eth2); `peer`: director <-> director (eth3); `front`: director <-> router (eth0). */
export type CutTarget = 'etcd' | 'peer' | 'front';

export const DIRECTOR_NAMES: readonly DirectorName[] = ['dir1', 'dir2'];
export const CUT_TARGETS: readonly CutTarget[] = ['etcd', 'peer', 'front'];
export const ETCD_MEMBERS = 3;

export const CLUSTER = {
  hosts: { client: 'client', router: 'router', frontSwitch: 'swf', serverSwitch: 'sw', mgmtSwitch: 'swm' },
  nets: {
    client: { ipv4: '198.18.2.0/24', ipv6: 'fd00:0:0:4::/64' },
    /** Where the vips float (the one-director topology's client net). */
    front: CLIENT_NET,
    server: SERVER_NET,
    mgmt: { ipv4: '198.18.3.0/24', ipv6: 'fd00:0:0:3::/64' },
    peer: { ipv4: '198.18.4.0/30', ipv6: 'fd00:0:0:5::/64' },
  },
  client: { host: 'client', ifname: 'eth0', ipv4: '198.18.2.2', ipv6: 'fd00:0:0:4::2' },
  router: {
    host: 'router',
    clientIf: 'eth0', clientIpv4: '198.18.2.1', clientIpv6: 'fd00:0:0:4::1',
    frontIf: 'eth1', frontIpv4: '198.18.0.254', frontIpv6: 'fd00:0:0:1::fe',
    /** On the server switch: dr replies (from the dr vip, straight from a real server) reach the client through it. */
    serverIf: 'eth2', serverIpv4: '198.19.1.254',
  },
  /**
   * The vip of the lab's dr service: it floats with the vip group like the others, and every real server
   * holds it on its loopback without answering ARP for it (what direct routing needs of a real server).
   */
  drVip: { ipv4: '198.18.0.13' },
  /** The real servers' routing table for what they send from the dr vip: a default route via the router's leg on sw. */
  drReplyTable: '100',
  /** Director interface names, the same on both directors. */
  interfaces: { front: 'eth0', server: 'eth1', mgmt: 'eth2', peer: 'eth3' },
  /** Floating: claimed on `front` by the active director. */
  vips: VIPS,
  /** Floating: claimed on `server` by the active director (fullnat SNAT pool). */
  localAddresses: LOCAL_ADDRESSES,
  /** Floating: the real servers' default gateway, claimed on `server` by the active director (nat mode). */
  serverGateway: { ipv4: '198.19.1.250', ipv6: 'fd00:0:0:2::fa' },
  etcdPorts: { client: 2379, peer: 2380 },
  /**
   * An operator's machine on the management network (swm), the one segment every director's admin
   * listeners (agent.admin, on the director's eth2 address) are reachable from and clients are not: where
   * lbadm --server, curl, a browser or Prometheus run in tests and the lab. The client's side cannot reach
   * swm (the router knows no route to it), as production keeps the admin API off the service network.
   */
  ops: { host: 'ops', ifname: 'eth0', ipv4: '198.18.3.100', ipv6: 'fd00:0:0:3::64' },
} as const;

export interface ClusterDirector {
  readonly host: DirectorName;
  readonly frontIf: string;
  readonly frontIpv4: string;
  readonly frontIpv6: string;
  readonly serverIf: string;
  readonly serverIpv4: string;
  readonly serverIpv6: string;
  readonly mgmtIf: string;
  readonly mgmtIpv4: string;
  readonly mgmtIpv6: string;
  readonly peerIf: string;
  readonly peerIpv4: string;
  readonly peerIpv6: string;
}

/** Host name and static addresses of director `k` (1 or 2, or its name). */
export function clusterDirector(k: 1 | 2 | DirectorName): ClusterDirector {
  const n = typeof k === 'number' ? k : DIRECTOR_NAMES.indexOf(k) + 1;
  if (n !== 1 && n !== 2) throw new Error(`director ${String(k)} is not dir1 or dir2`);
  const i = CLUSTER.interfaces;
  return {
    host: `dir${n}`,
    frontIf: i.front, frontIpv4: `198.18.0.${n}`, frontIpv6: `fd00:0:0:1::${n}`,
    serverIf: i.server, serverIpv4: `198.19.1.${n}`, serverIpv6: `fd00:0:0:2::${n}`,
    mgmtIf: i.mgmt, mgmtIpv4: `198.18.3.${n}`, mgmtIpv6: `fd00:0:0:3::${n}`,
    peerIf: i.peer, peerIpv4: `198.18.4.${n}`, peerIpv6: `fd00:0:0:5::${n}`,
  };
}

export interface EtcdMember {
  /** 1-based member number. */
  readonly k: number;
  /** Host (namespace) name and etcd member name: `etcd1`. */
  readonly host: string;
  readonly ipv4: string;
  readonly ipv6: string;
  readonly clientUrl: string;
  readonly peerUrl: string;
}

/** Etcd member `k` (1..3): etcd1 = 198.18.3.11, client http://198.18.3.11:2379, peer http://198.18.3.11:2380. */
export function etcdMember(k: number): EtcdMember {
  if (!Number.isInteger(k) || k < 1 || k > ETCD_MEMBERS) throw new Error(`etcd member ${k} is not in 1..${ETCD_MEMBERS}`);
  const ipv4 = `198.18.3.${10 + k}`;
  return {
    k, host: `etcd${k}`, ipv4, ipv6: `fd00:0:0:3::${10 + k}`,
    clientUrl: `http://${ipv4}:${CLUSTER.etcdPorts.client}`, peerUrl: `http://${ipv4}:${CLUSTER.etcdPorts.peer}`,
  };
}

/** The client URLs of all members, in member order. */
export const ETCD_ENDPOINTS: readonly string[] = Array.from({ length: ETCD_MEMBERS }, (_, i) => etcdMember(i + 1).clientUrl);

export interface FloatingAddress {
  readonly ifname: string;
  /** With its prefix length: /32 or /128. */
  readonly cidr: string;
}

/** Every address that floats between the directors, on the interface it belongs to. */
export const FLOATING_ADDRESSES: readonly FloatingAddress[] = [
  ...[VIPS.ipv4, VIPS.ipv4Nat, CLUSTER.drVip.ipv4].map((a) => ({ ifname: CLUSTER.interfaces.front, cidr: `${a}/32` })),
  { ifname: CLUSTER.interfaces.front, cidr: `${VIPS.ipv6}/128` },
  ...[...LOCAL_ADDRESSES.ipv4, CLUSTER.serverGateway.ipv4].map((a) => ({ ifname: CLUSTER.interfaces.server, cidr: `${a}/32` })),
  ...[...LOCAL_ADDRESSES.ipv6, CLUSTER.serverGateway.ipv6].map((a) => ({ ifname: CLUSTER.interfaces.server, cidr: `${a}/128` })),
];

export interface ClusterTopologyOptions {
  /** Namespace prefix: `runPrefix('lbdt')` in tests, `lbd-` in the lab. */
  readonly prefix: string;
  /** Number of real servers (default 3). */
  readonly realServers?: number;
}

export interface ClusterTopology {
  readonly topology: Topology;
  readonly directors: readonly ClusterDirector[];
  readonly realServers: readonly RealServerHost[];
  readonly etcdMembers: readonly EtcdMember[];
  /** Cuts one of the director's connections (see CutTarget). Idempotent. */
  cut(director: DirectorName, what: CutTarget): Promise<void>;
  /** Undoes `cut`: links up again, addresses the link-down removed put back. Idempotent. */
  restore(director: DirectorName, what: CutTarget): Promise<void>;
  /**
   * The box dies: every process in it stopped and its front link down at once, then its other links down
   * and its processes SIGKILLed. Returns the instant it stopped (Date.now()): the failure, as a power loss
   * would be. Idempotent.
   */
  killBox(director: DirectorName): Promise<number>;
  /** The box comes back as after a reboot: links up, static addresses and routes, no floating address. */
  reviveBox(director: DirectorName): Promise<void>;
  /** Whether `host` has `address` on `ifname` and that link is up with carrier. */
  holdsAddress(host: string, ifname: string, address: string): Promise<boolean>;
}

/** Bound on each drill command: a drill must never hang on a stuck `ip`. */
const DRILL_TIMEOUT_MS = 5000;

/**
 * Builds the cluster topology. On failure it removes what it built and rethrows, so callers only need
 * `topology.destroy()` for a topology they received.
 */
export async function clusterTopology(opts: ClusterTopologyOptions): Promise<ClusterTopology> {
  const realServers = realServerList(opts.realServers);
  const topology = new Topology(opts.prefix);
  try {
    const h = CLUSTER.hosts;
    await settleAll([h.frontSwitch, h.serverSwitch, h.mgmtSwitch].map((sw) => topology.addSwitch(sw)));
    await settleAll([
      buildClientAndRouter(topology),
      buildDirectors(topology),
      ...realServers.map((rs) => buildRealServer(topology, rs)),
      ...etcdMembers().map((m) => buildEtcdHost(topology, m)),
      buildOpsHost(topology),
    ]);
  } catch (e) {
    await topology.destroy().catch(() => undefined);
    throw e;
  }
  return clusterOf(topology, realServers);
}

/**
 * The drills and addresses of a cluster topology an earlier process built with the same prefix (the lab
 * bin acting on the running lab). Rejects when one of its namespaces is missing.
 */
export async function openClusterTopology(opts: ClusterTopologyOptions): Promise<ClusterTopology> {
  const realServers = realServerList(opts.realServers);
  const topology = new Topology(opts.prefix);
  const h = CLUSTER.hosts;
  for (const sw of [h.frontSwitch, h.serverSwitch, h.mgmtSwitch]) await topology.adoptHost(sw, { isSwitch: true });
  for (const host of [h.client, h.router, ...DIRECTOR_NAMES, ...realServers.map((r) => r.host), ...etcdMembers().map((m) => m.host), CLUSTER.ops.host]) {
    await topology.adoptHost(host);
  }
  return clusterOf(topology, realServers);
}

/** Every host (namespace) name of the cluster topology with `realServers` real servers, switches included. */
export function clusterHostNames(realServers = 3): string[] {
  const h = CLUSTER.hosts;
  return [h.client, h.router, h.frontSwitch, ...DIRECTOR_NAMES, h.serverSwitch, h.mgmtSwitch,
    ...realServerList(realServers).map((r) => r.host), ...etcdMembers().map((m) => m.host), CLUSTER.ops.host];
}

function realServerList(count = 3): RealServerHost[] {
  return Array.from({ length: count }, (_, i) => realServer(i + 1));
}

function etcdMembers(): EtcdMember[] {
  return Array.from({ length: ETCD_MEMBERS }, (_, i) => etcdMember(i + 1));
}

function clusterOf(topology: Topology, realServers: readonly RealServerHost[]): ClusterTopology {
  return {
    topology,
    directors: DIRECTOR_NAMES.map(clusterDirector),
    realServers,
    etcdMembers: etcdMembers(),
    cut: (d, what) => setCut(topology, d, what, true),
    restore: (d, what) => setCut(topology, d, what, false),
    killBox: (d) => killBox(topology, d),
    reviveBox: (d) => reviveBox(topology, d),
    holdsAddress: (host, ifname, address) => holdsAddress(topology, host, ifname, address),
  };
}

// ---- building ------------------------------------------------------------------------------------

async function buildClientAndRouter(t: Topology): Promise<void> {
  const { client: c, router: r, hosts } = CLUSTER;
  await Promise.all([t.addHost(c.host), t.addHost(r.host, { forwarding: true })]);
  await t.link({ host: c.host, ifname: c.ifname }, { host: r.host, ifname: r.clientIf });
  await t.attach(r.host, hosts.frontSwitch, r.frontIf);
  await addAddresses(t, c.host, c.ifname, [`${c.ipv4}/24`, `${c.ipv6}/64`]);
  await t.setDefaultRoute(c.host, r.clientIpv4);
  await t.setDefaultRoute(c.host, r.clientIpv6);
  await addAddresses(t, r.host, r.clientIf, [`${r.clientIpv4}/24`, `${r.clientIpv6}/64`]);
  await addAddresses(t, r.host, r.frontIf, [`${r.frontIpv4}/24`, `${r.frontIpv6}/64`]);
  await t.attach(r.host, hosts.serverSwitch, r.serverIf);
  await addAddresses(t, r.host, r.serverIf, [`${r.serverIpv4}/24`]);
  // dr replies come in on eth2 from the dr vip, which the router reaches through the front: not a spoof.
  for (const scope of ['all', r.serverIf]) await t.sysctl(r.host, `net.ipv4.conf.${scope}.rp_filter`, '0');
}

/**
 * Sysctls an LVS pair needs when both directors sit on the same L2 segments (swf and sw) and addresses
 * float between them. Linux's weak host model would otherwise answer ARP for any local address on any
 * interface and pick any local address as an ARP sender, so a director could capture traffic for an
 * address it holds on another interface, or (worse) teach the router a floating address's MAC merely by
 * asking about someone else.
 */
const DIRECTOR_SYSCTLS: readonly (readonly [key: string, value: string])[] = [
  // Answer ARP only for addresses configured on the interface the request arrived on.
  ['net.ipv4.conf.all.arp_ignore', '1'],
  // In ARP requests use a sender address of the outgoing interface's subnet, never a vip or local address.
  ['net.ipv4.conf.all.arp_announce', '2'],
  // Loose reverse-path filtering: after a failover, synced or nat-mode connections arrive on paths that a strict
  // filter (the reply route of the source would leave by another interface) would drop.
  ['net.ipv4.conf.all.rp_filter', '2'],
  ['net.ipv4.conf.default.rp_filter', '2'],
];

async function buildDirectors(t: Topology): Promise<void> {
  const [d1, d2] = DIRECTOR_NAMES.map(clusterDirector) as [ClusterDirector, ClusterDirector];
  await Promise.all([d1, d2].map((d) => t.addHost(d.host, { forwarding: true })));
  await t.link({ host: d1.host, ifname: d1.peerIf }, { host: d2.host, ifname: d2.peerIf });
  await settleAll([d1, d2].map(async (d) => {
    for (const [key, value] of DIRECTOR_SYSCTLS) await t.sysctl(d.host, key, value);
    await t.attach(d.host, CLUSTER.hosts.frontSwitch, d.frontIf);
    await t.attach(d.host, CLUSTER.hosts.serverSwitch, d.serverIf);
    await t.attach(d.host, CLUSTER.hosts.mgmtSwitch, d.mgmtIf);
    await applyStatic(t, d);
  }));
}

/** A director's static addresses, per interface (everything but the floating ones). */
function staticAddresses(d: ClusterDirector): readonly FloatingAddress[] {
  return [
    [d.frontIf, `${d.frontIpv4}/24`], [d.frontIf, `${d.frontIpv6}/64`],
    [d.serverIf, `${d.serverIpv4}/24`], [d.serverIf, `${d.serverIpv6}/64`],
    [d.mgmtIf, `${d.mgmtIpv4}/24`], [d.mgmtIf, `${d.mgmtIpv6}/64`],
    [d.peerIf, `${d.peerIpv4}/30`], [d.peerIf, `${d.peerIpv6}/64`],
  ].map(([ifname, cidr]) => ({ ifname: ifname!, cidr: cidr! }));
}

/**
 * Puts a director's static addresses and default routes in place, idempotently. Used to build and to
 * restore: setting a link down makes Linux drop its IPv6 addresses (net.ipv6.conf.*.keep_addr_on_down is
 * 0) and the IPv4 routes through it, so bringing the link up alone does not restore them.
 */
async function applyStatic(t: Topology, d: ClusterDirector, only?: string): Promise<void> {
  for (const a of staticAddresses(d)) if (only === undefined || a.ifname === only) await t.ensureAddress(d.host, a.ifname, a.cidr);
  if (only !== undefined && only !== d.frontIf) return;
  await t.setDefaultRoute(d.host, CLUSTER.router.frontIpv4);
  await t.setDefaultRoute(d.host, CLUSTER.router.frontIpv6);
}

async function buildRealServer(t: Topology, rs: RealServerHost): Promise<void> {
  await t.addHost(rs.host);
  await t.attach(rs.host, CLUSTER.hosts.serverSwitch, 'eth0');
  await addAddresses(t, rs.host, 'eth0', [`${rs.ipv4}/24`, `${rs.ipv6}/64`]);
  await t.setDefaultRoute(rs.host, CLUSTER.serverGateway.ipv4);
  await t.setDefaultRoute(rs.host, CLUSTER.serverGateway.ipv6);
  // Set up for direct routing, its dr replies by the router: nat replies still go through the floating gateway.
  await setUpDrRealServer(t, rs.host, { vips: [CLUSTER.drVip.ipv4], replyVia: { gateway: CLUSTER.router.serverIpv4, table: CLUSTER.drReplyTable } });
}

async function buildEtcdHost(t: Topology, m: EtcdMember): Promise<void> {
  await t.addHost(m.host);
  await t.attach(m.host, CLUSTER.hosts.mgmtSwitch, 'eth0');
  await addAddresses(t, m.host, 'eth0', [`${m.ipv4}/24`, `${m.ipv6}/64`]);
}

/** No default route: the ops host reaches the management network only, as an admin network would. */
async function buildOpsHost(t: Topology): Promise<void> {
  const o = CLUSTER.ops;
  await t.addHost(o.host);
  await t.attach(o.host, CLUSTER.hosts.mgmtSwitch, o.ifname);
  await addAddresses(t, o.host, o.ifname, [`${o.ipv4}/24`, `${o.ipv6}/64`]);
}

async function addAddresses(t: Topology, host: string, ifname: string, cidrs: readonly string[]): Promise<void> {
  for (const cidr of cidrs) await t.addAddress(host, ifname, cidr);
}

// ---- drills --------------------------------------------------------------------------------------

/**
 * `front` and `etcd` are cut on the switch side (the director's port on swf or swm goes down), so the
 * director sees what a pulled cable looks like: its interface loses carrier but keeps its addresses and
 * routes. `peer` is a direct veth with no switch, so both ends go down administratively; that drops their
 * IPv6 addresses, which `restore` puts back. A dead box's end stays down on restore (reviveBox raises it).
 */
async function setCut(t: Topology, director: DirectorName, what: CutTarget, cut: boolean): Promise<void> {
  const d = clusterDirector(director);
  if (what === 'front') return setLink(t, CLUSTER.hosts.frontSwitch, `p-${d.host}`, !cut);
  if (what === 'etcd') return setLink(t, CLUSTER.hosts.mgmtSwitch, `p-${d.host}`, !cut);
  if (what !== 'peer') throw new Error(`cannot cut ${String(what)}: one of ${CUT_TARGETS.join(', ')}`);
  for (const end of DIRECTOR_NAMES.map(clusterDirector)) {
    if (cut) await setLink(t, end.host, end.peerIf);
    else if (!(await isDead(t, end.host))) await raise(t, end, end.peerIf);
  }
}

async function killBox(t: Topology, director: DirectorName): Promise<number> {
  const d = clusterDirector(director);
  // As power loss: everything in the box stops at once (SIGSTOP: no waiting for exits), so its agent never
  // reacts (no release, no goodbye), and its front link drops with it: the `ip` that takes it down is
  // spawned just before the stop and acts a few ms after it, where awaiting it first put one `ip` spawn
  // (tens of ms on a loaded box) between the agent's last beat and the kernel's last forwarded packet, and
  // into every box-death figure. Then the other links drop and the processes die. Killing first and
  // waiting for the exits let a fast standby claim while the dead box's links were still up (measured:
  // 42 ms of dual ownership with the fast timing profile).
  const [front, ...rest] = directorLinks(d);
  const { stoppedAt, alongside } = await t.freeze(d.host, () => setLink(t, d.host, front!, false));
  await alongside;
  for (const ifname of rest) await setLink(t, d.host, ifname, false);
  await t.killAll(d.host, 'SIGKILL', DRILL_TIMEOUT_MS);
  return stoppedAt;
}

async function reviveBox(t: Topology, director: DirectorName): Promise<void> {
  const d = clusterDirector(director);
  // A rebooted box holds no floating address. IPv4 ones survive link down, and would be answered for (a
  // duplicate vip) the moment the links come up, so they go before the links do.
  for (const a of FLOATING_ADDRESSES) {
    await t.ip(d.host, 'addr', 'del', a.cidr, 'dev', a.ifname).catch(() => undefined);
  }
  const other = clusterDirector(director === 'dir1' ? 'dir2' : 'dir1');
  // The peer link stays down if it was cut: the other end alive but administratively down.
  const peerCut = !(await isDead(t, other.host)) && !(await linkFlags(t, other.host, other.peerIf)).includes('UP');
  for (const ifname of directorLinks(d)) {
    if (ifname === d.peerIf && peerCut) continue;
    await raise(t, d, ifname);
  }
}

function directorLinks(d: ClusterDirector): string[] {
  return [d.frontIf, d.serverIf, d.mgmtIf, d.peerIf];
}

/** A director's link up again, with what the link-down removed. */
async function raise(t: Topology, d: ClusterDirector, ifname: string): Promise<void> {
  await setLink(t, d.host, ifname, true);
  await applyStatic(t, d, ifname);
}

/** A box is dead while its server-side link is administratively down: only killBox touches that link. */
async function isDead(t: Topology, host: string): Promise<boolean> {
  return !(await linkFlags(t, host, CLUSTER.interfaces.server)).includes('UP');
}

async function setLink(t: Topology, host: string, ifname: string, up = false): Promise<void> {
  await runCommand('ip', ['-n', t.ns(host), 'link', 'set', ifname, up ? 'up' : 'down'], { timeoutMs: DRILL_TIMEOUT_MS });
}

interface IpAddrShow {
  readonly flags?: readonly string[];
  readonly addr_info?: readonly { readonly local?: string }[];
}

async function ipJson(t: Topology, host: string, args: readonly string[]): Promise<IpAddrShow> {
  const run = (): Promise<{ stdout: string }> => runCommand('ip', ['-n', t.ns(host), '-j', ...args], { timeoutMs: DRILL_TIMEOUT_MS });
  // killBox SIGKILLs every process in a namespace, including a concurrent `ip -n` (it enters the namespace
  // for its lifetime); one retry covers that race.
  const { stdout } = await run().catch(run);
  const parsed = JSON.parse(stdout) as IpAddrShow[];
  if (parsed.length !== 1) throw new Error(`ip ${args.join(' ')} in ${t.ns(host)}: expected one link, got ${parsed.length}`);
  return parsed[0]!;
}

async function linkFlags(t: Topology, host: string, ifname: string): Promise<readonly string[]> {
  return (await ipJson(t, host, ['link', 'show', 'dev', ifname])).flags ?? [];
}

/**
 * True when `address` (no prefix length) is on `ifname` in `host` and the link is up with carrier. Reads
 * the flags UP (administrative) and LOWER_UP (carrier), not `operstate`: the kernel publishes operstate
 * changes through linkwatch, up to a second late, while the carrier bit changes at once. One
 * `ip -j addr show` (about 2-4 ms), so drills can sample it every 10 ms.
 */
export async function holdsAddress(t: Topology, host: string, ifname: string, address: string): Promise<boolean> {
  const link = await ipJson(t, host, ['addr', 'show', 'dev', ifname]);
  const flags = link.flags ?? [];
  const want = address.toLowerCase();
  return flags.includes('UP') && flags.includes('LOWER_UP') && (link.addr_info ?? []).some((a) => a.local?.toLowerCase() === want);
}

/** Like Promise.all, but waits for every step to finish before rejecting, so cleanup never races a step. */
async function settleAll(steps: readonly Promise<void>[]): Promise<void> {
  const results = await Promise.allSettled(steps);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}
