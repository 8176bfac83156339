import { bigIntToAddress, addressToBigInt, canonicalAddress, familyOf, serviceKey, type Protocol } from '@lbd/config';
import type { SynProxyStats } from '@lbd/dataplane';
import {
  emptyMaps, ifnameText, realServerKey, MAP_NAMES, SCHEMA_VERSION, SERVICE_MARK_SHIFT, serviceMark, SLOT_SNAT_MAP,
  type MapName, type NftFamily, type ServiceFragment, type TableModel,
} from './model.js';

/**
 * Reads `nft -j list table <family> lbd` back into the kernel model, canonicalising every key and value
 * exactly as `renderTables` writes them. This is how a restarted agent re-adopts what the kernel has.
 */

interface Counters {
  readonly packets: number;
  readonly bytes: number;
}

export interface ParsedTable {
  readonly model: TableModel;
  /** Per-real-server counters by mark, and per-service counters by service mark (`id << 16`). */
  readonly realServerStats: ReadonlyMap<number, Counters>;
  readonly serviceStats: ReadonlyMap<number, Counters>;
  /** Packets a connection limit refused, by service tuple (`198.18.0.10 . tcp . 80`). */
  readonly limitStats: ReadonlyMap<string, Counters>;
}

/** Elements of a `counter` set: `{"elem": {"val": 65537, "counter": {"packets": 1, "bytes": 60}}}`. */
function statsEntries<K>(elems: Json[], key: (val: Json) => K): Map<K, Counters> {
  const out = new Map<K, Counters>();
  for (const e of elems) {
    const inner = isObj(e) && isObj(e.elem) ? e.elem : null;
    if (!inner) continue;
    const c = isObj(inner.counter) ? inner.counter : {};
    out.set(key(inner.val), { packets: Number(c.packets ?? 0), bytes: Number(c.bytes ?? 0) });
  }
  return out;
}

const markKey = (val: Json): number => Number(text(val));
const tupleKey = (val: Json): string => text(withProtocolName(val, 1));

type Json = unknown;

function isObj(v: Json): v is Record<string, Json> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function text(v: Json): string {
  if (typeof v === 'number') return String(v);
  if (typeof v === 'string') return familyOf(v) !== null ? canonicalAddress(v) : v;
  if (Array.isArray(v)) return v.map(text).join(' . ');
  if (isObj(v)) {
    if (Array.isArray(v.concat)) return v.concat.map(text).join(' . ');
    if (Array.isArray(v.range)) {
      const [a, b] = v.range.map(text);
      return a === b ? a! : `${a}-${b}`;
    }
    if (isObj(v.prefix)) {
      const addr = String(v.prefix.addr);
      const fam = familyOf(addr);
      if (fam === null) throw new Error(`unexpected prefix ${JSON.stringify(v)}`);
      const bits = fam === 4 ? 32 : 128;
      const hostBits = BigInt(bits - Number(v.prefix.len));
      const first = (addressToBigInt(addr) >> hostBits) << hostBits;
      const last = first + (1n << hostBits) - 1n;
      return `${bigIntToAddress(first, fam)}-${bigIntToAddress(last, fam)}`;
    }
    if (isObj(v.jump)) return `jump ${String(v.jump.target)}`;
    if (isObj(v.goto)) return `goto ${String(v.goto.target)}`;
    if (isObj(v.elem)) return text(v.elem.val);
  }
  throw new Error(`unexpected nft JSON value ${JSON.stringify(v)}`);
}

/** A single address in an interval value is printed as a /32 or /128 prefix; lbd writes `a-a`. */
function rangeText(v: Json): string {
  const t = text(v);
  return t.includes('-') ? t : `${t}-${t}`;
}

/**
 * Where the maps' tuples hold an `inet_proto`. nftables 1.0 prints it by name (`tcp`), as lbd writes it;
 * 1.1 (Debian 13) prints a map declared with `typeof ... meta l4proto` by number (6), in text and JSON alike.
 */
const PROTOCOL_AT: Partial<Record<MapName, { readonly key?: number; readonly value?: number }>> = {
  dispatch: { key: 1 }, dr_dispatch: { key: 1 }, dr_services: { key: 1 }, slots: { key: 1 }, service_tuple: { value: 1 },
  synproxy_services: { key: 1 }, synproxy_dispatch: { key: 1 }, limit_dispatch: { key: 1 },
};
const PROTOCOL_NAMES: Readonly<Record<number, Protocol>> = { 6: 'tcp', 17: 'udp' };

/** `v` with the concatenation's element at `at` named as lbd writes protocols (another number stays one: foreign). */
function withProtocolName(v: Json, at: number | undefined): Json {
  if (at === undefined || !isObj(v) || !Array.isArray(v.concat)) return v;
  const p = v.concat[at];
  if (typeof p !== 'number' || PROTOCOL_NAMES[p] === undefined) return v;
  return { concat: v.concat.map((x, i) => (i === at ? PROTOCOL_NAMES[p]! : x)) };
}

function elementEntry(map: MapName, elem: Json): [string, string] {
  if (map === 'eligible' || map === 'ecmp_services') return [text(elem), ''];
  if (map === 'dr_services' || map === 'synproxy_services') return [text(withProtocolName(elem, PROTOCOL_AT[map]!.key)), ''];
  if (!Array.isArray(elem) || elem.length !== 2) throw new Error(`unexpected ${map} element ${JSON.stringify(elem)}`);
  const at = PROTOCOL_AT[map] ?? {};
  const k = withProtocolName(elem[0]!, at.key);
  const v = withProtocolName(elem[1]!, at.value);
  const value = map === 'service_snat' ? rangeText(v) : text(v);
  return [text(k), value];
}

/** Parses nft's JSON listing of one lbd table. Returns null when there is no table or it has another schema. */
export function parseTable(family: NftFamily, json: string): ParsedTable | null {
  return parseListings(family, [json]);
}

/**
 * Parses nft's JSON listings of some of one lbd table's sets and maps (`nft -j list map ...`, one per
 * object) as if they were the table's: maps that were not listed are empty. Null when the `schema` set is
 * missing (no table) or names another schema.
 */
export function parseListings(family: NftFamily, jsons: readonly string[]): ParsedTable | null {
  const maps = emptyMaps();
  const slotSnat = new Map<string, string>();
  let realServerStats = new Map<number, Counters>();
  let serviceStats = new Map<number, Counters>();
  let limitStats = new Map<string, Counters>();
  let schema = -1;
  for (const item of jsons.flatMap((json) => (JSON.parse(json) as { nftables?: Json[] }).nftables ?? [])) {
    if (!isObj(item)) continue;
    const set = isObj(item.set) ? item.set : isObj(item.map) ? item.map : null;
    if (!set) continue;
    const name = String(set.name);
    const elems = Array.isArray(set.elem) ? set.elem : [];
    if (name === 'schema') schema = elems.length === 1 ? Number(text(elems[0])) : -1;
    else if (name === 'backend_stats') realServerStats = statsEntries(elems, markKey);
    else if (name === 'service_stats') serviceStats = statsEntries(elems, markKey);
    else if (name === 'limit_stats') limitStats = statsEntries(elems, tupleKey);
    else if (name === SLOT_SNAT_MAP) {
      for (const e of elems) {
        if (!Array.isArray(e) || e.length !== 2 || typeof e[0] !== 'string') throw new Error(`unexpected ${name} element ${JSON.stringify(e)}`);
        slotSnat.set(ifnameText(e[0]), rangeText(e[1]));
      }
    }
    else if ((MAP_NAMES as readonly string[]).includes(name)) {
      // (persist holds kernel-managed connections, not desired state, and is not read here.)
      const target = maps[name as MapName];
      for (const e of elems) {
        const [k, v] = elementEntry(name as MapName, e);
        target.set(k, v);
      }
    }
  }
  if (schema !== SCHEMA_VERSION) return null;
  return { model: { ...groupByService(family, maps), slotSnat }, realServerStats, serviceStats, limitStats };
}

/** Splits the flat maps read from the kernel into per-service fragments, as `renderService` makes them. */
function groupByService(family: NftFamily, maps: { [M in MapName]: Map<string, string> }): Omit<TableModel, 'slotSnat'> {
  type Draft = { chain: string; limitChain: string | null; synProxy: boolean; elements: { [M in MapName]: Map<string, string> }; realServerMarks: Map<string, number>; serviceId: number };
  const byTuple = new Map<string, Draft>();
  for (const dispatch of ['dispatch', 'dr_dispatch'] as const) {
    for (const [tuple, verdict] of maps[dispatch]) {
      const elements = emptyMaps();
      elements[dispatch].set(tuple, verdict);
      if (dispatch === 'dr_dispatch' && maps.dr_services.has(tuple)) elements.dr_services.set(tuple, '');
      if (maps.synproxy_services.has(tuple)) elements.synproxy_services.set(tuple, '');
      const proxy = maps.synproxy_dispatch.get(tuple);
      if (proxy !== undefined) elements.synproxy_dispatch.set(tuple, proxy);
      const limit = maps.limit_dispatch.get(tuple);
      if (limit !== undefined) elements.limit_dispatch.set(tuple, limit);
      byTuple.set(tuple, {
        chain: verdict.replace(/^jump /, ''), limitChain: limit === undefined ? null : limit.replace(/^jump /, ''), synProxy: proxy !== undefined,
        elements, realServerMarks: new Map(), serviceId: 0,
      });
    }
  }
  for (const [k, v] of maps.slots) byTuple.get(k.slice(0, k.lastIndexOf(' . ')))?.elements.slots.set(k, v);
  const byServiceMark = new Map<number, [string, Draft]>();
  for (const [svcMark, tuple] of maps.service_tuple) {
    const draft = byTuple.get(tuple);
    if (!draft) continue;
    draft.serviceId = Number(svcMark) >>> SERVICE_MARK_SHIFT;
    draft.elements.service_tuple.set(svcMark, tuple);
    const snat = maps.service_snat.get(svcMark);
    if (snat !== undefined) draft.elements.service_snat.set(svcMark, snat);
    if (maps.ecmp_services.has(svcMark)) draft.elements.ecmp_services.set(svcMark, '');
    byServiceMark.set(Number(svcMark), [tuple, draft]);
  }
  for (const [mark, rs] of maps.backend_dnat) {
    const owner = byServiceMark.get(serviceMark(Number(mark) >>> SERVICE_MARK_SHIFT));
    if (!owner) continue;
    const [tuple, draft] = owner;
    const [address, port] = rs.split(' . ');
    draft.realServerMarks.set(realServerKey(tupleToServiceKey(tuple), address!, Number(port)), Number(mark));
    draft.elements.backend_dnat.set(mark, rs);
    const target = maps.dr_target.get(mark);
    if (target !== undefined) draft.elements.dr_target.set(mark, target);
    if (maps.eligible.has(mark)) draft.elements.eligible.set(mark, '');
  }
  const services = new Map<string, ServiceFragment>();
  for (const [tuple, f] of byTuple) {
    const key = tupleToServiceKey(tuple);
    services.set(key, { source: null, key, serviceId: f.serviceId, realServerMarks: f.realServerMarks, chain: f.chain, limitChain: f.limitChain, synProxy: f.synProxy, elements: f.elements });
  }
  return { family, schema: SCHEMA_VERSION, services };
}

/** `fd00::10 . tcp . 80` → `[fd00::10]:80/tcp` */
function tupleToServiceKey(tuple: string): string {
  const [vip, protocol, port] = tuple.split(' . ') as [string, Protocol, string];
  return serviceKey({ vip, port: Number(port), protocol });
}

/** Persist-map elements (key, value) whose mark is in `marks`: the affinity to drop when a real server leaves. */
export function persistEntriesFor(json: string, marks: ReadonlySet<number>): Array<[string, string]> {
  const doc = JSON.parse(json) as { nftables?: Json[] };
  const entries: Array<[string, string]> = [];
  for (const item of doc.nftables ?? []) {
    if (!isObj(item) || !isObj(item.map) || item.map.name !== 'persist') continue;
    for (const e of Array.isArray(item.map.elem) ? item.map.elem : []) {
      if (!Array.isArray(e) || e.length !== 2) continue;
      const mark = text(e[1]);
      if (marks.has(Number(mark))) entries.push([text(e[0]), mark]);
    }
  }
  return entries;
}

/** `nft -j list set <family> lbd limit_stats`: packets and bytes per service tuple (`198.18.0.10 . tcp . 80`). */
export function parseLimitStats(json: string): Map<string, Counters> {
  for (const item of (JSON.parse(json) as { nftables?: Json[] }).nftables ?? []) {
    if (isObj(item) && isObj(item.set) && item.set.name === 'limit_stats') return statsEntries(Array.isArray(item.set.elem) ? item.set.elem : [], tupleKey);
  }
  return new Map();
}

/** A table that exists but cannot be re-adopted (another schema) is reported so the caller can log it. */
export function tableSchema(json: string): number | null {
  const doc = JSON.parse(json) as { nftables?: Json[] };
  for (const item of doc.nftables ?? []) {
    if (isObj(item) && isObj(item.set) && item.set.name === 'schema' && Array.isArray(item.set.elem)) return Number(text(item.set.elem[0]));
  }
  return null;
}

/**
 * `/proc/net/stat/synproxy`: a header (entries syn_received cookie_invalid cookie_valid cookie_retrans
 * conn_reopened), then a row of hex numbers per CPU. Columns are found by name. Null when it has no header.
 */
export function parseSynProxyStats(text: string): SynProxyStats | null {
  const [header, ...rows] = text.trim().split('\n');
  const names = header?.trim().split(/\s+/) ?? [];
  const at = (name: string): number => names.indexOf(name);
  if (at('syn_received') < 0 || at('cookie_valid') < 0 || at('cookie_invalid') < 0) return null;
  const sum = (name: string): number => {
    const i = at(name);
    return i < 0 ? 0 : rows.reduce((n, row) => n + (Number.parseInt(row.trim().split(/\s+/)[i] ?? '0', 16) || 0), 0);
  };
  return { synReceived: sum('syn_received'), cookieValid: sum('cookie_valid'), cookieInvalid: sum('cookie_invalid'), cookieRetransmitted: sum('cookie_retrans') };
}
