import { serviceKey, type AddressFamily, type Service } from '@lbd/config';
import { DataPlaneError, type DesiredSlot } from '@lbd/dataplane';
import { buildSlotTable, type Selector } from './schedule.js';

/**
 * The kernel model: what lbd's nftables table holds, as plain data. `renderTables` (pure) turns desired
 * services into models; `parseListings` turns nft's JSON listings of the table's maps and sets (a restarted
 * agent lists them one by one, never the ones the packet path fills: NftDataPlane's WRITTEN_OBJECTS) into the
 * same form, as `parseTable` does a whole table's listing; `diffTables` turns two
 * models into the nft commands that move one into the other. Element keys and values are kept in nft's
 * text syntax, canonicalised the same way on both paths, so "unchanged" is plain string equality.
 *
 * The table (one per family, `ip lbd` and `ip6 lbd`):
 *   prerouting/output (nat): `daddr . l4proto . dport vmap @dispatch` → a shared scheduling chain
 *   scheduling chain (one per selector × slot-table length × persistence, shared by all services alike):
 *       [persistence hit on a real server in @eligible (not quiescent) → dnat] ;
 *       ct mark set daddr . l4proto . dport . <selector> map @slots (one element per slot); dnat to ct mark map @backend_dnat
 *   postrouting (nat): ECMP services (`ct mark & 0xffff0000 @ecmp_services`) go to the ecmp_snat chain:
 *       `snat to iifname map @slot_snat`, the local addresses of the ECMP tier's slot whose interface (its
 *       macvlan, its own MAC) the connection arrived on, so the real server's replies come back to the slot;
 *       a connection that arrived elsewhere (or on a slot without a pool of this family) is dropped there,
 *       since no SNAT would bring its replies back. Other fullnat services
 *       `snat to ct mark & 0xffff0000 map @service_snat` (an explicit pool, never masquerade).
 *   forward (filter): per-real-server and per-service counters, on elements of sets keyed by ct mark.
 * NAT rules only see a connection's first packet, so no map change ever moves an established connection.
 *
 * dr services (direct routing) take another path, with no conntrack entry and no NAT:
 *   dr_raw (prerouting, raw): `daddr . l4proto . dport @dr_services notrack`: conntrack never sees them
 *   dr (prerouting, -140: after the kernel lease's chain at -150, whose drop of an unleased vip they obey):
 *       `daddr . l4proto . dport vmap @dr_dispatch` → a shared dr scheduling chain, run for every packet:
 *       the real server the flow memory (@dr_flows_tcp, @dr_flows_udp) holds for the flow, if it is still one; else
 *       meta mark set daddr . l4proto . dport . <hash> map @slots (the same slot tables as the NAT path);
 *       then dr_send: `dup to meta mark map @dr_target` (the packet, unchanged, to the real server's MAC:
 *       nf_dup routes it with the real server as the next hop), and dr_sent: remember the flow, count,
 *       drop the original (the vip is local here).
 *   A flow nobody remembers is hashed, so only mh and sh (fixed seeds) put it on the same real server on
 *   every director; a change of the slot table moves only flows no memory holds (see DR_FLOWS_MAP).
 * SYN proxy (synProxy services, in @synproxy_services and @synproxy_dispatch; see synProxyRules):
 *   prerouting (nat) accepts the service's new flows untranslated, so they reach input: the client's SYN, and
 *   what conntrack picks up mid-stream (tcp_loose) from the client's ACK. input jumps by @synproxy_dispatch to
 *   the `syn_proxy` chain, which exists only while some service uses it (see SYNPROXY_CHAIN). There `synproxy` answers the SYN
 *   with a syncookie and drops all but an ACK with a valid cookie; for that one it opens the connection to the
 *   vip itself, from this box: that SYN takes the output chain's scheduling and DNAT, and its entry is the only
 *   one the connection leaves. The SYN's own entry is never confirmed (the proxy consumes the packet), so a
 *   flood of SYNs fills no table. The SYN is tracked rather than `notrack`ed as in the usual recipe: conntrack
 *   must see it to end a TIME_WAIT entry of the same tuple (a client reusing its port), whose NAT binding would
 *   otherwise take the client's ACK to the real server.
 * Connection limit (connectionLimit services, in @limit_dispatch): prerouting and output jump, before
 *   scheduling, to a chain per limit (`limit_N`) that counts the service's connections in a set of its own
 *   (`conns_N`, `ct count over N`) and drops a new one over the limit, counting it in @limit_stats.
 * Why shared chains and maps rather than a chain per service: loading 10 000 services takes seconds with a
 * chain each and a fraction of a second as map elements, and per-packet cost stays one lookup per map.
 */

export type NftFamily = 'ip' | 'ip6';
export const TABLE_NAME = 'lbd';
/** Bump when the skeleton (maps, base chains, rule shapes) changes: an older table is then rebuilt whole. */
export const SCHEMA_VERSION = 7;
/** Every jhash gets this fixed seed, so a reload or another director maps a connection to the same real server. */
export const HASH_SEED = 0x4c424431;

/** The per-service maps (and sets): each element belongs to one service's fragment. */
export const MAP_NAMES = [
  'dispatch', 'slots', 'eligible', 'service_snat', 'backend_dnat', 'service_tuple', 'ecmp_services', 'dr_dispatch', 'dr_services', 'dr_target',
  'synproxy_services', 'synproxy_dispatch', 'limit_dispatch',
] as const;
export type MapName = (typeof MAP_NAMES)[number];
/** Sets among MAP_NAMES: their elements have no value (stored as ''). */
const SETS: ReadonlySet<MapName> = new Set(['eligible', 'ecmp_services', 'dr_services', 'synproxy_services']);
/** Whether `nft list` names one of MAP_NAMES a set or a map. */
export function objectKind(name: MapName): 'set' | 'map' {
  return SETS.has(name) ? 'set' : 'map';
}
/**
 * The table-wide map of the ECMP tier: slot interface → the slot's local addresses of the table's family.
 * (Not the `slots` map above, which holds the schedulers' slot tables: those slots share a word, not a meaning.)
 */
export const SLOT_SNAT_MAP = 'slot_snat';

type Elements = { readonly [M in MapName]: ReadonlyMap<string, string> };

/**
 * Everything one service puts into its family's table. The table is the union of its services'
 * fragments; keeping them apart lets a change to one service be rendered and diffed without touching
 * the other 9 999.
 */
export interface ServiceFragment {
  /** The desired service it was rendered from; null when read back from the kernel. */
  readonly source: Service | null;
  /** `198.18.0.10:80/tcp` */
  readonly key: string;
  readonly serviceId: number;
  /** realServerKey → mark, for this service's real servers. */
  readonly realServerMarks: ReadonlyMap<string, number>;
  readonly chain: string;
  /** The connection limit's chain (`limit_1000`); null without a limit. */
  readonly limitChain: string | null;
  /** Whether the service uses the `syn_proxy` chain (synProxy). */
  readonly synProxy: boolean;
  readonly elements: Elements;
}

export interface TableModel {
  readonly family: NftFamily;
  readonly schema: number;
  /** By service key. */
  readonly services: ReadonlyMap<string, ServiceFragment>;
  /**
   * The ECMP tier's slots with local addresses of this family: `"lbds0"` (nft's quoted ifname) →
   * `first-last`, as in @slot_snat. Slots without a pool of this family have no element.
   */
  readonly slotSnat: ReadonlyMap<string, string>;
}

/**
 * Marks. The mark of a real server within a service (in `ct mark` of every connection it serves) is
 * `serviceId << 16 | n`, n numbering the service's real servers, both from 1 to 65535. The service id in the high half lets
 * one per-packet lookup of `ct mark & 0xffff0000` count per service, so counters need no named objects
 * (40 000 counter objects make every later nft command slow to start).
 */
export const SERVICE_MARK_SHIFT = 16;
export const MAX_MARK_ID = 0xffff;

const SERVICE_MASK = `0x${(MAX_MARK_ID * 2 ** SERVICE_MARK_SHIFT).toString(16)}`;

export function serviceMark(serviceId: number): number {
  return serviceId * 2 ** SERVICE_MARK_SHIFT;
}

export function familyName(f: AddressFamily): NftFamily {
  return f === 4 ? 'ip' : 'ip6';
}

/**
 * Identity of a real server within a service. Joined, not a template literal: V8 keeps a template's result
 * longer than 12 characters as a rope (an object a `+`), and strings a table keeps are cheaper flat (see
 * CompactElements).
 */
export function realServerKey(service: string, address: string, port: number): string {
  return [service, '|', address, '#', port].join('');
}

function selectorExpr(family: NftFamily, selector: Selector, length: number): string {
  const seed = `seed 0x${HASH_SEED.toString(16)}`;
  switch (selector) {
    case 'numgen':
      return `numgen inc mod ${length}`;
    case 'srchash':
      return `jhash ${family} saddr mod ${length} ${seed}`;
    case 'flowhash':
      return `jhash ${family} saddr . th sport mod ${length} ${seed}`;
  }
}

const NO_SERVER_CHAIN = 'no_server';
/** Where postrouting sends an ECMP service's new connection: SNAT to its slot's pool, or drop. */
const ECMP_SNAT_CHAIN = 'ecmp_snat';
/** A service with no real server to take new connections and fallback reject. */
const REJECT_CHAIN = 'reject_new';
/**
 * The mark of a new connection to be refused: service id 0 is never given out, so no real server has it.
 * The input chain turns it into a TCP reset (or ICMP port unreachable): reject is not allowed in NAT chains.
 */
const REJECT_MARK = 0xffff;

function schedulingChainName(selector: Selector, length: number, persistenceSec: number, fallback: Service['fallback'] = 'drop'): string {
  if (length === 0) return fallback === 'reject' ? REJECT_CHAIN : NO_SERVER_CHAIN;
  return `${selector}_${length}${persistenceSec > 0 ? `_p${persistenceSec}` : ''}`;
}

/** dr scheduling chains are the NAT path's names with this prefix: `dr_flowhash_3203`, `dr_no_server`. */
const DR_CHAIN_PREFIX = 'dr_';

/** A connection limit's chain, `limit_1000`, and the set it counts in, `conns_1000`: one of each per limit value. */
const LIMIT_CHAIN = /^limit_(\d+)$/;
function limitChainName(limit: number): string {
  return `limit_${limit}`;
}
function limitSetName(chain: string): string {
  return chain.replace(/^limit_/, 'conns_');
}

/**
 * The limit's count lives on the element the rule adds for the service's tuple (nf_conncount: the tuples of
 * the connections it let through, each forgotten once conntrack has ended it). Only new connections pass
 * here (a NAT chain sees a connection's first packet), so the count starts from what is admitted after the
 * set exists: connections synced in from a peer, or older than the limit, are not counted. A service that
 * moves to another limit leaves its element behind in the old set, which then counts nothing new.
 */
function limitChainRules(family: NftFamily, limit: number): string[] {
  const tuple = `${family} daddr . meta l4proto . th dport`;
  return [`add @${limitSetName(limitChainName(limit))} { ${tuple} ct count over ${limit} } update @limit_stats { ${tuple} } drop`];
}

/** The declaration of a limit chain's set, as `set <name> { ... }` takes it in a table block and in `add set`. */
function limitSetBody(family: NftFamily): string {
  return `{ type ${family === 'ip' ? 'ipv4_addr' : 'ipv6_addr'} . inet_proto . inet_service; size 65536; flags dynamic; }`;
}

/**
 * The chain with the `synproxy` statement, created with the first SYN-proxied service and deleted with the last.
 * Not a fixed part of the table: a `synproxy` statement anywhere in the ruleset registers the kernel's synproxy
 * hooks in the namespace, and those act on every entry with a synproxy extension, which ctnetlink gives every
 * entry it creates, i.e. every connection synced in from a peer. A synced handshake (SYN_RECV) whose real
 * server's SYN-ACK retransmission then passes this director is taken for the proxy's own: answered with an
 * ACK of wrong numbers, it breaks (in the connsync test, 4 or 5 of the 20 handshakes a planned switchover caught).
 * So the hooks run only on a director that has SYN-proxied services, where the README says so. (A copy of a
 * proxied connection carries the proxy's cookie and sequence adjustment, synced with it.)
 */
const SYNPROXY_CHAIN = 'syn_proxy';

/**
 * The SYN proxy's options: what it offers the client in the syncookie SYN-ACK, and later asks of the real
 * server. The MSS is Ethernet's less the headers, so a path with a smaller MTU needs PMTU discovery, as any.
 *
 * No `timestamp`, and so no window scaling or SACK either (the kernel keeps those in the cookie's timestamp and
 * offers them only with it). With timestamps, the kernel's synproxy (6.18 here) adds its timestamp offset a
 * second time to the echo in its own handshake ACK to a real server behind NAT, and a current Linux real
 * server rejects that ACK (its TSecr is none it sent): every connection waited for the server's SYN-ACK
 * retransmission, a second (seen in an experiment; README). Without them a proxied connection's window is at most
 * 64 KiB: plenty on a LAN, a limit for bulk transfers over long round trips.
 */
function synProxyRules(family: NftFamily): string[] {
  const mss = family === 'ip' ? 1460 : 1440;
  return [
    // new: the SYN, or the client's ACK as tcp_loose picked it up; invalid: that ACK where loose is off.
    `ct state invalid,new synproxy mss ${mss}`,
    // What the proxy let through (a packet that is neither SYN nor ACK): nothing of a handshake it made.
    'ct state invalid,new drop',
  ];
}

/**
 * The dr flow memory (@dr_flows_tcp, @dr_flows_udp): the real server each dr flow went to, so that a change of
 * the slot table (a weight, a quiesced or drained server, a server added) moves no flow this director has seen;
 * only new flows follow the new table. Like IPVS's connection table for its DR mode, its entries end by timeout
 * (IPVS's defaults: 15 minutes for TCP, 5 for UDP), refreshed by every packet. A flow's first SYN
 * is remembered for only DR_SYN_TIMEOUT_S, so a flood of spoofed SYNs leaves nothing for long.
 *
 * One map per protocol (dr serves tcp and udp), keyed by the addresses and ports. nftables 1.0.6 cannot write
 * a dynamic map's `update` with a key over 16 bytes (it aborts: "dreg < ctx->reg_low"), nor hash much more
 * than the two addresses beside other fields, hence no protocol in the key, and for IPv6 two hashes (different
 * seeds) of the address pair in place of the addresses: two IPv6 flows share an entry only with the same
 * ports and a 64-bit collision of their address pairs, never in practice (with one 32-bit hash, about one flow
 * in 10^8 would have found another flow's entry in a full memory).
 *
 * The memory is this director's own: after a failover, or a slot move in the ECMP tier, the new director
 * has none, and every flow follows the current table, which breaks only those that a change had kept
 * apart from it (a flow on a quiesced server, say).
 */
const DR_FLOWS_MAP = { tcp: 'dr_flows_tcp', udp: 'dr_flows_udp' } as const;
const DR_FLOW_SEEDS = [0x4c424432, 0x4c424433] as const;
const DR_FLOWS_SIZE = 1048576;
const DR_TCP_TIMEOUT_S = 900;
const DR_UDP_TIMEOUT_S = 300;
const DR_SYN_TIMEOUT_S = 30;
/** Tries to send a dr packet to the real server its mark names: `dup` to its MAC, then dr_sent; back to the caller if the mark names none. */
const DR_SEND_CHAIN = 'dr_send';
/** A dr packet was sent: remember its flow, count it, drop the original (the vip is this director's own address). */
const DR_SENT_CHAIN = 'dr_sent';

function drFlowKey(family: NftFamily): string {
  if (family === 'ip') return 'ip saddr . ip daddr . th sport . th dport';
  return `${hash64('ip6 saddr . ip6 daddr', DR_FLOW_SEEDS)} . th sport . th dport`;
}

/** `expr` as two 32-bit jhashes with different seeds: a 64-bit stand-in for a key too long for nft 1.0.6. */
function hash64(expr: string, seeds: readonly [number, number]): string {
  return seeds.map((seed) => `jhash ${expr} mod 4294967295 seed 0x${seed.toString(16)}`).join(' . ');
}
/** One of hash64's halves in rendered text. */
const HASH64_PART = /jhash .*? mod 4294967295 seed 0x[0-9a-f]+/g;

/**
 * A map's `typeof` for a key with hashes in it. nft 1.0.6 lists a map declared `typeof jhash ...` by crashing
 * (a segfault in `nft list`, so no listing of the table at all); `numgen` has the same type (a 32-bit integer)
 * and lists, as the slot tables' `typeof ... numgen inc mod 2` always did.
 */
function hashedTypeof(key: string): string {
  return key.replace(HASH64_PART, 'numgen inc mod 2');
}

/**
 * A dr scheduling chain's rules: every packet of a dr service goes through it. A flow the memory holds goes
 * where it went before, if that real server is still one (dr_send returns when @dr_target has no such mark);
 * any other, by the slot table. The mark is cleared before each lookup, so one that misses leaves nothing
 * to forward by.
 */
function drChainRules(family: NftFamily, selector: Selector, length: number): string[] {
  if (length === 0) return ['drop'];
  const f = family;
  return [
    'meta mark set 0',
    `meta l4proto tcp meta mark set ${drFlowKey(f)} map @${DR_FLOWS_MAP.tcp}`,
    `meta l4proto udp meta mark set ${drFlowKey(f)} map @${DR_FLOWS_MAP.udp}`,
    `meta mark != 0 jump ${DR_SEND_CHAIN}`,
    'meta mark set 0',
    `meta mark set ${f} daddr . meta l4proto . th dport . ${selectorExpr(f, selector, length)} map @slots`,
    `meta mark != 0 jump ${DR_SEND_CHAIN}`,
    'drop',
  ];
}

/** dr_sent's rules (see DR_SENT_CHAIN). A memory that is full only skips its rule: the packet still goes, unremembered. */
function drSentRules(family: NftFamily): string[] {
  const key = drFlowKey(family);
  return [
    `tcp flags & (syn | ack) == syn update @${DR_FLOWS_MAP.tcp} { ${key} timeout ${DR_SYN_TIMEOUT_S}s : meta mark }`,
    `meta l4proto tcp tcp flags & (syn | ack) != syn update @${DR_FLOWS_MAP.tcp} { ${key} timeout ${DR_TCP_TIMEOUT_S}s : meta mark }`,
    `meta l4proto udp update @${DR_FLOWS_MAP.udp} { ${key} timeout ${DR_UDP_TIMEOUT_S}s : meta mark }`,
    'update @backend_stats { meta mark }',
    `update @service_stats { meta mark & ${SERVICE_MASK} }`,
    'drop',
  ];
}

/**
 * The key of a client's affinity to a real server (@persist): its address and the service's tuple. nft 1.0.6
 * aborts on a dynamic map's `update` with a key over 16 bytes (see DR_FLOWS_MAP), so an IPv6 key is two
 * hashes of it (64 bits: two clients meet in one entry never, in practice); IPv4's 12 bytes stay as they are.
 */
function persistKey(family: NftFamily): string {
  const tuple = `${family} saddr . ${family} daddr . meta l4proto . th dport`;
  if (family === 'ip') return tuple;
  return hash64(tuple, PERSIST_SEEDS);
}
const PERSIST_SEEDS = [0x4c424434, 0x4c424435] as const;

function schedulingChainRules(family: NftFamily, selector: Selector, length: number, persistenceSec: number): string[] {
  if (length === 0) return ['drop'];
  const f = family;
  const key = persistKey(f);
  const dnat = `meta l4proto { tcp, udp } dnat ${f} to ct mark map @backend_dnat`;
  const rules: string[] = [];
  if (persistenceSec > 0) {
    rules.push(`ct mark set ${key} map @persist`);
    rules.push(`meta l4proto { tcp, udp } ct mark @eligible dnat ${f} to ct mark map @backend_dnat`);
  }
  rules.push(`ct mark set ${f} daddr . meta l4proto . th dport . ${selectorExpr(f, selector, length)} map @slots`);
  if (persistenceSec > 0) rules.push(`update @persist { ${key} timeout ${persistenceSec}s : ct mark }`);
  rules.push(dnat);
  // Reached only when the lookups above miss: never forward a new connection un-translated to the vip.
  rules.push('drop');
  return rules;
}

/** The fixed part of the table: map declarations and base chains. */
function renderSkeleton(family: NftFamily): string[] {
  const addr = family === 'ip' ? 'ipv4_addr' : 'ipv6_addr';
  const f = family;
  return [
    `  set schema {`, `    type mark`, `    elements = { ${SCHEMA_VERSION} }`, `  }`,
    `  map dispatch {`, `    type ${addr} . inet_proto . inet_service : verdict`, `  }`,
    `  map slots {`, `    typeof ${f} daddr . meta l4proto . th dport . numgen inc mod 2 : ct mark`, `  }`,
    `  set eligible {`, `    type mark`, `  }`,
    `  map persist {`, `    typeof ${hashedTypeof(persistKey(f))} : ct mark`, `    size 1048576`,
    `    flags dynamic,timeout`, `    timeout 300s`, `  }`,
    `  map backend_dnat {`, `    type mark : ${addr} . inet_service`, `  }`,
    // Keyed by service mark (`ct mark & 0xffff0000`): one element per service, not per real server.
    // Interval data without `flags interval`: an interval-keyed set makes nft fetch all its elements
    // before every later command, which costs a third of a second at 10 000 services.
    `  map service_snat {`, `    typeof ct mark : interval ${f} saddr`, `  }`,
    // Which service a service mark stands for: how a restarted agent recognises its own marks.
    `  map service_tuple {`, `    type mark : ${addr} . inet_proto . inet_service`, `  }`,
    // ECMP tier. Service marks of ECMP services: their connections take the local addresses of their slot.
    `  set ecmp_services {`, `    type mark`, `  }`,
    // Keyed by the interface a connection arrived on, which postrouting still knows for a forwarded
    // packet (its first packet: NAT chains see no other). By name, not index: a slot's macvlan that is
    // re-created keeps its name, and elements may name an interface before it exists.
    `  map ${SLOT_SNAT_MAP} {`, `    typeof meta iifname : interval ${f} saddr`, `  }`,
    // Counters live on dynamic set elements that packets create and update: no objects to manage.
    `  set backend_stats {`, `    type mark`, `    size 1048576`, `    flags dynamic`, `    counter`, `  }`,
    `  set service_stats {`, `    type mark`, `    size 1048576`, `    flags dynamic`, `    counter`, `  }`,
    `  chain prerouting {`, `    type nat hook prerouting priority dstnat; policy accept;`,
    // A SYN-proxied service's connections are made by the proxy, from this box (output): not here.
    `    ${f} daddr . meta l4proto . th dport @synproxy_services accept`,
    `    ${f} daddr . meta l4proto . th dport vmap @limit_dispatch`,
    `    ${f} daddr . meta l4proto . th dport vmap @dispatch`, `  }`,
    `  chain output {`, `    type nat hook output priority -100; policy accept;`,
    `    ${f} daddr . meta l4proto . th dport vmap @limit_dispatch`,
    `    ${f} daddr . meta l4proto . th dport vmap @dispatch`, `  }`,
    `  chain postrouting {`, `    type nat hook postrouting priority srcnat; policy accept;`,
    `    ct mark & ${SERVICE_MASK} @ecmp_services goto ${ECMP_SNAT_CHAIN}`,
    `    ct mark != 0 snat ${f} to ct mark & ${SERVICE_MASK} map @service_snat`, `  }`,
    // Reached by an ECMP service's new connection only. A miss in @slot_snat (it did not arrive on a slot
    // interface, or its slot has no pool of this family, or it was sent by this box) would forward it
    // un-SNATed, and the real server's replies would not come back to the slot: it is dropped instead.
    `  chain ${ECMP_SNAT_CHAIN} {`, `    snat ${f} to iifname map @${SLOT_SNAT_MAP}`, `    counter drop`, `  }`,
    `  chain input {`, `    type filter hook input priority filter; policy accept;`,
    `    ${f} daddr . meta l4proto . th dport vmap @synproxy_dispatch`,
    `    ct mark ${REJECT_MARK} meta l4proto tcp reject with tcp reset`,
    `    ct mark ${REJECT_MARK} reject`, `  }`,
    `  chain forward {`, `    type filter hook forward priority filter; policy accept;`,
    `    ct mark != 0 update @backend_stats { ct mark }`,
    `    ct mark != 0 update @service_stats { ct mark & ${SERVICE_MASK} }`, `  }`,
    // dr services (see the top of this file): no conntrack entry, then the lease's verdict, then the real server.
    `  set dr_services {`, `    type ${addr} . inet_proto . inet_service`, `  }`,
    `  map dr_dispatch {`, `    type ${addr} . inet_proto . inet_service : verdict`, `  }`,
    `  map dr_target {`, `    type mark : ${addr}`, `  }`,
    `  set synproxy_services {`, `    type ${addr} . inet_proto . inet_service`, `  }`,
    `  map synproxy_dispatch {`, `    type ${addr} . inet_proto . inet_service : verdict`, `  }`,
    `  map limit_dispatch {`, `    type ${addr} . inet_proto . inet_service : verdict`, `  }`,
    // Packets a connection limit refused, per service tuple: what `lbd_service_limit_drops_total` reports.
    `  set limit_stats {`, `    type ${addr} . inet_proto . inet_service`, `    size 65536`, `    flags dynamic`, `    counter`, `  }`,
    // Untracked: a dr service's packets, all of them.
    `  chain dr_raw {`, `    type filter hook prerouting priority raw; policy accept;`,
    `    ${f} daddr . meta l4proto . th dport @dr_services notrack`, `  }`,
    `  chain dr {`, `    type filter hook prerouting priority ${DR_PRIORITY}; policy accept;`,
    `    ${f} daddr . meta l4proto . th dport vmap @dr_dispatch`, `  }`,
    ...(['tcp', 'udp'] as const).flatMap((p) => [`  map ${DR_FLOWS_MAP[p]} {`, `    typeof ${hashedTypeof(drFlowKey(f))} : meta mark`, `    size ${DR_FLOWS_SIZE}`,
      `    flags dynamic,timeout`, `    timeout ${p === 'tcp' ? DR_TCP_TIMEOUT_S : DR_UDP_TIMEOUT_S}s`, `  }`]),
    `  chain ${DR_SENT_CHAIN} {`, ...drSentRules(f).map((r) => `    ${r}`), `  }`,
    // A dup whose map has no element for the mark ends the rule there: no goto, back to the caller.
    `  chain ${DR_SEND_CHAIN} {`, `    dup to meta mark map @dr_target goto ${DR_SENT_CHAIN}`, `  }`,
  ];
}

/**
 * The dr chain's priority: after the kernel lease's prerouting chain (lease.ts, -150), so that a director
 * whose lease on the vip ran out drops the vip's dr packets there; before dstnat (-100), which they never
 * reach anyway (untracked packets skip NAT).
 */
const DR_PRIORITY = -140;

/** One empty element map per MapName (renderService fills them; parse.ts groups the kernel's into them). */
export function emptyMaps(): { [M in MapName]: Map<string, string> } {
  return Object.fromEntries(MAP_NAMES.map((m) => [m, new Map<string, string>()])) as { [M in MapName]: Map<string, string> };
}

/** The scheduling chains a table needs, with their rules. */
function tableChains(model: TableModel): Map<string, readonly string[]> {
  const chains = new Map<string, readonly string[]>();
  for (const frag of model.services.values()) {
    for (const name of fragmentChains(frag)) if (!chains.has(name)) chains.set(name, chainRulesByName(model.family, name));
  }
  return chains;
}

/** The chains a service's elements jump to. */
function fragmentChains(frag: ServiceFragment): string[] {
  return [frag.chain, ...(frag.limitChain === null ? [] : [frag.limitChain]), ...(frag.synProxy ? [SYNPROXY_CHAIN] : [])];
}

/** `numgen_6_p300` → its rules; unknown names get a marker that never equals a rendered chain. */
function chainRulesByName(family: NftFamily, name: string): readonly string[] {
  if (name === NO_SERVER_CHAIN) return schedulingChainRules(family, 'numgen', 0, 0);
  if (name === REJECT_CHAIN) return [`ct mark set ${REJECT_MARK}`];
  if (name === DR_CHAIN_PREFIX + NO_SERVER_CHAIN) return ['drop'];
  // No conntrack entry to mark for the input chain: a dr packet is refused where it is.
  if (name === DR_CHAIN_PREFIX + REJECT_CHAIN) return ['meta l4proto tcp reject with tcp reset', 'reject'];
  const limit = LIMIT_CHAIN.exec(name);
  if (limit) return limitChainRules(family, Number(limit[1]));
  if (name === SYNPROXY_CHAIN) return synProxyRules(family);
  const dr = /^dr_(srchash|flowhash)_(\d+)$/.exec(name);
  if (dr) return drChainRules(family, dr[1] as Selector, Number(dr[2]));
  const m = /^(numgen|srchash|flowhash)_(\d+)(?:_p(\d+))?$/.exec(name);
  if (!m) return ['# not an lbd scheduling chain'];
  return schedulingChainRules(family, m[1] as Selector, Number(m[2]), Number(m[3] ?? 0));
}

/**
 * One service's fragment. Pure: the same service and marks give the same fragment on every director.
 * `marks` maps each of the service's backendKeys to its mark.
 */
/**
 * The real servers to program: the configured ones, plus the sorry server when none of them may take new
 * connections and the service's fallback says so.
 */
export function effectiveRealServers(svc: Service): Service['realServers'] {
  if (svc.fallback !== 'sorry-server' || svc.sorryServer === null || svc.realServers.some((rs) => rs.weight > 0)) return svc.realServers;
  return [...svc.realServers, { address: svc.sorryServer.address, port: svc.sorryServer.port, weight: 1, healthCheck: null }];
}

/**
 * A fragment's maps that it puts no element in: one shared empty map, never written (fragments are
 * read-only). At 10 000 services, eight or so empty Maps per service were most of what planning allocated.
 */
const NO_ELEMENTS: ReadonlyMap<string, string> = new Map();

/** `jump CHAIN` verdicts, one string a chain for all the services that jump to it (chains are few). */
const JUMPS = new Map<string, string>();

function jumpTo(chain: string): string {
  let verdict = JUMPS.get(chain);
  if (verdict === undefined) {
    verdict = `jump ${chain}`;
    if (JUMPS.size < 1000) JUMPS.set(chain, verdict);
  }
  return verdict;
}

/**
 * A fragment's element map in fewer objects than a Map: a table keeps its fragments for as long as it is
 * the kernel's, and what a plan keeps is what garbage collection copies while it plans (at 10 000 services,
 * most of the plan's time). Written once, read by the encoder (forEach), the diff and observe (iterating one
 * lists its entries for the while). Values are never undefined, so `get` answers `has` too.
 */
abstract class CompactElements implements ReadonlyMap<string, string> {
  abstract readonly size: number;
  abstract get(key: string): string | undefined;
  abstract forEach(fn: (value: string, key: string, map: ReadonlyMap<string, string>) => void, thisArg?: unknown): void;
  has(key: string): boolean { return this.get(key) !== undefined; }
  entries(): MapIterator<[string, string]> {
    const out: Array<[string, string]> = [];
    this.forEach((value, key) => out.push([key, value]));
    return out[Symbol.iterator]();
  }
  keys(): MapIterator<string> {
    const out: string[] = [];
    this.forEach((_, key) => out.push(key));
    return out[Symbol.iterator]();
  }
  values(): MapIterator<string> {
    const out: string[] = [];
    this.forEach((value) => out.push(value));
    return out[Symbol.iterator]();
  }
  [Symbol.iterator](): MapIterator<[string, string]> { return this.entries(); }
}

/** A map of one element, what most of a fragment's maps hold: one object of two fields (a Map is ~170 bytes). */
class OneElement extends CompactElements {
  constructor(private readonly key: string, private readonly value: string) { super(); }
  get size(): number { return 1; }
  get(key: string): string | undefined { return key === this.key ? this.value : undefined; }
  forEach(fn: (value: string, key: string, map: ReadonlyMap<string, string>) => void, thisArg?: unknown): void {
    fn.call(thisArg, this.value, this.key, this);
  }
}

/**
 * A service's @slots elements, `VIP . PROTO . PORT . SLOT` → the mark of the slot's real server: the tuple
 * and a mark a slot; each key is made when it is asked for. As Map entries, the slots' keys were a fifth of
 * what a plan keeps.
 */
class SlotElements extends CompactElements {
  constructor(private readonly svcTuple: string, private readonly marks: readonly string[]) { super(); }
  get size(): number { return this.marks.length; }
  get(key: string): string | undefined {
    const at = this.svcTuple.length;
    if (!key.startsWith(this.svcTuple) || !key.startsWith(' . ', at)) return undefined;
    const slot = key.slice(at + 3);
    return /^(?:0|[1-9][0-9]*)$/.test(slot) ? this.marks[Number(slot)] : undefined;
  }
  forEach(fn: (value: string, key: string, map: ReadonlyMap<string, string>) => void, thisArg?: unknown): void {
    for (let slot = 0; slot < this.marks.length; slot++) fn.call(thisArg, this.marks[slot]!, `${this.svcTuple} . ${slot}`, this);
  }
  override values(): MapIterator<string> { return this.marks[Symbol.iterator](); }
}

function one(key: string, value: string): ReadonlyMap<string, string> {
  return new OneElement(key, value);
}

/** `key`: serviceKey(svc), when the caller has it already. */
export function renderService(svc: Service, serviceId: number, marks: ReadonlyMap<string, number>, key = serviceKey(svc)): ServiceFragment {
  // Joined, flat: it is kept in three of the fragment's maps (see realServerKey).
  const svcTuple = [svc.vip, svc.protocol, svc.port].join(' . ');
  const realServers = effectiveRealServers(svc);
  const table = buildSlotTable({ scheduler: svc.scheduler, realServers });
  const dr = svc.mode === 'dr';
  const persistent = svc.persistenceSec > 0;
  const chain = (dr ? DR_CHAIN_PREFIX : '') + schedulingChainName(table.selector, table.length, svc.persistenceSec, svc.fallback);
  const limitChain = svc.connectionLimit === null ? null : limitChainName(svc.connectionLimit);
  const svcMark = String(serviceMark(serviceId));
  const backendDnat = new Map<string, string>();
  const drTarget = dr ? new Map<string, string>() : null;
  const eligible = persistent ? new Map<string, string>() : null;
  const ids = realServers.map((rs) => {
    const mark = marks.get(realServerKey(key, rs.address, rs.port));
    if (mark === undefined) throw new Error(`no mark for ${realServerKey(key, rs.address, rs.port)}`);
    const id = String(mark);
    backendDnat.set(id, [rs.address, rs.port].join(' . '));
    drTarget?.set(id, rs.address);
    // Only persistence needs the eligible set (to refuse affinity to a quiescent real server); elsewhere
    // a real server takes new connections exactly when it owns slots.
    if (rs.weight > 0) eligible?.set(id, '');
    return id;
  });
  // One exact element per slot, not interval runs: a hash lookup is cheaper than an interval lookup
  // per new connection, and nft 1.0.6 prints some concatenated ranges byte-swapped, which would defeat re-adoption.
  const slots = new SlotElements(svcTuple, table.slots.map((server) => ids[server]!));
  // Every map named, in one shape for all fragments; the ones this service leaves empty share NO_ELEMENTS.
  const elements: Elements = {
    dispatch: dr ? NO_ELEMENTS : one(svcTuple, jumpTo(chain)),
    slots,
    eligible: eligible ?? NO_ELEMENTS,
    service_snat: svc.localAddresses ? one(svcMark, `${svc.localAddresses.first}-${svc.localAddresses.last}`) : NO_ELEMENTS,
    backend_dnat: backendDnat,
    service_tuple: one(svcMark, svcTuple),
    // A dr service on the ECMP tier has no connection to tie to a slot: every director hashes its packets alike.
    ecmp_services: svc.ecmp && !dr ? one(svcMark, '') : NO_ELEMENTS,
    dr_dispatch: dr ? one(svcTuple, jumpTo(chain)) : NO_ELEMENTS,
    dr_services: dr ? one(svcTuple, '') : NO_ELEMENTS,
    dr_target: drTarget ?? NO_ELEMENTS,
    synproxy_services: svc.synProxy ? one(svcTuple, '') : NO_ELEMENTS,
    synproxy_dispatch: svc.synProxy ? one(svcTuple, jumpTo(SYNPROXY_CHAIN)) : NO_ELEMENTS,
    limit_dispatch: limitChain === null ? NO_ELEMENTS : one(svcTuple, jumpTo(limitChain)),
  };
  return { source: svc, key, serviceId, realServerMarks: marks, chain, limitChain, synProxy: svc.synProxy, elements };
}

export function emptyTable(family: NftFamily): TableModel {
  return { family, schema: SCHEMA_VERSION, services: new Map(), slotSnat: new Map() };
}

/** An interface name as nft text: quoted, which nft reads for any name (unquoted, some names parse as keywords). */
export function ifnameText(ifname: string): string {
  return `"${ifname}"`;
}

/** Interface names nft and the kernel both take, with nothing to escape inside quotes. */
const IFNAME = /^[A-Za-z0-9_.-]{1,15}$/;

/**
 * The family's @slot_snat elements for the ECMP tier's slots, in slot order. Pure. Rejects what would
 * make the table ambiguous (two slots on one interface) or could not be written (a bad interface name).
 */
export function renderSlotSnat(family: NftFamily, slots: readonly DesiredSlot[]): Map<string, string> {
  const out = new Map<string, string>();
  const seen = new Map<string, number>();
  for (const slot of [...slots].sort((a, b) => a.index - b.index)) {
    if (!IFNAME.test(slot.ifname)) {
      throw new DataPlaneError('InvalidRuleset', 'apply', { detail: `slot ${slot.index}: interface name ${JSON.stringify(slot.ifname)} is not a valid interface name` });
    }
    const other = seen.get(slot.ifname);
    if (other !== undefined) {
      throw new DataPlaneError('InvalidRuleset', 'apply', { detail: `slots ${other} and ${slot.index} both use interface ${slot.ifname}; each slot needs its own` });
    }
    seen.set(slot.ifname, slot.index);
    const pool = family === 'ip' ? slot.localAddresses.ipv4 : slot.localAddresses.ipv6;
    if (pool) out.set(ifnameText(slot.ifname), `${pool.first}-${pool.last}`);
  }
  return out;
}

export type ElementMap = MapName | typeof SLOT_SNAT_MAP;

function elementText(map: ElementMap, key: string, value: string): string {
  return SETS.has(map as MapName) ? key : `${key} : ${value}`;
}

/** Elements in chunks, one statement per chunk: nft parses a few large statements much faster than many small. */
function elementStatements(verb: 'add' | 'delete', family: NftFamily, map: ElementMap, items: ReadonlyArray<readonly [string, string]>): string[] {
  const out: string[] = [];
  const CHUNK = 2000;
  for (let i = 0; i < items.length; i += CHUNK) {
    const chunk = items.slice(i, i + CHUNK);
    const body = chunk.map(([k, v]) => (verb === 'delete' ? k : elementText(map, k, v))).join(', ');
    out.push(`${verb} element ${family} ${TABLE_NAME} ${map} { ${body} }`);
  }
  return out;
}

/** Dependency order for adding elements: what a map refers to exists before the reference. */
const ADD_ORDER: readonly MapName[] = [
  'service_tuple', 'backend_dnat', 'dr_target', 'service_snat', 'ecmp_services', 'eligible', 'slots', 'dr_services', 'synproxy_services', 'synproxy_dispatch', 'limit_dispatch',
  'dispatch', 'dr_dispatch',
];
const DELETE_ORDER: readonly MapName[] = [...ADD_ORDER].reverse();

/**
 * A whole table, created fresh: replaces any previous `lbd` table of the family in the same transaction.
 * With `elements: false` the table's maps are left empty, for a caller that writes tableElements() itself
 * (as netlink messages: nft-netlink.ts).
 */
export function renderFullScript(model: TableModel, replaceExisting: boolean, opts: { elements?: boolean } = {}): string[] {
  const f = model.family;
  const lines: string[] = [];
  if (replaceExisting) {
    // `add` then `delete` makes the delete valid whether or not the table exists; all in one transaction.
    lines.push(`add table ${f} ${TABLE_NAME}`, `delete table ${f} ${TABLE_NAME}`);
  }
  lines.push(`table ${f} ${TABLE_NAME} {`);
  lines.push(...renderSkeleton(f));
  for (const [name, rules] of [...tableChains(model)].sort(([a], [b]) => a.localeCompare(b))) {
    if (LIMIT_CHAIN.test(name)) lines.push(`  set ${limitSetName(name)} ${limitSetBody(f)}`);
    lines.push(`  chain ${name} {`, ...rules.map((r) => `    ${r}`), `  }`);
  }
  lines.push('}');
  if (opts.elements === false) return lines;
  for (const [map, groups] of tableElements(model)) lines.push(...elementStatements('add', f, map, groups.flatMap((g) => [...g])));
  return lines;
}

/**
 * Every element of a table, map by map (ADD_ORDER, then the ECMP tier's slot_snat): for each map, its
 * elements per service fragment (the fragments' own maps, not copies). In a script all of it is one
 * transaction; NftDataPlane.writeElements, which sends several, puts @dispatch last itself.
 */
export function tableElements(model: TableModel): Array<[ElementMap, Array<ReadonlyMap<string, string>>]> {
  const out: Array<[ElementMap, Array<ReadonlyMap<string, string>>]> = [];
  for (const map of ADD_ORDER) {
    const groups: Array<ReadonlyMap<string, string>> = [];
    for (const frag of model.services.values()) if (frag.elements[map].size > 0) groups.push(frag.elements[map]);
    if (groups.length > 0) out.push([map, groups]);
  }
  if (model.slotSnat.size > 0) out.push([SLOT_SNAT_MAP, [model.slotSnat]]);
  return out;
}

/**
 * How many services of a model use each scheduling chain, remembered per model object: the model an apply
 * makes is the one the next apply starts from, so its counts are derived from its predecessor's plus what
 * changed (diffTables), and a one-server change never counts the chains of 10 000 services.
 */
const chainUse = new WeakMap<TableModel, ReadonlyMap<string, number>>();

function chainUseOf(model: TableModel): ReadonlyMap<string, number> {
  let use = chainUse.get(model);
  if (use === undefined) {
    const counts = new Map<string, number>();
    for (const frag of model.services.values()) for (const name of fragmentChains(frag)) counts.set(name, (counts.get(name) ?? 0) + 1);
    chainUse.set(model, use = counts);
  }
  return use;
}

/**
 * The commands that turn `from` into `to` (same family), element by element. Empty when they are equal:
 * applying an unchanged state writes nothing. Services whose fragment is the same object are skipped
 * without looking inside. `keys`, when given, are the only services whose fragment may differ (planTables
 * knows them): the others are not even looked at, which is what makes a one-server change cheap at
 * 10 000 services.
 */
export function diffTables(from: TableModel, to: TableModel, keys?: Iterable<string>): string[] {
  const f = to.family;
  const t = `${f} ${TABLE_NAME}`;
  const gone = Object.fromEntries(MAP_NAMES.map((m) => [m, [] as Array<[string, string]>])) as Record<MapName, Array<[string, string]>>;
  const added = Object.fromEntries(MAP_NAMES.map((m) => [m, [] as Array<[string, string]>])) as Record<MapName, Array<[string, string]>>;
  const changed: Array<[ServiceFragment | undefined, ServiceFragment | undefined]> = [];
  if (keys === undefined) {
    for (const [key, a] of from.services) {
      const b = to.services.get(key);
      if (a !== b) changed.push([a, b]);
    }
    for (const [key, b] of to.services) if (!from.services.has(key)) changed.push([undefined, b]);
  } else {
    for (const key of keys) {
      const a = from.services.get(key);
      const b = to.services.get(key);
      if (a !== b) changed.push([a, b]);
    }
  }
  // Chains: `to`'s use counts are `from`'s plus what changed; a chain that comes into use is added, one
  // that falls out of use is deleted (after the elements that jump to it).
  const fromUse = chainUseOf(from);
  const toUse = new Map(fromUse);
  const touched: string[] = [];
  for (const [a, b] of changed) {
    const before = a ? fragmentChains(a) : [];
    const after = b ? fragmentChains(b) : [];
    for (const name of before) if (!after.includes(name)) { toUse.set(name, (toUse.get(name) ?? 0) - 1); touched.push(name); }
    for (const name of after) if (!before.includes(name)) { toUse.set(name, (toUse.get(name) ?? 0) + 1); touched.push(name); }
  }
  for (const [name, n] of toUse) if (n <= 0) toUse.delete(name);
  if (!chainUse.has(to)) chainUse.set(to, toUse);
  const chainsAdded = [...new Set(touched)].filter((name) => toUse.has(name) && !fromUse.has(name)).sort();
  const chainsGone = [...new Set(touched)].filter((name) => fromUse.has(name) && !toUse.has(name)).sort();
  for (const [a, b] of changed) {
    for (const map of MAP_NAMES) {
      const old = a?.elements[map] ?? new Map<string, string>();
      const now = b?.elements[map] ?? new Map<string, string>();
      for (const [k, v] of old) {
        const nv = now.get(k);
        if (nv === undefined || nv !== v) gone[map].push([k, v]);
      }
      for (const [k, v] of now) if (old.get(k) !== v) added[map].push([k, v]);
    }
  }
  const ops: string[] = [];
  for (const name of chainsAdded) {
    if (LIMIT_CHAIN.test(name)) ops.push(`add set ${t} ${limitSetName(name)} ${limitSetBody(f)}`);
    ops.push(`add chain ${t} ${name}`, ...chainRulesByName(f, name).map((r) => `add rule ${t} ${name} ${r}`));
  }
  // The slot tier: a handful of elements, compared whole (a changed pool is deleted and added again).
  const slotsGone = [...from.slotSnat].filter(([k, v]) => to.slotSnat.get(k) !== v);
  const slotsAdded = [...to.slotSnat].filter(([k, v]) => from.slotSnat.get(k) !== v);
  ops.push(...elementStatements('delete', f, SLOT_SNAT_MAP, slotsGone));
  for (const map of DELETE_ORDER) ops.push(...elementStatements('delete', f, map, gone[map]));
  for (const map of ADD_ORDER) ops.push(...elementStatements('add', f, map, added[map]));
  ops.push(...elementStatements('add', f, SLOT_SNAT_MAP, slotsAdded));
  for (const name of chainsGone) {
    ops.push(`flush chain ${t} ${name}`, `delete chain ${t} ${name}`);
    if (LIMIT_CHAIN.test(name)) ops.push(`delete set ${t} ${limitSetName(name)}`);
  }
  return ops;
}

