import { existsSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { canonicalAddress, familyOf } from '@lbd/config';
import { DataPlaneError } from '@lbd/dataplane';
import { LeaseWriter, LeaseWriterUnavailable, leaseMs, type LeaseWord } from './lease-writer.js';
import { NFBATCH_HELPER } from './nft-netlink.js';
import { NftSession } from './nft-session.js';
import { OneAtATime } from './one-at-a-time.js';
import { localRunner, type CommandRunner } from './runner.js';

/**
 * The kernel lease (DESIGN.md "High availability"; the timing rule is in @lbd/coordinator's timing.ts).
 *
 * A director may forward a vip group's traffic and answer ARP/ND for the group's floating addresses only
 * while the kernel holds a lease for them, and the lease runs out in the kernel, with no process involved:
 * a frozen or starved agent stops serving at the lease's deadline even though its addresses are still on
 * the interfaces. The agent extends the lease only from a beat etcd confirmed (the election decides; this
 * module only writes what it is told).
 *
 * Two tables of lbd's own, apart from the data plane's `ip lbd` / `ip6 lbd` (whose full rebuilds must never
 * touch a lease):
 *
 *   table inet lbd   floating4/6: every floating address of every vip group this director serves
 *                    lease4/6:    the addresses leased now, each with a kernel timeout (`flags timeout`)
 *                    prerouting:  drops packets to a floating address that is not leased, and packets of
 *                                 connections first sent to one (NAT replies come back to the client's
 *                                 address, so their destination alone would not tell)
 *                    output:      drops what this box sends from an unleased floating address (ARP's IPv6
 *                                 counterpart: the neighbour advertisements a Linux kernel answers with the
 *                                 target as source, and anything else that could teach a neighbour the vip)
 *                    forward:     counts packets forwarded per floating address (served4/6): drills and
 *                                 operators see who forwarded what, read from the kernel
 *   table arp lbd    drops every ARP packet this box sends with an unleased floating address as sender
 *                    (replies, and requests a neighbour would learn the sender from)
 *
 * Renewing is `add element ... { A timeout Tms expires Tms }`, which sets the remaining time exactly, up or
 * down (nft 1.0.6, kernel 6.18, tried here: an element re-added with a shorter expiry expires sooner). A
 * renewal goes to the kernel as one netlink batch from a long-lived writer (lease-writer.ts: about 0.14 ms,
 * where a line to `nft -i` cost 5-9 ms of real-time CPU); creating the tables and changing what they guard
 * go through `nft -i`. T is computed from the deadline immediately before the line is written, so a write
 * that waited behind another is not lengthened by the wait. The kernel checks timeouts in jiffies (4 ms at
 * HZ=250): an element can outlive its deadline by at most one jiffy plus the write's own latency, which
 * timing.ts bounds as `maxLeaseSlackMs`.
 */

const LEASE_TABLE = 'lbd';
/** Bumped when the lease tables' layout changes (the session's sentinel lists it). */
const LEASE_SCHEMA = 1;
/** The priority of the lease chains: after conntrack (-200, so `ct original` is known), before dstnat (-100). */
const LEASE_PRIORITY = -150;
/** A lease write that takes longer than this is abandoned (and its session replaced). */
const WRITE_TIMEOUT_MS = 2000;

/** The commands that create both lease tables from nothing (any previous ones go, leases included). */
function renderLeaseTables(guarded: Iterable<string>): string[] {
  const t = `inet ${LEASE_TABLE}`;
  const a = `arp ${LEASE_TABLE}`;
  const cmds = [
    `add table ${t}`, `delete table ${t}`, `add table ${a}`, `delete table ${a}`,
    `add table ${t}`,
    `add set ${t} schema { type mark; elements = { ${LEASE_SCHEMA} }; }`,
    `add set ${t} floating4 { type ipv4_addr; }`, `add set ${t} floating6 { type ipv6_addr; }`,
    `add set ${t} lease4 { type ipv4_addr; flags timeout; }`, `add set ${t} lease6 { type ipv6_addr; flags timeout; }`,
    `add set ${t} served4 { type ipv4_addr; size 65536; flags dynamic; counter; }`,
    `add set ${t} served6 { type ipv6_addr; size 65536; flags dynamic; counter; }`,
    `add counter ${t} lease_dropped`,
    `add chain ${t} prerouting { type filter hook prerouting priority ${LEASE_PRIORITY}; policy accept; }`,
    `add rule ${t} prerouting ip daddr @floating4 ip daddr != @lease4 counter name lease_dropped drop`,
    `add rule ${t} prerouting ct original ip daddr @floating4 ct original ip daddr != @lease4 counter name lease_dropped drop`,
    `add rule ${t} prerouting ip6 daddr @floating6 ip6 daddr != @lease6 counter name lease_dropped drop`,
    `add rule ${t} prerouting ct original ip6 daddr @floating6 ct original ip6 daddr != @lease6 counter name lease_dropped drop`,
    `add chain ${t} output { type filter hook output priority ${LEASE_PRIORITY}; policy accept; }`,
    `add rule ${t} output ip saddr @floating4 ip saddr != @lease4 counter name lease_dropped drop`,
    `add rule ${t} output ip6 saddr @floating6 ip6 saddr != @lease6 counter name lease_dropped drop`,
    `add chain ${t} forward { type filter hook forward priority ${LEASE_PRIORITY}; policy accept; }`,
    `add rule ${t} forward ct original ip daddr @floating4 update @served4 { ct original ip daddr }`,
    `add rule ${t} forward ct original ip6 daddr @floating6 update @served6 { ct original ip6 daddr }`,
    `add table ${a}`,
    `add set ${a} floating4 { type ipv4_addr; }`,
    `add set ${a} lease4 { type ipv4_addr; flags timeout; }`,
    `add counter ${a} lease_dropped`,
    `add chain ${a} output { type filter hook output priority 0; policy accept; }`,
    `add rule ${a} output arp saddr ip @floating4 arp saddr ip != @lease4 counter name lease_dropped drop`,
  ];
  return [...cmds, ...renderGuarded(guarded, false)];
}

/** The commands that make the guarded sets hold exactly `guarded` (`flush`: replace what they hold). */
function renderGuarded(guarded: Iterable<string>, flush: boolean): string[] {
  const { v4, v6 } = byFamily(guarded);
  const out: string[] = [];
  if (flush) out.push(`flush set inet ${LEASE_TABLE} floating4`, `flush set inet ${LEASE_TABLE} floating6`, `flush set arp ${LEASE_TABLE} floating4`);
  if (v4.length > 0) out.push(`add element inet ${LEASE_TABLE} floating4 { ${v4.join(', ')} }`, `add element arp ${LEASE_TABLE} floating4 { ${v4.join(', ')} }`);
  if (v6.length > 0) out.push(`add element inet ${LEASE_TABLE} floating6 { ${v6.join(', ')} }`);
  return out;
}

/** Leases `addresses` for `ms` from when the kernel takes the write (ms >= 1). */
function leaseWords(addresses: Iterable<string>, ms: number): LeaseWord[] {
  const { v4, v6 } = byFamily(addresses);
  const w = (family: 'inet' | 'arp', set: string, xs: readonly string[]): LeaseWord[] =>
    xs.map((address) => ({ op: 'add', family, table: LEASE_TABLE, set, address, ms }));
  return [...w('inet', 'lease4', v4), ...w('arp', 'lease4', v4), ...w('inet', 'lease6', v6)];
}

/**
 * Ends the lease of `addresses` at once. An element that already expired is gone, and deleting a missing
 * element fails the whole transaction, so each is added (with a 1 ms expiry) before it is deleted.
 */
function revokeWords(addresses: Iterable<string>): LeaseWord[] {
  const { v4, v6 } = byFamily(addresses);
  const out: LeaseWord[] = [];
  const both = (family: 'inet' | 'arp', set: string, xs: readonly string[]): void => {
    for (const address of xs) out.push({ op: 'add', family, table: LEASE_TABLE, set, address, ms: 1 });
    for (const address of xs) out.push({ op: 'delete', family, table: LEASE_TABLE, set, address });
  };
  both('inet', 'lease4', v4);
  both('arp', 'lease4', v4);
  both('inet', 'lease6', v6);
  return out;
}

/** The same transaction as nft commands (guard(), and the writer's fallback): runs of one op and set merge. */
function nftCommands(words: readonly LeaseWord[]): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < words.length) {
    const first = words[i]!;
    const run: string[] = [];
    for (; i < words.length; i++) {
      const w = words[i]!;
      if (w.op !== first.op || w.family !== first.family || w.set !== first.set) break;
      run.push(w.op === 'add' ? `${w.address} timeout ${leaseMs(w.ms)}ms expires ${leaseMs(w.ms)}ms` : w.address);
    }
    out.push(`${first.op} element ${first.family} ${first.table} ${first.set} { ${run.join(', ')} }`);
  }
  return out;
}

function byFamily(addresses: Iterable<string>): { v4: string[]; v6: string[] } {
  const v4 = new Set<string>();
  const v6 = new Set<string>();
  for (const a of addresses) {
    const f = familyOf(a);
    if (f === null) throw new DataPlaneError('Unknown', 'lease', { detail: `not a host address: ${a}` });
    (f === 4 ? v4 : v6).add(canonicalAddress(a));
  }
  return { v4: [...v4].sort(), v6: [...v6].sort() };
}

export interface KernelLeaseOptions {
  readonly runner?: CommandRunner;
  /** Monotonic milliseconds (default performance.now): deadlines are kept on it. */
  readonly now?: () => number;
  /**
   * Whether renewals and revocations go through lbd-nfbatch (the default where it is built and the runner
   * can spawn) or through the lease's `nft -i` like everything else. `pnpm bench dataplane` compares the two.
   */
  readonly netlinkWriter?: boolean;
}

/**
 * The lease tables and their writers: renewals and revocations through the netlink writer, everything else
 * (and a renewal the writer could not take) through one `nft -i` session of their own; one transaction at
 * a time across both. Requests that arrive while a transaction is in flight are merged into the next one,
 * each group's latest deadline winning, and every remaining time is computed as that one is written.
 */
export class KernelLease {
  private readonly session: NftSession | null;
  private readonly writer: LeaseWriter | null;
  /** guard(), remove() and the renewals, one at a time: a renewal must not land inside a table rebuild. */
  private readonly turns = new OneAtATime();
  private readonly runner: CommandRunner;
  private readonly now: () => number;
  /** group → its floating addresses (canonical). */
  private guarded = new Map<string, readonly string[]>();
  private created = false;
  /** group → deadline (on `now`) as last written; absent: no lease. */
  private readonly written = new Map<string, number>();
  /** group → requested deadline (-Infinity: revoke) not written yet, with whoever waits for it. */
  private readonly pending = new Map<string, { deadline: number; waiters: Array<{ resolve: () => void; reject: (e: Error) => void }> }>();
  private flushing = false;

  constructor(opts: KernelLeaseOptions = {}) {
    this.runner = opts.runner ?? localRunner();
    this.now = opts.now ?? (() => performance.now());
    const spawnFn = this.runner.spawn?.bind(this.runner);
    this.session = spawnFn ? new NftSession(() => spawnFn('nft', ['-i']), `list set inet ${LEASE_TABLE} schema`) : null;
    // Without lbd-nfbatch (a tree whose native helpers were not built) every renewal goes through nft.
    this.writer = spawnFn && (opts.netlinkWriter ?? existsSync(NFBATCH_HELPER)) ? new LeaseWriter(() => spawnFn(NFBATCH_HELPER, [])) : null;
  }

  /**
   * Which addresses the kernel guards, per vip group. The first call creates the lease tables anew (a
   * previous life's leases go with them: a starting agent leads nothing); later calls replace the guarded
   * sets and re-lease the new addresses of groups leased now, with the deadline they have.
   */
  guard(groups: ReadonlyMap<string, readonly string[]>): Promise<void> {
    return this.turns.run(() => this.guardNow(groups));
  }

  private async guardNow(groups: ReadonlyMap<string, readonly string[]>): Promise<void> {
    this.guarded = new Map([...groups].map(([g, xs]) => {
      const { v4, v6 } = byFamily(xs);
      return [g, [...v4, ...v6]];
    }));
    const all = new Set([...this.guarded.values()].flat());
    const cmds = this.created ? renderGuarded(all, true) : renderLeaseTables(all);
    for (const [group, deadline] of this.written) {
      const ms = deadline - this.now();
      const addresses = this.guarded.get(group) ?? [];
      if (ms >= 1 && addresses.length > 0) cmds.push(...nftCommands(leaseWords(addresses, ms)));
      else this.written.delete(group);
    }
    await this.exec(cmds, 'guard');
    this.created = true;
    this.writer?.warm();
  }

  /** The kernel serves `group`'s addresses until `deadline` (on `now`); a deadline already past revokes. */
  lease(group: string, deadline: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const p = this.pending.get(group);
      if (p) {
        p.deadline = deadline;
        p.waiters.push({ resolve, reject });
      } else {
        this.pending.set(group, { deadline, waiters: [{ resolve, reject }] });
      }
      void this.flush();
    });
  }

  revoke(group: string): Promise<void> {
    return this.lease(group, Number.NEGATIVE_INFINITY);
  }

  /** Time left on `group`'s lease as last written (negative: the kernel ended it that long ago); null: none. */
  leftMs(group: string): number | null {
    const d = this.written.get(group);
    return d === undefined ? null : d - this.now();
  }

  /** Removes both lease tables (a graceful stop: this director serves nothing any more). */
  remove(): Promise<void> {
    return this.turns.run(() => this.removeNow());
  }

  private async removeNow(): Promise<void> {
    // One nft of its own: the session's sentinel lists a set of the table this deletes, so it would never
    // answer (the call waited out WRITE_TIMEOUT_MS and failed, on every graceful stop).
    if (this.created) await this.exec([`add table inet ${LEASE_TABLE}`, `delete table inet ${LEASE_TABLE}`, `add table arp ${LEASE_TABLE}`, `delete table arp ${LEASE_TABLE}`], 'remove', { oneShot: true });
    this.created = false;
    this.written.clear();
    this.close();
  }

  close(): void {
    this.session?.close();
    this.writer?.close();
  }

  private async flush(): Promise<void> {
    if (this.flushing) return;
    this.flushing = true;
    try {
      while (this.pending.size > 0) {
        const batch = [...this.pending];
        this.pending.clear();
        let wrote = new Map<string, number | null>();
        let error: Error | null = null;
        try {
          await this.turns.run(async () => {
            // The remaining times are taken here, right before the transaction goes to the kernel.
            let t = this.render(batch);
            wrote = t.wrote;
            if (t.words.length === 0) return;
            if (this.writer) {
              try {
                await this.writer.write(t.words);
                return;
              } catch (e) {
                if (!(e instanceof LeaseWriterUnavailable)) throw e;
                // Nothing was applied: the same transaction through nft, its times taken afresh.
                t = this.render(batch);
                wrote = t.wrote;
              }
            }
            await this.exec(nftCommands(t.words), 'lease');
          });
          for (const [group, d] of wrote) {
            if (d === null) this.written.delete(group);
            else this.written.set(group, d);
          }
        } catch (e) {
          error = e as Error;
        }
        for (const [, { waiters }] of batch) for (const w of waiters) (error ? w.reject(error) : w.resolve());
      }
    } finally {
      this.flushing = false;
    }
  }

  /** One transaction for the requested deadlines, as of now. */
  private render(batch: ReadonlyArray<readonly [string, { readonly deadline: number }]>): { words: LeaseWord[]; wrote: Map<string, number | null> } {
    const now = this.now();
    const words: LeaseWord[] = [];
    const wrote = new Map<string, number | null>();
    for (const [group, { deadline }] of batch) {
      const mine = this.guarded.get(group) ?? [];
      const ms = deadline - now;
      if (ms >= 1) {
        if (mine.length > 0) words.push(...leaseWords(mine, ms));
        wrote.set(group, deadline);
      } else {
        // Another group may lease the same address (a config mistake validation refuses): keep it then.
        const shared = new Set<string>();
        for (const [g, d] of this.written) if (g !== group && d > now) for (const a of this.guarded.get(g) ?? []) shared.add(a);
        const leaving = mine.filter((a) => !shared.has(a));
        if (leaving.length > 0) words.push(...revokeWords(leaving));
        wrote.set(group, null);
      }
    }
    return { words, wrote };
  }

  private async exec(cmds: readonly string[], op: string, opts: { oneShot?: boolean } = {}): Promise<void> {
    if (cmds.length === 0) return;
    let stderr: string;
    if (this.session && opts.oneShot !== true) {
      stderr = await this.session.run(cmds, WRITE_TIMEOUT_MS);
    } else {
      // A runner without spawn (unit tests of other things), or a change the sentinel cannot follow: one nft.
      const r = await this.runner.run('nft', [cmds.join('; ')]);
      if (r.code === 127) throw new DataPlaneError('CommandMissing', `${op} (nft)`, { detail: r.stderr });
      stderr = r.code === 0 ? '' : r.stderr.trim() || `nft exited ${r.code}`;
    }
    if (stderr !== '') {
      throw new DataPlaneError(/not permitted/i.test(stderr) ? 'PermissionDenied' : 'Unknown', `kernel lease ${op}`, { detail: stderr.split('\n')[0] });
    }
  }
}

/**
 * The kernel's count of packets the lease tables dropped (`counter lease_dropped` of `inet lbd`): packets
 * for, or from, a floating address this director held no lease for. A drill reads it on both directors
 * around a move (what reached the wrong one). Null when it cannot be read: no lease tables (a director on
 * its own, or an agent not started yet), or the read failed.
 *
 * Read with one netlink request (`lbd-nfbatch counter`: NFT_MSG_GETOBJ), not `nft list counter`: nft first
 * fetches its cache of the ruleset and starts over whenever the ruleset's generation changed meanwhile, and every lease
 * renewal changes it (each group's, 4 times a second with `fast`). On an ECMP director leading 4 slots,
 * quiet, `nft list counter` fetched 3 times to answer once; under the drill's load one took 36 s, and on a
 * director that had just claimed a slot, reads went on for over 30 s. The request names one object and
 * gets one answer, whatever the ruleset does meanwhile.
 */
export async function readLeaseDrops(runner: CommandRunner = localRunner()): Promise<number | null> {
  const r = await runner.run(NFBATCH_HELPER, ['counter', 'inet', LEASE_TABLE, 'lease_dropped']);
  return r.code === 0 ? parseLeaseDrops(r.stdout) : null;
}

/** `packets N` of `lbd-nfbatch counter`'s answer, or null. */
export function parseLeaseDrops(text: string): number | null {
  const m = /^packets (\d+) /m.exec(text);
  return m === null ? null : Number(m[1]);
}
