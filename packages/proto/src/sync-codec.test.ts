import assert from 'node:assert/strict';
import { decodeSyncMessage, decodeSyncReply, encodeSyncMessage, encodeSyncReply, SyncCodecError } from './sync-codec.js';
import { syncProto, type Change, type SyncMessage, type SyncReply } from './index.js';

/**
 * The hand-written SyncMessage codec against proto-loader's (what every earlier lbd sent and read): the
 * same objects out of the same bytes, and bytes proto-loader reads as it reads its own.
 */

const loader = syncProto().ConnSync.service.Stream;
const viaLoader = (m: SyncMessage): unknown => loader.requestDeserialize(loader.requestSerialize(m));

/** A small deterministic generator (mulberry32): the random messages are the same on every run. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const endpoint = (address: string, port: number): { address: string; port: number } => ({ address, port });

const upsert = (i: number, v6 = false): Change => ({
  upsert: {
    id: { protocol: i % 3 === 0 ? 'udp' : 'tcp', client: endpoint(v6 ? `fd00::${i.toString(16)}` : `198.18.${(i >> 8) & 255}.${i & 255}`, 1024 + (i % 60000)), vip: endpoint(v6 ? 'fd00::10' : '198.19.0.10', 443) },
    realServer: endpoint(v6 ? 'fd00:1::2' : '198.18.2.1', 8080),
    localAddress: i % 2 === 0 ? endpoint(v6 ? 'fd00:2::1' : '198.18.1.1', 20000 + i) : null,
    state: i % 3 === 0 ? 'ASSURED' : 'ESTABLISHED',
    timeoutSec: i % 5 === 0 ? 0 : 432000,
  },
});

const CASES: Array<[string, SyncMessage]> = [
  ['an empty message', {}],
  ['hello', { seq: 1, hello: { from: 'dir1', session: 'Xy_0-9', groups: ['default', '', 'ecmp-slot-3'] } }],
  ['hello with nothing in it', { seq: 1, hello: {} }],
  ['snapshotBegin', { seq: 2, snapshotBegin: { groups: ['default'], connections: 100_000, reason: 'peer joined (first stream)' } }],
  ['snapshotBegin, zeros', { seq: 2, snapshotBegin: { groups: [], connections: 0, reason: '' } }],
  ['snapshotEnd', { seq: 9, snapshotEnd: {} }],
  ['changes: one of each', { seq: 3, changes: { changes: [upsert(1), { remove: { protocol: 'tcp', client: endpoint('198.18.0.1', 5), vip: endpoint('198.19.0.10', 443) } }] } }],
  ['changes: a remove with the binding it removed', { seq: 4, changes: { changes: [{
    remove: { protocol: 'tcp', client: endpoint('198.18.0.1', 5), vip: endpoint('198.19.0.10', 443) },
    removedRealServer: endpoint('198.19.1.11', 443), removedLocalAddress: endpoint('198.19.1.88', 40001),
  }] } }],
  ['changes: empty', { seq: 4, changes: { changes: [] } }],
  ['changes: a change with no op, an upsert with nothing set, a remove with no endpoints', { seq: 5, changes: { changes: [{}, { upsert: {} }, { remove: { protocol: 'udp' } }] } }],
  // 512 changes: a Changes field of about 50 KiB, a length of three varint bytes, moved into place twice.
  ['changes: a full batch, IPv4', { seq: 6, changes: { changes: Array.from({ length: 512 }, (_, i) => upsert(i)) } }],
  ['changes: a full batch, IPv6 (each change over 127 bytes)', { seq: 7, changes: { changes: Array.from({ length: 512 }, (_, i) => upsert(i, true)) } }],
  ['a seq past 32 bits, and ports and timeouts at their largest', { seq: 2 ** 40 + 3, changes: { changes: [{ upsert: { id: { protocol: 'tcp', client: endpoint('198.18.0.1', 0xffffffff) }, timeoutSec: 0xffffffff } }] } }],
  ['changes: SYN-proxied connections (numbers at 0 and at the top of u32; an adjustment with one direction)', { seq: 10, changes: { changes: [
    { upsert: { ...upsert(1).upsert, synProxy: { isn: 0xffffffff, its: 0, tsoff: 7 }, seqAdjust: { original: { correctionPos: 0, offsetBefore: 0, offsetAfter: 0 }, reply: { correctionPos: 1, offsetBefore: 0xfffffffe, offsetAfter: 0xffffffff } } } },
    { upsert: { ...upsert(2, true).upsert, synProxy: { isn: 5 } } },
    { upsert: { ...upsert(4).upsert, seqAdjust: { original: { offsetAfter: 3 } } } },
  ] } }],
  ['text that is not ASCII', { seq: 8, snapshotBegin: { groups: ['grüppe', '組'], reason: 'Übergabe — ok' } }],
  ['seq as a string (proto-loader takes one)', { seq: '12', snapshotEnd: {} }],
];

describe('sync-codec: SyncMessage by hand, against proto-loader', () => {
  for (const [name, m] of CASES) {
    it(`${name}: proto-loader reads the bytes as its own, and the codec reads proto-loader's bytes as proto-loader does`, () => {
      const mine = encodeSyncMessage(m);
      assert.deepEqual(loader.requestDeserialize(mine), viaLoader(m), 'proto-loader reading the codec\'s bytes');
      assert.deepEqual(decodeSyncMessage(loader.requestSerialize(m)), viaLoader(m), 'the codec reading proto-loader\'s bytes');
      assert.deepEqual(decodeSyncMessage(mine), viaLoader(m), 'the codec reading its own bytes');
    });
  }

  it('random messages, both ways (2 000, from a fixed seed)', () => {
    const r = random(15);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
    const text = (): string => pick(['', 'tcp', 'udp', 'ESTABLISHED', '198.18.0.1', 'fd00::1:2', 'é', 'x'.repeat(200)]);
    const ep = (): { address: string; port: number } | null => (r() < 0.2 ? null : endpoint(text(), pick([0, 1, 80, 65535, 70000, 2 ** 31])));
    const id = (): Change['remove'] => (r() < 0.1 ? null : { protocol: text(), client: ep(), vip: ep() });
    const u32 = (): number => pick([0, 1, 0x7fffffff, 0xffffffff, Math.floor(r() * 2 ** 32)]);
    const dir = (): { correctionPos: number; offsetBefore: number; offsetAfter: number } | null => (r() < 0.2 ? null : { correctionPos: u32(), offsetBefore: u32(), offsetAfter: u32() });
    const change = (): Change => pick<() => Change>([
      () => ({}),
      () => ({ upsert: { id: id(), realServer: ep(), localAddress: ep(), state: text(), timeoutSec: pick([0, 1, 432000]) } }),
      () => ({ upsert: { id: id(), state: text(), synProxy: r() < 0.2 ? null : { isn: u32(), its: u32(), tsoff: u32() }, seqAdjust: r() < 0.2 ? null : { original: dir(), reply: dir() } } }),
      () => ({ remove: id() }),
      () => ({ remove: id(), removedRealServer: ep(), removedLocalAddress: ep() }),
    ])();
    for (let i = 0; i < 2000; i++) {
      const m: SyncMessage = pick<() => SyncMessage>([
        () => ({ seq: Math.floor(r() * 2 ** 50), hello: { from: text(), session: text(), groups: Array.from({ length: Math.floor(r() * 4) }, text) } }),
        () => ({ seq: i, snapshotBegin: { groups: Array.from({ length: Math.floor(r() * 4) }, text), connections: Math.floor(r() * 1e6), reason: text() } }),
        () => ({ seq: i, changes: { changes: Array.from({ length: Math.floor(r() * 40) }, change) } }),
        () => ({ seq: i, snapshotEnd: {} }),
      ])();
      assert.deepEqual(loader.requestDeserialize(encodeSyncMessage(m)), viaLoader(m), `message ${i}: ${JSON.stringify(m)}`);
      assert.deepEqual(decodeSyncMessage(loader.requestSerialize(m)), viaLoader(m), `message ${i}: ${JSON.stringify(m)}`);
    }
  });

  it('skips fields it does not know, at every level (a newer peer\'s additions)', () => {
    // Unknown fields of each wire type: 15 varint, 14 fixed64, 13 length-delimited, 12 fixed32.
    const unknown = Buffer.from([15 << 3 | 0, 0xac, 0x02, 14 << 3 | 1, 1, 2, 3, 4, 5, 6, 7, 8, 13 << 3 | 2, 2, 0x61, 0x62, 12 << 3 | 5, 9, 9, 9, 9]);
    const field = (n: number, body: Buffer): Buffer => {
      assert.ok(body.length < 16_384);
      const len = body.length < 0x80 ? [body.length] : [(body.length & 0x7f) | 0x80, body.length >> 7];
      return Buffer.concat([Buffer.from([n << 3 | 2, ...len]), body]);
    };
    const ep = Buffer.concat([field(1, Buffer.from('198.18.0.1')), Buffer.from([2 << 3, 80]), unknown]);
    const id = Buffer.concat([field(1, Buffer.from('tcp')), unknown, field(2, ep)]);
    const conn = Buffer.concat([field(1, id), unknown, field(4, Buffer.from('ESTABLISHED'))]);
    const change = Buffer.concat([unknown, field(1, conn)]);
    const changes = Buffer.concat([field(1, change), unknown]);
    const msg = Buffer.concat([Buffer.from([1 << 3, 7]), unknown, field(4, changes), field(5, unknown)]);
    const expected = {
      seq: 7, body: 'changes',
      changes: { changes: [{ op: 'upsert', upsert: { id: { protocol: 'tcp', client: { address: '198.18.0.1', port: 80 }, vip: null }, realServer: null, localAddress: null, state: 'ESTABLISHED', timeoutSec: 0, synProxy: null, seqAdjust: null }, removedRealServer: null, removedLocalAddress: null }] },
    };
    // The message holds a snapshotEnd last too (field 5, with unknown fields in it): the oneof's last one wins.
    assert.deepEqual(decodeSyncMessage(msg), { seq: 7, body: 'snapshotEnd', snapshotEnd: {} });
    assert.deepEqual(decodeSyncMessage(msg.subarray(0, msg.length - 23)), expected);
    assert.deepEqual(loader.requestDeserialize(msg.subarray(0, msg.length - 23)), expected, 'and proto-loader reads it so too');
  });

  it('a message with two bodies, or a change with two ops (no lbd sends one): the last one counts, as with proto-loader', () => {
    const hello = encodeSyncMessage({ seq: 1, hello: { from: 'a' } });
    const end = encodeSyncMessage({ seq: 2, snapshotEnd: {} });
    const both = decodeSyncMessage(Buffer.concat([hello, end]));
    assert.deepEqual(both, { seq: 2, body: 'snapshotEnd', snapshotEnd: {} });
    // proto-loader names the same body, and keeps the earlier one beside it.
    const theirs = loader.requestDeserialize(Buffer.concat([hello, end]));
    assert.deepEqual([theirs.body, theirs.snapshotEnd], ['snapshotEnd', {}]);
    // One Change holding an upsert, then a remove: [Changes [Change [upsert [state "X"]] [remove [protocol "tcp"]]]].
    const change = Buffer.from([1 << 3 | 2, 3, 4 << 3 | 2, 1, 0x58, 2 << 3 | 2, 5, 1 << 3 | 2, 3, 0x74, 0x63, 0x70]);
    const msg = Buffer.concat([Buffer.from([4 << 3 | 2, change.length + 2, 1 << 3 | 2, change.length]), change]);
    const remove = { seq: 0, body: 'changes', changes: { changes: [{ op: 'remove', remove: { protocol: 'tcp', client: null, vip: null }, removedRealServer: null, removedLocalAddress: null }] } };
    assert.deepEqual(decodeSyncMessage(msg), remove);
    assert.equal(loader.requestDeserialize(msg).changes?.changes[0]?.op, 'remove');
  });

  it('refuses what is not a SyncMessage, saying what is wrong', () => {
    const good = encodeSyncMessage({ seq: 3, changes: { changes: [upsert(1)] } });
    // Cut anywhere after the Changes field's key (before it, what is left is a whole message: seq alone).
    for (let cut = 3; cut < good.length; cut++) {
      assert.throws(() => decodeSyncMessage(good.subarray(0, cut)), SyncCodecError, `cut at ${cut} of ${good.length}`);
    }
    assert.throws(() => decodeSyncMessage(Buffer.from([1 << 3 | 2, 0])), /field seq has wire type 2, not 0/);
    assert.throws(() => decodeSyncMessage(Buffer.from([4 << 3 | 0, 1])), /field changes has wire type 0, not 2/);
    assert.throws(() => decodeSyncMessage(Buffer.from([9 << 3 | 3])), /wire type 3 is not one protobuf knows/);
    assert.throws(() => decodeSyncMessage(Buffer.from([1 << 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])), /varint longer than 10 bytes/);
    // A Change whose Endpoint's string runs past the Endpoint (but not past the message).
    const ep = Buffer.from([1 << 3 | 2, 5, 0x31, 0x32]);
    const id = Buffer.concat([Buffer.from([2 << 3 | 2, ep.length]), ep, Buffer.from([0, 0, 0])]);
    assert.throws(() => decodeSyncMessage(Buffer.concat([Buffer.from([4 << 3 | 2, id.length + 4, 1 << 3 | 2, id.length + 2, 2 << 3 | 2, id.length]), id])), /runs past the end/);
  });

  it('refuses to write a number protobuf cannot carry, naming the field', () => {
    assert.throws(() => encodeSyncMessage({ seq: -1 }), /seq: -1 is not an integer from 0 to 9007199254740991/);
    assert.throws(() => encodeSyncMessage({ seq: 1, changes: { changes: [{ upsert: { realServer: endpoint('198.18.0.1', 1.5) } }] } }), /port: 1\.5 is not an integer/);
    assert.throws(() => encodeSyncMessage({ seq: 1, changes: { changes: [{ upsert: { timeoutSec: 2 ** 32 } }] } }), /timeoutSec: 4294967296 is not an integer from 0 to 4294967295/);
    // The encoder's buffer is shared: a refused message leaves nothing behind for the next one.
    assert.deepEqual(decodeSyncMessage(encodeSyncMessage({ seq: 2, snapshotEnd: {} })), { seq: 2, body: 'snapshotEnd', snapshotEnd: {} });
  });
});

describe('sync-codec: SyncReply by hand, against proto-loader', () => {
  const viaLoaderReply = (m: SyncReply): unknown => loader.responseDeserialize(loader.responseSerialize(m));
  const REPLIES: Array<[string, SyncReply]> = [
    ['an ack', { ack: { seq: 41, injected: 1_000_000, failed: 2 } }],
    ['an ack of zeros', { ack: { seq: 0, injected: 0, failed: 0 } }],
    ['an ack past 32 bits', { ack: { seq: 2 ** 40 + 1, injected: 2 ** 52, failed: 0 } }],
    ['an empty ack', { ack: {} }],
    ['a resync', { resync: { expected: 17, reason: 'message 19 came after 16: 17 and 18 are missing' } }],
    ['a resync, not ASCII', { resync: { expected: 1, reason: 'Lücke — 組' } }],
    ['nothing', {}],
  ];
  for (const [name, m] of REPLIES) {
    it(`${name}: each reads the other's bytes as proto-loader reads its own`, () => {
      const mine = encodeSyncReply(m);
      assert.deepEqual(loader.responseDeserialize(mine), viaLoaderReply(m), 'proto-loader reading the codec\'s bytes');
      assert.deepEqual(decodeSyncReply(loader.responseSerialize(m)), viaLoaderReply(m), 'the codec reading proto-loader\'s bytes');
      assert.deepEqual(decodeSyncReply(mine), viaLoaderReply(m), 'the codec reading its own bytes');
    });
  }

  it('skips unknown fields, takes the last of two bodies, and refuses what is not a SyncReply', () => {
    const unknown = Buffer.from([15 << 3 | 0, 0xac, 0x02, 13 << 3 | 2, 1, 0x61]);
    const ack = Buffer.from([1 << 3, 5, ...unknown]);
    const withUnknown = Buffer.concat([unknown, Buffer.from([1 << 3 | 2, ack.length]), ack]);
    assert.deepEqual(decodeSyncReply(withUnknown), { body: 'ack', ack: { seq: 5, injected: 0, failed: 0 } });
    assert.deepEqual(loader.responseDeserialize(withUnknown), decodeSyncReply(withUnknown), 'and proto-loader reads it so too');
    const both = Buffer.concat([encodeSyncReply({ resync: { expected: 3 } }), encodeSyncReply({ ack: { seq: 9 } })]);
    // Protobuf's rule: the last one on the wire. (proto-loader keeps both, and names the one declared last.)
    assert.deepEqual(decodeSyncReply(both), { body: 'ack', ack: { seq: 9, injected: 0, failed: 0 } });
    const good = encodeSyncReply({ ack: { seq: 300, injected: 7 } });
    for (let cut = 1; cut < good.length; cut++) assert.throws(() => decodeSyncReply(good.subarray(0, cut)), SyncCodecError, `cut at ${cut} of ${good.length}`);
    assert.throws(() => decodeSyncReply(Buffer.from([1 << 3 | 2, 2, 1 << 3 | 2, 0])), /field ack.seq has wire type 2, not 0/);
    assert.throws(() => decodeSyncReply(Buffer.from([2 << 3 | 0, 1])), /field resync has wire type 0, not 2/);
    assert.throws(() => encodeSyncReply({ ack: { seq: -1 } }), /ack.seq: -1 is not an integer/);
  });
});
