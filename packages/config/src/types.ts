/**
 * Typed configuration. Everything after `loadConfig()` / `parseConfig()` takes these types, never raw
 * YAML or JSON: every default and unit is decided here, once.
 */

export type Protocol = 'tcp' | 'udp';
export type ForwardingMode = 'fullnat' | 'nat' | 'dr';
export type Scheduler = 'rr' | 'wrr' | 'sh' | 'mh';
export type AddressFamily = 4 | 6;

export const PROTOCOLS: readonly Protocol[] = ['tcp', 'udp'];
export const FORWARDING_MODES: readonly ForwardingMode[] = ['fullnat', 'nat', 'dr'];
/**
 * The schedulers a dr service may use. A dr service has no conntrack entry, and a director's flow memory is
 * its own: a director that has not seen a flow schedules its every packet, so only a hash of the packet's own
 * fields with a fixed seed keeps a connection on one real server, on every director and across reloads.
 */
export const DR_SCHEDULERS: readonly Scheduler[] = ['mh', 'sh'];
export const SCHEDULERS: readonly Scheduler[] = ['rr', 'wrr', 'sh', 'mh'];

/** Highest real-server weight, as in IPVS. Weight 0 = quiescent: no new connections, old ones live on. */
export const MAX_WEIGHT = 65535;

/** An address and a port: a real server, a vip's port, a listener, a client. Addresses are canonical text. */
export interface Endpoint {
  readonly address: string;
  readonly port: number;
}

/** Another director of the cluster: its id and where its peer service listens (its peerListen). */
export interface PeerEndpoint extends Endpoint {
  readonly id: string;
}

export type HealthCheckKind = 'tcp' | 'http' | 'https' | 'icmp' | 'udp' | 'exec';
export const HEALTH_CHECK_KINDS: readonly HealthCheckKind[] = ['tcp', 'http', 'https', 'icmp', 'udp', 'exec'];
export const HEALTH_STATES = ['up', 'down'] as const;
export type HealthState = (typeof HEALTH_STATES)[number];
/** What a failed real server becomes: quiescent (weight 0, connections live on) or removed (connections expired). */
export type OnDown = 'quiesce' | 'remove';
export const ON_DOWN: readonly OnDown[] = ['quiesce', 'remove'];
/** When every real server of a service is down: drop new connections, reset them at once, keep sending to the last ones, or use a sorry server. */
export type Fallback = 'drop' | 'reject' | 'keep-last' | 'sorry-server';
export const FALLBACKS: readonly Fallback[] = ['drop', 'reject', 'keep-last', 'sorry-server'];
export const HTTP_METHODS: readonly string[] = ['GET', 'HEAD', 'POST', 'PUT', 'OPTIONS'];

/**
 * A real server's effective health check: the service's check with the real server's overrides applied
 * (merged once, at validation).
 */
export interface HealthCheck {
  readonly kind: HealthCheckKind;
  readonly intervalMs: number;
  /** Less than intervalMs. */
  readonly timeoutMs: number;
  /** Consecutive successes that bring a down server up. */
  readonly rise: number;
  /** Consecutive failures that take an up server down. */
  readonly fall: number;
  /** Up to this much is added to each interval, so checks do not march in step. */
  readonly jitterMs: number;
  /** The state a new real server starts in, before its first results. */
  readonly startState: HealthState;
  /** Probe this address / port instead of the real server's own (a health port); null = the real server's. */
  readonly address: string | null;
  readonly port: number | null;
  /** tcp (optional) and udp (required): bytes to send; expect: a substring the reply must contain. */
  readonly send: string | null;
  readonly expect: string | null;
  /** http / https */
  readonly method: string;
  readonly path: string;
  readonly host: string | null;
  /** Inclusive status ranges that count as up. */
  readonly expectStatus: ReadonlyArray<readonly [number, number]>;
  /** A regular expression the body must match. */
  readonly bodyPattern: string | null;
  readonly tlsVerify: boolean;
  readonly sni: string | null;
  /** exec: argv of a command whose exit status 0 means up (like keepalived's MISC_CHECK). */
  readonly command: readonly string[] | null;
  /** Flap damping: `maxTransitions` state changes within `windowMs` hold a server down (0 = off). */
  readonly flapDamping: FlapDamping;
}

export interface FlapDamping {
  readonly windowMs: number;
  readonly maxTransitions: number;
  /** The first hold-down; each further one within the window doubles, up to maxHoldDownMs. */
  readonly holdDownMs: number;
  readonly maxHoldDownMs: number;
}

export const HEALTH_DEFAULTS = {
  intervalMs: 1000,
  timeoutMs: 500,
  rise: 2,
  fall: 3,
  startState: 'up' as HealthState,
  method: 'GET',
  path: '/',
  expectStatus: [[200, 399]] as ReadonlyArray<readonly [number, number]>,
  tlsVerify: true,
  flapDamping: { windowMs: 60_000, maxTransitions: 4, holdDownMs: 5_000, maxHoldDownMs: 300_000 } as FlapDamping,
};

export interface RealServer {
  /** Canonical text form (IPv6 compressed, lower case). */
  readonly address: string;
  readonly port: number;
  /** The weight to program: the configured one, or 0 while drained. */
  readonly weight: number;
  /**
   * True when the operator drained it (`drained: true`, lbadm server drain): it is programmed at weight 0,
   * quiescent like ipvsadm -w 0 (established connections live on, new ones go elsewhere), while the config
   * keeps its weight for lbadm server enable to restore. Absent when not drained.
   */
  readonly drained?: true;
  /** Effective health check; null = not checked (always up). */
  readonly healthCheck: HealthCheck | null;
}

/** An inclusive, contiguous address range: the fullnat SNAT pool of one service. */
export interface AddressRange {
  readonly first: string;
  readonly last: string;
  /** Number of addresses in the range (capped at 2^32 for IPv6). */
  readonly size: number;
}

export interface Service {
  readonly name: string;
  readonly family: AddressFamily;
  readonly vip: string;
  readonly port: number;
  readonly protocol: Protocol;
  /**
   * fullnat: DNAT + SNAT to `localAddresses`; nat: DNAT only (real servers route replies through the director);
   * dr: the packet goes to the real server's MAC unchanged, and the real server, holding the vip on a loopback,
   * answers the client directly (no conntrack entry, mh or sh only, real servers on a directly attached network).
   */
  readonly mode: ForwardingMode;
  readonly scheduler: Scheduler;
  /** Seconds of source-address affinity; 0 = off. */
  readonly persistenceSec: number;
  /** The fullnat SNAT pool; null in nat mode and for an ECMP service (its pools are the slots', config.ecmp). */
  readonly localAddresses: AddressRange | null;
  /** Expire a removed real server's connections (IPVS expire_nodest_conn); off by default. */
  readonly expireOnRemove: boolean;
  readonly realServers: readonly RealServer[];
  /** What a real server that fails its health check becomes. */
  readonly onDown: OnDown;
  /** Ramp a recovered real server's weight up over this long; 0 = at once. */
  readonly slowStartMs: number;
  /** What happens to new connections when every real server is down. */
  readonly fallback: Fallback;
  /** With fallback sorry-server: where new connections go when every real server is down. */
  readonly sorryServer: Endpoint | null;
  /**
   * The vip group whose leader serves it (default `default`): vips of one group fail over together. `''` for
   * an ECMP service, which belongs to no vip group (no vip group's leader claims its vip).
   */
  readonly vipGroup: string;
  /** Which of its connections the group's leader copies to the standbys, so they survive a failover. */
  readonly sync: ServiceSync;
  /**
   * Served by the ECMP tier (every director active, behind a BGP router) rather than by a vip group's
   * leader: fullnat only; its local addresses are the slots' (config.ecmp), and `vipGroup` is not used.
   */
  readonly ecmp: boolean;
  /**
   * SYN-flood defence: the kernel answers the service's SYNs with syncookies (nftables synproxy) and only a
   * completed handshake gets a conntrack entry, a real server and a connection to it. TCP, fullnat or nat,
   * not ECMP. Synced like any other (the copies carry the proxy's sequence-number adjustment).
   */
  readonly synProxy: boolean;
  /**
   * The most conntrack entries the service's new connections may hold on this director (nftables `ct count`);
   * a new connection beyond it is dropped and counted. null: no limit. Counts what this director admitted
   * since the limit took effect: connections synced in from a peer, or older than the limit, are not counted.
   */
  readonly connectionLimit: number | null;
}

/**
 * Connection sync per service. A TCP connection is copied once established, a UDP connection once it has seen
 * traffic both ways (so one-packet UDP exchanges never cost a copy); `minAgeMs` also holds back connections
 * younger than that, so short connections, which a failover rarely catches, cost nothing.
 */
export interface ServiceSync {
  readonly enabled: boolean;
  readonly minAgeMs: number;
}

export const SERVICE_SYNC_DEFAULTS: ServiceSync = { enabled: true, minAgeMs: 0 };

export interface AgentSettings {
  /** Path of the root-only admin unix socket. */
  readonly adminSocket: string;
  /** Set when this director is one of a cluster (the desired config then lives in etcd); null when alone. */
  readonly cluster: ClusterSettings | null;
  /** The admin API and ops pages over TCP (mutual TLS); both listeners off by default. */
  readonly admin: AdminSettings;
}

/** What a client certificate may do: `write` changes the cluster (apply, failover, rollback), `read` only looks. */
export type AdminRole = 'read' | 'write';
export const ADMIN_ROLES: readonly AdminRole[] = ['read', 'write'];

/** `*` as a client name: any certificate the CA signed. */
export const ANY_CLIENT = '*';

/**
 * The director's TCP listeners for operators: admin gRPC and HTTPS (metrics, dashboard, /api), each
 * with mutual TLS against a CA; a client is known by its certificate's name and gets that name's role.
 * The unix socket (adminSocket) stays root-only and always writes. Director-local, restart-only.
 */
export interface AdminSettings {
  /** Admin gRPC (lbadm --server); null: off. */
  readonly grpcListen: Endpoint | null;
  /** HTTPS: /metrics, the dashboard, /api/*; null: off. */
  readonly httpListen: Endpoint | null;
  /** The listeners' CA, certificate and key: agent.admin.tls, else agent.cluster.tls; null only when no listener is set. */
  readonly tls: PeerTls | null;
  /** Certificate name (subjectAltName DNS, else CN; or `*`) -> role. Names are unique, compared in lower case. */
  readonly clients: readonly AdminClientEntry[];
}

export interface AdminClientEntry {
  readonly name: string;
  readonly role: AdminRole;
}

export const ADMIN_DEFAULTS: AdminSettings = { grpcListen: null, httpListen: null, tls: null, clients: [] };

export const PREEMPT_POLICIES = ['never', 'after-delay', 'after-sync'] as const;
export type PreemptPolicy = (typeof PREEMPT_POLICIES)[number];
export const TIMING_PROFILE_NAMES = ['default', 'fast', 'relaxed'] as const;
/** agent.cluster.realtimePriority's default: above ordinary real-time helpers, far below the kernel's own (50, 99). */
export const DEFAULT_REALTIME_PRIORITY = 10;
export type TimingProfileName = (typeof TIMING_PROFILE_NAMES)[number];

/** This director's part in a cluster: director-local, so it stays in its own file, never in etcd. */
export interface ClusterSettings {
  /** This director's id: unique in the cluster. */
  readonly director: string;
  readonly etcd: readonly string[];
  /**
   * This director's client certificate for etcd (with https:// endpoints; etcd run with
   * --client-cert-auth knows the director by its common name, for etcd's role-based access). Null: plain
   * http://, which `lbadm doctor` calls out.
   */
  readonly etcdTls: PeerTls | null;
  /** The cluster's etcd key prefix, e.g. /lbd/prod. */
  readonly prefix: string;
  /**
   * host:port this director's peer service listens on: promises and pings, served by the election thread.
   * Connection sync listens on the same address, the next port (connSyncPort).
   */
  readonly peerListen: Endpoint;
  /** Every other director of the cluster (its peerListen): the only ones that may take over from this one. */
  readonly peers: readonly PeerEndpoint[];
  /** Where floating addresses go: vips on `vip`, local addresses and gateways on `local`. */
  readonly interfaces: { readonly vip: string; readonly local: string };
  /** Priority per vip group (1..255, higher leads); groups not listed get 100. */
  readonly priorities: Readonly<Record<string, number>>;
  readonly timing: TimingProfileName;
  /**
   * SCHED_FIFO priority of the election thread (beats, fence, takeover, claim; keepalived's
   * vrrp_rt_priority), 1..99; 0 leaves it at normal priority. Needs CAP_SYS_NICE; without it the agent says
   * so and runs the election at normal priority (still in its own thread).
   */
  readonly realtimePriority: number;
  /**
   * Commands whose failure makes this director unfit to lead (keepalived's track_script): an upstream
   * link, a firewall, a local dependency. Each runs every intervalMs; exit 0 = ok.
   */
  readonly track: readonly TrackCheck[];
  /**
   * Mutual TLS on the peer link (promises, pings and connection sync), with a cluster CA. Every
   * director's certificate names its director id (subjectAltName DNS:<id>). Null: the peer link is
   * plain gRPC and connections are not synced.
   */
  readonly tls: PeerTls | null;
  /** This director's part in the ECMP tier (config.ecmp); null: it serves no ECMP service. */
  readonly ecmp: DirectorEcmp | null;
}

/**
 * This director's side of the ECMP tier: director-local, so it lives in agent.cluster.ecmp, not in etcd.
 */
export interface DirectorEcmp {
  /** The fabric interface towards the routers: each slot gets a macvlan on it (`lbds0`, `lbds1`, ...). */
  readonly interface: string;
  /** This director's BGP router id (an IPv4 address, unique in the tier: usually its fabric address). */
  readonly routerId: string;
  /** GoBGP's gRPC API, `unix:///run/lbd/gobgpd.sock` or `host:port`. */
  readonly gobgpApi: string;
  /** Start and supervise gobgpd (true), or use one already running at gobgpApi (false). */
  readonly runGobgpd: boolean;
}

/** agent.cluster.ecmp's defaults: gobgpd run by lbd-agent, its API on a root-only unix socket. */
export const DIRECTOR_ECMP_DEFAULTS = { gobgpApi: 'unix:///run/lbd/gobgpd.sock', runGobgpd: true } as const;

/** The macvlan of slot `index` on the fabric interface: the slot's own MAC, where its next-hop address goes. */
export function slotInterface(index: number): string {
  return `lbds${index}`;
}

/** The election group of slot `index`: a slot is elected, fenced and synced exactly like a vip group. */
export function slotGroup(index: number): string {
  return `slot-${index}`;
}

/** The slot index of an election group name, or null when it is a vip group's. */
export function slotOfGroup(group: string): number | null {
  const m = /^slot-(\d+)$/.exec(group);
  return m === null ? null : Number(m[1]);
}

/**
 * The port connection sync listens on, beside a director's peerListen port: the next one. Promises are
 * served by the election thread and connection sync by the agent's main thread, each on its own listener,
 * so a flood of connections never queues a promise (an operator opens both ports on the peer link).
 */
export function connSyncPort(peerPort: number): number {
  return peerPort + 1;
}

/** PEM files. */
export interface PeerTls {
  readonly ca: string;
  readonly cert: string;
  readonly key: string;
}

export interface TrackCheck {
  readonly name: string;
  /** argv, no shell. */
  readonly command: readonly string[];
  readonly intervalMs: number;
  readonly timeoutMs: number;
  /** Consecutive successes that make the director fit again (it starts unfit until then). */
  readonly rise: number;
  /** Consecutive failures that make it resign. */
  readonly fall: number;
}

/** Group settings shared by every director (they live in the cluster config). */
export interface VipGroup {
  readonly name: string;
  readonly preempt: PreemptPolicy;
  readonly preemptDelayMs: number;
  /** Gratuitous ARPs / unsolicited neighbour advertisements sent on every claim. */
  readonly announce: { readonly count: number; readonly intervalMs: number };
  /** Extra floating addresses on the server side, e.g. the real servers' gateway for nat mode. */
  readonly gateways: readonly string[];
}

/**
 * A vip group's role on one director: leading it, keeping it without etcd because its peer vouches
 * (fail-static), standing by, or unfit to lead.
 */
export const GROUP_ROLES = ['leader', 'fail-static', 'standby', 'unhealthy'] as const;
export type GroupRole = (typeof GROUP_ROLES)[number];

export const DEFAULT_VIP_GROUP = 'default';
export const DEFAULT_PRIORITY = 100;
export const VIP_GROUP_DEFAULTS = { preempt: 'after-delay', preemptDelayMs: 10_000, announce: { count: 3, intervalMs: 200 } } as const;

/** Most slots a tier may have: GoBGP's add-path send limit here, and FRR's default maximum-paths. */
export const MAX_SLOTS = 64;
export const ROUTE_ORIGINS = ['igp', 'egp', 'incomplete'] as const;
export type RouteOrigin = (typeof ROUTE_ORIGINS)[number];

/** One address family of the ECMP tier: per slot, a next-hop address and a local-address pool. */
export interface EcmpFamily {
  /** nextHops[i]: slot i's floating next-hop address (on its macvlan, in the fabric subnet). */
  readonly nextHops: readonly string[];
  /** localAddresses[i]: slot i's fullnat SNAT pool (a range split evenly over the slots, or one range each). */
  readonly localAddresses: readonly AddressRange[];
}

/** An upstream router the directors peer with. */
export interface BgpRouter {
  readonly address: string;
  readonly asn: number;
  /** 0 = no hold timer (and no keepalives), else 3..65535. */
  readonly holdTimeSec: number;
  /** Less than holdTimeSec (usually a third of it); 0 only with holdTimeSec 0. */
  readonly keepaliveSec: number;
}

/**
 * The ECMP tier (DESIGN.md "ECMP tier"), shared by every director: S slots, each elected like a vip group
 * (owner and standby, fenced, synced), each with its next-hop address and local addresses; every director
 * announces each ECMP vip once per slot it owns or backs up, with the slot's next hop.
 */
export interface EcmpTier {
  readonly slots: number;
  readonly ipv4: EcmpFamily | null;
  readonly ipv6: EcmpFamily | null;
  /** The directors' AS number. */
  readonly asn: number;
  readonly routers: readonly BgpRouter[];
  /**
   * The same on every director: mixed attributes silently break the router's multipath. med null: none sent;
   * communities: `ASN:VALUE`, each 0..65535, without leading zeros.
   */
  readonly attributes: { readonly origin: RouteOrigin; readonly med: number | null; readonly communities: readonly string[] };
  /** How a slot moves back to the director that ranks first for it (scale-out: after-sync). */
  readonly preempt: PreemptPolicy;
  readonly preemptDelayMs: number;
  /** Gratuitous ARPs / unsolicited NAs for a slot's next hop and local addresses on every claim. */
  readonly announce: { readonly count: number; readonly intervalMs: number };
}

export const ECMP_DEFAULTS = {
  holdTimeSec: 9, keepaliveSec: 3, origin: 'igp' as RouteOrigin, preempt: 'after-sync' as PreemptPolicy, preemptDelayMs: 0,
  announce: { count: 3, intervalMs: 200 },
} as const;

export interface Config {
  readonly agent: AgentSettings;
  /** The ECMP tier; null when the config has none. It may be there before any service sets `ecmp: true`. */
  readonly ecmp: EcmpTier | null;
  /** Every group a service names or the config lists, with its settings (defaults filled in). */
  readonly vipGroups: readonly VipGroup[];
  readonly services: readonly Service[];
}

export const DEFAULT_ADMIN_SOCKET = '/run/lbd/admin.sock';

/** `198.18.0.10:80/tcp`, `[fd00::10]:80/tcp`: the one way a service is named in logs, CLI and errors. */
export function serviceKey(s: { vip: string; port: number; protocol: Protocol }): string {
  return `${hostPort(s.vip, s.port)}/${s.protocol}`;
}

export function hostPort(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}
