import { createHash } from 'node:crypto';

/**
 * Maglev consistent hashing (Eisenbud et al., NSDI 2016), weighted. The lookup table depends only on the
 * real servers' endpoints and weights and on the table size, never on ids or order of arrival, so every
 * director (and every reload) computes the same table and maps a connection to the same real server.
 */

export interface MaglevRealServer {
  /** Stable identity of the real server, e.g. `198.19.1.11:8080`. */
  readonly name: string;
  readonly weight: number;
}

/**
 * The table size for `realServerCount` configured real servers: a prime ≥ 100 × the count, constant for
 * up to 32 real servers and then doubling in bands. Why bands: Maglev only moves ~1/N of the connections
 * when the table size stays the same, so the size must not follow every change in the server count.
 */
export function maglevTableSize(realServerCount: number): number {
  let band = 32;
  while (band < realServerCount) band *= 2;
  return nextPrime(100 * band);
}

export function nextPrime(n: number): number {
  const isPrime = (k: number): boolean => {
    if (k < 2) return false;
    for (let d = 2; d * d <= k; d++) if (k % d === 0) return false;
    return true;
  };
  let k = Math.max(2, Math.ceil(n));
  while (!isPrime(k)) k++;
  return k;
}

function hash64(text: string, salt: string): bigint {
  return createHash('sha256').update(salt).update(text).digest().readBigUInt64BE(0);
}

/**
 * Returns, for each of `size` slots (size must be prime), the index into `realServers` that owns it.
 * Real servers with weight 0 own no slot. Each real server's share of slots is proportional to its weight:
 * in each round a real server earns weight/maxWeight of a turn and takes its preferred free slots with it.
 */
export function buildMaglevTable(realServers: readonly MaglevRealServer[], size: number): Int32Array {
  const table = new Int32Array(size).fill(-1);
  // Sorted by name: the table must not depend on the order real servers are listed in.
  const live = realServers.map((b, i) => ({ ...b, index: i })).filter((b) => b.weight > 0)
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  if (live.length === 0) return table;
  const m = BigInt(size);
  const perm = live.map((b) => ({
    index: b.index,
    offset: Number(hash64(b.name, 'offset') % m),
    skip: Number(hash64(b.name, 'skip') % (m - 1n)) + 1,
    next: 0,
    credit: 0,
    share: b.weight / Math.max(...live.map((x) => x.weight)),
  }));
  let filled = 0;
  while (filled < size) {
    for (const p of perm) {
      p.credit += p.share;
      while (p.credit >= 1 && filled < size) {
        p.credit -= 1;
        let slot = (p.offset + p.next * p.skip) % size;
        while (table[slot] !== -1) {
          p.next++;
          slot = (p.offset + p.next * p.skip) % size;
        }
        table[slot] = p.index;
        p.next++;
        filled++;
      }
      if (filled === size) break;
    }
  }
  return table;
}
