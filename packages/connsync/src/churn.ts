/**
 * String-keyed tables for entries that come and go thousands of times a second: the connections a leader copies
 * (each in for the life of a connection, often a few ms) and a sender's queue of changes.
 *
 * Why not a Map: in a leader's sync path fed at 4 000 new connections/s (two changes each), Maps with this churn
 * made every object the path touched survive the young generation's collections, about 2.5 MB a collection
 * against 0.08 MB with these tables, so each collection copied them and promoted them to the old generation for a
 * full collection to free; the path took 40 µs of CPU per connection against 28 (a script, not a benchmark; the
 * numbers are in docs/kernel-io.md). A null-prototype object in V8's dictionary mode does not do that.
 */

/**
 * A Map's get, has, set, delete, size and iteration over a null-prototype object. Values are never undefined
 * (presence is told by them). Iteration goes in insertion order except for keys that read as array indices (no key
 * here is one: they start with the protocol), and, as a Map's, visits no entry deleted before its turn.
 */
export class ChurnTable<V extends NonNullable<unknown>> implements Iterable<[string, V]> {
  private entries: Record<string, V> = Object.create(null) as Record<string, V>;
  private count = 0;

  get size(): number {
    return this.count;
  }

  // An empty table answers without a lookup: a leader's source asks its held, young and first-seen tables about
  // every event, and they are mostly empty (minAgeMs unset, handshakes kept back in lbd-ctnl); a lookup of a
  // key built for the event still hashes it and probes the object's dictionary.
  get(key: string): V | undefined {
    return this.count === 0 ? undefined : this.entries[key];
  }

  has(key: string): boolean {
    return this.count !== 0 && this.entries[key] !== undefined;
  }

  set(key: string, value: V): this {
    if (this.entries[key] === undefined) this.count++;
    this.entries[key] = value;
    return this;
  }

  delete(key: string): boolean {
    if (this.count === 0 || this.entries[key] === undefined) return false;
    delete this.entries[key];
    this.count--;
    return true;
  }

  clear(): void {
    this.entries = Object.create(null) as Record<string, V>;
    this.count = 0;
  }

  /** Sets `value` under `key` unless the key is there already; whether it set it. One lookup fewer than has, then set. */
  add(key: string, value: V): boolean {
    if (this.entries[key] !== undefined) return false;
    this.entries[key] = value;
    this.count++;
    return true;
  }

  values(): V[] {
    // A for-in over a dictionary-mode object lists its values in about 60% of Object.values' time (100 000 entries:
    // 55-60 ms against 90-120; a leader's snapshot reads them all).
    const out: V[] = [];
    for (const key in this.entries) out.push(this.entries[key]!);
    return out;
  }

  *[Symbol.iterator](): IterableIterator<[string, V]> {
    // A key deleted during the loop is skipped by for-in; its value is checked too, for one deleted and set again.
    for (const key in this.entries) {
      const value = this.entries[key];
      if (value !== undefined) yield [key, value];
    }
  }
}

/**
 * A queue of values by key, first in first out, where putting a key already queued replaces its value in place
 * (`fold` says with what): a sender's changes, at most one per connection. Taking is O(taken), whatever the
 * queue holds (a for-in over a large table would list every key to take a few).
 */
export class FoldingQueue<V extends NonNullable<unknown>> {
  private readonly values = new ChurnTable<V>();
  private order: string[] = [];
  private head = 0;

  get size(): number {
    return this.values.size;
  }

  /**
   * Queues `value` under `key`; one already queued becomes `fold(queued, value)` and keeps its place, or leaves
   * the queue when that is null. Whether the key is queued after.
   */
  put(key: string, value: V, fold: (queued: V, value: V) => V | null): boolean {
    const queued = this.values.get(key);
    if (queued === undefined) {
      this.order.push(key);
      this.values.set(key, value);
      return true;
    }
    const folded = fold(queued, value);
    // Its key stays in the order until take passes it (take skips a key with no value, as after clear).
    if (folded === null) this.values.delete(key);
    else this.values.set(key, folded);
    return folded !== null;
  }

  /** Takes up to `n` values, oldest first. */
  take(n: number): V[] {
    const out: V[] = [];
    while (out.length < n && this.head < this.order.length) {
      const key = this.order[this.head++]!;
      const value = this.values.get(key);
      // A key that left by a fold to nothing (or left and came back: then it is queued in its first place, and its
      // later place in the order finds nothing).
      if (value === undefined) continue;
      this.values.delete(key);
      out.push(value);
    }
    if (this.head === this.order.length) {
      this.order = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    }
    return out;
  }

  clear(): void {
    this.values.clear();
    this.order = [];
    this.head = 0;
  }
}
