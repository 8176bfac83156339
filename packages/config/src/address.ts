import { isIP } from 'node:net';
import type { AddressFamily } from './types.js';

/** Address helpers shared by validation and rendering: parsing, canonical text, arithmetic on ranges. */

/**
 * 4, 6, or null when `address` is not a plain IP address. Zone indexes (`fe80::1%eth0`), which Node's
 * isIP accepts, are refused: nftables cannot match them and the arithmetic below would drop them silently.
 */
export function familyOf(address: string): AddressFamily | null {
  if (address.includes('%')) return null;
  const v = isIP(address);
  return v === 4 ? 4 : v === 6 ? 6 : null;
}

/** The address as a bigint (IPv4 in 32 bits, IPv6 in 128). Throws on anything `familyOf` rejects. */
export function addressToBigInt(address: string): bigint {
  const family = familyOf(address);
  if (family === 4) {
    return address.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
  }
  if (family === 6) {
    let text = address.toLowerCase();
    // An embedded IPv4 tail (::ffff:1.2.3.4) becomes two hextets.
    const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
    if (v4?.[1]) {
      const n = addressToBigInt(v4[1]);
      text = text.slice(0, -v4[1].length) + `${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
    }
    const [head = '', tail] = text.split('::');
    const headParts = head === '' ? [] : head.split(':');
    const tailParts = tail === undefined || tail === '' ? [] : tail.split(':');
    const missing = 8 - headParts.length - tailParts.length;
    const parts = tail === undefined ? headParts : [...headParts, ...Array<string>(missing).fill('0'), ...tailParts];
    return parts.reduce((acc, part) => (acc << 16n) | BigInt(parseInt(part, 16)), 0n);
  }
  throw new Error(`not an IP address: ${address}`);
}

export function bigIntToAddress(value: bigint, family: AddressFamily): string {
  if (family === 4) {
    return [24n, 16n, 8n, 0n].map((s) => String((value >> s) & 0xffn)).join('.');
  }
  const hextets: number[] = [];
  for (let i = 7; i >= 0; i--) hextets.push(Number((value >> BigInt(i * 16)) & 0xffffn));
  // RFC 5952: compress the longest run (of two or more) of zero hextets, the first one on a tie.
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (hextets[i] !== 0) { i++; continue; }
    let j = i;
    while (j < 8 && hextets[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) { bestStart = i; bestLen = j - i; }
    i = j;
  }
  const hex = hextets.map((h) => h.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

/** Canonical text of an address: IPv4 dotted quad, IPv6 RFC 5952 (what `nft` prints). */
export function canonicalAddress(address: string): string {
  const family = familyOf(address);
  if (family === null) throw new Error(`not an IP address: ${address}`);
  return bigIntToAddress(addressToBigInt(address), family);
}
