/**
 * Floating addresses of a vip group: the vips (on the front interface) and the FULLNAT local addresses or a
 * floating gateway (on the server-side interface) that move with the group's leadership. The elected
 * director claims them (adds them and announces them: gratuitous ARP / unsolicited NA), the others release.
 */

/** A host address (plain text, no prefix: it is added as /32 or /128) on one interface. */
export interface FloatingAddress {
  readonly address: string;
  readonly ifname: string;
}

/** How a claim is announced: `count` announcements per address, `intervalMs` apart (count 0: none). */
export interface Announce {
  readonly count: number;
  readonly intervalMs: number;
}

export interface AddressOwner {
  /** Adds every address that is missing (idempotent, one batch), then announces them in the background:
   *  resolves once the addresses are on their interfaces, NEVER waits for the announcements
   *  (a blocking arping once starved a lease keepalive). A second claim of the same group replaces its set
   *  (adds new, removes ones no longer listed). */
  claim(group: string, addresses: readonly FloatingAddress[], announce: Announce): Promise<void>;
  /** Removes the group's addresses (and stops its announcements); resolves once they are gone. Idempotent. */
  release(group: string): Promise<void>;
  /** Which of `addresses` are on their interface right now (read from the kernel, not from memory). */
  present(addresses: readonly FloatingAddress[]): Promise<FloatingAddress[]>;
  /** Whether an interface exists and is operationally up (fast local detection: a leader whose vip
   *  interface is down resigns). */
  linkUp(ifname: string): Promise<boolean>;
  /** Stops background work. `releaseAll`: also remove every claimed address (graceful shutdown). */
  close(opts?: { releaseAll?: boolean }): Promise<void>;
}
