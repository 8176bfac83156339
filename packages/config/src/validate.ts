import { addressToBigInt, bigIntToAddress, canonicalAddress, familyOf } from './address.js';
import { nearestName } from './names.js';
import {
  ADMIN_DEFAULTS, ADMIN_ROLES, ANY_CLIENT, DEFAULT_ADMIN_SOCKET, DEFAULT_VIP_GROUP, FALLBACKS, PREEMPT_POLICIES, TIMING_PROFILE_NAMES, DEFAULT_REALTIME_PRIORITY, VIP_GROUP_DEFAULTS, FORWARDING_MODES, HEALTH_CHECK_KINDS, HEALTH_DEFAULTS, HEALTH_STATES, HTTP_METHODS, MAX_WEIGHT, ON_DOWN,
  PROTOCOLS, SCHEDULERS, DR_SCHEDULERS, SERVICE_SYNC_DEFAULTS, connSyncPort, hostPort, serviceKey,
  DIRECTOR_ECMP_DEFAULTS, ECMP_DEFAULTS, MAX_SLOTS, ROUTE_ORIGINS, slotOfGroup,
  type AddressFamily, type AddressRange, type Endpoint, type PeerEndpoint, type AgentSettings, type Config, type Fallback, type FlapDamping, type ForwardingMode,
  type HealthCheck, type HealthCheckKind, type HealthState, type OnDown, type Protocol, type RealServer, type Scheduler,
  type AdminClientEntry, type AdminRole, type AdminSettings, type Service, type ClusterSettings, type TrackCheck, type PreemptPolicy, type TimingProfileName, type VipGroup, type PeerTls, type ServiceSync,
  type BgpRouter, type DirectorEcmp, type EcmpFamily, type EcmpTier, type RouteOrigin,
} from './types.js';

/**
 * Validation at the edge: raw parsed YAML/JSON in, a typed `Config` or the complete list of problems out.
 * Each problem names the path, the value, the rule it breaks and the fix, so an operator can correct
 * every mistake in one edit.
 */

export interface Problem {
  /** `services[1].realServers[0].weight` */
  readonly path: string;
  /** The offending value as found; undefined when missing (the rule then reads on its own: `a vip is required`). */
  readonly value: unknown;
  /** What is wrong, phrased to follow the value: `is not an IPv4 or IPv6 address`. Never contains ";". */
  readonly rule: string;
  /** What to do about it. Never contains ";". */
  readonly fix: string;
}

/** `path: VALUE rule; fix`, or `path: rule; fix` when the value is missing. One line, no trailing period. */
export function formatProblem(p: Problem): string {
  return p.value === undefined ? `${p.path}: ${p.rule}; ${p.fix}` : `${p.path}: ${formatValue(p.value)} ${p.rule}; ${p.fix}`;
}

/** JSON text of a value, except that NaN and ±Infinity (YAML `.nan`, `.inf`) keep their names instead of `null`. */
function formatValue(v: unknown): string {
  if (typeof v === 'number' && !Number.isFinite(v)) return String(v);
  if (typeof v === 'bigint') return v.toString();
  return JSON.stringify(v, (_k, x: unknown) => (typeof x === 'number' && !Number.isFinite(x) ? String(x) : x)) ?? String(v);
}

export type ValidationResult = { ok: true; config: Config } | { ok: false; problems: Problem[] };

const SERVICE_FIELDS = [
  'name', 'vip', 'port', 'protocol', 'mode', 'scheduler', 'persistenceSec', 'localAddresses',
  'expireOnRemove', 'realServers', 'healthCheck', 'onDown', 'slowStartMs', 'fallback', 'sorryServer', 'vipGroup', 'sync', 'ecmp',
  'synProxy', 'connectionLimit',
] as const;
const REAL_SERVER_FIELDS = ['address', 'port', 'weight', 'drained', 'healthCheck'] as const;
const TOP_FIELDS = ['agent', 'vipGroups', 'services', 'ecmp'] as const;
const AGENT_FIELDS = ['adminSocket', 'cluster', 'admin'] as const;
const ADMIN_FIELDS = ['grpcListen', 'httpListen', 'tls', 'clients'] as const;
/**
 * A client certificate's name as agent.admin.clients lists it: a DNS name or a common name such as
 * ops-alice or prometheus.example.org. No commas (the certificate's subjectAltName is a comma-separated
 * list) and no wildcards but `*` alone.
 */
const CLIENT_NAME_PATTERN = /^[A-Za-z0-9]([A-Za-z0-9 ._@-]{0,251}[A-Za-z0-9])?$/;
const CLUSTER_FIELDS = ['director', 'etcd', 'etcdTls', 'prefix', 'peerListen', 'peers', 'interfaces', 'priorities', 'timing', 'realtimePriority', 'track', 'tls', 'ecmp'] as const;
const TRACK_FIELDS = ['name', 'command', 'intervalMs', 'timeoutMs', 'rise', 'fall'] as const;
const VIP_GROUP_FIELDS = ['name', 'preempt', 'preemptDelayMs', 'announce', 'gateways'] as const;
/** Linux interface names: at most 15 bytes, no "/" or whitespace. */
const IFNAME_PATTERN = /^[A-Za-z0-9_.:-]{1,15}$/;
const NAME_PATTERN = /^[a-z0-9]([a-z0-9_.-]{0,61}[a-z0-9])?$/;
/** The kernel's conntrack table holds at most 2^31 entries; a limit above that is no limit. */
export const MAX_CONNECTION_LIMIT = 2 ** 31 - 1;
/** A year: persistence longer than that is a typo, not a policy. */
const MAX_PERSISTENCE_SEC = 365 * 24 * 3600;

class Collector {
  readonly problems: Problem[] = [];
  add(path: string, value: unknown, rule: string, fix: string): void {
    this.problems.push({ path, value, rule, fix });
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function typeName(v: unknown): string {
  if (v === null) return 'empty';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  return `a ${typeof v}`;
}

function checkUnknownFields(c: Collector, path: string, obj: Record<string, unknown>, known: readonly string[]): void {
  for (const key of Object.keys(obj)) {
    if (known.includes(key)) continue;
    const nearest = nearestName(key, known);
    const hint = nearest !== undefined ? `did you mean "${nearest}"?` : `known fields: ${known.join(', ')}`;
    c.add(`${path}${path ? '.' : ''}${key}`, obj[key], 'is not a known field', hint);
  }
}

/** A whole number written in quotes ("80"): the commonest way a number arrives as text. */
function isQuotedNumber(v: unknown): v is string {
  return typeof v === 'string' && /^\s*-?\d+\s*$/.test(v);
}

/** A whole number in [min, max], or a problem with `rule` and `fix` (numbers in quotes get their own). */
function checkWholeNumber(c: Collector, path: string, v: unknown, min: number, max: number, rule: string, fix: string): number | undefined {
  if (isQuotedNumber(v)) {
    c.add(path, v, 'is text, not a number', `write it without quotes: ${v.trim()}`);
    return undefined;
  }
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    c.add(path, v, rule, fix);
    return undefined;
  }
  return v;
}

function checkPort(c: Collector, path: string, v: unknown): number | undefined {
  if (v === undefined) {
    c.add(path, v, 'a port is required', 'give a whole number from 1 to 65535');
    return undefined;
  }
  return checkWholeNumber(c, path, v, 1, 65535, 'is not a port (a whole number from 1 to 65535)', 'give a whole number from 1 to 65535');
}

function checkEnum<T extends string>(c: Collector, path: string, v: unknown, allowed: readonly T[], dflt: T | undefined, what: string): T | undefined {
  if (v === undefined) {
    if (dflt !== undefined) return dflt;
    c.add(path, v, `a ${what} is required`, `set it to one of: ${allowed.join(', ')}`);
    return undefined;
  }
  if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v)) {
    const lower = typeof v === 'string' ? v.toLowerCase() : undefined;
    const fix = lower !== undefined && (allowed as readonly string[]).includes(lower)
      ? `write it in lower case: ${lower}` : `use one of: ${allowed.join(', ')}`;
    c.add(path, v, `is not a supported ${what}`, fix);
    return undefined;
  }
  return v as T;
}

/**
 * Why an address cannot be a vip, real server or local address, or null when it can. An IPv4-mapped IPv6
 * address would also print differently in `nft` output (::ffff:1.2.3.4), so it would never match what we render.
 */
function unusableAddress(address: string, family: AddressFamily): { rule: string; fix: string } | null {
  const n = addressToBigInt(address);
  const unicast = family === 4 ? 'give a unicast address such as 198.18.0.10' : 'give a unicast address such as fd00::10';
  if (n === 0n) return { rule: 'is the unspecified address', fix: unicast };
  if (family === 4) {
    if (n >> 28n === 0xen) return { rule: 'is a multicast address', fix: unicast };
    if (n === 0xffffffffn) return { rule: 'is the broadcast address', fix: unicast };
    return null;
  }
  if (n >> 120n === 0xffn) return { rule: 'is a multicast address', fix: unicast };
  if (n >> 32n === 0xffffn) return { rule: 'is an IPv4-mapped IPv6 address', fix: `write the IPv4 address ${bigIntToAddress(n & 0xffffffffn, 4)} instead` };
  return null;
}

/** 127.0.0.0/8 or ::1: an address every host has for itself, which no packet from another host reaches. */
function isLoopback(n: bigint, family: AddressFamily): boolean {
  return family === 4 ? n >> 24n === 127n : n === 1n;
}

/**
 * Why a vip, real server, sorry server or local address cannot be a loopback address (other addresses, a
 * health check's, gobgpd's API, may be one), or null when it is not one.
 */
function loopbackProblem(address: string, family: AddressFamily, role: 'vip' | 'server' | 'local'): { rule: string; fix: string } | null {
  if (!isLoopback(addressToBigInt(address), family)) return null;
  const ex = family === 4 ? { vip: '198.18.0.10', server: '198.19.1.11', local: '198.19.1.100' } : { vip: 'fd00::10', server: 'fd00:1::11', local: 'fd00:2::10' };
  switch (role) {
    case 'vip': return { rule: 'is a loopback address: packets to it never leave a host, so no client can reach the service', fix: `give the address clients connect to, such as ${ex.vip}` };
    case 'server': return { rule: 'is a loopback address: the director would send the traffic to itself, not to a server', fix: `give the server's own address, such as ${ex.server}` };
    case 'local': return { rule: 'is a loopback address: real servers cannot send their replies to it', fix: `give addresses the director owns on the real servers' network, such as ${ex.local}` };
  }
}

function checkAddress(c: Collector, path: string, v: unknown, what: string, role?: 'vip' | 'server'): { address: string; family: AddressFamily } | undefined {
  if (v === undefined) {
    c.add(path, v, `${what} is required`, 'give an IPv4 address such as 198.18.0.10 or an IPv6 address such as fd00::10');
    return undefined;
  }
  const family = typeof v === 'string' ? familyOf(v) : null;
  if (typeof v !== 'string' || family === null) {
    c.add(path, v, 'is not an IPv4 or IPv6 address', 'give an IPv4 address such as 198.18.0.10 or an IPv6 address such as fd00::10 (no prefix length, port or zone)');
    return undefined;
  }
  const unusable = unusableAddress(v, family) ?? (role === undefined ? null : loopbackProblem(v, family, role));
  if (unusable) {
    c.add(path, v, unusable.rule, unusable.fix);
    return undefined;
  }
  return { address: canonicalAddress(v), family };
}

/** Examples in the vip's family, so a fix can be copied as it stands. */
function poolExamples(family: AddressFamily | undefined): { one: string; range: string; two: string } {
  return family === 6
    ? { one: 'fd00:2::10', range: 'fd00:2::10-fd00:2::13', two: 'fd00:2::10, fd00:2::11' }
    : { one: '198.18.2.10', range: '198.18.2.10-198.18.2.13', two: '198.18.2.10, 198.18.2.11' };
}

/**
 * `localAddresses`: a list of addresses and `first-last` ranges that together form one contiguous range
 * (the SNAT pool is rendered as one `snat to FIRST-LAST`). Only fullnat has one.
 */
function checkLocalAddresses(c: Collector, path: string, v: unknown, mode: ForwardingMode | undefined, vipFamily: AddressFamily | undefined): AddressRange | null {
  if (mode === 'nat' || mode === 'dr') {
    if (v !== undefined && !(Array.isArray(v) && v.length === 0)) {
      c.add(path, v, `is set but ${mode} mode does not translate source addresses`, 'remove localAddresses, or use mode: fullnat');
    }
    return null;
  }
  if (mode !== 'fullnat') return null;
  const ex = poolExamples(vipFamily);
  if (v === undefined) {
    c.add(path, v, 'fullnat needs at least one local address (the SNAT pool real servers reply to)', `add localAddresses: [${ex.one}] or a range such as [${ex.range}], addresses this director owns`);
    return null;
  }
  if (Array.isArray(v) && v.length === 0) {
    c.add(path, v, 'is empty, but fullnat needs at least one local address (the SNAT pool real servers reply to)', `add an address such as ${ex.one} or a range such as ${ex.range}, addresses this director owns`);
    return null;
  }
  if (!Array.isArray(v)) {
    c.add(path, v, `is ${typeName(v)}, not a list`, `write a list such as [${ex.two}] or [${ex.range}]`);
    return null;
  }
  const spans: Span[] = [];
  let family = vipFamily;
  v.forEach((item, i) => {
    const other = vipFamily !== undefined ? 'the vip' : 'the first local address';
    const r = checkRange(c, `${path}[${i}]`, item, ex, family, (fam, want) => ({
      rule: `is IPv${fam} but ${other} is IPv${want}, and nftables NAT cannot translate between families`, fix: `use IPv${want} local addresses`,
    }));
    if (r === undefined) return;
    family ??= r.family;
    if (r.span === undefined) return;
    // A piece that reaches into 127.0.0.0/8 (or is ::1): its first loopback address is named.
    const [lo, hi] = r.family === 4 ? [127n << 24n, (128n << 24n) - 1n] : [1n, 1n];
    if (r.span.first <= hi && r.span.last >= lo) {
      const at = bigIntToAddress(r.span.first > lo ? r.span.first : lo, r.family);
      const lp = loopbackProblem(at, r.family, 'local')!;
      c.add(`${path}[${i}]`, item, r.span.first === r.span.last ? lp.rule : `holds ${at}, which ${lp.rule}`, lp.fix);
      return;
    }
    spans.push(r.span);
  });
  if (spans.length !== v.length || family === undefined) return null;
  const joined = joinSpans(c, path, v, spans, family);
  return joined === undefined ? null : toRange(joined.first, joined.last, family);
}

/** A piece of an address pool as written (`A` or `A-B`), as numbers. */
interface Span {
  readonly first: bigint;
  readonly last: bigint;
  readonly item: string;
}

/**
 * One piece of an address pool: an address or a `first-last` range, both ends of one family. Undefined when
 * it is not one, or not of the family `want` (the caller words that problem); otherwise its family, and its
 * span when it is usable (a problem is added when not).
 */
function checkRange(c: Collector, path: string, item: unknown, ex: { one: string; range: string }, want: AddressFamily | undefined,
  wrongFamily: (fam: AddressFamily, want: AddressFamily) => { rule: string; fix: string }): { family: AddressFamily; span: Span | undefined } | undefined {
  const parts = typeof item === 'string' ? item.split('-').map((x) => x.trim()) : [];
  const fams = parts.map((x) => familyOf(x));
  if (typeof item !== 'string' || parts.length > 2 || fams.some((f) => f === null) || (parts.length === 2 && fams[0] !== fams[1])) {
    c.add(path, item, 'is not an address or a first-last address range', `write ${ex.one} or ${ex.range}`);
    return undefined;
  }
  const fam = fams[0]!;
  if (want !== undefined && fam !== want) {
    const w = wrongFamily(fam, want);
    c.add(path, item, w.rule, w.fix);
    return undefined;
  }
  const unusable = parts.map((x) => unusableAddress(x, fam)).find((u) => u !== null);
  if (unusable) {
    c.add(path, item, unusable.rule, unusable.fix);
    return { family: fam, span: undefined };
  }
  const first = addressToBigInt(parts[0]!);
  const last = addressToBigInt(parts[1] ?? parts[0]!);
  if (last < first) {
    c.add(path, item, 'is a range whose last address comes before its first', 'write the lower address first');
    return { family: fam, span: undefined };
  }
  return { family: fam, span: { first, last, item } };
}

/**
 * Pieces that together form one contiguous range, listing no address twice, or undefined with the problem
 * added. `gap` words a gap (the default: the pieces of a service's pool).
 */
function joinSpans(c: Collector, path: string, v: unknown, pieces: readonly Span[], fam: AddressFamily,
  gap: (missing: string, example: string) => { rule: string; fix: string } = (missing, example) => ({
    rule: `is not one contiguous range (${missing} is missing)`, fix: `use consecutive addresses, e.g. ${example}, or add the missing ones`,
  })): { first: bigint; last: bigint } | undefined {
  const spans = [...pieces].sort((a, b) => (a.first < b.first ? -1 : a.first > b.first ? 1 : 0));
  for (let i = 1; i < spans.length; i++) {
    const prev = spans[i - 1]!;
    const cur = spans[i]!;
    if (cur.first <= prev.last) {
      c.add(path, v, `lists ${bigIntToAddress(cur.first, fam)} more than once (in "${prev.item}" and "${cur.item}")`, 'list each local address once');
      return undefined;
    }
  }
  for (let i = 1; i < spans.length; i++) {
    if (spans[i]!.first !== spans[i - 1]!.last + 1n) {
      const missing = bigIntToAddress(spans[i - 1]!.last + 1n, fam);
      const total = spans.reduce((n, s) => n + (s.last - s.first + 1n), 0n);
      const first = spans[0]!.first;
      const g = gap(missing, `${bigIntToAddress(first, fam)}-${bigIntToAddress(first + total - 1n, fam)}`);
      c.add(path, v, g.rule, g.fix);
      return undefined;
    }
  }
  return { first: spans[0]!.first, last: spans[spans.length - 1]!.last };
}

/** An AddressRange from numbers; its size is capped at 2^32 - 1, which no pool reaches in practice. */
function toRange(first: bigint, last: bigint, fam: AddressFamily): AddressRange {
  const size = last - first + 1n;
  return { first: bigIntToAddress(first, fam), last: bigIntToAddress(last, fam), size: size > 0xffffffffn ? 0xffffffff : Number(size) };
}

/** Real servers; a missing port means the service's port (as ipvsadm does), a missing weight means 1. */
const HEALTH_FIELDS = [
  'kind', 'intervalMs', 'timeoutMs', 'rise', 'fall', 'jitterMs', 'startState', 'address', 'port', 'send', 'expect',
  'method', 'path', 'host', 'expectStatus', 'bodyPattern', 'tlsVerify', 'sni', 'command', 'flapDamping',
] as const;
const FLAP_FIELDS = ['windowMs', 'maxTransitions', 'holdDownMs', 'maxHoldDownMs'] as const;

function checkFlapDamping(c: Collector, path: string, raw: unknown, base: FlapDamping): FlapDamping {
  if (raw === undefined) return base;
  if (!isRecord(raw)) {
    c.add(path, raw, `is ${typeName(raw)}, not a mapping`, 'write {windowMs: 60000, maxTransitions: 4, holdDownMs: 5000, maxHoldDownMs: 300000}');
    return base;
  }
  checkUnknownFields(c, path, raw, FLAP_FIELDS);
  const field = (k: (typeof FLAP_FIELDS)[number], min: number, rule: string, fix: string): number =>
    raw[k] === undefined ? base[k] : checkWholeNumber(c, `${path}.${k}`, raw[k], min, MAX_INTERVAL_MS * 24, rule, fix) ?? base[k];
  const out = {
    windowMs: field('windowMs', 1, 'is not a window (whole milliseconds, at least 1)', 'give whole milliseconds, e.g. 60000'),
    maxTransitions: field('maxTransitions', 0, 'is not a count of state changes (a whole number, 0 = no damping)', 'give a whole number, e.g. 4'),
    holdDownMs: field('holdDownMs', 1, 'is not a hold-down time (whole milliseconds, at least 1)', 'give whole milliseconds, e.g. 5000'),
    maxHoldDownMs: field('maxHoldDownMs', 1, 'is not a hold-down time (whole milliseconds, at least 1)', 'give whole milliseconds, e.g. 300000'),
  };
  if (out.maxHoldDownMs < out.holdDownMs) {
    c.add(`${path}.maxHoldDownMs`, out.maxHoldDownMs, `must be at least holdDownMs (${out.holdDownMs})`, `raise maxHoldDownMs to ${out.holdDownMs} or more`);
  }
  return out;
}
/** Fields that only some kinds of check use: giving one to another kind is a mistake worth naming. */
const KIND_ONLY: Partial<Record<(typeof HEALTH_FIELDS)[number], readonly HealthCheckKind[]>> = {
  port: ['tcp', 'http', 'https', 'udp'],
  send: ['tcp', 'udp'], expect: ['tcp', 'udp'],
  method: ['http', 'https'], path: ['http', 'https'], host: ['http', 'https'], expectStatus: ['http', 'https'], bodyPattern: ['http', 'https'],
  tlsVerify: ['https'], sni: ['https'],
  command: ['exec'],
};
const MIN_INTERVAL_MS = 50;
const MAX_INTERVAL_MS = 3_600_000;
const MAX_RISE_FALL = 100;

function checkText(c: Collector, path: string, v: unknown, what: string): string | undefined {
  if (typeof v !== 'string' || v.length === 0 || v.length > 4096) {
    c.add(path, v, `is not ${what}`, 'write it as non-empty text (quote it if it starts with a special character)');
    return undefined;
  }
  return v;
}

/** expectStatus: [200, "200-399", 301]: codes and inclusive ranges of HTTP status codes. */
function checkStatusList(c: Collector, path: string, v: unknown): Array<[number, number]> | undefined {
  const fix = 'write a list of status codes and ranges, e.g. [200, "300-399"]';
  if (!Array.isArray(v) || v.length === 0) {
    c.add(path, v, 'is not a list of HTTP status codes', fix);
    return undefined;
  }
  const out: Array<[number, number]> = [];
  for (const [i, item] of v.entries()) {
    const m = typeof item === 'string' ? /^\s*(\d{3})\s*-\s*(\d{3})\s*$/.exec(item) : null;
    const range: [number, number] | null = typeof item === 'number' && Number.isInteger(item) ? [item, item]
      : m ? [Number(m[1]), Number(m[2])] : typeof item === 'string' && /^\s*\d{3}\s*$/.test(item) ? [Number(item), Number(item)] : null;
    if (!range || range[0] < 100 || range[1] > 599 || range[1] < range[0]) {
      c.add(`${path}[${i}]`, item, 'is not an HTTP status code (100-599) or a "first-last" range of them', fix);
      return undefined;
    }
    out.push(range);
  }
  return out;
}

/**
 * A health check: the service's (`base` null) or a real server's overrides on top of the service's.
 * Returns null for "no check", undefined when there were problems (all of them added to `c`).
 */
function checkHealthCheck(c: Collector, path: string, raw: unknown, base: HealthCheck | null): HealthCheck | null | undefined {
  if (raw === undefined || raw === null) return base;
  if (!isRecord(raw)) {
    c.add(path, raw, `is ${typeName(raw)}, not a health check`, 'write a mapping such as {kind: http, path: /healthz, intervalMs: 1000}');
    return undefined;
  }
  const before = c.problems.length;
  checkUnknownFields(c, path, raw, HEALTH_FIELDS);
  const kind = checkEnum<HealthCheckKind>(c, `${path}.kind`, raw.kind, HEALTH_CHECK_KINDS, base?.kind, 'health check kind');
  const num = (field: 'intervalMs' | 'timeoutMs' | 'rise' | 'fall' | 'jitterMs', min: number, max: number, rule: string, fix: string, dflt: number): number => {
    if (raw[field] === undefined) return dflt;
    return checkWholeNumber(c, `${path}.${field}`, raw[field], min, max, rule, fix) ?? dflt;
  };
  const intervalMs = num('intervalMs', MIN_INTERVAL_MS, MAX_INTERVAL_MS, `is not an interval (whole milliseconds from ${MIN_INTERVAL_MS} to ${MAX_INTERVAL_MS})`,
    'give whole milliseconds, e.g. 1000', base?.intervalMs ?? HEALTH_DEFAULTS.intervalMs);
  const timeoutMs = num('timeoutMs', 1, MAX_INTERVAL_MS, 'is not a timeout (whole milliseconds, at least 1)', 'give whole milliseconds, less than intervalMs, e.g. 500',
    base?.timeoutMs ?? Math.min(HEALTH_DEFAULTS.timeoutMs, Math.floor(intervalMs / 2)));
  const rise = num('rise', 1, MAX_RISE_FALL, `is not a count of successes (a whole number from 1 to ${MAX_RISE_FALL})`, 'give a whole number, e.g. 2', base?.rise ?? HEALTH_DEFAULTS.rise);
  const fall = num('fall', 1, MAX_RISE_FALL, `is not a count of failures (a whole number from 1 to ${MAX_RISE_FALL})`, 'give a whole number, e.g. 3', base?.fall ?? HEALTH_DEFAULTS.fall);
  const jitterMs = num('jitterMs', 0, MAX_INTERVAL_MS, 'is not a jitter (whole milliseconds, 0 or more)', `give whole milliseconds up to half of intervalMs, e.g. ${Math.floor(intervalMs / 10)}`,
    raw.intervalMs === undefined && base ? base.jitterMs : Math.floor(intervalMs / 10));
  if (raw.timeoutMs !== undefined || raw.intervalMs !== undefined) {
    if (timeoutMs >= intervalMs && c.problems.length === before) {
      c.add(`${path}.timeoutMs`, timeoutMs, `must be less than intervalMs (${intervalMs})`, `lower timeoutMs below ${intervalMs} or raise intervalMs above ${timeoutMs}`);
    }
  }
  if (jitterMs > intervalMs / 2 && raw.jitterMs !== undefined) {
    c.add(`${path}.jitterMs`, jitterMs, `must be at most half of intervalMs (${intervalMs})`, `lower jitterMs to ${Math.floor(intervalMs / 2)} or less`);
  }
  const startState = checkEnum<HealthState>(c, `${path}.startState`, raw.startState, HEALTH_STATES, base?.startState ?? HEALTH_DEFAULTS.startState, 'start state');
  let address = base?.address ?? null;
  if (raw.address !== undefined) address = checkAddress(c, `${path}.address`, raw.address, 'a health check address')?.address ?? null;
  let port = base?.port ?? null;
  if (raw.port !== undefined) port = checkPort(c, `${path}.port`, raw.port) ?? null;

  if (kind !== undefined) {
    for (const [field, kinds] of Object.entries(KIND_ONLY)) {
      if (raw[field] !== undefined && !kinds.includes(kind)) {
        c.add(`${path}.${field}`, raw[field], `is not used by ${kind} checks (only by ${kinds.join(', ')})`, `remove it, or use kind: ${kinds[0]}`);
      }
    }
  }
  const sameKind = base !== null && base.kind === kind;
  const inherit = <K extends keyof HealthCheck>(k: K, dflt: HealthCheck[K]): HealthCheck[K] => (sameKind ? base![k] : dflt);
  let send = inherit('send', null);
  if (raw.send !== undefined) send = checkText(c, `${path}.send`, raw.send, 'text to send') ?? null;
  let expect = inherit('expect', null);
  if (raw.expect !== undefined) expect = checkText(c, `${path}.expect`, raw.expect, 'text to expect in the reply') ?? null;
  let method = inherit('method', HEALTH_DEFAULTS.method);
  if (raw.method !== undefined) method = checkEnum(c, `${path}.method`, raw.method, HTTP_METHODS, undefined, 'HTTP method') ?? method;
  let httpPath = inherit('path', HEALTH_DEFAULTS.path);
  if (raw.path !== undefined) {
    if (typeof raw.path !== 'string' || !raw.path.startsWith('/') || /\s/.test(raw.path)) {
      c.add(`${path}.path`, raw.path, 'is not an HTTP path (it starts with "/" and has no spaces)', 'write a path such as /healthz');
    } else {
      httpPath = raw.path;
    }
  }
  let host = inherit('host', null);
  if (raw.host !== undefined) host = checkText(c, `${path}.host`, raw.host, 'a Host header value') ?? null;
  let expectStatus = inherit('expectStatus', HEALTH_DEFAULTS.expectStatus);
  if (raw.expectStatus !== undefined) expectStatus = checkStatusList(c, `${path}.expectStatus`, raw.expectStatus) ?? expectStatus;
  let bodyPattern = inherit('bodyPattern', null);
  if (raw.bodyPattern !== undefined) {
    const text = checkText(c, `${path}.bodyPattern`, raw.bodyPattern, 'a regular expression');
    if (text !== undefined) {
      try {
        new RegExp(text);
        bodyPattern = text;
      } catch (e) {
        c.add(`${path}.bodyPattern`, raw.bodyPattern, `is not a valid regular expression (${(e as Error).message.replace(/^Invalid regular expression: /, '')})`, 'escape special characters with \\, or write a plain word');
      }
    }
  }
  let tlsVerify = inherit('tlsVerify', HEALTH_DEFAULTS.tlsVerify);
  if (raw.tlsVerify !== undefined) {
    if (typeof raw.tlsVerify !== 'boolean') c.add(`${path}.tlsVerify`, raw.tlsVerify, 'is not true or false', 'write true to verify the real server\'s certificate, false to accept any');
    else tlsVerify = raw.tlsVerify;
  }
  let sni = inherit('sni', null);
  if (raw.sni !== undefined) sni = checkText(c, `${path}.sni`, raw.sni, 'a TLS server name') ?? null;
  let command = inherit('command', null);
  if (raw.command !== undefined) {
    if (!Array.isArray(raw.command) || raw.command.length === 0 || raw.command.some((a) => typeof a !== 'string' || a.length === 0)) {
      c.add(`${path}.command`, raw.command, 'is not a command (a list: the program, then its arguments)', 'write e.g. [/usr/local/bin/check-db, --quick]; the real server is in $LBD_RS_ADDRESS and $LBD_RS_PORT');
    } else {
      command = raw.command as string[];
    }
  }
  const flapDamping = checkFlapDamping(c, `${path}.flapDamping`, raw.flapDamping, base?.flapDamping ?? HEALTH_DEFAULTS.flapDamping);
  if (kind === 'udp' && send === null && c.problems.length === before) {
    c.add(`${path}.send`, undefined, 'a udp check needs something to send', 'add send: the datagram the real server answers, and optionally expect');
  }
  if (kind === 'exec' && command === null && c.problems.length === before) {
    c.add(`${path}.command`, undefined, 'an exec check needs a command', 'add command: [/path/to/check, arg...]; exit status 0 means up');
  }
  if (c.problems.length !== before || kind === undefined) return undefined;
  return {
    kind, intervalMs, timeoutMs, rise, fall, jitterMs, startState: startState!, address, port, send, expect, method, path: httpPath,
    host, expectStatus, bodyPattern, tlsVerify, sni, command, flapDamping,
  };
}

function checkRealServers(c: Collector, path: string, v: unknown, vip: { address: string; family: AddressFamily } | undefined, servicePort: number | undefined, serviceCheck: HealthCheck | null): RealServer[] | undefined {
  const family = vip?.family;
  if (v === undefined) return [];
  if (!Array.isArray(v)) {
    c.add(path, v, `is ${typeName(v)}, not a list`, 'write a list of {address, port, weight} entries, or [] for none');
    return undefined;
  }
  const out: RealServer[] = [];
  const seen = new Map<string, number>();
  v.forEach((raw, i) => {
    const p = `${path}[${i}]`;
    if (!isRecord(raw)) {
      c.add(p, raw, `is ${typeName(raw)}, not a real server`, 'write {address: 198.18.1.11, port: 8080, weight: 1}');
      return;
    }
    checkUnknownFields(c, p, raw, REAL_SERVER_FIELDS);
    const addr = checkAddress(c, `${p}.address`, raw.address, 'a real server address', 'server');
    if (addr && family !== undefined && addr.family !== family) {
      c.add(`${p}.address`, raw.address, `is IPv${addr.family} but the vip is IPv${family}, and nftables NAT cannot translate between families`, `use an IPv${family} real server, or put it in a service with an IPv${addr.family} vip`);
    }
    if (addr && addr.address === vip?.address) {
      c.add(`${p}.address`, raw.address, 'is the service\'s own vip: the director would send the vip\'s traffic back to the vip, never to a server',
        'give the real server\'s own address (the vip is the address clients connect to)');
      return;
    }
    // Without a port of its own, a real server takes the service's; when that one is bad, its problem is already listed.
    const port = raw.port === undefined ? servicePort : checkPort(c, `${p}.port`, raw.port);
    let weight = 1;
    if (raw.weight !== undefined) {
      const w = checkWholeNumber(c, `${p}.weight`, raw.weight, 0, MAX_WEIGHT,
        `is not a weight (a whole number from 0 to ${MAX_WEIGHT}, 0 = quiescent)`, `give a whole number from 0 to ${MAX_WEIGHT}`);
      if (w === undefined) return;
      weight = w;
    }
    let drained = false;
    if (raw.drained !== undefined) {
      if (typeof raw.drained !== 'boolean') {
        c.add(`${p}.drained`, raw.drained, 'is not true or false', 'write true to drain it (weight 0, established connections live on), or remove the field (lbadm server enable does)');
        return;
      }
      drained = raw.drained;
    }
    const healthCheck = checkHealthCheck(c, `${p}.healthCheck`, raw.healthCheck, serviceCheck);
    if (!addr || port === undefined || healthCheck === undefined || (family !== undefined && addr.family !== family)) return;
    const key = `${addr.address}#${port}`;
    const first = seen.get(key);
    if (first !== undefined) {
      c.add(p, hostPort(addr.address, port), `repeats ${path}[${first}] (same address and port)`, 'list each real server once (to send it more traffic, raise its weight)');
      return;
    }
    seen.set(key, i);
    // Drained means weight 0 from here on, so nothing downstream can program a drained server at its weight.
    out.push(drained ? { address: addr.address, port, weight: 0, drained: true, healthCheck } : { address: addr.address, port, weight, healthCheck });
  });
  return out;
}

function checkService(c: Collector, path: string, raw: unknown): Service | undefined {
  if (!isRecord(raw)) {
    c.add(path, raw, `is ${typeName(raw)}, not a service`, 'write a mapping with name, vip, port, protocol, mode and realServers');
    return undefined;
  }
  const before = c.problems.length;
  checkUnknownFields(c, path, raw, SERVICE_FIELDS);

  let name: string | undefined;
  if (typeof raw.name !== 'string' || !NAME_PATTERN.test(raw.name)) {
    c.add(`${path}.name`, raw.name, raw.name === undefined ? 'a service name is required' : 'is not a valid service name',
      'use 1 to 63 lower-case letters, digits, "-", "_" or ".", starting and ending with a letter or digit');
  } else {
    name = raw.name;
  }
  const vip = checkAddress(c, `${path}.vip`, raw.vip, 'a vip', 'vip');
  const port = checkPort(c, `${path}.port`, raw.port);
  const protocol = checkEnum<Protocol>(c, `${path}.protocol`, raw.protocol, PROTOCOLS, 'tcp', 'protocol');
  const mode = checkEnum<ForwardingMode>(c, `${path}.mode`, raw.mode, FORWARDING_MODES, undefined, 'forwarding mode');
  // A dr service's default is mh: the stateless schedulers are the only ones it may use (checkDirectRouting).
  const scheduler = checkEnum<Scheduler>(c, `${path}.scheduler`, raw.scheduler, SCHEDULERS, mode === 'dr' ? 'mh' : 'wrr', 'scheduler');

  let persistenceSec = 0;
  if (raw.persistenceSec !== undefined) {
    persistenceSec = checkWholeNumber(c, `${path}.persistenceSec`, raw.persistenceSec, 0, MAX_PERSISTENCE_SEC,
      `is not a persistence time (whole seconds from 0 to ${MAX_PERSISTENCE_SEC}, 0 = off)`,
      'give whole seconds, e.g. 300, or 0 for no source-address affinity') ?? 0;
  }
  let expireOnRemove = false;
  if (raw.expireOnRemove !== undefined) {
    if (typeof raw.expireOnRemove !== 'boolean') {
      c.add(`${path}.expireOnRemove`, raw.expireOnRemove, 'is not true or false',
        typeof raw.expireOnRemove === 'string' ? 'write true or false without quotes'
          : 'write true to expire a removed real server\'s connections, false to let them finish');
    } else {
      expireOnRemove = raw.expireOnRemove;
    }
  }
  // undefined: not a boolean (its problem is listed), so whether the service needs local addresses is not known.
  let ecmp: boolean | undefined = false;
  if (raw.ecmp !== undefined) {
    if (typeof raw.ecmp !== 'boolean') {
      c.add(`${path}.ecmp`, raw.ecmp, 'is not true or false', 'write true to serve it through the ECMP tier (every director active behind BGP routers), or false to have a vip group\'s leader serve it (the default)');
      ecmp = undefined;
    } else {
      ecmp = raw.ecmp;
    }
  }
  // fullnat brings replies back to the slot that took the connection (its local addresses); dr needs no
  // way back (the real server answers the client) and no state (every director hashes a flow alike). A nat
  // real server sends its replies to its one default gateway, which is no slot's.
  if (ecmp && mode === 'nat') {
    c.add(`${path}.ecmp`, true, 'needs mode: fullnat (replies come back to the slot that took the connection, through its local addresses) or dr (replies go from the real server to the client), but mode is nat, whose replies go to the real server\'s one gateway',
      'set mode: fullnat or dr, or ecmp: false');
  }
  let localAddresses: AddressRange | null = null;
  if (ecmp === false) {
    localAddresses = checkLocalAddresses(c, `${path}.localAddresses`, raw.localAddresses, mode, vip?.family);
  } else if (ecmp && raw.localAddresses !== undefined && !(Array.isArray(raw.localAddresses) && raw.localAddresses.length === 0)) {
    const pools = vip === undefined ? 'ecmp.ipv4 or ecmp.ipv6' : `ecmp.ipv${vip.family}`;
    c.add(`${path}.localAddresses`, raw.localAddresses, `is set but an ECMP service (ecmp: true) uses its slots' local addresses (${pools}.localAddresses)`, 'remove localAddresses');
  }
  const serviceCheck = checkHealthCheck(c, `${path}.healthCheck`, raw.healthCheck, null);
  const realServers = checkRealServers(c, `${path}.realServers`, raw.realServers, vip, port, serviceCheck ?? null);
  const onDown = checkEnum<OnDown>(c, `${path}.onDown`, raw.onDown, ON_DOWN, 'quiesce', 'onDown action');
  const slowStartMs = raw.slowStartMs === undefined ? 0 : checkWholeNumber(c, `${path}.slowStartMs`, raw.slowStartMs, 0, MAX_INTERVAL_MS,
    `is not a slow-start time (whole milliseconds from 0 to ${MAX_INTERVAL_MS}, 0 = off)`, 'give whole milliseconds, e.g. 10000, or 0 to restore full weight at once');
  const fallback = checkEnum<Fallback>(c, `${path}.fallback`, raw.fallback, FALLBACKS, 'drop', 'fallback');
  let sorryServer: Service['sorryServer'] = null;
  if (raw.sorryServer !== undefined) {
    if (!isRecord(raw.sorryServer)) {
      c.add(`${path}.sorryServer`, raw.sorryServer, `is ${typeName(raw.sorryServer)}, not a server`, 'write {address: 198.19.1.99, port: 8080}');
    } else {
      checkUnknownFields(c, `${path}.sorryServer`, raw.sorryServer, ['address', 'port']);
      const a = checkAddress(c, `${path}.sorryServer.address`, raw.sorryServer.address, 'a sorry server address', 'server');
      const sp = raw.sorryServer.port === undefined ? port : checkPort(c, `${path}.sorryServer.port`, raw.sorryServer.port);
      if (a && vip && a.family !== vip.family) {
        c.add(`${path}.sorryServer.address`, raw.sorryServer.address, `is IPv${a.family} but the vip is IPv${vip.family}, and nftables NAT cannot translate between families`, `use an IPv${vip.family} sorry server`);
      } else if (a && sp !== undefined) {
        if (a.address === vip?.address) {
          c.add(`${path}.sorryServer.address`, raw.sorryServer.address, 'is the service\'s own vip: the director would send the vip\'s traffic back to the vip, never to a server',
            'give the sorry server\'s own address (the vip is the address clients connect to)');
        } else if (realServers?.some((rs) => rs.address === a.address && rs.port === sp)) {
          c.add(`${path}.sorryServer`, hostPort(a.address, sp), 'is also one of the real servers', 'give a sorry server that is not in realServers (it only serves when they are all down)');
        } else {
          sorryServer = { address: a.address, port: sp };
        }
      }
    }
  }
  if (fallback === 'sorry-server' && raw.sorryServer === undefined) {
    c.add(`${path}.sorryServer`, undefined, 'fallback sorry-server needs a sorry server', 'add sorryServer: {address: ..., port: ...}, or choose another fallback: drop, reject, keep-last');
  } else if (fallback !== 'sorry-server' && raw.sorryServer !== undefined) {
    c.add(`${path}.sorryServer`, raw.sorryServer, `is set but fallback is ${fallback ?? 'invalid'}`, 'set fallback: sorry-server to use it, or remove sorryServer');
  }
  // An ECMP service belongs to no vip group: '' matches none, so no group's leader ever claims its vip.
  let vipGroup: string | undefined = ecmp ? '' : DEFAULT_VIP_GROUP;
  if (raw.vipGroup !== undefined && ecmp) {
    c.add(`${path}.vipGroup`, raw.vipGroup, 'is set but an ECMP service (ecmp: true) belongs to no vip group: every director serves it, through the slots it owns', 'remove vipGroup');
  } else if (raw.vipGroup !== undefined) {
    vipGroup = checkName(c, `${path}.vipGroup`, raw.vipGroup, 'vip group name');
    if (vipGroup !== undefined && !checkNotSlotGroup(c, `${path}.vipGroup`, vipGroup)) vipGroup = undefined;
  }
  const sync = checkServiceSync(c, `${path}.sync`, raw.sync);
  if (mode === 'dr') checkDirectRouting(c, path, raw, { scheduler, persistenceSec, port, realServers, sorryServer, fallback });
  const synProxy = checkSynProxy(c, path, raw, { protocol, mode, ecmp });
  const connectionLimit = checkConnectionLimit(c, path, raw, mode);
  if (slowStartMs === undefined || onDown === undefined || fallback === undefined || vipGroup === undefined || sync === undefined || ecmp === undefined) return undefined;
  if (synProxy === undefined || connectionLimit === undefined) return undefined;

  if (c.problems.length !== before) return undefined;
  return {
    name: name!, family: vip!.family, vip: vip!.address, port: port!, protocol: protocol!, mode: mode!,
    scheduler: scheduler!, persistenceSec, localAddresses, expireOnRemove, realServers: realServers!,
    onDown, slowStartMs, fallback, sorryServer, vipGroup, sync, ecmp, synProxy, connectionLimit,
  };
}

/**
 * synProxy: the kernel completes the client's handshake with a syncookie before anything else happens, then
 * opens the connection to the real server itself. Where that cannot work, it is refused rather than half done.
 */
function checkSynProxy(c: Collector, path: string, raw: Record<string, unknown>, svc: {
  protocol: Protocol | undefined; mode: ForwardingMode | undefined; ecmp: boolean | undefined;
}): boolean | undefined {
  const p = `${path}.synProxy`;
  if (raw.synProxy === undefined) return false;
  if (typeof raw.synProxy !== 'boolean') {
    c.add(p, raw.synProxy, 'is not true or false', typeof raw.synProxy === 'string' ? 'write true or false without quotes'
      : 'write true to answer this service\'s SYNs with syncookies (SYN-flood defence), false for none (the default)');
    return undefined;
  }
  if (!raw.synProxy) return false;
  const before = c.problems.length;
  if (svc.protocol === 'udp') {
    c.add(p, true, 'is set on a UDP service, but a SYN proxy completes TCP handshakes', 'remove synProxy, or set protocol: tcp');
  }
  if (svc.mode === 'dr') {
    c.add(p, true, 'is set on a dr service, but the proxy must see the whole handshake and a dr real server answers the client directly',
      'remove synProxy, or use mode fullnat or nat');
  }
  if (svc.ecmp) {
    c.add(p, true, 'is set on an ECMP service, but the proxy\'s own connection to the real server arrives on no slot interface, so no slot\'s local address could take it',
      'remove synProxy, or serve the service from a vip group (ecmp: false)');
  }
  return c.problems.length === before ? true : undefined;
}

/** connectionLimit: a whole number of conntrack entries, or absent for no limit. dr services have no entries to count. */
function checkConnectionLimit(c: Collector, path: string, raw: Record<string, unknown>, mode: ForwardingMode | undefined): number | null | undefined {
  const p = `${path}.connectionLimit`;
  if (raw.connectionLimit === undefined || raw.connectionLimit === null) return null;
  const n = checkWholeNumber(c, p, raw.connectionLimit, 1, MAX_CONNECTION_LIMIT, `is not a connection limit (a whole number of connections from 1 to ${MAX_CONNECTION_LIMIT})`,
    'give the most connections this service may hold on a director, e.g. 100000, or remove connectionLimit for none');
  if (n === undefined) return undefined;
  if (mode === 'dr') {
    c.add(p, n, 'is set on a dr service, but dr keeps no conntrack entry per connection, so there is nothing to count', 'remove connectionLimit, or use mode fullnat or nat');
    return undefined;
  }
  return n;
}

/**
 * What a dr service cannot have. No director keeps a connection's state that another shares (a director's flow
 * memory is its own, and may be full), so a packet is hashed to its real server again wherever no memory holds
 * its flow: only mh and sh do that the same way on every director and across reloads, and
 * persistence (which is state) is refused, sh being the stateless way to keep a client on one server. The
 * packet reaches the real server unchanged, so a real server (and a sorry server) serves the vip's own port.
 */
function checkDirectRouting(c: Collector, path: string, raw: Record<string, unknown>, svc: {
  scheduler: Scheduler | undefined; persistenceSec: number; port: number | undefined;
  realServers: readonly RealServer[] | undefined; sorryServer: Service['sorryServer']; fallback: Fallback | undefined;
}): void {
  if (svc.scheduler !== undefined && !DR_SCHEDULERS.includes(svc.scheduler)) {
    c.add(`${path}.scheduler`, raw.scheduler, `is ${svc.scheduler}, but a dr flow is remembered only by the director that saw it, and any other director schedules its packets again, so only a hash of the packet (mh, sh) keeps a connection on one real server through a failover`,
      'use scheduler: mh (weighted Maglev, the default for dr) or sh (source hash), or another mode');
  }
  if (svc.persistenceSec > 0) {
    c.add(`${path}.persistenceSec`, raw.persistenceSec, 'is set, but a dr service keeps no state (persistence records each client\'s real server)',
      'remove persistenceSec and use scheduler: sh to keep each client on one real server, or use mode fullnat or nat');
  }
  if (svc.port === undefined) return;
  (svc.realServers ?? []).forEach((rs, i) => {
    if (rs.port !== svc.port) {
      c.add(`${path}.realServers[${i}].port`, rs.port, `is not the service's port ${svc.port}: dr does not rewrite the packet, so the real server receives it on the vip's port`,
        `remove the port (it defaults to ${svc.port}), or use mode fullnat or nat to translate ports`);
    }
  });
  if (svc.sorryServer !== null && svc.sorryServer.port !== svc.port) {
    c.add(`${path}.sorryServer.port`, svc.sorryServer.port, `is not the service's port ${svc.port}: dr does not rewrite the packet`, `remove the port (it defaults to ${svc.port})`);
  }
}

/** `slot-<n>` is slot n's election group (slotGroup): a vip group of that name would share its election. */
function checkNotSlotGroup(c: Collector, path: string, name: string): boolean {
  const slot = slotOfGroup(name);
  if (slot === null) return true;
  c.add(path, name, `is reserved for the ECMP tier's slot ${slot} (vip group names slot-<n> are the slots' election groups)`, 'give the vip group another name');
  return false;
}

function checkName(c: Collector, path: string, v: unknown, what: string): string | undefined {
  if (typeof v !== 'string' || !NAME_PATTERN.test(v)) {
    c.add(path, v, v === undefined ? `a ${what} is required` : `is not a valid ${what}`,
      'use 1 to 63 lower-case letters, digits, "-", "_" or ".", starting and ending with a letter or digit');
    return undefined;
  }
  return v;
}

/** `host:port` with an IPv4 or bracketed IPv6 address. */
function checkHostPort(c: Collector, path: string, v: unknown): Endpoint | undefined {
  const m = typeof v === 'string' ? /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d+)$/.exec(v) : null;
  const fix = 'write address:port, e.g. 198.18.4.1:7411 or [fd00::1]:7411';
  if (!m) {
    c.add(path, v, v === undefined ? 'an address:port is required' : 'is not address:port', fix);
    return undefined;
  }
  const address = checkAddress(c, path, m[1] ?? m[2], 'an address');
  const port = Number(m[3]);
  if (!(port >= 1 && port <= 65535)) {
    c.add(path, v, 'has a port outside 1 to 65535', fix);
    return undefined;
  }
  return address ? { address: address.address, port } : undefined;
}

/** A peer link's port leaves room for connection sync on the next one (connSyncPort). */
function checkPeerPort(c: Collector, path: string, v: unknown, hp: Endpoint | undefined): Endpoint | undefined {
  if (hp && connSyncPort(hp.port) > 65535) {
    c.add(path, v, `has port ${hp.port}, which leaves no port for connection sync (it listens on the next one)`, 'give a port from 1 to 65534, e.g. 7411 (connection sync then uses 7412)');
    return undefined;
  }
  return hp;
}

function checkCluster(c: Collector, raw: unknown): ClusterSettings | null {
  const path = 'agent.cluster';
  if (!isRecord(raw)) {
    c.add(path, raw, `is ${typeName(raw)}, not a mapping`, 'write cluster: {director: dir1, etcd: [http://...:2379], prefix: /lbd/prod, peerListen: ..., peers: [...], interfaces: {vip: eth0, local: eth1}}');
    return null;
  }
  const before = c.problems.length;
  checkUnknownFields(c, path, raw, CLUSTER_FIELDS);
  const director = checkName(c, `${path}.director`, raw.director, 'director id');
  const etcd: string[] = [];
  if (!Array.isArray(raw.etcd) || raw.etcd.length === 0) {
    c.add(`${path}.etcd`, raw.etcd, 'is not a list of etcd client URLs', 'list every member, e.g. [http://198.18.3.11:2379, http://198.18.3.12:2379, http://198.18.3.13:2379]');
  } else {
    raw.etcd.forEach((u: unknown, i: number) => {
      let ok = false;
      try { ok = typeof u === 'string' && ['http:', 'https:'].includes(new URL(u).protocol); } catch { ok = false; }
      if (!ok) c.add(`${path}.etcd[${i}]`, u, 'is not an http:// or https:// URL', 'give a client URL such as http://198.18.3.11:2379');
      else etcd.push(u as string);
    });
  }
  let prefix: string | undefined;
  if (typeof raw.prefix !== 'string' || !/^\/[A-Za-z0-9_.\/-]*[A-Za-z0-9_.-]$/.test(raw.prefix)) {
    c.add(`${path}.prefix`, raw.prefix, raw.prefix === undefined ? 'an etcd key prefix is required' : 'is not an etcd key prefix', 'give an absolute path without a trailing slash, e.g. /lbd/prod (every director of the cluster uses the same)');
  } else prefix = raw.prefix;
  const peerListen = checkPeerPort(c, `${path}.peerListen`, raw.peerListen, checkHostPort(c, `${path}.peerListen`, raw.peerListen));
  const peers: PeerEndpoint[] = [];
  const peerIds = new Set<string>();
  if (raw.peers !== undefined && !Array.isArray(raw.peers)) {
    c.add(`${path}.peers`, raw.peers, `is ${typeName(raw.peers)}, not a list`, 'list the other directors: [{id: dir2, address: 198.18.4.2:7411}], or [] for a cluster of one');
  } else {
    ((raw.peers ?? []) as unknown[]).forEach((p, i) => {
      const pp = `${path}.peers[${i}]`;
      if (!isRecord(p)) { c.add(pp, p, `is ${typeName(p)}, not a peer`, 'write {id: dir2, address: 198.18.4.2:7411}'); return; }
      checkUnknownFields(c, pp, p, ['id', 'address']);
      const id = checkName(c, `${pp}.id`, p.id, 'director id');
      const hp = checkPeerPort(c, `${pp}.address`, p.address, checkHostPort(c, `${pp}.address`, p.address));
      if (id !== undefined && id === director) c.add(`${pp}.id`, id, 'is this director itself', 'list only the other directors');
      else if (id !== undefined && peerIds.has(id)) c.add(`${pp}.id`, id, 'is listed twice', 'list every peer once');
      else if (id !== undefined && hp) peers.push({ id, ...hp });
      if (id !== undefined) peerIds.add(id);
    });
  }
  const interfaces = { vip: '', local: '' };
  if (!isRecord(raw.interfaces)) {
    c.add(`${path}.interfaces`, raw.interfaces, raw.interfaces === undefined ? 'interfaces are required' : `is ${typeName(raw.interfaces)}, not a mapping`, 'write interfaces: {vip: eth0, local: eth1} (where vips and where local addresses go)');
  } else {
    checkUnknownFields(c, `${path}.interfaces`, raw.interfaces, ['vip', 'local']);
    for (const k of ['vip', 'local'] as const) {
      const v = checkInterfaceName(c, `${path}.interfaces.${k}`, raw.interfaces[k]);
      if (v !== undefined) interfaces[k] = v;
    }
  }
  const priorities: Record<string, number> = {};
  if (raw.priorities !== undefined) {
    if (!isRecord(raw.priorities)) {
      c.add(`${path}.priorities`, raw.priorities, `is ${typeName(raw.priorities)}, not a mapping`, 'write priorities: {default: 150} (vip group: priority from 1 to 255)');
    } else {
      for (const [g, v] of Object.entries(raw.priorities)) {
        const gname = checkName(c, `${path}.priorities`, g, 'vip group name');
        const n = checkWholeNumber(c, `${path}.priorities.${g}`, v, 1, 255, 'is not a priority (a whole number from 1 to 255)', 'give a whole number from 1 to 255; the highest healthy director leads');
        if (gname !== undefined && n !== undefined) priorities[gname] = n;
      }
    }
  }
  const timing = checkEnum<TimingProfileName>(c, `${path}.timing`, raw.timing, TIMING_PROFILE_NAMES, 'default', 'timing profile');
  const realtimePriority = raw.realtimePriority === undefined ? DEFAULT_REALTIME_PRIORITY
    : checkWholeNumber(c, `${path}.realtimePriority`, raw.realtimePriority, 0, 99, 'is not a real-time priority (a whole number from 0 to 99)',
      `give 1..99 for the election thread's SCHED_FIFO priority (default ${DEFAULT_REALTIME_PRIORITY}), or 0 for normal priority`);
  const track = checkTrack(c, `${path}.track`, raw.track);
  const tls = checkPeerTls(c, `${path}.tls`, raw.tls);
  const etcdTls = checkEtcdTls(c, path, raw, etcd);
  const ecmp = checkDirectorEcmp(c, `${path}.ecmp`, raw.ecmp);
  if (c.problems.length !== before || director === undefined || prefix === undefined || !peerListen || timing === undefined || realtimePriority === undefined || ecmp === undefined) return null;
  return { director, etcd, etcdTls, prefix, peerListen, peers, interfaces, priorities, timing, realtimePriority, track, tls, ecmp };
}

function checkInterfaceName(c: Collector, path: string, v: unknown): string | undefined {
  if (typeof v !== 'string' || !IFNAME_PATTERN.test(v)) {
    c.add(path, v, v === undefined ? 'an interface name is required' : 'is not an interface name', 'give a Linux interface name such as eth0 (at most 15 characters)');
    return undefined;
  }
  return v;
}

const DIRECTOR_ECMP_FIELDS = ['interface', 'routerId', 'gobgpApi', 'runGobgpd'] as const;
/** sun_path holds 108 bytes with the terminating NUL. */
const MAX_UNIX_SOCKET_PATH = 107;
const ROUTER_ID_FIX = 'give an IPv4 address unique in the tier, usually this director\'s IPv4 address on the fabric, e.g. 198.18.9.11';

/**
 * agent.cluster.ecmp: this director's side of the tier. Null when absent (it serves no ECMP service),
 * undefined when it has problems.
 */
function checkDirectorEcmp(c: Collector, path: string, raw: unknown): DirectorEcmp | null | undefined {
  if (raw === undefined || raw === null) return null;
  if (!isRecord(raw)) {
    c.add(path, raw, `is ${typeName(raw)}, not a mapping`, 'write ecmp: {interface: fab0, routerId: 198.18.9.11}, or leave it out');
    return undefined;
  }
  const before = c.problems.length;
  checkUnknownFields(c, path, raw, DIRECTOR_ECMP_FIELDS);
  let iface = checkInterfaceName(c, `${path}.interface`, raw.interface);
  const slotIface = iface === undefined ? null : /^lbds(\d+)$/.exec(iface);
  if (slotIface) {
    c.add(`${path}.interface`, iface, `is the name of slot ${Number(slotIface[1])}'s macvlan (lbd names them lbds<n>)`, 'give the fabric interface the slots\' macvlans are made on, e.g. fab0');
    iface = undefined;
  }
  const routerId = checkRouterId(c, `${path}.routerId`, raw.routerId);
  const gobgpApi = raw.gobgpApi === undefined ? DIRECTOR_ECMP_DEFAULTS.gobgpApi : checkGobgpApi(c, `${path}.gobgpApi`, raw.gobgpApi);
  let runGobgpd: boolean | undefined = DIRECTOR_ECMP_DEFAULTS.runGobgpd;
  if (raw.runGobgpd !== undefined && typeof raw.runGobgpd !== 'boolean') {
    c.add(`${path}.runGobgpd`, raw.runGobgpd, 'is not true or false', 'write true to have lbd-agent start and supervise gobgpd, false to use one already running at gobgpApi');
    runGobgpd = undefined;
  } else if (raw.runGobgpd !== undefined) {
    runGobgpd = raw.runGobgpd;
  }
  if (runGobgpd === true && gobgpApi !== undefined && !gobgpApi.startsWith('unix:')) {
    // GobgpdProcess gives the gobgpd it runs a unix socket only: reachable by file permission, not by anyone on the box.
    c.add(`${path}.gobgpApi`, raw.gobgpApi, 'is host:port, but the gobgpd lbd-agent runs (runGobgpd: true) serves its API on a unix socket only',
      'use a unix:///PATH address such as unix:///run/lbd/gobgpd.sock, or set runGobgpd: false to use a gobgpd already listening there');
  }
  if (c.problems.length !== before || iface === undefined || routerId === undefined || gobgpApi === undefined || runGobgpd === undefined) return undefined;
  return { interface: iface, routerId, gobgpApi, runGobgpd };
}

/** A BGP router id: 4 bytes, written as an IPv4 address even on an IPv6-only director. */
function checkRouterId(c: Collector, path: string, v: unknown): string | undefined {
  if (v === undefined) {
    c.add(path, v, 'a BGP router id is required', ROUTER_ID_FIX);
    return undefined;
  }
  const fam = typeof v === 'string' ? familyOf(v) : null;
  if (typeof v !== 'string' || fam !== 4) {
    c.add(path, v, fam === 6 ? 'is an IPv6 address, but a BGP router id is 4 bytes written as an IPv4 address (even on an IPv6-only fabric)' : 'is not an IPv4 address', ROUTER_ID_FIX);
    return undefined;
  }
  const unusable = unusableAddress(v, 4);
  if (unusable) {
    c.add(path, v, unusable.rule, ROUTER_ID_FIX);
    return undefined;
  }
  return canonicalAddress(v);
}

/** gobgpd's gRPC API: `unix:///absolute/path` or `host:port` (an IPv4 address, a [bracketed] IPv6 one, or a name). */
function checkGobgpApi(c: Collector, path: string, v: unknown): string | undefined {
  const fix = 'write unix:///run/lbd/gobgpd.sock (a unix socket, the default) or host:port such as 127.0.0.1:50051';
  if (typeof v !== 'string') {
    c.add(path, v, 'is not a gRPC address (unix:///PATH or host:port)', fix);
    return undefined;
  }
  if (v.startsWith('unix:')) {
    const m = /^unix:\/\/(\/\S*[^/\s])$/.exec(v);
    if (m === null) {
      c.add(path, v, 'is not a unix socket address (unix:// followed by an absolute path)', 'write unix:///run/lbd/gobgpd.sock (three slashes: unix:// and the path\'s own)');
      return undefined;
    }
    const bytes = new TextEncoder().encode(m[1]!).length;
    if (bytes > MAX_UNIX_SOCKET_PATH) {
      c.add(path, v, `has a socket path of ${bytes} bytes, longer than a unix socket's ${MAX_UNIX_SOCKET_PATH}`, 'use a shorter path, e.g. unix:///run/lbd/gobgpd.sock');
      return undefined;
    }
    return v;
  }
  if (v.startsWith('/')) {
    c.add(path, v, 'is a path, not a gRPC address', `write unix://${v}`);
    return undefined;
  }
  const m = /^(?:\[([^\]]+)\]|([^:[\]\s/]+)):(\d{1,5})$/.exec(v);
  const port = m === null ? 0 : Number(m[3]);
  const host = m?.[1] ?? m?.[2];
  const fam = host === undefined ? null : familyOf(host);
  const name = host !== undefined && fam === null && m?.[2] !== undefined && /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/.test(host);
  // An IPv6 address goes in brackets, so [fd00::1]:50051 is an address and a port, never a name.
  if (m === null || port < 1 || port > 65535 || (fam === null && !name) || (fam === 6 && m[1] === undefined) || (fam === 4 && m[1] !== undefined)) {
    c.add(path, v, 'is not a gRPC address (unix:///PATH, or host:port with a port from 1 to 65535)', fix);
    return undefined;
  }
  if (fam === null) return v;
  const unusable = unusableAddress(host!, fam);
  if (unusable) {
    c.add(path, v, unusable.rule, fix);
    return undefined;
  }
  return hostPort(canonicalAddress(host!), port);
}

/** An hour: a connection younger than that is not worth holding back from sync any longer. */
const MAX_SYNC_MIN_AGE_MS = 3_600_000;

function checkServiceSync(c: Collector, path: string, raw: unknown): ServiceSync | undefined {
  if (raw === undefined) return SERVICE_SYNC_DEFAULTS;
  if (!isRecord(raw)) {
    c.add(path, raw, `is ${typeName(raw)}, not a mapping`, 'write sync: {enabled: true, minAgeMs: 0} (enabled: false keeps this service\'s connections out of sync)');
    return undefined;
  }
  checkUnknownFields(c, path, raw, ['enabled', 'minAgeMs']);
  let enabled = SERVICE_SYNC_DEFAULTS.enabled;
  if (raw.enabled !== undefined) {
    if (typeof raw.enabled !== 'boolean') c.add(`${path}.enabled`, raw.enabled, 'is not true or false', 'write true to copy this service\'s connections to the standbys, false to let them break on a failover');
    else enabled = raw.enabled;
  }
  const minAgeMs = raw.minAgeMs === undefined ? SERVICE_SYNC_DEFAULTS.minAgeMs
    : checkWholeNumber(c, `${path}.minAgeMs`, raw.minAgeMs, 0, MAX_SYNC_MIN_AGE_MS, `is not a duration in milliseconds from 0 to ${MAX_SYNC_MIN_AGE_MS}`, 'give a whole number of milliseconds: connections younger than that are not copied (0 copies every established connection)');
  if (minAgeMs === undefined) return undefined;
  return { enabled, minAgeMs };
}

const PEER_TLS_FIX = 'write tls: {ca: /etc/lbd/tls/ca.pem, cert: /etc/lbd/tls/dir1.pem, key: /etc/lbd/tls/dir1.key} (PEM files; the certificate names this director, DNS:<director id>)';

function checkPeerTls(c: Collector, path: string, raw: unknown, fix = PEER_TLS_FIX): PeerTls | null {
  if (raw === undefined || raw === null) return null;
  if (!isRecord(raw)) {
    c.add(path, raw, `is ${typeName(raw)}, not a mapping`, fix);
    return null;
  }
  checkUnknownFields(c, path, raw, ['ca', 'cert', 'key']);
  const out: Record<string, string> = {};
  for (const k of ['ca', 'cert', 'key'] as const) {
    const v = raw[k];
    if (typeof v !== 'string' || !v.startsWith('/')) c.add(`${path}.${k}`, v, v === undefined ? 'a file is required' : 'is not an absolute path', fix);
    else out[k] = v;
  }
  return out.ca !== undefined && out.cert !== undefined && out.key !== undefined ? { ca: out.ca, cert: out.cert, key: out.key } : null;
}

const ETCD_TLS_FIX = 'write etcdTls: {ca: /etc/lbd/tls/etcd-ca.pem, cert: /etc/lbd/tls/dir1-etcd.pem, key: /etc/lbd/tls/dir1-etcd.key} (the CA that signed etcd\'s certificate, and this director\'s client certificate for etcd)';

/**
 * `etcdTls`: this director's client certificate for etcd. https:// endpoints need it (etcd with
 * --client-cert-auth refuses a client without one); with it, every endpoint must be https:// (a plain one
 * would send the same calls unencrypted and unauthenticated).
 */
function checkEtcdTls(c: Collector, path: string, raw: Record<string, unknown>, etcd: readonly string[]): PeerTls | null {
  const tls = checkPeerTls(c, `${path}.etcdTls`, raw.etcdTls, ETCD_TLS_FIX);
  const secure = etcd.filter((u) => u.startsWith('https:'));
  if (raw.etcdTls === undefined && secure.length > 0) {
    c.add(`${path}.etcdTls`, undefined, `is missing, but ${path}.etcd has https:// endpoints (${secure[0]}), which need this director's client certificate`, ETCD_TLS_FIX);
  }
  if (raw.etcdTls !== undefined) {
    etcd.forEach((u, i) => {
      if (u.startsWith('http:')) c.add(`${path}.etcd[${i}]`, u, 'is plain http:// while etcdTls is set: calls to it would go unencrypted and without the client certificate', `write ${u.replace(/^http:/, 'https:')}`);
    });
  }
  return tls;
}

function checkTrack(c: Collector, path: string, raw: unknown): TrackCheck[] {
  const out: TrackCheck[] = [];
  if (raw === undefined) return out;
  if (!Array.isArray(raw)) {
    c.add(path, raw, `is ${typeName(raw)}, not a list`, 'write track: [{name: uplink, command: [/usr/local/bin/check-uplink]}]');
    return out;
  }
  const names = new Set<string>();
  raw.forEach((t: unknown, i: number) => {
    const p = `${path}[${i}]`;
    if (!isRecord(t)) { c.add(p, t, `is ${typeName(t)}, not a track check`, 'write {name: uplink, command: [/usr/local/bin/check-uplink]}'); return; }
    checkUnknownFields(c, p, t, TRACK_FIELDS);
    const name = checkName(c, `${p}.name`, t.name, 'track check name');
    if (name !== undefined && names.has(name)) c.add(`${p}.name`, name, 'is used by an earlier track check', 'give every track check its own name');
    if (name !== undefined) names.add(name);
    const command = Array.isArray(t.command) && t.command.length > 0 && t.command.every((x) => typeof x === 'string' && x !== '') && String(t.command[0]).startsWith('/')
      ? (t.command as string[]) : undefined;
    if (command === undefined) c.add(`${p}.command`, t.command, t.command === undefined ? 'a command is required' : 'is not a command (a list: an absolute path, then arguments)', 'write command: [/usr/local/bin/check-uplink, arg...]; exit status 0 means fit to lead');
    const num = (k: 'intervalMs' | 'timeoutMs' | 'rise' | 'fall', dflt: number, min: number, max: number, unit: string): number | undefined =>
      t[k] === undefined ? dflt : checkWholeNumber(c, `${p}.${k}`, t[k], min, max, `is not ${unit} from ${min} to ${max}`, `give a whole number from ${min} to ${max}`);
    const intervalMs = num('intervalMs', 1000, 100, 3_600_000, 'an interval in milliseconds');
    const timeoutMs = num('timeoutMs', 1000, 10, 3_600_000, 'a timeout in milliseconds');
    const rise = num('rise', 2, 1, 100, 'a count');
    const fall = num('fall', 2, 1, 100, 'a count');
    if (name === undefined || command === undefined || intervalMs === undefined || timeoutMs === undefined || rise === undefined || fall === undefined) return;
    out.push({ name, command, intervalMs, timeoutMs, rise, fall });
  });
  return out;
}

const ADMIN_TLS_FIX = 'write tls: {ca: /etc/lbd/tls/ca.pem, cert: /etc/lbd/tls/dir1.pem, key: /etc/lbd/tls/dir1.key} (PEM files: the CA that signs the clients\' certificates, and this director\'s certificate and key)';
const CLIENTS_FIX = 'write clients: [{name: ops-alice, role: write}, {name: prometheus, role: read}] (a certificate\'s DNS name or common name, or \'*\' for any certificate the CA signed)';

/**
 * agent.admin: the TCP listeners for operators. TLS defaults to the peer link's (agent.cluster.tls);
 * a listener without either, or with no client allowed, could never serve anyone, so both are problems.
 */
function checkAdmin(c: Collector, raw: unknown, cluster: ClusterSettings | null, clusterTlsSet: boolean): AdminSettings {
  const path = 'agent.admin';
  if (raw === undefined) return ADMIN_DEFAULTS;
  if (!isRecord(raw)) {
    c.add(path, raw, `is ${typeName(raw)}, not a mapping`, 'write admin: {grpcListen: 198.18.3.1:7412, clients: [{name: ops-alice, role: write}]} or leave it out');
    return ADMIN_DEFAULTS;
  }
  checkUnknownFields(c, path, raw, ADMIN_FIELDS);
  const listen = (k: 'grpcListen' | 'httpListen'): Endpoint | null =>
    raw[k] === undefined || raw[k] === null ? null : checkHostPort(c, `${path}.${k}`, raw[k]) ?? null;
  const grpcListen = listen('grpcListen');
  const httpListen = listen('httpListen');
  const same = (a: Endpoint | null, b: Endpoint | null): boolean =>
    a !== null && b !== null && a.port === b.port && a.address === b.address;
  if (same(grpcListen, httpListen)) c.add(`${path}.httpListen`, raw.httpListen, 'is the same address and port as grpcListen', 'give each listener its own port, e.g. 7412 for gRPC and 9443 for HTTPS');
  for (const [k, l] of [['grpcListen', grpcListen], ['httpListen', httpListen]] as const) {
    if (cluster !== null && same(l, cluster.peerListen)) c.add(`${path}.${k}`, raw[k], 'is the same address and port as agent.cluster.peerListen', 'give it its own port, e.g. 7412 for gRPC and 9443 for HTTPS');
    const sync = cluster === null ? null : { address: cluster.peerListen.address, port: connSyncPort(cluster.peerListen.port) };
    if (same(l, sync)) c.add(`${path}.${k}`, raw[k], `is the address and port connection sync listens on (agent.cluster.peerListen's port + 1)`, 'give it another port, or move agent.cluster.peerListen');
  }
  const listening = raw.grpcListen !== undefined && raw.grpcListen !== null || raw.httpListen !== undefined && raw.httpListen !== null;
  const ownTls = checkPeerTls(c, `${path}.tls`, raw.tls, ADMIN_TLS_FIX);
  if (listening && (raw.tls === undefined || raw.tls === null) && !clusterTlsSet) {
    c.add(`${path}.tls`, undefined, 'is required: the listeners serve only mutual TLS, and there is no agent.cluster.tls to default to', ADMIN_TLS_FIX);
  }
  const tls = ownTls ?? cluster?.tls ?? null;
  const clients = checkAdminClients(c, `${path}.clients`, raw.clients, listening);
  return { grpcListen, httpListen, tls, clients };
}

function checkAdminClients(c: Collector, path: string, raw: unknown, listening: boolean): AdminClientEntry[] {
  const out: AdminClientEntry[] = [];
  if (raw === undefined || raw === null || (Array.isArray(raw) && raw.length === 0)) {
    if (listening) c.add(path, raw, raw === undefined || raw === null ? 'is required: without it every client certificate is refused' : 'is empty, so every client certificate would be refused', CLIENTS_FIX);
    return out;
  }
  if (!Array.isArray(raw)) {
    c.add(path, raw, `is ${typeName(raw)}, not a list`, CLIENTS_FIX);
    return out;
  }
  const seen = new Map<string, number>();
  raw.forEach((item: unknown, i: number) => {
    const p = `${path}[${i}]`;
    if (!isRecord(item)) { c.add(p, item, `is ${typeName(item)}, not a client`, 'write {name: ops-alice, role: write}'); return; }
    checkUnknownFields(c, p, item, ['name', 'role']);
    let name: string | undefined;
    const v = item.name;
    if (typeof v === 'string' && (v === ANY_CLIENT || CLIENT_NAME_PATTERN.test(v))) name = v;
    else if (typeof v === 'string' && v.includes('*')) c.add(`${p}.name`, v, 'is a partial wildcard; only \'*\' alone (any certificate the CA signed) is supported', 'list each certificate name, or use \'*\'');
    else c.add(`${p}.name`, v, v === undefined ? 'a certificate name is required' : 'is not a certificate name', 'give the client certificate\'s DNS name or common name (letters, digits, ".", "-", "_", "@", spaces inside; no commas), or \'*\'');
    const role = checkEnum<AdminRole>(c, `${p}.role`, item.role, ADMIN_ROLES, undefined, 'role');
    if (name !== undefined) {
      // Certificate names are DNS names: case does not distinguish them.
      const earlier = seen.get(name.toLowerCase());
      if (earlier !== undefined) { c.add(`${p}.name`, name, `is already listed by ${path}[${earlier}]`, 'list every certificate name once, with the one role it has'); return; }
      seen.set(name.toLowerCase(), i);
    }
    if (name !== undefined && role !== undefined) out.push({ name, role });
  });
  return out;
}

function checkAgent(c: Collector, raw: unknown): AgentSettings {
  const settings: { adminSocket: string; cluster: ClusterSettings | null; admin: AdminSettings } = { adminSocket: DEFAULT_ADMIN_SOCKET, cluster: null, admin: ADMIN_DEFAULTS };
  if (raw === undefined) return settings;
  if (!isRecord(raw)) {
    c.add('agent', raw, `is ${typeName(raw)}, not a mapping`, 'write agent: {adminSocket: /run/lbd/admin.sock} or leave it out');
    return settings;
  }
  checkUnknownFields(c, 'agent', raw, AGENT_FIELDS);
  if (raw.adminSocket !== undefined) {
    if (typeof raw.adminSocket !== 'string' || !raw.adminSocket.startsWith('/')) {
      c.add('agent.adminSocket', raw.adminSocket, 'is not an absolute path', 'give an absolute path such as /run/lbd/admin.sock');
    } else {
      settings.adminSocket = raw.adminSocket;
    }
  }
  if (raw.cluster !== undefined) settings.cluster = checkCluster(c, raw.cluster);
  // A cluster section with problems is null here, but its tls may have been given: not "missing".
  const clusterTlsSet = isRecord(raw.cluster) && raw.cluster.tls !== undefined && raw.cluster.tls !== null;
  settings.admin = checkAdmin(c, raw.admin, settings.cluster, clusterTlsSet);
  return settings;
}

/** preempt and preemptDelayMs of a vip group or of the ECMP tier's slots (in `raw`, at `path`). */
function checkPreemption(c: Collector, path: string, raw: Record<string, unknown>, dflt: { readonly preempt: PreemptPolicy; readonly preemptDelayMs: number }): { preempt: PreemptPolicy | undefined; preemptDelayMs: number | undefined } {
  const preempt = checkEnum<PreemptPolicy>(c, `${path}.preempt`, raw.preempt, PREEMPT_POLICIES, dflt.preempt, 'preemption policy');
  const preemptDelayMs = raw.preemptDelayMs === undefined ? dflt.preemptDelayMs
    : checkWholeNumber(c, `${path}.preemptDelayMs`, raw.preemptDelayMs, 0, 3_600_000, 'is not a delay (whole milliseconds from 0 to 3600000)', 'give whole milliseconds, e.g. 10000');
  if (preempt === 'never' && raw.preemptDelayMs !== undefined) {
    c.add(`${path}.preemptDelayMs`, raw.preemptDelayMs, 'is set but preempt is never', 'remove preemptDelayMs, or choose preempt: after-delay');
  }
  return { preempt, preemptDelayMs };
}

/** Gratuitous ARPs / unsolicited NAs per claim: a vip group's or the slots'. */
function checkAnnounce(c: Collector, path: string, raw: unknown, dflt: { readonly count: number; readonly intervalMs: number }): { count: number; intervalMs: number } | undefined {
  if (raw === undefined) return { ...dflt };
  if (!isRecord(raw)) {
    c.add(path, raw, `is ${typeName(raw)}, not a mapping`, 'write announce: {count: 3, intervalMs: 200}');
    return undefined;
  }
  checkUnknownFields(c, path, raw, ['count', 'intervalMs']);
  const count = raw.count === undefined ? dflt.count : checkWholeNumber(c, `${path}.count`, raw.count, 1, 100, 'is not an announcement count (1 to 100)', 'give a whole number from 1 to 100, e.g. 3');
  const intervalMs = raw.intervalMs === undefined ? dflt.intervalMs : checkWholeNumber(c, `${path}.intervalMs`, raw.intervalMs, 10, 60_000, 'is not an interval (10 to 60000 ms)', 'give whole milliseconds, e.g. 200');
  return count !== undefined && intervalMs !== undefined ? { count, intervalMs } : undefined;
}

function checkVipGroups(c: Collector, raw: unknown, services: readonly Service[]): VipGroup[] {
  const out = new Map<string, VipGroup>();
  const seen = new Set<string>();
  if (raw !== undefined && !Array.isArray(raw)) {
    c.add('vipGroups', raw, `is ${typeName(raw)}, not a list`, 'write vipGroups as a list, each item starting with "- name:"');
  } else {
    ((raw ?? []) as unknown[]).forEach((g, i) => {
      const path = `vipGroups[${i}]`;
      if (!isRecord(g)) { c.add(path, g, `is ${typeName(g)}, not a vip group`, 'write {name: default, preempt: after-delay, preemptDelayMs: 10000}'); return; }
      checkUnknownFields(c, path, g, VIP_GROUP_FIELDS);
      let name = checkName(c, `${path}.name`, g.name, 'vip group name');
      if (name !== undefined && !checkNotSlotGroup(c, `${path}.name`, name)) name = undefined;
      const { preempt, preemptDelayMs } = checkPreemption(c, path, g, VIP_GROUP_DEFAULTS);
      const announce = checkAnnounce(c, `${path}.announce`, g.announce, VIP_GROUP_DEFAULTS.announce);
      const gateways: string[] = [];
      if (g.gateways !== undefined && !Array.isArray(g.gateways)) {
        c.add(`${path}.gateways`, g.gateways, `is ${typeName(g.gateways)}, not a list`, 'list addresses, e.g. [198.19.1.250]');
      } else {
        ((g.gateways ?? []) as unknown[]).forEach((a, j) => {
          const addr = checkAddress(c, `${path}.gateways[${j}]`, a, 'a gateway address');
          if (addr) gateways.push(addr.address);
        });
      }
      if (name !== undefined && seen.has(name)) { c.add(`${path}.name`, name, 'is already defined by an earlier vip group', 'give every vip group its own name'); return; }
      if (name !== undefined) seen.add(name);
      if (name === undefined || preempt === undefined || preemptDelayMs === undefined || announce === undefined) return;
      out.set(name, { name, preempt, preemptDelayMs, announce, gateways });
    });
  }
  for (const s of services) {
    if (!s.ecmp && !out.has(s.vipGroup)) out.set(s.vipGroup, { name: s.vipGroup, ...VIP_GROUP_DEFAULTS, announce: { ...VIP_GROUP_DEFAULTS.announce }, gateways: [] });
  }
  return [...out.values()];
}

const ECMP_FIELDS = ['slots', 'ipv4', 'ipv6', 'asn', 'routers', 'attributes', 'preempt', 'preemptDelayMs', 'announce'] as const;
const ROUTER_FIELDS = ['address', 'asn', 'holdTimeSec', 'keepaliveSec'] as const;
const ATTRIBUTE_FIELDS = ['origin', 'med', 'communities'] as const;
/** AS numbers and MEDs are 32 bits. */
const MAX_U32 = 4_294_967_295;
const SLOTS_FIX = `give a whole number from 1 to ${MAX_SLOTS}, at most the routers' maximum-paths, e.g. 8`;
const HOLD_RULE = 'is not a hold time (0 = off, or whole seconds from 3 to 65535)';
const HOLD_FIX = 'give whole seconds from 3 to 65535, e.g. 9 (with keepaliveSec 3), or 0 to turn the hold timer off';

/** The lab's fabric and pools (DESIGN.md, Lab addresses), so a fix can be copied as it stands. */
function ecmpExamples(family: AddressFamily): { hop: string; pool: string } {
  return family === 6 ? { hop: 'fd00:9::64', pool: 'fd00:2::100-fd00:2::17f' } : { hop: '198.18.9.64', pool: '198.18.2.64-198.18.2.127' };
}

/**
 * An address or range of the ECMP tier where the operator wrote it (a problem's path and value), and the
 * slot it is for. `own`: the path is this slot's alone; false when one value covers every slot (one next
 * hop counted up from, one range split evenly).
 */
interface Placed {
  readonly path: string;
  readonly value: unknown;
  readonly own: boolean;
  readonly slot: number;
  readonly first: bigint;
  readonly last: bigint;
}

interface CheckedFamily {
  readonly family: AddressFamily;
  readonly typed: EcmpFamily;
  readonly hops: readonly Placed[];
  readonly pools: readonly Placed[];
}

const ADDRESS_TOP: Record<AddressFamily, bigint> = { 4: (1n << 32n) - 1n, 6: (1n << 128n) - 1n };

function wrongEcmpFamily(fam: AddressFamily, want: AddressFamily): { rule: string; fix: string } {
  return { rule: `is IPv${fam}, but it is under ecmp.ipv${want}`, fix: `give IPv${want} addresses here, and IPv${fam} ones under ecmp.ipv${fam}` };
}

/**
 * `nextHops`: one address (slot i gets that address + i) or a list of exactly `slots` distinct addresses.
 * With `slots` unknown (its own problem is listed), only the addresses are checked.
 */
function checkNextHops(c: Collector, path: string, v: unknown, fam: AddressFamily, slots: number | undefined): Placed[] | undefined {
  const ex = ecmpExamples(fam);
  const fix = `give the first of the slots' next-hop addresses, e.g. ${ex.hop} (slot i gets ${ex.hop} + i), or a list of one address per slot`;
  if (v === undefined) {
    c.add(path, v, 'next-hop addresses are required (each slot\'s floating address on the fabric, which the routers send its traffic to)', fix);
    return undefined;
  }
  const address = (p: string, item: unknown): bigint | undefined => {
    const a = checkAddress(c, p, item, 'a next-hop address');
    if (a === undefined) return undefined;
    if (a.family !== fam) {
      const w = wrongEcmpFamily(a.family, fam);
      c.add(p, item, w.rule, w.fix);
      return undefined;
    }
    return addressToBigInt(a.address);
  };
  if (typeof v === 'string') {
    const first = address(path, v);
    if (first === undefined || slots === undefined) return undefined;
    if (first + BigInt(slots) - 1n > ADDRESS_TOP[fam]) {
      c.add(path, v, `leaves no room for ${slots} consecutive next hops (slot i gets ${bigIntToAddress(first, fam)} + i)`, 'choose a lower first address, or list one address per slot');
      return undefined;
    }
    const out: Placed[] = [];
    for (let i = 0; i < slots; i++) {
      const n = first + BigInt(i);
      const unusable = unusableAddress(bigIntToAddress(n, fam), fam);
      if (unusable) {
        c.add(path, v, `gives slot ${i} the next hop ${bigIntToAddress(n, fam)}, which ${unusable.rule}`,
          `choose a first address followed by ${slots - 1} more unicast addresses, or list one address per slot`);
        return undefined;
      }
      out.push({ path, value: v, own: false, slot: i, first: n, last: n });
    }
    return out;
  }
  if (!Array.isArray(v) || v.length === 0) {
    c.add(path, v, Array.isArray(v) ? 'is empty' : `is ${typeName(v)}, not an address or a list`, fix);
    return undefined;
  }
  const before = c.problems.length;
  if (slots !== undefined && v.length !== slots) {
    c.add(path, v, `lists ${v.length} address${v.length === 1 ? '' : 'es'} but ecmp.slots is ${slots}`,
      `write one address without brackets (slot i gets that address + i), or list exactly ${slots}, one per slot`);
  }
  const out: Placed[] = [];
  const seen = new Map<bigint, number>();
  v.forEach((item, i) => {
    const p = `${path}[${i}]`;
    const n = address(p, item);
    if (n === undefined) return;
    const earlier = seen.get(n);
    if (earlier !== undefined) {
      c.add(p, item, `is also slot ${earlier}'s next hop (${path}[${earlier}])`, 'give every slot its own next-hop address');
      return;
    }
    seen.set(n, i);
    out.push({ path: p, value: item, own: true, slot: i, first: n, last: n });
  });
  return c.problems.length === before ? out : undefined;
}

/**
 * The slots' `localAddresses`: one range, written as a service's localAddresses are (`A-B`, or a list of
 * pieces that form one range), split evenly over the slots; or a list of exactly `slots` ranges, one per slot.
 */
function checkSlotPools(c: Collector, path: string, v: unknown, fam: AddressFamily, slots: number | undefined): Placed[] | undefined {
  const ex = ecmpExamples(fam);
  const pieces = poolExamples(fam);
  const fix = `give one range to split evenly over the slots, e.g. ${ex.pool}, or a list of one range per slot`;
  if (v === undefined) {
    c.add(path, v, 'local addresses are required (each slot\'s fullnat SNAT pool, which the real servers reply to)', fix);
    return undefined;
  }
  if (typeof v === 'string') {
    const span = checkRange(c, path, v, pieces, fam, wrongEcmpFamily)?.span;
    return span === undefined || slots === undefined ? undefined : splitPool(c, path, v, span, fam, slots);
  }
  if (!Array.isArray(v) || v.length === 0) {
    c.add(path, v, Array.isArray(v) ? 'is empty' : `is ${typeName(v)}, not a range or a list`, fix);
    return undefined;
  }
  const before = c.problems.length;
  const spans = v.map((item, i) => checkRange(c, `${path}[${i}]`, item, pieces, fam, wrongEcmpFamily)?.span);
  if (c.problems.length !== before || slots === undefined) return undefined;
  const ok = spans as Span[];
  if (v.length === slots) {
    // One range per slot: of any size, but no address in two slots.
    const order = ok.map((s, i) => ({ s, i })).sort((a, b) => (a.s.first < b.s.first ? -1 : a.s.first > b.s.first ? 1 : 0));
    for (let k = 1; k < order.length; k++) {
      const prev = order[k - 1]!;
      const cur = order[k]!;
      if (cur.s.first <= prev.s.last) {
        c.add(`${path}[${cur.i}]`, v[cur.i], `overlaps ${path}[${prev.i}] ("${prev.s.item}") at ${bigIntToAddress(cur.s.first, fam)}`, 'give every slot its own local addresses');
      }
    }
    if (c.problems.length !== before) return undefined;
    return ok.map((s, i) => ({ path: `${path}[${i}]`, value: v[i], own: true, slot: i, first: s.first, last: s.last }));
  }
  const joined = joinSpans(c, path, v, ok, fam, (missing, example) => ({
    rule: `is neither one contiguous range (${missing} is missing) nor one range per slot (${v.length} ranges for ${slots} slots)`,
    fix: `give one range to split evenly over the slots, e.g. ${example}, or exactly ${slots} ranges, one per slot`,
  }));
  return joined === undefined ? undefined : splitPool(c, path, v, joined, fam, slots);
}

/** One range split evenly over the slots: its size must be a multiple of their number. */
function splitPool(c: Collector, path: string, v: unknown, span: { first: bigint; last: bigint }, fam: AddressFamily, slots: number): Placed[] | undefined {
  const n = span.last - span.first + 1n;
  const s = BigInt(slots);
  if (n % s !== 0n) {
    const sizes = [(n / s) * s, (n / s + 1n) * s]
      .filter((size) => size >= s && span.first + size - 1n <= ADDRESS_TOP[fam])
      .map((size) => `${size} (${bigIntToAddress(span.first, fam)}-${bigIntToAddress(span.first + size - 1n, fam)})`);
    const rule = n < s ? `has ${n} address${n === 1n ? '' : 'es'}, fewer than the ${slots} slots (each slot needs at least one)`
      : `has ${n} addresses, which do not split evenly over ${slots} slots`;
    c.add(path, v, rule, `give a multiple of ${slots} addresses${sizes.length > 0 ? ` such as ${sizes.join(' or ')}` : ''}, or a list of one range per slot`);
    return undefined;
  }
  const per = n / s;
  return Array.from({ length: slots }, (_, i) => ({
    path, value: v, own: false, slot: i, first: span.first + BigInt(i) * per, last: span.first + BigInt(i + 1) * per - 1n,
  }));
}

function checkEcmpFamily(c: Collector, path: string, raw: unknown, fam: AddressFamily, slots: number | undefined): CheckedFamily | undefined {
  const ex = ecmpExamples(fam);
  if (!isRecord(raw)) {
    c.add(path, raw, `is ${typeName(raw)}, not a mapping`, `write ipv${fam}: {nextHops: ${ex.hop}, localAddresses: ${ex.pool}}, or leave it out`);
    return undefined;
  }
  checkUnknownFields(c, path, raw, ['nextHops', 'localAddresses']);
  const hops = checkNextHops(c, `${path}.nextHops`, raw.nextHops, fam, slots);
  const pools = checkSlotPools(c, `${path}.localAddresses`, raw.localAddresses, fam, slots);
  if (hops === undefined || pools === undefined) return undefined;
  return {
    family: fam, hops, pools,
    typed: { nextHops: hops.map((h) => bigIntToAddress(h.first, fam)), localAddresses: pools.map((p) => toRange(p.first, p.last, fam)) },
  };
}

function checkAsn(c: Collector, path: string, v: unknown, whose: string): number | undefined {
  const fix = `give ${whose} AS number, a whole number from 1 to ${MAX_U32} (private: 64512-65534 and 4200000000-4294967294)`;
  if (v === undefined) {
    c.add(path, v, 'an AS number is required', fix);
    return undefined;
  }
  return checkWholeNumber(c, path, v, 1, MAX_U32, `is not an AS number (a whole number from 1 to ${MAX_U32})`, fix);
}

/**
 * keepaliveSec: less than holdTimeSec; 0 (no keepalives) only with holdTimeSec 0 (RFC 4271 4.4). Its
 * default is 3, or a third of a shorter hold time, or 0 with holdTimeSec 0.
 */
function checkKeepalive(c: Collector, path: string, v: unknown, hold: number | undefined): number | undefined {
  if (hold === undefined) {
    if (v !== undefined) checkWholeNumber(c, path, v, 0, 65535, 'is not a keepalive interval (whole seconds, 0 = off)', 'give whole seconds, usually a third of holdTimeSec, e.g. 3');
    return undefined;
  }
  if (v === undefined) return hold === 0 ? 0 : Math.min(ECMP_DEFAULTS.keepaliveSec, Math.floor(hold / 3));
  const k = checkWholeNumber(c, path, v, 0, 65535, 'is not a keepalive interval (whole seconds, 0 = off)', 'give whole seconds, usually a third of holdTimeSec, e.g. 3');
  if (k === undefined) return undefined;
  const usual = `give keepaliveSec from 1 to ${hold - 1}, usually a third of holdTimeSec (${Math.max(1, Math.floor(hold / 3))})`;
  if (hold === 0 && k !== 0) {
    c.add(path, v, 'is set but holdTimeSec is 0 (with the hold timer off, no keepalives are sent)', 'set keepaliveSec to 0 or remove it, or give holdTimeSec from 3 to 65535');
    return undefined;
  }
  if (hold > 0 && k === 0) {
    c.add(path, v, `turns keepalives off, which only holdTimeSec 0 allows (with holdTimeSec ${hold} the session would drop after ${hold} s)`, usual);
    return undefined;
  }
  if (hold > 0 && k >= hold) {
    c.add(path, v, `must be less than holdTimeSec (${hold})`, usual);
    return undefined;
  }
  return k;
}

function checkRouters(c: Collector, path: string, raw: unknown): BgpRouter[] | undefined {
  const fix = 'list the upstream routers the directors peer with, e.g. routers: [{address: 198.18.9.1, asn: 65000}]';
  if (raw === undefined) {
    c.add(path, raw, 'at least one router is required (the tier announces its vips to the routers over BGP)', fix);
    return undefined;
  }
  if (!Array.isArray(raw) || raw.length === 0) {
    c.add(path, raw, Array.isArray(raw) ? 'is empty, but the tier announces its vips to the routers over BGP' : `is ${typeName(raw)}, not a list`, fix);
    return undefined;
  }
  const before = c.problems.length;
  const out: BgpRouter[] = [];
  const seen = new Map<string, number>();
  raw.forEach((r: unknown, i: number) => {
    const p = `${path}[${i}]`;
    if (!isRecord(r)) {
      c.add(p, r, `is ${typeName(r)}, not a router`, 'write {address: 198.18.9.1, asn: 65000}');
      return;
    }
    checkUnknownFields(c, p, r, ROUTER_FIELDS);
    const a = checkAddress(c, `${p}.address`, r.address, 'a router address');
    const earlier = a === undefined ? undefined : seen.get(a.address);
    if (a !== undefined && earlier !== undefined) c.add(`${p}.address`, r.address, `is already listed by ${path}[${earlier}]`, 'list every router once');
    else if (a !== undefined) seen.set(a.address, i);
    const asn = checkAsn(c, `${p}.asn`, r.asn, 'the router\'s');
    let hold: number | undefined = ECMP_DEFAULTS.holdTimeSec;
    if (r.holdTimeSec !== undefined) {
      hold = checkWholeNumber(c, `${p}.holdTimeSec`, r.holdTimeSec, 0, 65535, HOLD_RULE, HOLD_FIX);
      if (hold === 1 || hold === 2) {
        c.add(`${p}.holdTimeSec`, r.holdTimeSec, HOLD_RULE, HOLD_FIX);
        hold = undefined;
      }
    }
    const keepalive = checkKeepalive(c, `${p}.keepaliveSec`, r.keepaliveSec, hold);
    if (a === undefined || asn === undefined || hold === undefined || keepalive === undefined) return;
    out.push({ address: a.address, asn, holdTimeSec: hold, keepaliveSec: keepalive });
  });
  return c.problems.length === before ? out : undefined;
}

function checkAttributes(c: Collector, path: string, raw: unknown): EcmpTier['attributes'] | undefined {
  if (raw === undefined) return { origin: ECMP_DEFAULTS.origin, med: null, communities: [] };
  if (!isRecord(raw)) {
    c.add(path, raw, `is ${typeName(raw)}, not a mapping`, 'write attributes: {origin: igp, med: 0, communities: ["65010:100"]}, or leave it out');
    return undefined;
  }
  const before = c.problems.length;
  checkUnknownFields(c, path, raw, ATTRIBUTE_FIELDS);
  const origin = checkEnum<RouteOrigin>(c, `${path}.origin`, raw.origin, ROUTE_ORIGINS, ECMP_DEFAULTS.origin, 'route origin');
  const med = raw.med === undefined || raw.med === null ? null
    : checkWholeNumber(c, `${path}.med`, raw.med, 0, MAX_U32, `is not a MED (a whole number from 0 to ${MAX_U32})`, 'give a whole number, e.g. 0, or leave med out to send none');
  const communities: string[] = [];
  if (raw.communities !== undefined && !Array.isArray(raw.communities)) {
    c.add(`${path}.communities`, raw.communities, `is ${typeName(raw.communities)}, not a list`, 'write a list of "ASN:VALUE" in quotes, e.g. ["65010:100"]');
  } else {
    const seen = new Map<string, number>();
    ((raw.communities ?? []) as unknown[]).forEach((item, i) => {
      const p = `${path}.communities[${i}]`;
      const m = typeof item === 'string' ? /^\s*(\d{1,5}):(\d{1,5})\s*$/.exec(item) : null;
      if (m === null || Number(m[1]) > 65535 || Number(m[2]) > 65535) {
        c.add(p, item, 'is not a community ("ASN:VALUE", each a whole number from 0 to 65535)', 'write it in quotes, e.g. "65010:100"');
        return;
      }
      const text = `${Number(m[1])}:${Number(m[2])}`;
      const earlier = seen.get(text);
      if (earlier !== undefined) {
        c.add(p, item, `is already listed by ${path}.communities[${earlier}]`, 'list every community once');
        return;
      }
      seen.set(text, i);
      communities.push(text);
    });
  }
  if (c.problems.length !== before || origin === undefined || med === undefined) return undefined;
  return { origin, med, communities };
}

/** The ECMP tier's own fields; its addresses against the rest of the config: checkEcmpOverlaps. */
function checkEcmp(c: Collector, raw: unknown): { tier: EcmpTier; families: CheckedFamily[] } | undefined {
  const path = 'ecmp';
  if (!isRecord(raw)) {
    c.add(path, raw, `is ${typeName(raw)}, not a mapping`, 'write ecmp: {slots: 8, ipv4: {nextHops: ..., localAddresses: ...}, asn: 65010, routers: [...]} as in deploy/examples/ecmp/cluster.yaml, or leave it out');
    return undefined;
  }
  const before = c.problems.length;
  checkUnknownFields(c, path, raw, ECMP_FIELDS);
  let slots: number | undefined;
  if (raw.slots === undefined) c.add(`${path}.slots`, undefined, 'a slot count is required', SLOTS_FIX);
  else slots = checkWholeNumber(c, `${path}.slots`, raw.slots, 1, MAX_SLOTS, `is not a slot count (a whole number from 1 to ${MAX_SLOTS})`, SLOTS_FIX);
  if (raw.ipv4 === undefined && raw.ipv6 === undefined) {
    const ex = ecmpExamples(4);
    c.add(path, undefined, 'needs ipv4, ipv6 or both (the slots\' next hops and local addresses for vips of that family)', `add e.g. ipv4: {nextHops: ${ex.hop}, localAddresses: ${ex.pool}}`);
  }
  const families: CheckedFamily[] = [];
  for (const fam of [4, 6] as const) {
    if (raw[`ipv${fam}`] === undefined) continue;
    const f = checkEcmpFamily(c, `${path}.ipv${fam}`, raw[`ipv${fam}`], fam, slots);
    if (f !== undefined) families.push(f);
  }
  const asn = checkAsn(c, `${path}.asn`, raw.asn, 'the directors\'');
  const routers = checkRouters(c, `${path}.routers`, raw.routers);
  const attributes = checkAttributes(c, `${path}.attributes`, raw.attributes);
  const { preempt, preemptDelayMs } = checkPreemption(c, path, raw, ECMP_DEFAULTS);
  const announce = checkAnnounce(c, `${path}.announce`, raw.announce, ECMP_DEFAULTS.announce);
  if (c.problems.length !== before || slots === undefined || asn === undefined || routers === undefined || attributes === undefined
    || preempt === undefined || preemptDelayMs === undefined || announce === undefined) return undefined;
  const typed = (fam: AddressFamily): EcmpFamily | null => families.find((f) => f.family === fam)?.typed ?? null;
  return { tier: { slots, ipv4: typed(4), ipv6: typed(6), asn, routers, attributes, preempt, preemptDelayMs, announce }, families };
}

/** An address or range something else in the config uses, named for a problem: `one` after "is also", `all` after "overlaps". */
interface Claim {
  readonly family: AddressFamily;
  readonly first: bigint;
  readonly last: bigint;
  readonly one: string;
  readonly all: string;
}

/**
 * The tier's next hops and local addresses belong to the slots alone: not to each other, a vip, a service's
 * local addresses, a vip group's gateway or a router. Each clash is named once, on the tier's side.
 */
function checkEcmpOverlaps(c: Collector, tier: EcmpTier, families: readonly CheckedFamily[], services: readonly Service[],
  indexOf: ReadonlyMap<Service, number>, vipGroups: readonly VipGroup[]): void {
  const others: Claim[] = [];
  const single = (address: string, what: string): Claim => {
    const n = addressToBigInt(address);
    return { family: familyOf(address)!, first: n, last: n, one: what, all: what };
  };
  const vips = new Set<string>();
  for (const s of services) {
    const svc = `services[${indexOf.get(s)}] ("${s.name}")`;
    // A vip that several services share (other ports) is named once, by its first service.
    if (!vips.has(s.vip)) others.push(single(s.vip, `the vip of ${svc}`));
    vips.add(s.vip);
    if (s.localAddresses !== null) {
      others.push({ family: s.family, first: addressToBigInt(s.localAddresses.first), last: addressToBigInt(s.localAddresses.last),
        one: `one of the local addresses of ${svc}`, all: `the local addresses of ${svc}` });
    }
  }
  for (const g of vipGroups) for (const gw of g.gateways) others.push(single(gw, `a gateway of vip group "${g.name}"`));
  tier.routers.forEach((r, i) => others.push(single(r.address, `the address of ecmp.routers[${i}]`)));
  for (const f of families) {
    const same = others.filter((o) => o.family === f.family);
    const pools: Claim[] = f.pools.map((p) => ({
      family: f.family, first: p.first, last: p.last, one: p.own ? `one of slot ${p.slot}'s local addresses (${p.path})` : `one of the slots' local addresses (${p.path})`, all: '',
    }));
    reportOverlaps(c, f.hops, f.family, [...pools, ...same], 'hop', 'choose next hops that no vip, local address, gateway or router uses');
    reportOverlaps(c, f.pools, f.family, same, 'pool', 'choose local addresses for the slots that no vip, other local address, gateway or router uses');
  }
}

function reportOverlaps(c: Collector, placed: readonly Placed[], fam: AddressFamily, claims: readonly Claim[], kind: 'hop' | 'pool', fix: string): void {
  const said = new Set<string>();
  for (const p of placed) {
    for (const cl of claims) {
      if (p.last < cl.first || cl.last < p.first) continue;
      const key = `${p.path}\n${cl.one}`;
      if (said.has(key)) continue;
      said.add(key);
      const at = bigIntToAddress(p.first > cl.first ? p.first : cl.first, fam);
      const rule = kind === 'hop'
        ? (p.own ? `is also ${cl.one}` : `gives slot ${p.slot} the next hop ${at}, which is also ${cl.one}`)
        : (p.own ? `overlaps ${cl.all} at ${at}`
          : `gives slot ${p.slot} ${bigIntToAddress(p.first, fam)}-${bigIntToAddress(p.last, fam)}, which overlaps ${cl.all} at ${at}`);
      c.add(p.path, p.value, rule, fix);
    }
  }
}

/**
 * A service's local addresses are its vip group leader's to claim and to receive replies on: none may be a
 * vip (clients' address), a real server (a host of its own) or in another vip group's pool (two leaders
 * would claim it). Pools of services in one vip group may overlap: one leader claims them.
 *
 * Linear in the services (plus a sort), not quadratic: every vip and real server address is parsed once
 * into one sorted index that each pool searches by range, and pools are compared per distinct pool, not
 * per pair of services. Comparing every service with every other parsed 400 million addresses for
 * 10 000 services (about 6 minutes, at every apply).
 */
function checkLocalAddressClaims(c: Collector, services: readonly Service[], indexOf: ReadonlyMap<Service, number>): void {
  const name = (s: Service): string => `services[${indexOf.get(s)}] ("${s.name}")`;
  const fix = 'choose local addresses that no vip, real server or other vip group\'s local addresses use';
  // Every vip and real server address, in the order the services list them (vip first): for each address,
  // its first use is what a pool that holds it is said to clash with.
  interface Use { readonly owner: Service; readonly kind: 'vip' | 'rs'; readonly address: string; readonly order: number }
  const first = new Map<string, Use>();
  let order = 0;
  for (const o of services) {
    for (const [kind, address] of [['vip', o.vip], ...o.realServers.map((rs) => ['rs', rs.address])] as Array<['vip' | 'rs', string]>) {
      const family = familyOf(address);
      const key = `${family}|${address}`;
      if (family !== null && !first.has(key)) first.set(key, { owner: o, kind, address, order: order++ });
    }
  }
  const byFamily = new Map<AddressFamily, Array<{ value: bigint; use: Use }>>();
  for (const use of first.values()) {
    const family = familyOf(use.address)!;
    let list = byFamily.get(family);
    if (!list) byFamily.set(family, list = []);
    list.push({ value: addressToBigInt(use.address), use });
  }
  for (const list of byFamily.values()) list.sort((x, y) => (x.value < y.value ? -1 : x.value > y.value ? 1 : 0));
  /** The first index in `list` whose value is >= v. */
  const lowerBound = (list: ReadonlyArray<{ value: bigint }>, v: bigint): number => {
    let lo = 0;
    let hi = list.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (list[mid]!.value < v) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  // Pools by what they are (family, range, vip group), each with its services in order.
  interface Pool { readonly family: AddressFamily; readonly first: bigint; readonly last: bigint; readonly vipGroup: string; readonly services: Service[] }
  const pools = new Map<string, Pool>();
  const poolOf = new Map<Service, Pool>();
  for (const s of services) {
    if (s.localAddresses === null) continue;
    const key = `${s.family}|${s.localAddresses.first}|${s.localAddresses.last}|${s.vipGroup}`;
    let pool = pools.get(key);
    if (!pool) {
      pool = { family: s.family, first: addressToBigInt(s.localAddresses.first), last: addressToBigInt(s.localAddresses.last), vipGroup: s.vipGroup, services: [] };
      pools.set(key, pool);
    }
    pool.services.push(s);
    poolOf.set(s, pool);
  }
  for (const s of services) {
    const pool = poolOf.get(s);
    if (s.localAddresses === null || pool === undefined) continue;
    const path = `services[${indexOf.get(s)}].localAddresses`;
    const value = s.localAddresses.size === 1 ? [s.localAddresses.first] : [`${s.localAddresses.first}-${s.localAddresses.last}`];
    // One problem per address (the first thing it clashes with), in the order the services list them.
    const list = byFamily.get(s.family) ?? [];
    const held: Use[] = [];
    for (let i = lowerBound(list, pool.first); i < list.length && list[i]!.value <= pool.last; i++) held.push(list[i]!.use);
    held.sort((x, y) => x.order - y.order);
    for (const use of held) {
      const o = use.owner;
      const what = use.kind === 'vip' ? (o === s ? 'the service\'s own vip' : `the vip of ${name(o)}`) : `a real server of ${o === s ? 'the service' : name(o)}`;
      c.add(path, value, `holds ${use.address}, which is ${what}`, fix);
    }
    const overlaps: Service[] = [];
    for (const other of pools.values()) {
      if (other.family !== s.family || other.vipGroup === s.vipGroup || other.last < pool.first || pool.last < other.first) continue;
      for (const o of other.services) if (indexOf.get(o)! < indexOf.get(s)!) overlaps.push(o);
    }
    overlaps.sort((x, y) => indexOf.get(x)! - indexOf.get(y)!);
    for (const o of overlaps) {
      const of = poolOf.get(o)!.first;
      const at = bigIntToAddress(of > pool.first ? of : pool.first, s.family);
      c.add(path, value, `overlaps the local addresses of ${name(o)} at ${at}, but that service is in vip group "${o.vipGroup}" and this one in "${s.vipGroup}": both groups' leaders would claim ${at}`,
        'give services in different vip groups separate local addresses, or put them in the same vip group');
    }
  }
}

/** Validates parsed YAML/JSON. Never throws on bad input: every problem is in the result. */
export function validateConfig(raw: unknown): ValidationResult {
  const c = new Collector();
  if (raw === null || raw === undefined) {
    // An empty file is refused rather than read as "no services": a truncated write must not flush the data plane.
    c.add('(top level)', undefined, 'the document is empty', 'write "services:" followed by a list of services, or "services: []" for none');
    return { ok: false, problems: c.problems };
  }
  if (!isRecord(raw)) {
    c.add('(top level)', raw, `is ${typeName(raw)}, not a mapping`, 'start the file with "services:" followed by a list of services');
    return { ok: false, problems: c.problems };
  }
  checkUnknownFields(c, '', raw, TOP_FIELDS);
  const agent = checkAgent(c, raw.agent);
  const services: Service[] = [];
  /** Each valid service's index in the list, for problems that name it. */
  const indexOf = new Map<Service, number>();
  if (raw.services !== undefined && !Array.isArray(raw.services)) {
    c.add('services', raw.services, `is ${typeName(raw.services)}, not a list`, 'write services as a list, each item starting with "- name:", or "services: []" for none');
  } else {
    const list = (raw.services ?? []) as unknown[];
    const byKey = new Map<string, { index: number; name: string }>();
    const byName = new Map<string, number>();
    list.forEach((item, i) => {
      const svc = checkService(c, `services[${i}]`, item);
      if (!svc) return;
      const key = serviceKey(svc);
      const other = byKey.get(key);
      if (other) {
        c.add(`services[${i}]`, key, `is already defined by services[${other.index}] ("${other.name}")`, 'each vip:port/protocol must be unique: change the vip, port or protocol, or merge the two services');
        return;
      }
      const sameName = byName.get(svc.name);
      if (sameName !== undefined) {
        c.add(`services[${i}].name`, svc.name, `is already used by services[${sameName}]`, 'give every service its own name');
        return;
      }
      byKey.set(key, { index: i, name: svc.name });
      byName.set(svc.name, i);
      services.push(svc);
      indexOf.set(svc, i);
    });
  }
  checkLocalAddressClaims(c, services, indexOf);
  const vipGroups = checkVipGroups(c, raw.vipGroups, services);
  let ecmp: EcmpTier | null = null;
  if (raw.ecmp !== undefined) {
    const checked = checkEcmp(c, raw.ecmp);
    if (checked !== undefined) {
      ecmp = checked.tier;
      checkEcmpOverlaps(c, checked.tier, checked.families, services, indexOf, vipGroups);
    }
  }
  for (const s of services) {
    // A tier that is there but has problems has them listed already (a tier with no family at all, too).
    if (!s.ecmp) continue;
    const path = `services[${indexOf.get(s)}].ecmp`;
    const fam = `ipv${s.family}` as const;
    if (raw.ecmp === undefined) {
      c.add(path, true, 'needs the ECMP tier (a top-level ecmp section), which this config does not have',
        'add ecmp: {slots, ipv4 or ipv6, asn, routers} as in deploy/examples/ecmp/cluster.yaml, or set ecmp: false');
    } else if (isRecord(raw.ecmp) && raw.ecmp[fam] === undefined && (raw.ecmp.ipv4 !== undefined || raw.ecmp.ipv6 !== undefined)) {
      c.add(path, true, `needs ecmp.${fam} (the slots' IPv${s.family} next hops and local addresses) for its IPv${s.family} vip, which the ecmp section does not have`,
        `add ecmp.${fam}: {nextHops: ${ecmpExamples(s.family).hop}, localAddresses: ${ecmpExamples(s.family).pool}}, or set ecmp: false`);
    }
  }
  if (agent.cluster !== null) {
    // Two sources of services would disagree sooner or later: a clustered director takes them from etcd.
    for (const k of ['services', 'vipGroups', 'ecmp'] as const) {
      const v = raw[k];
      if (k === 'ecmp' ? v === undefined : !(Array.isArray(v) && v.length > 0)) continue;
      c.add(k, undefined, `cannot be in a director's own file when agent.cluster is set: the cluster config in etcd holds ${k === 'ecmp' ? 'it' : 'them'}`,
        `move ${k} to a cluster config file and write it with lbadm apply -f FILE, keeping only agent: here${k === 'ecmp' ? ' (this director\'s own part of the tier is agent.cluster.ecmp)' : ''}`);
    }
  }
  if (c.problems.length > 0) return { ok: false, problems: c.problems };
  return { ok: true, config: { agent, ecmp, vipGroups, services } };
}
