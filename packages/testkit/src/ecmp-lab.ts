import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { TimingProfileName } from '@lbd/config';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeClusterPki } from './certs.js';
import { etcdMember, ETCD_ENDPOINTS, ETCD_MEMBERS } from './cluster-topology.js';
import { setUpDrRealServer } from './director-topology.js';
import { startEtcdCluster, type RunningEtcdCluster } from './etcd.js';
import type { BackgroundProcess } from './exec.js';
import { runCommand } from './exec.js';
import { FrrRouter } from './frr.js';
import { AGENT_BIN, lbadmAdmin, waitAgentAnswers, waitFor, type HaAdmin } from './ha-lab.js';
import { Topology } from './netns.js';
import { startTestServers } from './processes.js';
import { ResilientMirror } from './resilient-mirror.js';

/**
 * The ECMP tier's lab (DESIGN.md "ECMP tier"): a real FRR router in front of three active
 * directors that speak BGP through gobgpd, real servers behind them, etcd on a management segment.
 *
 *   client ──veth── router (FRR: zebra + bgpd, AS 65000, `bgp listen range`, maximum-paths 8)
 *   198.18.2.2      eth0 198.18.2.1 · eth1 198.18.9.1 ── swx (fabric) ──┬── dir1 eth0 198.18.9.11
 *                   eth2 198.19.1.254 on sw                           ├── dir2 eth0 198.18.9.12
 *                                                                     └── dir3 eth0 198.18.9.13   (AS 65010)
 *   dirK  eth0 fabric (slot macvlans lbds0..7 hang from it), default via 198.18.9.1
 *         eth1 198.19.1.K/24 on sw (real servers rs1..3 = 198.19.1.11..13)
 *         eth2 198.18.3.K/24 on swm (etcd1..3 = 198.18.3.11..13; peer service :7411, sync :7412)
 *
 * The fullnat services share ECMP_VIP; `stream-dr` (ECMP_DR_VIP) is dr: the real servers hold that vip on
 * lo and send what they answer from it to the router's eth2, past the directors.
 *
 * Slot i's next hop is 198.18.9.(64+i) and its local addresses 198.19.1.(64+8i) .. (71+8i): the real
 * servers reach them on-link, so replies go to whichever director holds the slot. The router hashes
 * flows over the next hops by their addresses, protocol and ports, as a production router does: policy 3
 * (custom fields), not 1, which takes the packet's receive hash when it has one, and over a veth that is
 * the client socket's random hash (sk_txhash). With it one 4-tuple went to a different slot each time its
 * port was reused, and a flow moved to another slot mid-connection whenever the client's TCP re-hashed
 * (after a retransmission timeout): resets the tier did not cause and a production router never shows.
 */

/** The directors the lab starts. */
export const ECMP_DIRECTORS = ['dir1', 'dir2', 'dir3'] as const;
/** The director a scale-out adds (with `spare`: its box is built and it is every director's peer, its agent not started). */
export const ECMP_SPARE = 'dir4';
export type EcmpDirector = (typeof ECMP_DIRECTORS)[number] | typeof ECMP_SPARE;
/** The tier's slots unless a lab asks for fewer: the 8. */
export const ECMP_SLOTS = 8;
/**
 * The lab agents' election timing. Every slot is an election, so each director leads several; their beats
 * travel as one etcd write per director (coordinator beat-batch.ts), which `default` fits at rest, but its
 * 230 ms window did not hold at a drill's start with etcd, three directors, the router and the traffic on
 * two cores (README, "The ECMP tier").
 */
export const ECMP_TIMING: TimingProfileName = 'relaxed';
/** Local addresses of the tier (64), split evenly over its slots. */
const LOCAL_POOL = { first: 64, size: 64 } as const;
export const ECMP_VIP = '198.18.10.10';
/**
 * The tier's dr vip: every director forwards its packets to the real server's MAC unchanged, hashed alike
 * on each (mh), and the real servers answer the client through the router (ROUTER_SERVERS), so a flow
 * survives any director's death with no state copied.
 */
export const ECMP_DR_VIP = '198.18.10.13';
/** The router's address on the real servers' network, where the real servers send what they answer from the dr vip. */
const ROUTER_SERVERS = '198.19.1.254';
const DR_REPLY_TABLE = '100';
export const ECMP_ASN = { router: 65000, directors: 65010 } as const;
const ROUTER_FABRIC = '198.18.9.1';

/** Slot i's next-hop address. */
export function ecmpNextHop(i: number): string {
  return `198.18.9.${64 + i}`;
}

/** The slot whose local addresses hold `address` in a tier of `slots` slots, or null. */
export function ecmpSlotOfLocalAddress(address: string, slots = ECMP_SLOTS): number | null {
  const m = /^198\.19\.1\.(\d+)$/.exec(address);
  if (m === null) return null;
  const n = Number(m[1]) - LOCAL_POOL.first;
  return n >= 0 && n < LOCAL_POOL.size ? Math.floor(n / (LOCAL_POOL.size / slots)) : null;
}

function directorNumber(d: EcmpDirector): number {
  return Number(d.slice(3));
}

/** Director d's own address on the fabric: its BGP session's address at the router. */
export function ecmpFabricAddress(d: EcmpDirector): string {
  return `198.18.9.${10 + directorNumber(d)}`;
}

const routerBgp = (slots: number): string => `
router bgp ${ECMP_ASN.router}
 bgp router-id ${ROUTER_FABRIC}
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 bgp bestpath as-path multipath-relax
 neighbor dirs peer-group
 neighbor dirs remote-as ${ECMP_ASN.directors}
 neighbor dirs timers 3 9
 neighbor dirs timers connect 1
 bgp listen range 198.18.9.0/24 peer-group dirs
 address-family ipv4 unicast
  neighbor dirs activate
  maximum-paths ${slots}
 exit-address-family
`;

/** The tier's cluster config: `web` (HTTP), `stream` (long-lived TCP) and `udp` on the fullnat vip, and `stream-dr` on the dr vip. */
export function ecmpClusterConfig(o: { sync?: boolean; slots?: number } = {}): string {
  const servers = (port: number): string => [11, 12, 13].map((h) => `      - { address: 198.19.1.${h}, port: ${port} }\n`).join('');
  // Short web connections are not copied (minAgeMs): every director syncs to two peers and receives from
  // two, and copying thousands of one-request connections a second would cost more than a failover saves.
  const sync = (minAgeMs: number): string => `    sync: { enabled: ${o.sync ?? true}, minAgeMs: ${minAgeMs} }\n`;
  const svc = (name: string, port: number, protocol: string, rsPort: number, check: string, minAgeMs = 0): string =>
    `  - name: ${name}\n    vip: ${ECMP_VIP}\n    port: ${port}\n    protocol: ${protocol}\n    mode: fullnat\n    scheduler: mh\n    ecmp: true\n${sync(minAgeMs)}${check}    realServers:\n${servers(rsPort)}`;
  const dr = `  - name: stream-dr\n    vip: ${ECMP_DR_VIP}\n    port: 9000\n    mode: dr\n    scheduler: mh\n    ecmp: true\n    realServers:\n${servers(9000)}`;
  return `ecmp:
  slots: ${o.slots ?? ECMP_SLOTS}
  ipv4: { nextHops: ${ecmpNextHop(0)}, localAddresses: 198.19.1.${LOCAL_POOL.first}-198.19.1.${LOCAL_POOL.first + LOCAL_POOL.size - 1} }
  asn: ${ECMP_ASN.directors}
  routers:
    - { address: ${ROUTER_FABRIC}, asn: ${ECMP_ASN.router}, holdTimeSec: 9, keepaliveSec: 3 }
  preempt: after-sync
services:
${svc('web', 80, 'tcp', 8080, '    healthCheck: { kind: tcp, intervalMs: 1000, rise: 1, fall: 2 }\n', 5000)}${svc('stream', 9000, 'tcp', 9000, '')}${svc('udp', 53, 'udp', 5353, '')}${dr}`;
}

function agentFile(d: EcmpDirector, o: { socket: string; prefix: string; tlsDir: string; gobgpSocket: string; all: readonly EcmpDirector[]; timing: TimingProfileName }): string {
  const k = directorNumber(d);
  const peers = o.all.filter((p) => p !== d).map((p) => `      - { id: ${p}, address: 198.18.3.${directorNumber(p)}:7411 }`).join('\n');
  return `agent:
  adminSocket: ${o.socket}
  cluster:
    director: ${d}
    etcd: [${ETCD_ENDPOINTS.join(', ')}]
    prefix: ${o.prefix}
    peerListen: 198.18.3.${k}:7411
    peers:
${peers}
    tls: { ca: ${o.tlsDir}/ca.pem, cert: ${o.tlsDir}/${d}.pem, key: ${o.tlsDir}/${d}.key }
    interfaces: { vip: eth0, local: eth1 }
    timing: ${o.timing}
    ecmp: { interface: eth0, routerId: 198.18.9.${10 + k}, gobgpApi: 'unix://${o.gobgpSocket}' }
`;
}

export interface EcmpLabOptions<A extends HaAdmin = HaAdmin> {
  readonly prefix: string;
  /**
   * The admin client on a socket path (default: lbadmAdmin, a process per call). Tests pass an in-process
   * client: three directors polled through lbadm processes (about 150 ms of CPU each) would take most of a
   * 2-core machine by themselves.
   */
  readonly admin?: (socketPath: string) => A;
  /** Connection sync on (default) or off for the tier's services. */
  readonly sync?: boolean;
  /** The tier's slots (default ECMP_SLOTS; a power of two up to 64, so the local addresses split evenly). */
  readonly slots?: number;
  /**
   * Provision ECMP_SPARE for a scale-out: its box is built and every director lists it as a peer (the
   * agents' peers are read at start, so a director added later must be known to the others from the
   * start, as an operator provisions one), but its agent starts only with startDirector.
   */
  readonly spare?: boolean;
  readonly echo?: boolean;
  /** The agents' election timing (default ECMP_TIMING). */
  readonly timing?: TimingProfileName;
}

export interface EcmpLab<A extends HaAdmin = HaAdmin> {
  readonly topology: Topology;
  readonly router: FrrRouter;
  readonly etcd: RunningEtcdCluster;
  readonly slots: number;
  /** What a fit director announces: each of the tier's vips (ECMP_VIP, ECMP_DR_VIP) once per slot. */
  readonly pathsPerDirector: number;
  api(d: EcmpDirector): A;
  /** Director d's admin socket (for lbadm --socket). */
  socket(d: EcmpDirector): string;
  /** Each slot's leader as the directors' own statuses say (undefined: none leads it now). */
  slotOwners(): Promise<Map<number, EcmpDirector | undefined>>;
  /**
   * Waits (bounded) until the tier is steady: every running director answers, is healthy and reaches etcd,
   * the router has every slot's path from each of them, and each slot is led, by etcd's record and the director's own role, by the highest-priority running
   * director (so no preemption is pending). Returns the owners.
   */
  waitSteady(timeoutMs?: number): Promise<Map<number, EcmpDirector>>;
  /**
   * Waits (bounded) until every running director's connection sync towards every running peer has caught
   * up: each slot's connections are copied (UDP flows once assured). A provisioned director whose agent
   * is not running has nothing to catch up.
   */
  waitSynced(timeoutMs?: number): Promise<void>;
  /** The next hops the router's FIB has for the vip now. */
  routerNextHops(): Promise<string[]>;
  /**
   * What the router forwards the client's traffic for the vip over, as one line. Hash-threshold (zebra's
   * route): `ip route`'s next hops in order with their weights (what its hash maps over), without the parts
   * that change with no effect on forwarding (proto, metric). Resilient: the mirror's route and every
   * bucket's next hop. Equal before and after a drill: the router moved no flow.
   */
  routerRoute(): Promise<string>;
  /**
   * Which group the router forwards the client's traffic through: zebra's hash-threshold group (the lab
   * starts so) or the resilient mirror of it (resilient-mirror.ts), which moves only a lost member's buckets.
   */
  routerMode(mode: RouterMode): Promise<void>;
  /** The resilient group's next hop per bucket (for movedShare). */
  routerBuckets(): Promise<string[]>;
  /** Paths the router received from each director with an established BGP session (absent: no session). */
  routerPaths(): Promise<Map<EcmpDirector, number>>;
  /** The router's route and next-hop changes as `ip -ts monitor` printed them, last `lines` (for failure messages). */
  routerChanges(lines?: number): string;
  /** As power loss: the box's processes frozen, its links down, then killed. Returns when it stopped. */
  killBox(d: EcmpDirector): Promise<number>;
  /** The box comes back as after a reboot (no floating address) and its agent starts; resolves once it answers. */
  reviveBox(d: EcmpDirector): Promise<void>;
  /** Starts a director's agent (a scale-out with ECMP_SPARE); resolves once it answers. */
  startDirector(d: EcmpDirector): Promise<void>;
  /** Stops a director's agent as systemd does (SIGTERM: it hands its slots on and withdraws its paths); resolves once it exited. */
  stopDirector(d: EcmpDirector): Promise<void>;
  /** The directors whose agents run. */
  running(): EcmpDirector[];
  agentLog(d: EcmpDirector, lines?: number): string;
  logs(lines?: number): string;
  destroy(): Promise<void>;
}

export type RouterMode = 'hash-threshold' | 'resilient';

/** Bound on bringing the tier up: gobgpd 3.10 waits 5-10 s before its first connect to a new peer. */
const TIER_UP_MS = 60_000;

/** How often the lab looks at the directors while it waits (each look asks all three). */
const POLL_MS = 250;

export async function startEcmpLab<A extends HaAdmin = HaAdmin>(opts: EcmpLabOptions<A>): Promise<EcmpLab<A>> {
  const makeAdmin = opts.admin ?? ((s: string) => lbadmAdmin(s) as unknown as A);
  const slots = opts.slots ?? ECMP_SLOTS;
  const pathsPerDirector = [ECMP_VIP, ECMP_DR_VIP].length * slots;
  const all: readonly EcmpDirector[] = opts.spare ? [...ECMP_DIRECTORS, ECMP_SPARE] : ECMP_DIRECTORS;
  const t = new Topology(opts.prefix);
  let tmp: string | undefined;
  let etcd: RunningEtcdCluster | undefined;
  let router: FrrRouter | undefined;
  let mirror: ResilientMirror | undefined;
  let mode: RouterMode = 'hash-threshold';
  const agents = new Map<EcmpDirector, BackgroundProcess>();
  const apis = new Map<EcmpDirector, A>();
  const destroy = async (): Promise<void> => {
    for (const a of apis.values()) a.close();
    apis.clear();
    await mirror?.stop().catch(() => undefined);
    await router?.stop().catch(() => undefined);
    await t.destroy().catch(() => undefined);
    await etcd?.stop().catch(() => undefined);
    if (tmp !== undefined) await rm(tmp, { recursive: true, force: true });
  };
  try {
    tmp = await mkdtemp(join(tmpdir(), 'lbd-ecmplab-'));
    for (const sw of ['swx', 'sw', 'swm']) await t.addSwitch(sw);
    await t.addHost('client');
    await t.addHost('router', { forwarding: true });
    await t.link({ host: 'client', ifname: 'eth0' }, { host: 'router', ifname: 'eth0' });
    await t.addAddress('client', 'eth0', '198.18.2.2/24');
    await t.setDefaultRoute('client', '198.18.2.1');
    await t.addAddress('router', 'eth0', '198.18.2.1/24');
    await t.attach('router', 'swx', 'eth1');
    await t.addAddress('router', 'eth1', `${ROUTER_FABRIC}/24`);
    // Hash flows by their ports too (with the default, addresses only, one client would use one slot), from
    // the headers: fields 0x37 = source and destination address, protocol, source and destination port.
    await t.sysctl('router', 'net.ipv4.fib_multipath_hash_policy', '3');
    await t.sysctl('router', 'net.ipv4.fib_multipath_hash_fields', '0x37');
    for (const d of all) {
      const k = directorNumber(d);
      await t.addHost(d, { forwarding: true });
      for (const [key, value] of [['net.ipv4.conf.all.arp_ignore', '1'], ['net.ipv4.conf.all.arp_announce', '2'], ['net.ipv4.conf.all.rp_filter', '2'], ['net.ipv4.conf.default.rp_filter', '2']] as const) {
        await t.sysctl(d, key, value);
      }
      await t.attach(d, 'swx', 'eth0');
      await t.addAddress(d, 'eth0', `${ecmpFabricAddress(d)}/24`);
      await t.setDefaultRoute(d, ROUTER_FABRIC);
      await t.attach(d, 'sw', 'eth1');
      await t.addAddress(d, 'eth1', `198.19.1.${k}/24`);
      await t.attach(d, 'swm', 'eth2');
      await t.addAddress(d, 'eth2', `198.18.3.${k}/24`);
    }
    await t.attach('router', 'sw', 'eth2');
    await t.addAddress('router', 'eth2', `${ROUTER_SERVERS}/24`);
    for (let k = 1; k <= 3; k++) {
      await t.addHost(`rs${k}`);
      await t.attach(`rs${k}`, 'sw', 'eth0');
      await t.addAddress(`rs${k}`, 'eth0', `198.19.1.${10 + k}/24`);
      await setUpDrRealServer(t, `rs${k}`, { vips: [ECMP_DR_VIP], replyVia: { gateway: ROUTER_SERVERS, table: DR_REPLY_TABLE } });
    }
    for (let k = 1; k <= ETCD_MEMBERS; k++) {
      const m = etcdMember(k);
      await t.addHost(m.host);
      await t.attach(m.host, 'swm', 'eth0');
      await t.addAddress(m.host, 'eth0', `${m.ipv4}/24`);
    }
    etcd = await startEtcdCluster(t);
    router = await FrrRouter.start(t, 'router', routerBgp(slots));
    mirror = await ResilientMirror.start(t, 'router', ECMP_VIP, { iif: 'eth0' });
    // For the record: every change of the router's routes and next hops, timed (a moved route moves flows).
    const monitor = t.spawn('router', 'ip', ['-ts', 'monitor', 'route', 'nexthop'], { label: 'router:ip-monitor' });
    const routerChanges = (lines = 40): string => monitor.stdout.split('\n').filter((l) => l !== '').slice(-lines).join('\n') || '(none)';
    await startTestServers(t, ['rs1', 'rs2', 'rs3'], { http: 8080, stream: 9000, udp: 5353 });
    const tlsDir = join(tmp, 'tls');
    await makeClusterPki(tlsDir, [...all]);
    const prefix = `/lbd/test/${opts.prefix.replace(/-$/, '')}`;
    const socket = (d: EcmpDirector): string => join(tmp!, `${d}.sock`);
    const api = (d: EcmpDirector): A => {
      let a = apis.get(d);
      if (a === undefined) apis.set(d, (a = makeAdmin(socket(d))));
      return a;
    };
    /** Output of agents that exited (a killed box's), kept for failure messages. */
    const pastLogs = new Map<EcmpDirector, string>();
    const agentLog = (d: EcmpDirector, lines = 40): string => {
      const p = agents.get(d);
      const all = (pastLogs.get(d) ?? '') + (p === undefined ? '' : p.stdout + p.stderr);
      return all.split('\n').filter((l) => l !== '').slice(-lines).join('\n');
    };
    const logs = (lines = 40): string => all.filter((d) => agents.has(d)).map((d) => `== ${d} agent (last ${lines} lines)\n${agentLog(d, lines)}`).join('\n');
    const startAgent = async (d: EcmpDirector): Promise<void> => {
      const old = agents.get(d);
      if (old !== undefined) pastLogs.set(d, `${pastLogs.get(d) ?? ''}${old.stdout}${old.stderr}\n--- agent exited\n`);
      const file = join(tmp!, `${d}.yaml`);
      const p = t.spawn(d, process.execPath, [AGENT_BIN, '--config', file, '--admin-socket', socket(d)], { label: `${d}:lbd-agent`, ...(opts.echo ? { echo: true } : {}) });
      agents.set(d, p);
      await waitAgentAnswers(api(d), `lbd-agent on ${d}`, () => p.running).catch((e: Error) => { throw new Error(`${e.message}\n${agentLog(d)}`); });
    };
    for (const d of all) await writeFile(join(tmp, `${d}.yaml`), agentFile(d, { socket: socket(d), prefix, tlsDir, gobgpSocket: join(tmp, `gobgpd-${d}.sock`), all, timing: opts.timing ?? ECMP_TIMING }));
    for (const d of ECMP_DIRECTORS) await startAgent(d);
    const running = (): EcmpDirector[] => all.filter((d) => agents.get(d)?.running === true);
    await api('dir1').apply({ configText: ecmpClusterConfig({ ...opts, slots }), source: 'ecmp-lab', author: 'ecmp-lab' }, { timeoutMs: 60_000 })
      .catch((e: Error) => { throw new Error(`applying the tier's config: ${e.message}\n${logs()}`); });

    const slotOwners = async (): Promise<Map<number, EcmpDirector | undefined>> => {
      const out = new Map<number, EcmpDirector | undefined>();
      for (let i = 0; i < slots; i++) out.set(i, undefined);
      for (const d of running()) {
        const st = await api(d).getClusterStatus({ timeoutMs: 2000 }).catch(() => undefined);
        for (const g of st?.groups ?? []) {
          const m = /^slot-(\d+)$/.exec(g.name);
          if (m !== null && (g.role === 'leader' || g.role === 'fail-static')) out.set(Number(m[1]), d);
        }
      }
      return out;
    };
    const waitSteady = async (timeoutMs = 60_000): Promise<Map<number, EcmpDirector>> => {
      return waitFor('the ECMP tier steady (every slot led by its highest-priority director)', timeoutMs, async () => {
        const live = running();
        const all = await Promise.all(live.map((d) => api(d).getClusterStatus({ timeoutMs: 2000 }).catch(() => undefined)));
        if (all.some((st) => st === undefined || !st.etcdReachable)) return undefined;
        // Every running director has applied the same config revision: a drill that starts while one still
        // applies (a test's cleanup just wrote the config back) would measure the apply, not the drill. (Seen:
        // 3 of 200 streams failed to start while two directors applied a revision that removed a service.)
        if (new Set(all.map((st) => st!.configRevision)).size !== 1) return undefined;
        const view = all[0]!;
        if (!live.every((d) => view.directors.find((x) => x.id === d)?.healthy === true)) return undefined;
        // Every running director runs the tier: it elects every slot and has registered its priorities for them
        // (a director that just started registers before its config applies).
        const names = Array.from({ length: slots }, (_, i) => `slot-${i}`);
        if (!all.every((st) => names.every((n) => st!.groups.some((g) => g.name === n)))) return undefined;
        if (!live.every((d) => names.every((n) => (view.directors.find((x) => x.id === d)?.priorities[n] ?? 0) > 0))) return undefined;
        // The router has every running director's paths: a session that comes up later adds paths while a
        // test runs (the route stays the same, but a test should not start before the tier has converged).
        const paths = await routerPaths();
        if (!live.every((d) => paths.get(d) === pathsPerDirector)) return undefined;
        const owners = new Map<number, EcmpDirector>();
        for (let i = 0; i < slots; i++) {
          const group = `slot-${i}`;
          const prio = (d: EcmpDirector): number => view.directors.find((x) => x.id === d)?.priorities[group] ?? 0;
          const best = live.reduce((a, b) => (prio(b) > prio(a) ? b : a));
          const leader = view.groups.find((g) => g.name === group)?.leader;
          const own = all[live.indexOf(best)]!.groups.find((g) => g.name === group)?.role;
          if (leader !== best || own !== 'leader') return undefined;
          owners.set(i, best);
        }
        return owners;
      }, POLL_MS).catch((e: Error) => { throw new Error(`${e.message}\n${logs(30)}`); });
    };
    const waitSynced = async (timeoutMs = 30_000): Promise<void> => {
      await waitFor('every slot\'s connections copied to its peers', timeoutMs, async () => {
        const live = running();
        for (const d of live) {
          const st = await api(d).getClusterStatus({ timeoutMs: 2000 });
          if (!(st.sync?.peers ?? []).filter((p) => p.direction === 'to' && live.includes(p.peer as EcmpDirector)).every((p) => p.caughtUp)) return undefined;
        }
        return true;
      }, 500).catch((e: Error) => { throw new Error(`${e.message}\n${logs(20)}`); });
    };
    const routerNextHops = (): Promise<string[]> => router!.nextHops(ECMP_VIP);
    const routerRoute = async (): Promise<string> => {
      if (mode === 'resilient') return mirror!.describe();
      return (await t.exec('router', 'ip', ['route', 'show', 'exact', ECMP_VIP])).stdout.replace(/\s+/g, ' ').replace(/ proto \S+| metric \d+/g, '').trim();
    };
    const routerMode = async (m: RouterMode): Promise<void> => {
      await mirror!.sync();
      if (mirror!.error() !== '') throw new Error(`the router's resilient mirror failed: ${mirror!.error()}`);
      await mirror!.use(m === 'resilient');
      mode = m;
    };
    const routerBuckets = (): Promise<string[]> => mirror!.bucketMap();
    const routerPaths = async (): Promise<Map<EcmpDirector, number>> => {
      const summary = JSON.parse(await router!.vtysh('show bgp ipv4 unicast summary json')) as { peers?: Record<string, { state?: string; pfxRcd?: number }> };
      const out = new Map<EcmpDirector, number>();
      for (const d of all) {
        const p = summary.peers?.[ecmpFabricAddress(d)];
        if (p?.state === 'Established') out.set(d, p.pfxRcd ?? 0);
      }
      return out;
    };
    const killBox = async (d: EcmpDirector): Promise<number> => {
      const { stoppedAt, alongside } = await t.freeze(d, () => runCommand('ip', ['-n', t.ns(d), 'link', 'set', 'eth0', 'down'], { timeoutMs: 5000 }).then(() => undefined));
      await alongside;
      for (const ifname of ['eth1', 'eth2']) await runCommand('ip', ['-n', t.ns(d), 'link', 'set', ifname, 'down'], { timeoutMs: 5000 });
      await t.killAll(d, 'SIGKILL', 5000);
      return stoppedAt;
    };
    const reviveBox = async (d: EcmpDirector): Promise<void> => {
      // As after a reboot: no floating address (the slots' next hops and local addresses go before the links
      // come up, or the box would answer for them at once), links up, the default route back, the agent started.
      const ip = (...args: string[]): Promise<unknown> => runCommand('ip', ['-n', t.ns(d), ...args], { timeoutMs: 5000 });
      for (let i = 0; i < slots; i++) await ip('addr', 'flush', 'dev', `lbds${i}`).catch(() => undefined);
      for (let k = 0; k < LOCAL_POOL.size; k++) await ip('addr', 'del', `198.19.1.${LOCAL_POOL.first + k}/32`, 'dev', 'eth1').catch(() => undefined);
      for (const ifname of ['eth0', 'eth1', 'eth2']) await ip('link', 'set', ifname, 'up');
      await t.setDefaultRoute(d, ROUTER_FABRIC);
      await startAgent(d);
    };
    const stopDirector = async (d: EcmpDirector): Promise<void> => {
      // The agent's own shutdown bound is a few seconds (hand-offs, withdraws); SIGKILL only past that.
      await agents.get(d)?.stop(15_000);
    };
    const lab: EcmpLab<A> = {
      topology: t, router, etcd, slots, pathsPerDirector, api, socket, slotOwners, waitSteady, waitSynced, routerNextHops, routerRoute, routerPaths, killBox, reviveBox, startDirector: startAgent, stopDirector, running,
      routerMode, routerBuckets, routerChanges,
      agentLog, logs, destroy,
    };
    try {
      await waitFor('every slot led and every next hop at the router', TIER_UP_MS, async () => {
        const owners = await slotOwners();
        if ([...owners.values()].some((o) => o === undefined)) return undefined;
        return (await routerNextHops()).length === slots ? true : undefined;
      }, POLL_MS);
    } catch (e) {
      throw new Error(`${(e as Error).message}\nowners: ${JSON.stringify([...(await slotOwners())])}\nrouter: ${(await routerNextHops()).join(', ')}\n${logs()}`);
    }
    await waitSteady();
    return lab;
  } catch (e) {
    await destroy();
    throw e;
  }
}
