import { Topology } from './netns.js';

/**
 * The standard one-director topology shared by privileged tests, benchmarks and the lab, so that all of
 * them (and deploy/lab/lab.yaml) use the same addresses.
 *
 *   client                         dir1 (forwarding on)                      sw (bridge br0)
 *   ┌──────────────────────┐      ┌──────────────────────────────────┐      ┌────────────┐
 *   │ eth0 198.18.0.2/24   │ veth │ eth0 198.18.0.1/24               │      │            │
 *   │      fd00:0:0:1::2/64├──────┤      fd00:0:0:1::1/64            │      │            │
 *   │ default via dir1     │      │      vips 198.18.0.10/32,        │      │            │
 *   └──────────────────────┘      │           198.18.0.11/32,        │      │            │
 *                                 │           fd00:0:0:1::10/128     │ veth │            │
 *                                 │ eth1 198.19.1.1/24               ├──────┤ p-dir1     │
 *                                 │      fd00:0:0:2::1/64            │      │            │
 *                                 │      local addresses (fullnat)   │      │            │
 *                                 │      198.19.1.100-103/32,        │      │            │
 *                                 │      fd00:0:0:2::100/128         │      │            │
 *                                 └──────────────────────────────────┘      │            │
 *   rsK (K = 1..N)                                                          │            │
 *   ┌───────────────────────────────────────────────┐  veth                 │            │
 *   │ eth0 198.19.1.(10+K)/24, fd00:0:0:2::(10+K)/64├───────────────────────┤ p-rsK      │
 *   │ default via dir1 (198.19.1.1 / fd00:0:0:2::1) │                       └────────────┘
 *   └───────────────────────────────────────────────┘
 *
 * The vips sit on dir1's client-facing interface (not on lo) because Linux answers IPv6 neighbour
 * solicitations only for addresses on the receiving interface; the client, whose /24 and /64 contain the
 * vips, resolves them directly. The local addresses sit on the server-facing interface so real servers'
 * replies to them are answered by ARP/NDP there. Real servers route replies via dir1, which nat mode
 * needs; dir1's own traffic (health checks) leaves from 198.19.1.1 / fd00:0:0:2::1, never from a vip or a
 * local address (see Topology.addAddress `serviceAddress`). `bypassDirector` gives chosen servers a gateway nobody holds instead (the classic nat failure
 * that `lbadm doctor` must explain: replies never come back through the director).
 */

export const HOSTS = { client: 'client', director: 'dir1', switch: 'sw' } as const;

export const CLIENT_NET = { ipv4: '198.18.0.0/24', ipv6: 'fd00:0:0:1::/64' } as const;
export const SERVER_NET = { ipv4: '198.19.1.0/24', ipv6: 'fd00:0:0:2::/64' } as const;

export const CLIENT = { host: HOSTS.client, ifname: 'eth0', ipv4: '198.18.0.2', ipv6: 'fd00:0:0:1::2' } as const;

export const DIRECTOR = {
  host: HOSTS.director,
  /** Client-facing side: the client's gateway and the vips. */
  clientIf: 'eth0',
  clientIpv4: '198.18.0.1',
  clientIpv6: 'fd00:0:0:1::1',
  /** Server-facing side: the real servers' gateway and the local addresses. */
  serverIf: 'eth1',
  serverIpv4: '198.19.1.1',
  serverIpv6: 'fd00:0:0:2::1',
} as const;

/** Addresses on dir1 that services use as vips. */
export const VIPS = {
  /** fullnat services (web on 80, stream on 9000, dns on 53/udp in the lab). */
  ipv4: '198.18.0.10',
  /** A second IPv4 vip (nat-mode service in the lab). */
  ipv4Nat: '198.18.0.11',
  ipv6: 'fd00:0:0:1::10',
} as const;

/** The fullnat SNAT pool on dir1's server side. */
export const LOCAL_ADDRESSES = {
  ipv4: ['198.19.1.100', '198.19.1.101', '198.19.1.102', '198.19.1.103'],
  /** The same pool as a config `localAddresses` range. */
  ipv4Range: '198.19.1.100-198.19.1.103',
  ipv6: ['fd00:0:0:2::100'],
  ipv6Range: 'fd00:0:0:2::100',
} as const;

/** A gateway address on the server segment that no host holds: replies routed to it are lost. */
export const BYPASS_GATEWAY = { ipv4: '198.19.1.254', ipv6: 'fd00:0:0:2::fe' } as const;

/** Ports lbd-testserver listens on in the lab and in tests that do not choose their own. */
export const SERVER_PORTS = { http: 8080, stream: 9000, udp: 5353 } as const;

/** Real servers number from 1; addresses 10+K stay clear of the local addresses (.100 and up). */
export const MAX_REAL_SERVERS = 80;

export interface RealServerHost {
  /** Host name (`rs1`) and the name lbd-testserver answers with. */
  readonly host: string;
  readonly ipv4: string;
  readonly ipv6: string;
}

/** Host name and addresses of real server `k` (1-based): rs1 = 198.19.1.11 / fd00:0:0:2::11. */
export function realServer(k: number): RealServerHost {
  if (!Number.isInteger(k) || k < 1 || k > MAX_REAL_SERVERS) throw new Error(`real server number ${k} is not in 1..${MAX_REAL_SERVERS}`);
  return { host: `rs${k}`, ipv4: `198.19.1.${10 + k}`, ipv6: `fd00:0:0:2::${10 + k}` };
}

export interface DirectorTopologyOptions {
  /** Namespace prefix: `runPrefix('lbdt')` in tests, `lbd-` in the lab. */
  readonly prefix: string;
  /** Number of real servers (default 3). */
  readonly realServers?: number;
  /** Real servers (host names) whose default route bypasses the director (via BYPASS_GATEWAY). */
  readonly bypassDirector?: readonly string[];
}

export interface DirectorTopology {
  readonly topology: Topology;
  readonly realServers: readonly RealServerHost[];
}

/**
 * Builds the standard topology. On failure it removes what it built and rethrows, so callers only need
 * `topology.destroy()` for a topology they received.
 */
export async function directorTopology(opts: DirectorTopologyOptions): Promise<DirectorTopology> {
  const count = opts.realServers ?? 3;
  const realServers = Array.from({ length: count }, (_, i) => realServer(i + 1));
  const bypass = new Set(opts.bypassDirector ?? []);
  for (const h of bypass) {
    if (!realServers.some((rs) => rs.host === h)) throw new Error(`bypassDirector: ${h} is not one of ${realServers.map((r) => r.host).join(', ')}`);
  }
  const topology = new Topology(opts.prefix);
  try {
    await topology.addSwitch(HOSTS.switch);
    await settleAll([
      buildClientAndDirector(topology),
      ...realServers.map((rs) => buildRealServer(topology, rs, bypass.has(rs.host))),
    ]);
  } catch (e) {
    await topology.destroy().catch(() => undefined);
    throw e;
  }
  return { topology, realServers };
}

async function buildClientAndDirector(t: Topology): Promise<void> {
  const d = DIRECTOR;
  await Promise.all([t.addHost(CLIENT.host), t.addHost(d.host, { forwarding: true })]);
  await t.link({ host: CLIENT.host, ifname: CLIENT.ifname }, { host: d.host, ifname: d.clientIf });
  await t.attach(d.host, HOSTS.switch, d.serverIf);

  await t.addAddress(CLIENT.host, CLIENT.ifname, `${CLIENT.ipv4}/24`);
  await t.addAddress(CLIENT.host, CLIENT.ifname, `${CLIENT.ipv6}/64`);
  await t.setDefaultRoute(CLIENT.host, d.clientIpv4);
  await t.setDefaultRoute(CLIENT.host, d.clientIpv6);

  await t.addAddress(d.host, d.clientIf, `${d.clientIpv4}/24`);
  await t.addAddress(d.host, d.clientIf, `${d.clientIpv6}/64`);
  const service = { serviceAddress: true };
  for (const vip of [VIPS.ipv4, VIPS.ipv4Nat]) await t.addAddress(d.host, d.clientIf, `${vip}/32`, service);
  await t.addAddress(d.host, d.clientIf, `${VIPS.ipv6}/128`, service);

  await t.addAddress(d.host, d.serverIf, `${d.serverIpv4}/24`);
  await t.addAddress(d.host, d.serverIf, `${d.serverIpv6}/64`);
  for (const lip of LOCAL_ADDRESSES.ipv4) await t.addAddress(d.host, d.serverIf, `${lip}/32`, service);
  for (const lip of LOCAL_ADDRESSES.ipv6) await t.addAddress(d.host, d.serverIf, `${lip}/128`, service);
}

/**
 * A real server set up for direct routing: each vip on its loopback, no ARP for it (arp_ignore=1,
 * arp_announce=2), and, with `replyVia`, what it sends from the first vip routed by a table of its own to that
 * gateway, past the directors (one holds the vip and would drop a packet from its own address). Only
 * replies from the vip take that route.
 */
export async function setUpDrRealServer(t: Topology, host: string, o: { vips: readonly string[]; replyVia?: { gateway: string; table: string } }): Promise<void> {
  for (const scope of ['all', 'eth0']) {
    await t.sysctl(host, `net.ipv4.conf.${scope}.arp_ignore`, '1');
    await t.sysctl(host, `net.ipv4.conf.${scope}.arp_announce`, '2');
  }
  for (const vip of o.vips) await t.addAddress(host, 'lo', vip.includes(':') ? `${vip}/128` : `${vip}/32`, { serviceAddress: true });
  if (o.replyVia === undefined) return;
  await t.exec(host, 'ip', ['rule', 'add', 'from', o.vips[0]!, 'lookup', o.replyVia.table]);
  await t.exec(host, 'ip', ['route', 'add', 'default', 'via', o.replyVia.gateway, 'table', o.replyVia.table]);
}

async function buildRealServer(t: Topology, rs: RealServerHost, bypass: boolean): Promise<void> {
  await t.addHost(rs.host);
  await t.attach(rs.host, HOSTS.switch, 'eth0');
  await t.addAddress(rs.host, 'eth0', `${rs.ipv4}/24`);
  await t.addAddress(rs.host, 'eth0', `${rs.ipv6}/64`);
  await t.setDefaultRoute(rs.host, bypass ? BYPASS_GATEWAY.ipv4 : DIRECTOR.serverIpv4);
  await t.setDefaultRoute(rs.host, bypass ? BYPASS_GATEWAY.ipv6 : DIRECTOR.serverIpv6);
}

/** Like Promise.all, but waits for every step to finish before rejecting, so cleanup never races a step. */
async function settleAll(steps: readonly Promise<void>[]): Promise<void> {
  const results = await Promise.allSettled(steps);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}
