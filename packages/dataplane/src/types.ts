import type { AddressRange, Endpoint, Protocol, Service } from '@lbd/config';

/**
 * What the agent asks of the data plane. A desired service is a validated config service after the agent
 * has merged in what it knows (health, drains): the data plane does not decide, it programs.
 */
export interface DesiredState {
  readonly services: readonly Service[];
  /** The ECMP tier's slots (empty or absent: no tier). Every director programs every slot alike. */
  readonly slots?: readonly DesiredSlot[];
}

/**
 * One slot of the ECMP tier as the data plane programs it: a new connection of an ECMP service (`ecmp`)
 * that arrives on the slot's interface (its macvlan, its own MAC) is SNATed to the slot's local addresses,
 * so the real server's replies come back to whichever director holds the slot. Whether this director holds
 * it is the kernel lease's business (the slot's addresses are floating), not the table's.
 */
export interface DesiredSlot {
  readonly index: number;
  /** `lbds<index>` (slotInterface() in @lbd/config). */
  readonly ifname: string;
  readonly localAddresses: { readonly ipv4: AddressRange | null; readonly ipv6: AddressRange | null };
}

export interface ApplyOptions {
  /** Compute and return the change without touching the kernel. */
  readonly dryRun?: boolean;
}

export interface ApplyResult {
  /** False when the kernel already matched: nothing was written. */
  readonly changed: boolean;
  /** The rule diff, one nft command per line, as applied (or as it would be, on a dry run). */
  readonly operations: readonly string[];
  /** Whether the whole table was (or would be) rebuilt rather than patched element by element. */
  readonly fullRebuild: boolean;
  /** Connections expired because their real server was removed from a service with expireOnRemove. */
  readonly expiredConnections: number;
  readonly durationMs: number;
}

export interface Counters {
  readonly packets: number;
  readonly bytes: number;
}

/** Defined in @lbd/config, beside the config that names real servers and listeners by it. */
export type { Endpoint } from '@lbd/config';

export interface ObservedRealServer extends Endpoint {
  /** The id in `ct mark` of this real server's connections in this service. */
  readonly realServerId: number;
  /** Takes no new connections (weight 0, or owns no slot); its established ones live on. */
  readonly quiescent: boolean;
  readonly counters: Counters;
}

/** A real server of a service and its id, the `ct mark` of its connections there. */
export interface RealServerId extends Endpoint {
  /** `198.18.0.10:80/tcp` */
  readonly service: string;
  readonly realServerId: number;
}

export interface ObservedService {
  /** `198.18.0.10:80/tcp` */
  readonly key: string;
  readonly vip: string;
  readonly port: number;
  readonly protocol: Protocol;
  readonly counters: Counters;
  /** Packets of new connections its connection limit dropped (each a SYN, or a retransmission of one). */
  readonly limitDrops: Counters;
  readonly realServers: readonly ObservedRealServer[];
}

/** The kernel's SYN proxy, all of a director's SYN-proxied services together (it counts per network namespace). */
export interface SynProxyStats {
  /** SYNs answered with a syncookie. */
  readonly synReceived: number;
  /** ACKs that brought back a valid cookie: handshakes completed, each a connection opened to a real server. */
  readonly cookieValid: number;
  /** ACKs whose cookie was wrong or expired: dropped. */
  readonly cookieInvalid: number;
  readonly cookieRetransmitted: number;
}

/** What the kernel has now: used on restart (re-adopt without a drop) and by the `lbadm` views. */
export interface ObservedState {
  readonly services: readonly ObservedService[];
  /** The SYN proxy's counters; absent when no service uses it (or the kernel says nothing). */
  readonly synProxy?: SynProxyStats;
}

export interface Connection {
  readonly protocol: Protocol;
  /** conntrack state: ESTABLISHED, SYN_SENT, TIME_WAIT, … (UDP: ASSURED or UNREPLIED). */
  readonly state: string;
  readonly client: Endpoint;
  readonly vip: Endpoint;
  /** The fullnat source the real server sees; null in nat mode. */
  readonly localAddress: Endpoint | null;
  readonly realServer: Endpoint;
  readonly expiresInSec: number;
  /** No reply seen yet: in nat mode, the sign of a real server whose replies bypass the director. */
  readonly unreplied: boolean;
  readonly realServerId: number;
  /** Service key, when the real server id is one of lbd's. */
  readonly service: string | null;
}

export interface ConnectionFilter {
  /** Only this service's connections (by key, `198.18.0.10:80/tcp`). */
  readonly service?: string;
}

/** Kernel facts that `lbadm doctor` reasons about. Gathered by the adapter, judged by the agent. */
export interface KernelFacts {
  readonly ipv4Forwarding: boolean;
  readonly ipv6Forwarding: boolean;
  /** Effective rp_filter (max of `all` and the interface) per interface: 0 off, 1 strict, 2 loose. */
  readonly rpFilter: Readonly<Record<string, number>>;
  /** Packets dropped by reverse-path filtering since boot (TcpExt IPReversePathFilter). */
  readonly rpFilterDrops: number;
  readonly conntrackCount: number;
  readonly conntrackMax: number;
  /** net.ipv4.ip_local_port_range, the ports SNAT picks from. */
  readonly localPortRange: readonly [number, number];
  /** For each real server: can the director open a TCP connection to it (a plain reachability probe)? */
  readonly realServerReachable: Readonly<Record<string, boolean>>;
  /** For each probed real server's address: the director's own address on the route to it (`ip route get`). */
  readonly directorAddressTowards: Readonly<Record<string, string>>;
  /**
   * The box's own addresses (`ip addr`: valid forever, where floating addresses always have a lifetime),
   * with their interface: a vip or local address among them would be taken from the interface on release.
   */
  readonly permanentAddresses: ReadonlyArray<{ readonly address: string; readonly ifname: string }>;
  /**
   * For each dr vip asked about (`arpProbes`): the hosts that answered an ARP request for it on the interface
   * towards its real servers (a dr real server must not: it would take the vip's traffic), by MAC, with the
   * address the director's neighbour table knows that MAC by (null when none).
   */
  readonly vipArpAnswers: ReadonlyArray<{ readonly vip: string; readonly ifname: string; readonly mac: string; readonly address: string | null }>;
  /**
   * For each real server of each dr vip asked about: whether it answered an ICMP echo sent to the vip at its
   * MAC (as the director's dr packets reach it): a dr real server that does not hold the vip drops them.
   * null: not asked (no MAC for it in the neighbour table, or the probe could not run), with why.
   */
  readonly vipOnRealServer: ReadonlyArray<{ readonly vip: string; readonly realServer: string; readonly answered: boolean | null; readonly why?: string }>;
}

/** A dr vip whose ARP answers doctor wants: asked on the interface the director reaches `realServers` through. */
export interface ArpProbe {
  readonly vip: string;
  readonly realServers: readonly string[];
}

/** DataPlane programs forwarding for this director. Applying the same state twice changes nothing. */
export interface DataPlane {
  /** Makes the kernel match `desired` in one transaction. */
  apply(desired: DesiredState, opts?: ApplyOptions): Promise<ApplyResult>;
  /** What the kernel has now. */
  observe(): Promise<ObservedState>;
  /**
   * Every real server's id, as the table holds them: from what this data plane wrote in its last apply
   * when it applied last (no kernel read: on a busy director each nft listing is slow), else from the kernel.
   */
  realServerIds(): Promise<readonly RealServerId[]>;
  /** lbd's connections from conntrack. */
  connections(filter?: ConnectionFilter): Promise<Connection[]>;
  /**
   * Packets each limited service's connection limit dropped, by service key: the one counter the limit
   * watch reads every few seconds, so one small listing per family rather than a whole observe().
   */
  limitDrops(): Promise<ReadonlyMap<string, number>>;
  /** Facts for doctor; `probeRealServers` are endpoints to test for TCP reachability from the director. */
  kernelFacts(probeRealServers: readonly Endpoint[], arpProbes?: readonly ArpProbe[]): Promise<KernelFacts>;
  /**
   * Makes the ECMP tier's slot interfaces exist: a macvlan `lbds<i>` on `parent` for i < count, up, with
   * the ARP and reverse-path settings a slot needs; removes lbd's slot interfaces beyond count. Idempotent.
   */
  prepareSlots(parent: string, count: number): Promise<void>;
}
