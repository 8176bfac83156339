import assert from 'node:assert/strict';
import { addressToBigInt, bigIntToAddress, canonicalAddress, familyOf } from './address.js';
import type { AddressFamily } from './types.js';

/** Address text <-> bigint, and the canonical text every other package compares against (RFC 5952 for IPv6). */

describe('familyOf', () => {
  const cases: [string, AddressFamily | null][] = [
    ['198.18.0.10', 4], ['0.0.0.0', 4], ['255.255.255.255', 4],
    ['fd00::10', 6], ['FD00:0:0:1:0:0:0:10', 6], ['::', 6], ['::ffff:198.18.0.10', 6],
    ['10.0.0.300', null], ['010.0.0.1', null], ['198.18.0', null], ['198.18.0.10/32', null], [' 198.18.0.10', null],
    ['fe80::1%eth0', null], ['fd00::1::2', null], ['fd00:0:0:0:0:0:0:0:1', null], ['', null], ['localhost', null],
  ];
  for (const [text, want] of cases) {
    it(`${JSON.stringify(text)} -> ${String(want)}`, () => assert.equal(familyOf(text), want));
  }
});

describe('addressToBigInt / bigIntToAddress', () => {
  const cases: [string, AddressFamily, bigint][] = [
    ['0.0.0.0', 4, 0n],
    ['198.18.0.10', 4, 3323068426n],
    ['255.255.255.255', 4, 0xffffffffn],
    ['::', 6, 0n],
    ['::1', 6, 1n],
    ['fd00::10', 6, 0xfd000000000000000000000000000010n],
    ['2001:db8::1', 6, 0x20010db8000000000000000000000001n],
    ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 6, (1n << 128n) - 1n],
    ['::ffff:c612:a', 6, 0xffffc612000an],
  ];
  for (const [text, family, value] of cases) {
    it(`${text} <-> ${value}`, () => {
      assert.equal(addressToBigInt(text), value);
      assert.equal(bigIntToAddress(value, family), text);
    });
  }

  it('reads an embedded IPv4 tail as the last two hextets', () => {
    assert.equal(addressToBigInt('::ffff:198.18.0.10'), 0xffffc612000an);
  });

  it('round-trips spread-out values in both families', () => {
    // A fixed linear congruential sequence: reproducible, and it reaches zero runs of every length.
    let x = 12345n;
    for (let i = 0; i < 500; i++) {
      x = (x * 6364136223846793005n + 1442695040888963407n) & ((1n << 128n) - 1n);
      const zeros = BigInt(i % 8) * 16n;
      const v6 = (x >> zeros) << zeros; // low hextets zeroed, so compression is exercised
      const v4 = x & 0xffffffffn;
      assert.equal(addressToBigInt(bigIntToAddress(v6, 6)), v6, bigIntToAddress(v6, 6));
      assert.equal(addressToBigInt(bigIntToAddress(v4, 4)), v4);
    }
  });

  it('throws on text that is not an address', () => {
    assert.throws(() => addressToBigInt('10.0.0.300'), /not an IP address: 10\.0\.0\.300/);
  });
});

describe('canonicalAddress (RFC 5952)', () => {
  const cases: [string, string, string][] = [
    ['lower case', '2001:DB8::AAAA', '2001:db8::aaaa'],
    ['leading zeros dropped', '2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
    ['the issue\'s example', 'FD00:0:0:1:0:0:0:10', 'fd00:0:0:1::10'],
    ['one zero hextet is not compressed', '2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'],
    ['the longest run is compressed', '2001:0:0:1:0:0:0:1', '2001:0:0:1::1'],
    ['on a tie, the first run is compressed', '2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['a run at the end', '2001:db8:0:0:1:0:0:0', '2001:db8:0:0:1::'],
    ['a run at the start', '0:0:0:0:0:0:0:1', '::1'],
    ['all zeros', '0:0:0:0:0:0:0:0', '::'],
    ['no zeros', '1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8'],
    ['over-compressed input', '1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0'],
    ['embedded IPv4 becomes hex', '::FFFF:198.18.0.10', '::ffff:c612:a'],
    ['IPv4 unchanged', '198.18.0.10', '198.18.0.10'],
  ];
  for (const [name, text, want] of cases) {
    it(`${name}: ${text} -> ${want}`, () => assert.equal(canonicalAddress(text), want));
  }

  it('is idempotent', () => {
    for (const [, text] of cases) assert.equal(canonicalAddress(canonicalAddress(text)), canonicalAddress(text));
  });

  it('throws on text that is not an address', () => {
    assert.throws(() => canonicalAddress('fe80::1%eth0'), /not an IP address: fe80::1%eth0/);
  });
});
