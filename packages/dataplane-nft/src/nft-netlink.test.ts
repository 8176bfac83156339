import assert from 'node:assert/strict';
import { endianness } from 'node:os';
import { encodeElementBatch, encodeTimedElements, ElementEncodingError, frameParts, type ElementPart } from './nft-netlink.js';

/**
 * The bytes nft 1.0.6 itself sends, from `nft --debug=netlink add element ...` against lbd's table
 * (each 32-bit word printed in host order, as nft prints them):
 *
 *   dispatch       element 0a0012c6 00000006 00005000 : jump -> numgen_6
 *   slots          element 0a0012c6 00000006 00005000 00000003 : 23290001
 *   service_snat   element 23290000 : 010112c6 040112c6
 *   backend_dnat   element 23290001 : 010212c6 00005000
 *   service_tuple  element 23290000 : 0a0012c6 00000006 00005000
 *   slot_snat      element 7364626c 00000030 00000000 00000000 : 010112c6 040112c6
 *   eligible       element 23290001
 *
 * and the message layout from `nft --debug=mnl` (NEWSETELEM: table, set, a nested list of nested elements,
 * each a nested key holding a value, and a nested data holding a value or a verdict with code and chain).
 */

const LE = endianness() === 'LE';

/** nft's words as bytes in memory: each word is a host-order u32. */
function words(...ws: string[]): Buffer {
  const out = Buffer.alloc(ws.length * 4);
  ws.forEach((w, i) => (LE ? out.writeUInt32LE(parseInt(w, 16), i * 4) : out.writeUInt32BE(parseInt(w, 16), i * 4)));
  return out;
}

interface Attr { type: number; nested: boolean; payload: Buffer }

function attrs(buf: Buffer): Attr[] {
  const out: Attr[] = [];
  let o = 0;
  while (o + 4 <= buf.length) {
    const len = LE ? buf.readUInt16LE(o) : buf.readUInt16BE(o);
    const type = LE ? buf.readUInt16LE(o + 2) : buf.readUInt16BE(o + 2);
    assert.ok(len >= 4 && o + len <= buf.length, `attribute at ${o} of length ${len} fits`);
    out.push({ type: type & 0x3fff, nested: (type & 0x8000) !== 0, payload: buf.subarray(o + 4, o + len) });
    o += (len + 3) & ~3;
  }
  assert.equal(o, buf.length, 'attributes fill the message exactly');
  return out;
}

interface Message { type: number; flags: number; seq: number; family: number; resId: number; body: Buffer }

function messages(buf: Buffer): Message[] {
  const out: Message[] = [];
  let o = 0;
  while (o < buf.length) {
    const len = LE ? buf.readUInt32LE(o) : buf.readUInt32BE(o);
    const u16 = (at: number): number => (LE ? buf.readUInt16LE(at) : buf.readUInt16BE(at));
    out.push({
      type: u16(o + 4), flags: u16(o + 6), seq: LE ? buf.readUInt32LE(o + 8) : buf.readUInt32BE(o + 8),
      family: buf[o + 16]!, resId: buf.readUInt16BE(o + 18), body: buf.subarray(o + 20, o + len),
    });
    assert.equal(len % 4, 0);
    o += len;
  }
  assert.equal(o, buf.length);
  return out;
}

/** Each element of a NEWSETELEM message: its key bytes and its data (bytes, or a verdict). */
function elementsOf(msg: Message): { table: string; set: string; elements: Array<{ key: Buffer; data?: Buffer; verdict?: [number, string] }> } {
  const top = attrs(msg.body);
  const str = (a: Attr | undefined): string => a!.payload.subarray(0, a!.payload.indexOf(0)).toString();
  const list = top.find((a) => a.type === 3)!;
  assert.ok(list.nested);
  return {
    table: str(top.find((a) => a.type === 1)),
    set: str(top.find((a) => a.type === 2)),
    elements: attrs(list.payload).map((el) => {
      assert.deepEqual([el.type, el.nested], [1, true]);
      const parts = attrs(el.payload);
      const key = attrs(parts.find((p) => p.type === 1)!.payload);
      assert.deepEqual(key.map((k) => k.type), [1]);
      const dataAttr = parts.find((p) => p.type === 2);
      if (!dataAttr) return { key: key[0]!.payload };
      const [inner] = attrs(dataAttr.payload);
      if (inner!.type === 1) return { key: key[0]!.payload, data: inner!.payload };
      const verdict = attrs(inner!.payload);
      const chain = verdict.find((v) => v.type === 2)!.payload;
      return { key: key[0]!.payload, verdict: [verdict.find((v) => v.type === 1)!.payload.readInt32BE(0), chain.subarray(0, chain.indexOf(0)).toString()] };
    }),
  };
}

const part = (map: string, items: Array<[string, string]>, family: 'ip' | 'ip6' = 'ip'): ElementPart => ({ family, table: 'lbd', map, groups: [new Map(items)] });

describe('nf_tables element messages', () => {
  it('encodes every map as nft 1.0.6 does', () => {
    const batch = encodeElementBatch([
      part('dispatch', [['198.18.0.10 . tcp . 80', 'jump numgen_6']]),
      part('slots', [['198.18.0.10 . tcp . 80 . 3', '589889537']]),
      part('service_snat', [['589889536', '198.18.1.1-198.18.1.4']]),
      part('backend_dnat', [['589889537', '198.18.2.1 . 80']]),
      part('service_tuple', [['589889536', '198.18.0.10 . tcp . 80']]),
      part('slot_snat', [['"lbds0"', '198.18.1.1-198.18.1.4']]),
      part('eligible', [['589889537', '']]),
    ], 100);
    const msgs = messages(batch.bytes);
    assert.deepEqual(msgs.map((m) => [m.type, m.seq]), [[0x10, 100], ...[1, 2, 3, 4, 5, 6, 7].map((i) => [0x0a0c, 100 + i]), [0x11, 108]]);
    // Batch begin and end address the nf_tables subsystem (res_id 10, network order); elements ask for an ack.
    assert.deepEqual([msgs[0]!.resId, msgs.at(-1)!.resId], [10, 10]);
    for (const m of msgs.slice(1, -1)) assert.deepEqual([m.family, m.flags], [2, 0x1 | 0x4 | 0x400]);
    const got = msgs.slice(1, -1).map(elementsOf);
    assert.deepEqual(got.map((g) => [g.table, g.set]), ['dispatch', 'slots', 'service_snat', 'backend_dnat', 'service_tuple', 'slot_snat', 'eligible'].map((s) => ['lbd', s]));
    const [dispatch, slots, snat, dnat, tuple, slotSnat, eligible] = got.map((g) => g.elements[0]!);
    assert.deepEqual(dispatch!.key, words('0a0012c6', '00000006', '00005000'));
    assert.deepEqual(dispatch!.verdict, [-3, 'numgen_6']);
    assert.deepEqual([slots!.key, slots!.data], [words('0a0012c6', '00000006', '00005000', '00000003'), words('23290001')]);
    assert.deepEqual([snat!.key, snat!.data], [words('23290000'), words('010112c6', '040112c6')]);
    assert.deepEqual([dnat!.key, dnat!.data], [words('23290001'), words('010212c6', '00005000')]);
    assert.deepEqual([tuple!.key, tuple!.data], [words('23290000'), words('0a0012c6', '00000006', '00005000')]);
    assert.deepEqual([slotSnat!.key, slotSnat!.data], [words('7364626c', '00000030', '00000000', '00000000'), words('010112c6', '040112c6')]);
    assert.deepEqual([eligible!.key, eligible!.data, eligible!.verdict], [words('23290001'), undefined, undefined]);
    assert.deepEqual(batch.messages.map((m) => [m.seq, m.map, m.count]), [
      [101, 'dispatch', 1], [102, 'slots', 1], [103, 'service_snat', 1], [104, 'backend_dnat', 1], [105, 'service_tuple', 1], [106, 'slot_snat', 1], [107, 'eligible', 1],
    ]);
    assert.equal(batch.messages[0]!.first, '198.18.0.10 . tcp . 80 : jump numgen_6');
  });

  it('encodes IPv6 addresses, udp and goto in full', () => {
    const batch = encodeElementBatch([
      part('dispatch', [['fd00::a . udp . 53', 'goto reject_new']], 'ip6'),
      part('backend_dnat', [['65537', '::ffff:198.18.2.1 . 8080']], 'ip6'),
    ]);
    const [d, b] = messages(batch.bytes).slice(1, -1).map((m) => { assert.equal(m.family, 10); return elementsOf(m).elements[0]!; });
    assert.deepEqual(d!.key, Buffer.concat([Buffer.from('fd00000000000000000000000000000a', 'hex'), words('00000011'), Buffer.from([0, 53, 0, 0])]));
    assert.deepEqual(d!.verdict, [-4, 'reject_new']);
    assert.deepEqual(b!.data, Buffer.concat([Buffer.from('00000000000000000000ffffc6120201', 'hex'), Buffer.from([0x1f, 0x90, 0, 0])]));
  });

  it('splits a large map into messages whose element list fits a 16-bit attribute length', () => {
    const items: Array<[string, string]> = [];
    for (let i = 0; i < 5000; i++) items.push([`198.18.${i >> 8}.${i & 0xff} . tcp . 80 . 0`, String(i + 1)]);
    const batch = encodeElementBatch([part('slots', items)]);
    const msgs = messages(batch.bytes).slice(1, -1);
    assert.ok(msgs.length > 1, 'more than one message');
    let total = 0;
    for (const m of msgs) {
      const list = attrs(m.body).find((a) => a.type === 3)!;
      assert.ok(list.payload.length + 4 <= 0xffff);
      total += elementsOf(m).elements.length;
    }
    assert.equal(total, 5000);
    assert.deepEqual(batch.messages.map((m) => m.count).reduce((a, b) => a + b), 5000);
  });

  it('refuses text that does not fit the map, naming the element, the map and why', () => {
    const cases: Array<[ElementPart, RegExp]> = [
      [part('dispatch', [['198.18.0.300 . tcp . 80', 'jump numgen_6']]), /"198\.18\.0\.300 \. tcp \. 80 : jump numgen_6" of map dispatch \(ip lbd\): "198\.18\.0\.300" is not an IPv4 address/],
      [part('dispatch', [['198.18.0.1 . sctp . 80', 'jump numgen_6']]), /"sctp" is not tcp or udp/],
      [part('dispatch', [['198.18.0.1 . tcp . 80', 'accept']]), /"accept" is not "jump CHAIN" or "goto CHAIN"/],
      [part('slots', [['198.18.0.1 . tcp . 80', '1']]), /is not 4 parts separated by " \. "/],
      [part('backend_dnat', [['1', '198.18.2.1 . 70000']]), /"70000" is not a port/],
      [part('service_snat', [['1', '198.18.1.1']]), /is not a range first-last/],
      [part('slot_snat', [['"averyveryverylongname"', '198.18.1.1-198.18.1.2']]), /is not an interface name/],
      [part('eligible', [['-1', '']]), /"-1" is not a 32-bit number/],
      [part('backend_dnat', [['1', 'fd00::1 . 80']], 'ip'), /"fd00::1" is not an IPv4 address/],
      [part('backend_dnat', [['1', 'fd00::1::2 . 80']], 'ip6'), /is not an IPv6 address/],
      [part('persist', [['1', '2']]), /map persist: lbd writes no such map/],
    ];
    for (const [p, re] of cases) assert.throws(() => encodeElementBatch([p]), (e: unknown) => e instanceof ElementEncodingError && re.test(e.message), String(re));
  });

  it('frames keep the parts in order and never cut a service\'s elements', () => {
    const g = (n: number, tag: string): Map<string, string> => new Map(Array.from({ length: n }, (_, i) => [`${tag}${i}`, '']));
    const parts: ElementPart[] = [
      { family: 'ip', table: 'lbd', map: 'slots', groups: [g(3, 'a'), g(3, 'b'), g(3, 'c')] },
      { family: 'ip6', table: 'lbd', map: 'slots', groups: [g(2, 'd')] },
      { family: 'ip', table: 'lbd', map: 'dispatch', groups: [g(1, 'e'), g(1, 'f')] },
    ];
    const frames = frameParts(parts, 5);
    const flat = (f: ElementPart[]): string[] => f.flatMap((p) => p.groups.flatMap((m) => [...m.keys()].map((k) => `${p.family}/${p.map}/${k}`)));
    assert.deepEqual(frames.map(flat), [
      ['ip/slots/a0', 'ip/slots/a1', 'ip/slots/a2'],
      ['ip/slots/b0', 'ip/slots/b1', 'ip/slots/b2'],
      ['ip/slots/c0', 'ip/slots/c1', 'ip/slots/c2', 'ip6/slots/d0', 'ip6/slots/d1'],
      ['ip/dispatch/e0', 'ip/dispatch/f0'],
    ]);
    // A group larger than a frame is a frame of its own, whole.
    assert.deepEqual(frameParts([{ family: 'ip', table: 'lbd', map: 'slots', groups: [g(7, 'x')] }], 5).map(flat), [[0, 1, 2, 3, 4, 5, 6].map((i) => `ip/slots/x${i}`)]);
  });

  /*
   * The kernel lease's words, against `nft --debug=mnl add element inet lbd lease4 { 198.18.0.10 timeout
   * 5000ms expires 5000ms }` (and `delete element`, the arp table, lease6): NEWSETELEM (0x0a0c) for family
   * 1 (inet) or 3 (arp); table, set, and one nested element holding a nested key (a value: the address in
   * network order), NFTA_SET_ELEM_TIMEOUT (4) and NFTA_SET_ELEM_EXPIRATION (5), each 00000000 00001388 (5000
   * ms, 64 bits in network order). DELSETELEM (0x0a0e) holds the key alone. nft also sends
   * NFTA_SET_ELEM_LIST_SET_ID, which names a set made in the same batch; these sets already exist.
   */
  it('encodes the kernel lease\'s timed elements as nft 1.0.6 does', () => {
    const batch = encodeTimedElements([
      { op: 'add', family: 'inet', table: 'lbd', set: 'lease4', address: '198.18.0.10', ms: 5000.7 },
      { op: 'add', family: 'arp', table: 'lbd', set: 'lease4', address: '198.18.0.10', ms: 0.2 },
      { op: 'add', family: 'inet', table: 'lbd', set: 'lease6', address: 'fd00::10', ms: 2 ** 33 },
      { op: 'delete', family: 'inet', table: 'lbd', set: 'lease4', address: '198.18.0.10' },
    ], 40);
    const msgs = messages(batch.bytes);
    assert.deepEqual(msgs.map((m) => [m.type, m.seq, m.family, m.flags]), [
      [0x10, 40, 0, 0x1], [0x0a0c, 41, 1, 0x405], [0x0a0c, 42, 3, 0x405], [0x0a0c, 43, 1, 0x405], [0x0a0e, 44, 1, 0x5], [0x11, 45, 0, 0x1],
    ]);
    assert.deepEqual(batch.seqs, [41, 42, 43, 44]);
    const timed = msgs.slice(1, -1).map((m) => {
      const top = attrs(m.body);
      const str = (t: number): string => { const p = top.find((a) => a.type === t)!.payload; return p.subarray(0, p.indexOf(0)).toString(); };
      const [el, more] = attrs(top.find((a) => a.type === 3)!.payload);
      assert.equal(more, undefined, 'one element per message');
      const parts = attrs(el!.payload);
      const key = attrs(parts.find((p) => p.type === 1)!.payload);
      const u64 = (t: number): string | undefined => parts.find((p) => p.type === t)?.payload.toString('hex');
      return { table: str(1), set: str(2), key: key.map((k) => [k.type, k.payload.toString('hex')]), timeout: u64(4), expires: u64(5), types: parts.map((p) => p.type) };
    });
    assert.deepEqual(timed, [
      { table: 'lbd', set: 'lease4', key: [[1, 'c612000a']], timeout: '0000000000001388', expires: '0000000000001388', types: [1, 4, 5] },
      { table: 'lbd', set: 'lease4', key: [[1, 'c612000a']], timeout: '0000000000000001', expires: '0000000000000001', types: [1, 4, 5] },
      { table: 'lbd', set: 'lease6', key: [[1, 'fd000000000000000000000000000010']], timeout: '0000000200000000', expires: '0000000200000000', types: [1, 4, 5] },
      { table: 'lbd', set: 'lease4', key: [[1, 'c612000a']], timeout: undefined, expires: undefined, types: [1] },
    ]);
    assert.throws(() => encodeTimedElements([{ op: 'add', family: 'inet', table: 'lbd', set: 'lease4', address: '198.18.0.300', ms: 5 }]),
      (e: unknown) => e instanceof ElementEncodingError && /"198\.18\.0\.300" of set lease4 \(inet lbd\): not an IPv4 or IPv6 address/.test(e.message));
    assert.throws(() => encodeTimedElements([{ op: 'add', family: 'inet', table: 'lbd', set: 'lease4', address: '198.18.0.3', ms: Number.NaN }]),
      /timeout NaN ms is not a number of milliseconds/);
  });
});
