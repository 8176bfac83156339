import { addressToBigInt, slotGroup, type AddressRange, type EcmpTier } from '@lbd/config';

/**
 * Which slot of the ECMP tier a connection of an ECMP service belongs to, for connection sync: the slot whose
 * local-address pool holds the connection's local address (its fullnat SNAT address, the reply direction's
 * destination). The data plane SNATs a new connection to the pool of the slot it arrived on, so the local
 * address names the slot for the connection's whole life, on the owner and on any peer that holds a copy.
 * This is not where slots are elected or programmed: it only answers "which slot", once per kernel event
 * on the sending side and once per received change on the receiving side.
 *
 * Why sorted ranges and a binary search rather than a map of every pool address: a pool may be a large IPv6
 * range (its size is capped only at 2^32), so expanding pools would cost whatever memory the config asks for,
 * while the ranges are at most 64 per family: a lookup is at most 7 bigint comparisons after the address is
 * parsed once, about what building the connection's key strings already costs per event.
 */

interface Range {
  readonly first: bigint;
  readonly last: bigint;
  readonly slot: number;
}

/** The slots this director leads, for a sync scope: a connection is copied when its local address is in one of their pools. */
export interface LedSlots {
  /** Each slot group led, with its pools as text: a slot that changes pools counts as a scope change. */
  readonly led: ReadonlyMap<string, string>;
  /** The led slot group whose pool holds `localAddress`, or null (no slot's pool, or a slot not led). */
  groupOf(localAddress: string): string | null;
}

export class SlotMap {
  /** No ECMP tier: no address is in a slot. */
  static readonly NONE = new SlotMap(null);

  /** Per family, sorted by first address, not overlapping. */
  private readonly v4: readonly Range[];
  private readonly v6: readonly Range[];
  /** slotGroup(i), made once: a lookup allocates no string. */
  private readonly groups: readonly string[];
  private readonly pools: readonly string[];

  /**
   * Throws when two slots' pools overlap (config validation must refuse that: a local address of two slots
   * would send one slot's replies to the other's owner) or a pool holds something that is not an address.
   */
  constructor(ecmp: EcmpTier | null) {
    const slots = ecmp?.slots ?? 0;
    this.groups = Array.from({ length: slots }, (_, i) => slotGroup(i));
    this.v4 = ranges(ecmp?.ipv4?.localAddresses ?? [], slots);
    this.v6 = ranges(ecmp?.ipv6?.localAddresses ?? [], slots);
    this.pools = this.groups.map((_, i) => [ecmp?.ipv4?.localAddresses[i], ecmp?.ipv6?.localAddresses[i]]
      .filter((r): r is AddressRange => r !== undefined).map((r) => `${r.first}-${r.last}`).join(' '));
  }

  /** The slot whose pool holds `address`, or null (no slot's, or not an address). */
  slotOf(address: string): number | null {
    const table = address.includes(':') ? this.v6 : this.v4;
    if (table.length === 0) return null;
    let value: bigint;
    try {
      value = addressToBigInt(address);
    } catch {
      return null;
    }
    // The last range that starts at or below the address; it holds the address when it ends at or above it.
    let lo = 0;
    let hi = table.length - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (table[mid]!.first <= value) {
        found = mid;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    if (found < 0) return null;
    const r = table[found]!;
    return value <= r.last ? r.slot : null;
  }

  /** The slot group (`slot-<i>`) whose pool holds `address`, or null. */
  groupOf(address: string): string | null {
    const slot = this.slotOf(address);
    return slot === null ? null : this.groups[slot]!;
  }

  /** The part of the tier this director leads (`groups`: every group it leads; others are ignored), or null for none. */
  leading(groups: ReadonlySet<string>): LedSlots | null {
    const led = new Map<string, string>();
    const mine: boolean[] = this.groups.map((g, i) => {
      if (!groups.has(g)) return false;
      led.set(g, this.pools[i]!);
      return true;
    });
    if (led.size === 0) return null;
    return {
      led,
      groupOf: (localAddress) => {
        const slot = this.slotOf(localAddress);
        return slot !== null && mine[slot] ? this.groups[slot]! : null;
      },
    };
  }
}

function ranges(pools: readonly AddressRange[], slots: number): Range[] {
  const out = pools.slice(0, slots).map((r, slot) => ({ first: addressToBigInt(r.first), last: addressToBigInt(r.last), slot }));
  out.sort((a, b) => (a.first < b.first ? -1 : a.first > b.first ? 1 : 0));
  for (let i = 1; i < out.length; i++) {
    const [a, b] = [out[i - 1]!, out[i]!];
    if (b.first <= a.last) {
      throw new Error(`the local addresses of ${slotGroup(a.slot)} (${pools[a.slot]!.first}-${pools[a.slot]!.last}) and ${slotGroup(b.slot)} `
        + `(${pools[b.slot]!.first}-${pools[b.slot]!.last}) overlap; each slot needs its own`);
    }
  }
  return out;
}
