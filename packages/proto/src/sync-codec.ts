import type { Long } from '@grpc/proto-loader';
import type {
  Change, Change__Output, ConnectionId, ConnectionId__Output, Endpoint, Endpoint__Output, Hello__Output, SeqAdjust__Output, SeqAdjustDirection,
  SeqAdjustDirection__Output, SnapshotBegin__Output, SyncedConnection, SyncedConnection__Output, SynProxyState__Output, SyncMessage, SyncMessage__Output,
  SyncReply, SyncReply__Output,
} from './gen/index.js';

/*
 * lbd.peer.v1.SyncMessage (sync.proto) written and read by hand: the connection-sync stream's messages, the
 * only ones that carry a message per connection.
 *
 * Why: through proto-loader a change cost 1.6-2.8 us to serialize (fromObject makes a message object of
 * every object before encode walks it), a leader's largest share per change after the event itself. Here a
 * change is written straight from the object the sender holds: 0.3-0.6 us (`pnpm bench connsync` prints both
 * codecs' figures). Reading is about as fast as protobufjs' generated decoder once warm (0.6-1 us a change:
 * the strings and objects are the cost), and is done here as well so that both halves keep one contract, and
 * so that a sub-message that runs past its end is refused rather than read across.
 *
 * The bytes are protobuf's: a peer running proto-loader's codec reads these messages, and these functions
 * read its messages. What is read is what proto-loader gives with LOADER_OPTIONS (longs as numbers, defaults
 * filled in, message fields null when absent, the oneof's name in `body` / `op`), so the receiver cannot
 * tell the two apart; sync-codec.test.ts holds both to that, message by message, both ways. Unknown fields are
 * skipped (a newer peer's additions); a known field with the wrong wire type, or a message cut short, throws.
 * Bytes no lbd sends (two bodies in one message, two ops in one change) read as the last one alone: the
 * one proto-loader names in `body` / `op` too, though it keeps the earlier one beside it (which a receiver
 * then found as well; protobuf says a oneof holds one).
 * Scalars at their default value are not written (as protobuf's canonical encoding), message fields are
 * written when not null, so an empty SnapshotEnd still says which body the message has.
 *
 * lbd.peer.v1.SyncReply (the standby's Ack for every batch it applied, or a Resync) is written and read here
 * too: a leader reads one for every message it sends, and proto-loader's reader (a message object, then
 * toObject, uint64 through Long) cost it about as much per ack as the rest of the reply path together.
 * A reply with both bodies (none is sent) reads as the last one on the wire, protobuf's rule; proto-loader
 * there keeps both and names the one declared last.
 */

const VARINT = 0;
const I64 = 1;
const LEN = 2;
const I32 = 5;

export class SyncCodecError extends Error {}

/** The encoder's buffer: grown by doubling, reused from call to call (its bytes are copied out per message). */
class Out {
  buf = Buffer.allocUnsafe(64 * 1024);
  n = 0;

  room(more: number): void {
    if (this.n + more <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.n + more) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.n);
    this.buf = next;
  }

  /** A non-negative integer up to 2^53, as a varint (the caller made room for 10 bytes). */
  varint(v: number): void {
    const b = this.buf;
    let n = this.n;
    while (v >= 0x80) {
      b[n++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    b[n++] = v;
    this.n = n;
  }

  /** A field's key (every field number here is below 16: one byte). */
  key(field: number, wire: number): void {
    this.buf[this.n++] = (field << 3) | wire;
  }

  uint(field: number, v: number): void {
    if (v === 0) return;
    this.room(11);
    this.key(field, VARINT);
    this.varint(v);
  }

  str(field: number, s: string): void {
    if (s === '') return;
    // ASCII (every address, state and protocol) is copied by hand: Buffer.write costs more than a short string.
    this.room(s.length * 3 + 6);
    this.key(field, LEN);
    const at = this.n;
    const b = this.buf;
    if (s.length < 0x80) {
      let n = at + 1;
      let ascii = true;
      for (let i = 0; i < s.length; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) { ascii = false; break; }
        b[n++] = c;
      }
      if (ascii) {
        b[at] = s.length;
        this.n = n;
        return;
      }
    }
    const len = Buffer.byteLength(s);
    this.varint(len);
    this.n += b.write(s, this.n, 'utf8');
  }

  /** Starts a message field (its key, a byte for its length); returns where, for `end`. */
  begin(field: number): number {
    this.room(2);
    this.key(field, LEN);
    return this.n++;
  }

  /** Ends the message field `begin` started: its length in place, moving the body when it needs more bytes. */
  end(at: number): void {
    const len = this.n - at - 1;
    if (len < 0x80) {
      this.buf[at] = len;
      return;
    }
    let extra = 0;
    for (let v = len >>> 7; v > 0; v >>>= 7) extra++;
    this.room(extra);
    this.buf.copyWithin(at + 1 + extra, at + 1, this.n);
    const end = this.n + extra;
    this.n = at;
    this.varint(len);
    this.n = end;
  }
}

const out = new Out();

function number(v: number | string | Long | undefined | null): number {
  if (v === undefined || v === null) return 0;
  if (typeof v === 'number') return v;
  if (typeof v === 'string') return Number(v);
  return v.toNumber();
}

function checkedUint(v: number | string | Long | undefined | null, field: string, max: number): number {
  const n = number(v);
  if (!Number.isInteger(n) || n < 0 || n > max) throw new SyncCodecError(`${field}: ${String(v)} is not an integer from 0 to ${max}`);
  return n;
}

function writeEndpoint(field: number, e: Endpoint): void {
  const at = out.begin(field);
  out.str(1, e.address ?? '');
  out.uint(2, checkedUint(e.port, 'port', 0xffffffff));
  out.end(at);
}

function writeConnectionId(field: number, c: ConnectionId): void {
  const at = out.begin(field);
  out.str(1, c.protocol ?? '');
  if (c.client) writeEndpoint(2, c.client);
  if (c.vip) writeEndpoint(3, c.vip);
  out.end(at);
}

function writeSyncedConnection(field: number, c: SyncedConnection): void {
  const at = out.begin(field);
  if (c.id) writeConnectionId(1, c.id);
  if (c.realServer) writeEndpoint(2, c.realServer);
  if (c.localAddress) writeEndpoint(3, c.localAddress);
  out.str(4, c.state ?? '');
  out.uint(5, checkedUint(c.timeoutSec, 'timeoutSec', 0xffffffff));
  if (c.synProxy) {
    const sp = out.begin(7);
    out.uint(1, checkedUint(c.synProxy.isn, 'synProxy.isn', 0xffffffff));
    out.uint(2, checkedUint(c.synProxy.its, 'synProxy.its', 0xffffffff));
    out.uint(3, checkedUint(c.synProxy.tsoff, 'synProxy.tsoff', 0xffffffff));
    out.end(sp);
  }
  if (c.seqAdjust) {
    const sa = out.begin(8);
    if (c.seqAdjust.original) writeSeqAdjustDirection(1, c.seqAdjust.original, 'seqAdjust.original');
    if (c.seqAdjust.reply) writeSeqAdjustDirection(2, c.seqAdjust.reply, 'seqAdjust.reply');
    out.end(sa);
  }
  out.end(at);
}

function writeSeqAdjustDirection(field: number, d: SeqAdjustDirection, name: string): void {
  const at = out.begin(field);
  out.uint(1, checkedUint(d.correctionPos, `${name}.correctionPos`, 0xffffffff));
  out.uint(2, checkedUint(d.offsetBefore, `${name}.offsetBefore`, 0xffffffff));
  out.uint(3, checkedUint(d.offsetAfter, `${name}.offsetAfter`, 0xffffffff));
  out.end(at);
}

function writeChange(c: Change): void {
  const at = out.begin(1);
  if (c.upsert) writeSyncedConnection(1, c.upsert);
  if (c.remove) writeConnectionId(2, c.remove);
  if (c.removedRealServer) writeEndpoint(3, c.removedRealServer);
  if (c.removedLocalAddress) writeEndpoint(4, c.removedLocalAddress);
  out.end(at);
}

/** A SyncMessage as protobuf bytes (what proto-loader's serializer gives for it, field for field). */
export function encodeSyncMessage(m: SyncMessage): Buffer {
  out.n = 0;
  out.uint(1, checkedUint(m.seq, 'seq', Number.MAX_SAFE_INTEGER));
  if (m.hello) {
    const h = m.hello;
    const at = out.begin(2);
    out.str(1, h.from ?? '');
    out.str(2, h.session ?? '');
    for (const g of h.groups ?? []) repeatedStr(3, g);
    out.end(at);
  }
  if (m.snapshotBegin) {
    const s = m.snapshotBegin;
    const at = out.begin(3);
    for (const g of s.groups ?? []) repeatedStr(1, g);
    out.uint(2, checkedUint(s.connections, 'connections', Number.MAX_SAFE_INTEGER));
    out.str(3, s.reason ?? '');
    out.end(at);
  }
  if (m.changes) {
    const at = out.begin(4);
    for (const c of m.changes.changes ?? []) writeChange(c);
    out.end(at);
  }
  if (m.snapshotEnd) out.end(out.begin(5));
  return Buffer.from(out.buf.subarray(0, out.n));
}

/** An element of a repeated string: written even when empty (its presence is the element). */
function repeatedStr(field: number, s: string): void {
  if (s !== '') {
    out.str(field, s);
    return;
  }
  out.room(2);
  out.key(field, LEN);
  out.buf[out.n++] = 0;
}

/** The decoder's position in one message's bytes. */
class In {
  pos: number;
  constructor(readonly buf: Buffer, start: number, readonly end: number) { this.pos = start; }

  varint(): number {
    const b = this.buf;
    let v = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new SyncCodecError('a varint runs past the end of its message');
      const byte = b[this.pos++]!;
      v += (byte & 0x7f) * scale;
      if (byte < 0x80) return v;
      scale *= 0x80;
    }
    throw new SyncCodecError('a varint longer than 10 bytes');
  }

  /** The end of a length-delimited field starting here (its length read). */
  span(): number {
    const len = this.varint();
    const end = this.pos + len;
    if (end > this.end) throw new SyncCodecError(`a field of ${len} bytes runs past the end of its message`);
    return end;
  }

  str(): string {
    const end = this.span();
    const s = this.buf.toString('utf8', this.pos, end);
    this.pos = end;
    return s;
  }

  skip(wire: number): void {
    switch (wire) {
      case VARINT: this.varint(); return;
      case I64: this.pos += 8; break;
      case LEN: this.pos = this.span(); return;
      case I32: this.pos += 4; break;
      default: throw new SyncCodecError(`wire type ${wire} is not one protobuf knows (or a group, which proto3 has not)`);
    }
    if (this.pos > this.end) throw new SyncCodecError('a fixed-size field runs past the end of its message');
  }
}

/** After a sub-message's fields: the last one must have ended where the sub-message does. */
function ended(r: In, end: number, what: string): void {
  if (r.pos !== end) throw new SyncCodecError(`a field of ${what} runs past the end of it`);
}

function expect(wire: number, want: number, field: string): void {
  if (wire !== want) throw new SyncCodecError(`field ${field} has wire type ${wire}, not ${want}`);
}

/** uint32 as protobufjs reads it: the varint's low 32 bits. */
function uint32(v: number): number {
  return v % 0x1_0000_0000;
}

function readEndpoint(r: In, end: number): Endpoint__Output {
  const e: Endpoint__Output = { address: '', port: 0 };
  while (r.pos < end) {
    const key = r.varint();
    const wire = key & 7;
    switch (key >>> 3) {
      case 1: expect(wire, LEN, 'address'); e.address = r.str(); break;
      case 2: expect(wire, VARINT, 'port'); e.port = uint32(r.varint()); break;
      default: r.skip(wire);
    }
  }
  ended(r, end, 'an Endpoint');
  return e;
}

function readConnectionId(r: In, end: number): ConnectionId__Output {
  const c: ConnectionId__Output = { protocol: '', client: null, vip: null };
  while (r.pos < end) {
    const key = r.varint();
    const wire = key & 7;
    switch (key >>> 3) {
      case 1: expect(wire, LEN, 'protocol'); c.protocol = r.str(); break;
      case 2: expect(wire, LEN, 'client'); c.client = readEndpoint(r, r.span()); break;
      case 3: expect(wire, LEN, 'vip'); c.vip = readEndpoint(r, r.span()); break;
      default: r.skip(wire);
    }
  }
  ended(r, end, 'a ConnectionId');
  return c;
}

function readSyncedConnection(r: In, end: number): SyncedConnection__Output {
  const c: SyncedConnection__Output = { id: null, realServer: null, localAddress: null, state: '', timeoutSec: 0, synProxy: null, seqAdjust: null };
  while (r.pos < end) {
    const key = r.varint();
    const wire = key & 7;
    switch (key >>> 3) {
      case 1: expect(wire, LEN, 'id'); c.id = readConnectionId(r, r.span()); break;
      case 2: expect(wire, LEN, 'realServer'); c.realServer = readEndpoint(r, r.span()); break;
      case 3: expect(wire, LEN, 'localAddress'); c.localAddress = readEndpoint(r, r.span()); break;
      case 4: expect(wire, LEN, 'state'); c.state = r.str(); break;
      case 5: expect(wire, VARINT, 'timeoutSec'); c.timeoutSec = uint32(r.varint()); break;
      case 7: expect(wire, LEN, 'synProxy'); c.synProxy = readSynProxyState(r, r.span()); break;
      case 8: expect(wire, LEN, 'seqAdjust'); c.seqAdjust = readSeqAdjust(r, r.span()); break;
      default: r.skip(wire);
    }
  }
  ended(r, end, 'a SyncedConnection');
  return c;
}

function readSynProxyState(r: In, end: number): SynProxyState__Output {
  const s: SynProxyState__Output = { isn: 0, its: 0, tsoff: 0 };
  while (r.pos < end) {
    const key = r.varint();
    const wire = key & 7;
    switch (key >>> 3) {
      case 1: expect(wire, VARINT, 'isn'); s.isn = uint32(r.varint()); break;
      case 2: expect(wire, VARINT, 'its'); s.its = uint32(r.varint()); break;
      case 3: expect(wire, VARINT, 'tsoff'); s.tsoff = uint32(r.varint()); break;
      default: r.skip(wire);
    }
  }
  ended(r, end, 'a SynProxyState');
  return s;
}

function readSeqAdjust(r: In, end: number): SeqAdjust__Output {
  const s: SeqAdjust__Output = { original: null, reply: null };
  while (r.pos < end) {
    const key = r.varint();
    const wire = key & 7;
    switch (key >>> 3) {
      case 1: expect(wire, LEN, 'original'); s.original = readSeqAdjustDirection(r, r.span()); break;
      case 2: expect(wire, LEN, 'reply'); s.reply = readSeqAdjustDirection(r, r.span()); break;
      default: r.skip(wire);
    }
  }
  ended(r, end, 'a SeqAdjust');
  return s;
}

function readSeqAdjustDirection(r: In, end: number): SeqAdjustDirection__Output {
  const d: SeqAdjustDirection__Output = { correctionPos: 0, offsetBefore: 0, offsetAfter: 0 };
  while (r.pos < end) {
    const key = r.varint();
    const wire = key & 7;
    switch (key >>> 3) {
      case 1: expect(wire, VARINT, 'correctionPos'); d.correctionPos = uint32(r.varint()); break;
      case 2: expect(wire, VARINT, 'offsetBefore'); d.offsetBefore = uint32(r.varint()); break;
      case 3: expect(wire, VARINT, 'offsetAfter'); d.offsetAfter = uint32(r.varint()); break;
      default: r.skip(wire);
    }
  }
  ended(r, end, 'a SeqAdjustDirection');
  return d;
}

function readChange(r: In, end: number): Change__Output {
  const c: Change__Output = { removedRealServer: null, removedLocalAddress: null };
  while (r.pos < end) {
    const key = r.varint();
    const wire = key & 7;
    switch (key >>> 3) {
      case 1:
        expect(wire, LEN, 'upsert');
        c.upsert = readSyncedConnection(r, r.span());
        if (c.remove !== undefined) delete c.remove; // (a `delete` otherwise would make every change a slow object)
        c.op = 'upsert';
        break;
      case 2:
        expect(wire, LEN, 'remove');
        c.remove = readConnectionId(r, r.span());
        if (c.upsert !== undefined) delete c.upsert;
        c.op = 'remove';
        break;
      case 3: expect(wire, LEN, 'removedRealServer'); c.removedRealServer = readEndpoint(r, r.span()); break;
      case 4: expect(wire, LEN, 'removedLocalAddress'); c.removedLocalAddress = readEndpoint(r, r.span()); break;
      default: r.skip(wire);
    }
  }
  ended(r, end, 'a Change');
  return c;
}

function readStrings(r: In, end: number, field: number, into: string[], other: (n: number, wire: number) => void): void {
  while (r.pos < end) {
    const key = r.varint();
    const wire = key & 7;
    if (key >>> 3 === field) {
      expect(wire, LEN, 'groups');
      into.push(r.str());
    } else {
      other(key >>> 3, wire);
    }
  }
  ended(r, end, 'a message');
}

const BODIES = ['hello', 'snapshotBegin', 'changes', 'snapshotEnd'] as const;

/** A SyncMessage from protobuf bytes, as proto-loader's deserializer gives it with LOADER_OPTIONS. */
export function decodeSyncMessage(buf: Buffer): SyncMessage__Output {
  const r = new In(buf, 0, buf.length);
  const m: SyncMessage__Output = { seq: 0 };
  const body = (name: (typeof BODIES)[number]): void => {
    for (const other of BODIES) if (other !== name && m[other] !== undefined) delete m[other];
    m.body = name;
  };
  while (r.pos < r.end) {
    const key = r.varint();
    const wire = key & 7;
    switch (key >>> 3) {
      case 1: expect(wire, VARINT, 'seq'); m.seq = r.varint(); break;
      case 2: {
        expect(wire, LEN, 'hello');
        const end = r.span();
        const h: Hello__Output = { from: '', session: '', groups: [] };
        readStrings(r, end, 3, h.groups, (n, w) => {
          if (n === 1) { expect(w, LEN, 'from'); h.from = r.str(); } else if (n === 2) { expect(w, LEN, 'session'); h.session = r.str(); } else r.skip(w);
        });
        body('hello');
        m.hello = h;
        break;
      }
      case 3: {
        expect(wire, LEN, 'snapshotBegin');
        const end = r.span();
        const s: SnapshotBegin__Output = { groups: [], connections: 0, reason: '' };
        readStrings(r, end, 1, s.groups, (n, w) => {
          if (n === 2) { expect(w, VARINT, 'connections'); s.connections = r.varint(); } else if (n === 3) { expect(w, LEN, 'reason'); s.reason = r.str(); } else r.skip(w);
        });
        body('snapshotBegin');
        m.snapshotBegin = s;
        break;
      }
      case 4: {
        expect(wire, LEN, 'changes');
        const end = r.span();
        const changes: Change__Output[] = [];
        while (r.pos < end) {
          const k = r.varint();
          if (k >>> 3 === 1) {
            expect(k & 7, LEN, 'changes');
            changes.push(readChange(r, r.span()));
          } else {
            r.skip(k & 7);
          }
        }
        ended(r, end, 'Changes');
        body('changes');
        m.changes = { changes };
        break;
      }
      case 5: {
        expect(wire, LEN, 'snapshotEnd');
        r.pos = r.span(); // SnapshotEnd has no fields: whatever a newer peer put in it is skipped
        body('snapshotEnd');
        m.snapshotEnd = {};
        break;
      }
      default: r.skip(wire);
    }
  }
  return m;
}

/** A SyncReply as protobuf bytes (what proto-loader's serializer gives for it). */
export function encodeSyncReply(m: SyncReply): Buffer {
  out.n = 0;
  if (m.ack) {
    const at = out.begin(1);
    out.uint(1, checkedUint(m.ack.seq, 'ack.seq', Number.MAX_SAFE_INTEGER));
    out.uint(2, checkedUint(m.ack.injected, 'ack.injected', Number.MAX_SAFE_INTEGER));
    out.uint(3, checkedUint(m.ack.failed, 'ack.failed', Number.MAX_SAFE_INTEGER));
    out.end(at);
  }
  if (m.resync) {
    const at = out.begin(2);
    out.uint(1, checkedUint(m.resync.expected, 'resync.expected', Number.MAX_SAFE_INTEGER));
    out.str(2, m.resync.reason ?? '');
    out.end(at);
  }
  return Buffer.from(out.buf.subarray(0, out.n));
}

/** A SyncReply from protobuf bytes, as proto-loader's deserializer gives it with LOADER_OPTIONS. */
export function decodeSyncReply(buf: Buffer): SyncReply__Output {
  const r = new In(buf, 0, buf.length);
  const m: SyncReply__Output = {};
  while (r.pos < r.end) {
    const key = r.varint();
    const wire = key & 7;
    switch (key >>> 3) {
      case 1: {
        expect(wire, LEN, 'ack');
        const end = r.span();
        const a = { seq: 0, injected: 0, failed: 0 };
        while (r.pos < end) {
          const k = r.varint();
          const w = k & 7;
          switch (k >>> 3) {
            case 1: expect(w, VARINT, 'ack.seq'); a.seq = r.varint(); break;
            case 2: expect(w, VARINT, 'ack.injected'); a.injected = r.varint(); break;
            case 3: expect(w, VARINT, 'ack.failed'); a.failed = r.varint(); break;
            default: r.skip(w);
          }
        }
        ended(r, end, 'an Ack');
        if (m.resync !== undefined) delete m.resync;
        m.ack = a;
        m.body = 'ack';
        break;
      }
      case 2: {
        expect(wire, LEN, 'resync');
        const end = r.span();
        const s = { expected: 0, reason: '' };
        while (r.pos < end) {
          const k = r.varint();
          const w = k & 7;
          switch (k >>> 3) {
            case 1: expect(w, VARINT, 'resync.expected'); s.expected = r.varint(); break;
            case 2: expect(w, LEN, 'resync.reason'); s.reason = r.str(); break;
            default: r.skip(w);
          }
        }
        ended(r, end, 'a Resync');
        if (m.ack !== undefined) delete m.ack;
        m.resync = s;
        m.body = 'resync';
        break;
      }
      default: r.skip(wire);
    }
  }
  return m;
}
