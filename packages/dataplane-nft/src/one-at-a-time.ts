/**
 * Runs calls one at a time, in the order they came: the kernel's tools take one change at a time from a
 * writer (one `nft -i`, one netlink helper), and a change must not interleave with the one before it.
 */
export class OneAtATime {
  private tail: Promise<unknown> = Promise.resolve();

  /** `fn` once every earlier call has ended; the caller gets its result or its error. */
  run<T>(fn: () => Promise<T>): Promise<T> {
    const mine = this.tail.then(fn);
    this.tail = mine.catch(() => { /* the caller hears it through `mine`; the queue only orders */ });
    return mine;
  }
}
