/**
 * Floating addresses of a vip group: the vips (on the front interface) and the FULLNAT local addresses or a
 * floating gateway (on the server-side interface) that move with the group's leadership. The elected
 * director claims them (adds them and announces them: gratuitous ARP / unsolicited NA), the others release.
 *
 * Holding an address is not enough to serve it: the kernel serves a group's addresses (forwards their
 * traffic, answers ARP/ND for them) only while the group holds a *lease* that runs out in the kernel by
 * itself (DESIGN.md "High availability"). The election extends it from beats etcd confirmed; a frozen agent
 * therefore stops serving at the lease's end even with its addresses still on the interfaces.
 */

/** A host address (plain text, no prefix: it is added as /32 or /128) on one interface. */
export interface FloatingAddress {
  readonly address: string;
  readonly ifname: string;
  /**
   * Neighbours (same family, on the interface's link) that each announcement also asks, from this address:
   * an ARP request or neighbour solicitation for each, which makes a Linux neighbour create its entry for
   * this address. A gratuitous ARP or unsolicited NA only updates an entry that exists (without `arp_accept`),
   * and an ECMP slot's next hop needs one at the router before its first packet: a Linux router's
   * hash-threshold next-hop group skips a next hop whose neighbour is still unresolved, so for those
   * milliseconds it sends the slot's new flows to another slot, which resets them once they move back.
   */
  readonly solicit?: readonly string[];
}

/** How a claim is announced: `count` announcements per address, `intervalMs` apart (count 0: none). */
export interface Announce {
  readonly count: number;
  readonly intervalMs: number;
}

export interface AddressOwner {
  /**
   * Which floating addresses the kernel guards, per vip group (every group this director serves, leader or
   * not): traffic to them and ARP/ND from them is dropped unless their group is leased. Called with every
   * config; the first call starts from no lease at all (a starting agent leads nothing).
   */
  guard(groups: ReadonlyMap<string, readonly FloatingAddress[]>): Promise<void>;
  /**
   * Lets the kernel serve `group`'s guarded addresses for the next `forMs` milliseconds, counted from this
   * call; then it stops by itself unless leased again (forMs <= 0 ends the lease at once). Resolves once the
   * kernel has it. Never waits behind a claim, a release or an announcement.
   */
  lease(group: string, forMs: number): Promise<void>;
  /** Milliseconds left on `group`'s lease as last written; negative: the kernel ended it that long ago; null: none. */
  leaseLeftMs(group: string): number | null;
  /** Adds every address that is missing (idempotent, one batch), then announces them in the background:
   *  resolves once the addresses are on their interfaces, NEVER waits for the announcements
   *  (a blocking arping once starved a lease keepalive). A second claim of the same group replaces its set
   *  (adds new, removes ones no longer listed). */
  claim(group: string, addresses: readonly FloatingAddress[], announce: Announce): Promise<void>;
  /** Ends the group's lease, then removes its addresses (and stops its announcements); resolves once they
   *  are gone. Idempotent. */
  release(group: string): Promise<void>;
  /** Which of `addresses` are on their interface right now (read from the kernel, not from memory). */
  present(addresses: readonly FloatingAddress[]): Promise<FloatingAddress[]>;
  /** Whether an interface exists and is operationally up (fast local detection: a leader whose vip
   *  interface is down resigns). */
  linkUp(ifname: string): Promise<boolean>;
  /** Stops background work. `releaseAll`: also remove every claimed address (graceful shutdown). */
  close(opts?: { releaseAll?: boolean }): Promise<void>;
}
