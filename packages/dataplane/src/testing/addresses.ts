import { performance } from 'node:perf_hooks';
import type { AddressOwner, Announce, FloatingAddress } from '../addresses.js';

const key = (a: FloatingAddress): string => `${a.address.toLowerCase()}%${a.ifname}`;

export type AddressCall =
  | { readonly op: 'claim'; readonly group: string; readonly addresses: readonly FloatingAddress[]; readonly announce: Announce }
  | { readonly op: 'release'; readonly group: string }
  | { readonly op: 'guard'; readonly groups: ReadonlyMap<string, readonly FloatingAddress[]> }
  | { readonly op: 'lease'; readonly group: string; readonly forMs: number }
  | { readonly op: 'close'; readonly releaseAll: boolean };

/**
 * An in-memory AddressOwner for election and agent tests. It keeps the claimed addresses in a Map, records
 * every call and every announcement a real owner would send, and lets a test take links down or make the
 * next claim fail. Announcements are recorded at claim time (count per address), not sent over time.
 */
export class FakeAddressOwner implements AddressOwner {
  /** What each group holds now. */
  readonly held = new Map<string, readonly FloatingAddress[]>();
  readonly calls: AddressCall[] = [];
  readonly announcements: Array<{ readonly group: string; readonly address: FloatingAddress; readonly count: number }> = [];
  /** Interfaces that are down (or missing); every other interface is up. */
  readonly linksDown = new Set<string>();
  /** Set to make the next claim fail with this error (then it is cleared); nothing is added. */
  failNextClaim: Error | null = null;
  closed = false;
  /** What the kernel would guard, per group (the last guard call). */
  guarded: ReadonlyMap<string, readonly FloatingAddress[]> = new Map();
  /** group → lease deadline on `now` (absent: no lease). */
  readonly leases = new Map<string, number>();

  /** `now`: the clock leases run on (default performance.now; election tests pass their FakeClock's). */
  constructor(private readonly now: () => number = () => performance.now()) {}

  /** Whether the kernel would serve `group`'s addresses right now. */
  leased(group: string): boolean {
    return (this.leases.get(group) ?? Number.NEGATIVE_INFINITY) > this.now();
  }

  async guard(groups: ReadonlyMap<string, readonly FloatingAddress[]>): Promise<void> {
    this.assertOpen();
    this.calls.push({ op: 'guard', groups });
    this.guarded = groups;
  }

  async lease(group: string, forMs: number): Promise<void> {
    this.assertOpen();
    this.calls.push({ op: 'lease', group, forMs });
    if (forMs > 0) this.leases.set(group, this.now() + forMs);
    else this.leases.delete(group);
  }

  leaseLeftMs(group: string): number | null {
    const d = this.leases.get(group);
    return d === undefined ? null : d - this.now();
  }

  setLink(ifname: string, up: boolean): void {
    if (up) this.linksDown.delete(ifname);
    else this.linksDown.add(ifname);
  }

  /** Whether any group holds this address (what `present` reports). */
  holds(address: FloatingAddress): boolean {
    const k = key(address);
    for (const list of this.held.values()) if (list.some((a) => key(a) === k)) return true;
    return false;
  }

  async claim(group: string, addresses: readonly FloatingAddress[], announce: Announce): Promise<void> {
    this.assertOpen();
    this.calls.push({ op: 'claim', group, addresses: [...addresses], announce });
    if (this.failNextClaim) {
      const err = this.failNextClaim;
      this.failNextClaim = null;
      throw err;
    }
    this.held.set(group, [...addresses]);
    if (announce.count > 0) for (const address of addresses) this.announcements.push({ group, address, count: announce.count });
  }

  async release(group: string): Promise<void> {
    this.assertOpen();
    this.calls.push({ op: 'release', group });
    this.leases.delete(group);
    this.held.delete(group);
  }

  async present(addresses: readonly FloatingAddress[]): Promise<FloatingAddress[]> {
    return addresses.filter((a) => this.holds(a));
  }

  async linkUp(ifname: string): Promise<boolean> {
    return !this.linksDown.has(ifname);
  }

  async close(opts: { releaseAll?: boolean } = {}): Promise<void> {
    this.calls.push({ op: 'close', releaseAll: opts.releaseAll === true });
    if (opts.releaseAll) {
      this.held.clear();
      this.leases.clear();
    }
    this.closed = true;
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('address owner is closed');
  }
}
