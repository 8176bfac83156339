import { endianness } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { NftFamily } from './model.js';

/*
 * Map elements as nf_tables netlink messages: what `nft add element` sends, without nft's parser.
 *
 * Why: nft spends about 7 us of CPU per element evaluating a script, so the elements of 10 000 services
 * (about 120 000) took 1.3 s to load. Encoded here and sent by lbd-nfbatch (one process, one send per
 * transaction), they cost the kernel's share and this encoder's (docs/kernel-io.md has the figures).
 *
 * Elements arrive in the model's text form (model.ts: `198.18.0.10 . tcp . 80 . 3` → `589889537`), which is
 * canonical, so each map has a fixed layout. The bytes are nft's own: every part of a concatenation takes a
 * multiple of four bytes; addresses and ports in network order, padded; marks, protocols and the numgen
 * slot in host order (nft's `integer` of `typeof numgen` and `mark` are host-endian); interval data is
 * the first and last address; an interface name is 16 bytes (IFNAMSIZ), zero-padded. nft-netlink.test.ts
 * holds bytes nft 1.0.6 sent for each map (`nft --debug=netlink`), and a privileged test compares a table
 * written this way with one nft's script wrote, and re-adopts it without a write.
 */

/**
 * The compiled nf_tables batch sender (native/lbd-nfbatch.c), built beside this file: it sends what this
 * module encodes (a new table's elements, the kernel lease's renewals) and reads counters.
 */
export const NFBATCH_HELPER = fileURLToPath(new URL('./lbd-nfbatch', import.meta.url));

const NFNL_SUBSYS_NFTABLES = 10;
const NFT_MSG_NEWSETELEM = 12;
const NFT_MSG_DELSETELEM = 14;
const NFNL_MSG_BATCH_BEGIN = 0x10;
const NFNL_MSG_BATCH_END = 0x11;
const NLM_F_REQUEST = 0x1;
const NLM_F_ACK = 0x4;
const NLM_F_CREATE = 0x400;
const NLA_F_NESTED = 0x8000;
const NFTA_SET_ELEM_LIST_TABLE = 1;
const NFTA_SET_ELEM_LIST_SET = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS = 3;
const NFTA_LIST_ELEM = 1;
const NFTA_SET_ELEM_KEY = 1;
const NFTA_SET_ELEM_DATA = 2;
const NFTA_SET_ELEM_TIMEOUT = 4;
const NFTA_SET_ELEM_EXPIRATION = 5;
const NFTA_DATA_VALUE = 1;
const NFTA_DATA_VERDICT = 2;
const NFTA_VERDICT_CODE = 1;
const NFTA_VERDICT_CHAIN = 2;
const NFT_JUMP = -3;
const NFT_GOTO = -4;
const FAMILY_NUMBER: Record<NftFamily, number> = { ip: 2, ip6: 10 };
/** The lease tables' families (lease.ts): NFPROTO_INET and NFPROTO_ARP. */
const TIMED_FAMILY_NUMBER: Record<TimedElement['family'], number> = { inet: 1, arp: 3 };
const IFNAMSIZ = 16;
/** Element bytes per message: the elements' list is one attribute, and an attribute's length is 16 bits. */
const MAX_LIST_BYTES = 60_000;
const LITTLE_ENDIAN = endianness() === 'LE';

/** One part of a key or value, in the model's text. */
type Part = 'addr' | 'proto' | 'port' | 'u32' | 'range' | 'ifname';
/** A map's layout: its key's parts and its value's (null for a set, 'verdict' for a verdict map). */
interface Layout { readonly key: readonly Part[]; readonly value: readonly Part[] | 'verdict' | null }

/** The layout of every map lbd writes elements to (model.ts' MAP_NAMES and slot_snat). */
const MAP_LAYOUTS: Readonly<Record<string, Layout>> = {
  dispatch: { key: ['addr', 'proto', 'port'], value: 'verdict' },
  slots: { key: ['addr', 'proto', 'port', 'u32'], value: ['u32'] },
  eligible: { key: ['u32'], value: null },
  ecmp_services: { key: ['u32'], value: null },
  backend_dnat: { key: ['u32'], value: ['addr', 'port'] },
  service_snat: { key: ['u32'], value: ['range'] },
  service_tuple: { key: ['u32'], value: ['addr', 'proto', 'port'] },
  slot_snat: { key: ['ifname'], value: ['range'] },
  dr_dispatch: { key: ['addr', 'proto', 'port'], value: 'verdict' },
  dr_services: { key: ['addr', 'proto', 'port'], value: null },
  dr_target: { key: ['u32'], value: ['addr'] },
  synproxy_services: { key: ['addr', 'proto', 'port'], value: null },
  synproxy_dispatch: { key: ['addr', 'proto', 'port'], value: 'verdict' },
  limit_dispatch: { key: ['addr', 'proto', 'port'], value: 'verdict' },
};

export class ElementEncodingError extends Error {}

/** What a batch holds, message by message, so that an error the kernel names by sequence number can be told. */
interface EncodedMessage {
  readonly seq: number;
  readonly map: string;
  /** The message's first element, in the model's text, and how many it carries. */
  readonly first: string;
  readonly count: number;
}

export interface ElementBatch {
  readonly bytes: Buffer;
  readonly messages: readonly EncodedMessage[];
}

/**
 * A growing buffer. Writes do not check room: the encoder makes room for a whole element (or header) at once
 * (`room`), which keeps bounds checks out of the per-byte work. Netlink's own numbers (lengths, types,
 * flags) are in host order.
 */
class Writer {
  buf: Buffer;
  n = 0;
  constructor(size: number) { this.buf = Buffer.allocUnsafe(size); }
  room(more: number): void {
    if (this.n + more <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.n + more) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.n);
    this.buf = next;
  }
  u16(v: number): void {
    const b = this.buf, n = this.n;
    if (LITTLE_ENDIAN) { b[n] = v & 0xff; b[n + 1] = (v >>> 8) & 0xff; } else { b[n] = (v >>> 8) & 0xff; b[n + 1] = v & 0xff; }
    this.n = n + 2;
  }
  u32(v: number): void {
    const b = this.buf, n = this.n;
    if (LITTLE_ENDIAN) { b[n] = v & 0xff; b[n + 1] = (v >>> 8) & 0xff; b[n + 2] = (v >>> 16) & 0xff; b[n + 3] = (v >>> 24) & 0xff; }
    else { b[n] = (v >>> 24) & 0xff; b[n + 1] = (v >>> 16) & 0xff; b[n + 2] = (v >>> 8) & 0xff; b[n + 3] = v & 0xff; }
    this.n = n + 4;
  }
  /** Network order (a verdict code). */
  be32(v: number): void {
    const b = this.buf, n = this.n;
    b[n] = (v >>> 24) & 0xff; b[n + 1] = (v >>> 16) & 0xff; b[n + 2] = (v >>> 8) & 0xff; b[n + 3] = v & 0xff;
    this.n = n + 4;
  }
  byte(v: number): void { this.buf[this.n++] = v; }
  pad(): void { while (this.n & 3) this.buf[this.n++] = 0; }
  /** Starts an attribute; returns where its length goes. */
  open(type: number): number { this.pad(); const at = this.n; this.u16(0); this.u16(type); return at; }
  close(at: number): void {
    const len = this.n - at;
    const b = this.buf;
    if (LITTLE_ENDIAN) { b[at] = len & 0xff; b[at + 1] = len >>> 8; } else { b[at] = len >>> 8; b[at + 1] = len & 0xff; }
    this.pad();
  }
  /** A zero-terminated string attribute (makes its own room). */
  str(type: number, s: string): void {
    const len = Buffer.byteLength(s);
    this.room(len + 12);
    const at = this.open(type);
    this.buf.write(s, this.n);
    this.n += len;
    this.byte(0);
    this.close(at);
  }
}

/** Room for one element: nested headers, a key and a value of at most 16 + 16 bytes, or a verdict (its chain by str). */
const ELEMENT_ROOM = 256;
/** Room for a message's headers (its table and set name by str). */
const HEADER_ROOM = 64;

/** The decimal number in text[from, to), or -1 (no digits, another character, or above 2^32 - 1). */
function decimal(text: string, from: number, to: number): number {
  if (from >= to || to - from > 10) return -1;
  let v = 0;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return -1;
    v = v * 10 + c;
  }
  return v > 0xffffffff ? -1 : v;
}

/** Writes the IPv4 address in text[from, to); false if it is not one. */
function writeIpv4(w: Writer, text: string, from: number, to: number): boolean {
  let at = from;
  for (let k = 0; k < 4; k++) {
    let end = k < 3 ? text.indexOf('.', at) : to;
    if (end < 0 || end > to) return false;
    const v = decimal(text, at, end);
    if (v < 0 || v > 255) return false;
    w.buf[w.n + k] = v;
    at = end + 1;
  }
  w.n += 4;
  return true;
}

/** Writes the IPv6 address in text (with `::` and a dotted IPv4 tail); false if it is not one. */
function writeIpv6(w: Writer, text: string): boolean {
  const halves = text.split('::');
  if (halves.length > 2) return false;
  const groups = (half: string): number[] | null => {
    if (half === '') return [];
    const out: number[] = [];
    const words = half.split(':');
    for (let i = 0; i < words.length; i++) {
      const word = words[i]!;
      if (i === words.length - 1 && word.includes('.')) {
        const v4 = word.split('.').map((b) => decimal(b, 0, b.length));
        if (v4.length !== 4 || v4.some((b) => b < 0 || b > 255)) return null;
        out.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(word)) return null;
        out.push(parseInt(word, 16));
      }
    }
    return out;
  };
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  if (head === null || tail === null) return false;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return false;
  for (const g of [...head, ...new Array<number>(missing).fill(0), ...tail]) { w.buf[w.n++] = g >> 8; w.buf[w.n++] = g & 0xff; }
  return true;
}

/** Writes the part in text[from, to); returns what it is not, or null when it was written. */
function writePart(w: Writer, family: NftFamily, part: Part, text: string, from: number, to: number): string | null {
  switch (part) {
    case 'addr':
      if (family === 'ip') return writeIpv4(w, text, from, to) ? null : 'an IPv4 address';
      return writeIpv6(w, text.slice(from, to)) ? null : 'an IPv6 address';
    case 'range': {
      const dash = text.indexOf('-', from);
      if (dash < 0 || dash >= to) return 'a range first-last';
      return writePart(w, family, 'addr', text, from, dash) ?? writePart(w, family, 'addr', text, dash + 1, to);
    }
    case 'proto': {
      // Compared in place: no string made per element.
      const p = to - from !== 3 ? undefined : text.startsWith('tcp', from) ? 6 : text.startsWith('udp', from) ? 17 : undefined;
      if (p === undefined) return 'tcp or udp';
      w.u32(p);
      return null;
    }
    case 'port': {
      const v = decimal(text, from, to);
      if (v < 0 || v > 0xffff) return 'a port';
      w.buf[w.n++] = v >> 8;
      w.buf[w.n++] = v & 0xff;
      w.buf[w.n++] = 0;
      w.buf[w.n++] = 0;
      return null;
    }
    case 'u32': {
      const v = decimal(text, from, to);
      if (v < 0) return 'a 32-bit number';
      w.u32(v);
      return null;
    }
    case 'ifname': {
      const quoted = to - from >= 2 && text.charCodeAt(from) === 34 && text.charCodeAt(to - 1) === 34;
      const name = quoted ? text.slice(from + 1, to - 1) : text.slice(from, to);
      const len = Buffer.byteLength(name);
      if (len === 0 || len >= IFNAMSIZ) return 'an interface name';
      w.buf.write(name, w.n);
      w.buf.fill(0, w.n + len, w.n + IFNAMSIZ);
      w.n += IFNAMSIZ;
      return null;
    }
  }
}

/** A key or value (its parts separated by " . " in the model's text); returns why not, or null. */
function writeValue(w: Writer, family: NftFamily, parts: readonly Part[], text: string): string | null {
  const at = w.open(NFTA_DATA_VALUE);
  let from = 0;
  for (let i = 0; i < parts.length; i++) {
    const last = i === parts.length - 1;
    const to = last ? text.length : text.indexOf(' . ', from);
    if (to < 0 || (last && text.indexOf(' . ', from) >= 0)) return `${JSON.stringify(text)} is not ${parts.length} parts separated by " . "`;
    const not = writePart(w, family, parts[i]!, text, from, to);
    if (not !== null) return `${JSON.stringify(text.slice(from, to))} is not ${not}`;
    from = to + 3;
  }
  w.close(at);
  return null;
}

/** Verdicts are few (one per scheduling chain): each is checked once. */
const VERDICTS = new Map<string, readonly [number, string]>();

function writeVerdict(w: Writer, text: string): string | null {
  let verdict = VERDICTS.get(text);
  if (verdict === undefined) {
    const m = /^(jump|goto) ([A-Za-z0-9_]+)$/.exec(text);
    if (!m) return `${JSON.stringify(text)} is not "jump CHAIN" or "goto CHAIN"`;
    verdict = [m[1] === 'jump' ? NFT_JUMP : NFT_GOTO, m[2]!];
    if (VERDICTS.size < 1000) VERDICTS.set(text, verdict);
  }
  const at = w.open(NLA_F_NESTED | NFTA_DATA_VERDICT);
  const code = w.open(NFTA_VERDICT_CODE);
  w.be32(verdict[0]);
  w.close(code);
  w.str(NFTA_VERDICT_CHAIN, verdict[1]);
  w.close(at);
  return null;
}

/** Starts a netlink message with its nfgenmsg header; returns where it starts (its length is set by closeMessage). */
function openMessage(w: Writer, type: number, flags: number, seq: number, fam: number, resId: number): number {
  w.room(HEADER_ROOM);
  const at = w.n;
  w.u32(0);
  w.u16(type);
  w.u16(flags);
  w.u32(seq);
  w.u32(0);
  w.byte(fam);
  w.byte(0);
  w.byte(resId >>> 8); // nfgenmsg's res_id is in network order
  w.byte(resId & 0xff);
  return at;
}

function closeMessage(w: Writer, at: number): void {
  w.pad();
  const end = w.n;
  w.n = at;
  w.u32(end - at);
  w.n = end;
}

/** Elements for one map of one table: in the model's form, a map's elements per service fragment (`key → value`). */
export interface ElementPart {
  readonly family: NftFamily;
  readonly table: string;
  readonly map: string;
  readonly groups: ReadonlyArray<ReadonlyMap<string, string>>;
}

/**
 * The parts cut into transactions of about `maxElements` each (a group, one service's elements of a map, is
 * never cut), in their order. Pure. Sent one after another, each transaction's elements are in the kernel
 * before the next one's: with the parts in dependency order, no element is ever there before what it needs.
 */
export function frameParts(parts: readonly ElementPart[], maxElements: number): ElementPart[][] {
  const frames: ElementPart[][] = [];
  let frame: ElementPart[] = [];
  let inFrame = 0;
  for (const part of parts) {
    let groups: Array<ReadonlyMap<string, string>> = [];
    for (const g of part.groups) {
      if (inFrame > 0 && inFrame + g.size > maxElements) {
        if (groups.length > 0) frame.push({ ...part, groups });
        frames.push(frame);
        frame = [];
        groups = [];
        inFrame = 0;
      }
      groups.push(g);
      inFrame += g.size;
    }
    if (groups.length > 0) frame.push({ ...part, groups });
  }
  if (frame.length > 0) frames.push(frame);
  return frames;
}

/**
 * One nf_tables transaction adding the given elements: BATCH_BEGIN, NEWSETELEM messages of at most
 * MAX_LIST_BYTES of elements each (every one asking for an ack), BATCH_END. Sequence numbers start at seq0.
 * Pure: throws ElementEncodingError, naming the element, for text that does not fit its map's layout.
 */
export function encodeElementBatch(parts: readonly ElementPart[], seq0 = 1): ElementBatch {
  // Sized for the common case up front (an element takes 40-90 bytes): growing copies the whole batch.
  let count = 0;
  for (const { groups } of parts) for (const g of groups) count += g.size;
  const w = new Writer(count * 96 + 4096);
  const messages: EncodedMessage[] = [];
  let seq = seq0 >>> 0;
  const header = (type: number, flags: number, fam: number, resId: number): number => openMessage(w, type, flags, seq, fam, resId);
  const finish = (at: number): void => {
    closeMessage(w, at);
    seq = (seq + 1) >>> 0;
  };

  finish(header(NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, 0, NFNL_SUBSYS_NFTABLES));
  for (const { family, table, map, groups } of parts) {
    const layout = MAP_LAYOUTS[map];
    if (layout === undefined) throw new ElementEncodingError(`cannot encode elements of map ${map}: lbd writes no such map`);
    const text = (key: string, value: string): string => (layout.value === null ? key : `${key} : ${value}`);
    // A message is open while msgAt >= 0; a new one starts when its element list nears the 16-bit limit.
    let msgAt = -1;
    let list = 0;
    let first = '';
    let inMessage = 0;
    const close = (): void => {
      w.close(list);
      messages.push({ seq, map, first, count: inMessage });
      finish(msgAt);
      msgAt = -1;
    };
    const element = (value: string, key: string): void => {
      if (msgAt >= 0 && w.n - list >= MAX_LIST_BYTES) close();
      if (msgAt < 0) {
        msgAt = header((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWSETELEM, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK, FAMILY_NUMBER[family], 0);
        w.str(NFTA_SET_ELEM_LIST_TABLE, table);
        w.str(NFTA_SET_ELEM_LIST_SET, map);
        list = w.open(NLA_F_NESTED | NFTA_SET_ELEM_LIST_ELEMENTS);
        first = text(key, value);
        inMessage = 0;
      }
      w.room(ELEMENT_ROOM);
      const el = w.open(NLA_F_NESTED | NFTA_LIST_ELEM);
      const k = w.open(NLA_F_NESTED | NFTA_SET_ELEM_KEY);
      let why = writeValue(w, family, layout.key, key);
      w.close(k);
      if (why === null && layout.value !== null) {
        const d = w.open(NLA_F_NESTED | NFTA_SET_ELEM_DATA);
        why = layout.value === 'verdict' ? writeVerdict(w, value) : writeValue(w, family, layout.value, value);
        w.close(d);
      }
      if (why !== null) throw new ElementEncodingError(`cannot encode element ${JSON.stringify(text(key, value))} of map ${map} (${family} ${table}): ${why}`);
      w.close(el);
      inMessage++;
    };
    // forEach, not for-of: no [key, value] array per element (120 000 of them at 10 000 services).
    for (const group of groups) group.forEach(element);
    if (msgAt >= 0) close();
  }
  finish(header(NFNL_MSG_BATCH_END, NLM_F_REQUEST, 0, NFNL_SUBSYS_NFTABLES));
  return { bytes: w.buf.subarray(0, w.n), messages };
}

/**
 * One write to a set of addresses with `flags timeout` (the kernel lease's sets, lease.ts): add the element
 * with `timeout <ms> expires <ms>` (an element already there gets both, so its remaining time is set, up or
 * down), or delete it (the kernel answers ENOENT when it is not there).
 */
export type TimedElement =
  | { readonly op: 'add'; readonly family: 'inet' | 'arp'; readonly table: string; readonly set: string; readonly address: string; readonly ms: number }
  | { readonly op: 'delete'; readonly family: 'inet' | 'arp'; readonly table: string; readonly set: string; readonly address: string };

export interface TimedElementBatch {
  readonly bytes: Buffer;
  /** The sequence number of each element's message, in the order given (BATCH_BEGIN has seq0). */
  readonly seqs: readonly number[];
}

/**
 * One nf_tables transaction of the given writes, one message each: what `nft add element inet lbd lease4
 * { A timeout Tms expires Tms }` sends (NEWSETELEM with NLM_F_CREATE and no NLM_F_EXCL; the key, then
 * NFTA_SET_ELEM_TIMEOUT and NFTA_SET_ELEM_EXPIRATION in ms, 64 bits in network order) and `nft delete
 * element` (DELSETELEM, the key alone). Every message asks for an ack, so each refusal is told. ms is
 * written whole, at least 1. Pure: throws ElementEncodingError for an address that is neither IPv4 nor
 * IPv6 text, or a time that is not a finite number.
 */
export function encodeTimedElements(writes: readonly TimedElement[], seq0 = 1): TimedElementBatch {
  const w = new Writer(writes.length * (HEADER_ROOM + 2 * 32 + ELEMENT_ROOM) + 64);
  const seqs: number[] = [];
  let seq = seq0 >>> 0;
  const message = (type: number, flags: number, fam: number, resId: number, body?: () => void): void => {
    const at = openMessage(w, type, flags, seq, fam, resId);
    body?.();
    closeMessage(w, at);
    seq = (seq + 1) >>> 0;
  };
  const u64 = (type: number, v: number): void => {
    const at = w.open(type);
    w.be32(Math.floor(v / 0x1_0000_0000));
    w.be32(v >>> 0);
    w.close(at);
  };
  message(NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, 0, NFNL_SUBSYS_NFTABLES);
  for (const e of writes) {
    const add = e.op === 'add';
    if (add && !Number.isFinite(e.ms)) throw new ElementEncodingError(`cannot encode ${e.address} of set ${e.set} (${e.family} ${e.table}): timeout ${e.ms} ms is not a number of milliseconds`);
    seqs.push(seq);
    const type = (NFNL_SUBSYS_NFTABLES << 8) | (add ? NFT_MSG_NEWSETELEM : NFT_MSG_DELSETELEM);
    message(type, NLM_F_REQUEST | NLM_F_ACK | (add ? NLM_F_CREATE : 0), TIMED_FAMILY_NUMBER[e.family], 0, () => {
      w.str(NFTA_SET_ELEM_LIST_TABLE, e.table);
      w.str(NFTA_SET_ELEM_LIST_SET, e.set);
      w.room(ELEMENT_ROOM);
      const list = w.open(NLA_F_NESTED | NFTA_SET_ELEM_LIST_ELEMENTS);
      const el = w.open(NLA_F_NESTED | NFTA_LIST_ELEM);
      const key = w.open(NLA_F_NESTED | NFTA_SET_ELEM_KEY);
      const value = w.open(NFTA_DATA_VALUE);
      const written = e.address.includes(':') ? writeIpv6(w, e.address) : writeIpv4(w, e.address, 0, e.address.length);
      if (!written) throw new ElementEncodingError(`cannot encode ${JSON.stringify(e.address)} of set ${e.set} (${e.family} ${e.table}): not an IPv4 or IPv6 address`);
      w.close(value);
      w.close(key);
      if (add) {
        const ms = Math.max(1, Math.floor(e.ms));
        u64(NFTA_SET_ELEM_TIMEOUT, ms);
        u64(NFTA_SET_ELEM_EXPIRATION, ms);
      }
      w.close(el);
      w.close(list);
    });
  }
  message(NFNL_MSG_BATCH_END, NLM_F_REQUEST, 0, NFNL_SUBSYS_NFTABLES);
  return { bytes: w.buf.subarray(0, w.n), seqs };
}
