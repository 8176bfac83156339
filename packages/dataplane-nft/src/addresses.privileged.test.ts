import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { FloatingAddress } from '@lbd/dataplane';
import { KernelAddressOwner } from './addresses.js';
import { netnsRunner } from './runner.js';

/**
 * Floating addresses against the real kernel. Three namespaces: a "router" with a bridge, and two
 * directors d1 and d2 whose eth0 is plugged into it (each with a base address, like a real director).
 * The router's neighbour entries show whether an announcement moved a vip from one director to the other.
 */

const base = `lbdt${process.pid}-fa`;
const R = `${base}-r`;
const D1 = `${base}-d1`;
const D2 = `${base}-d2`;
const ip = (...args: string[]): string => execFileSync('ip', args, { encoding: 'utf8' });
const inNs = (ns: string, ...args: string[]): string => execFileSync('ip', ['netns', 'exec', ns, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const fixture = new URL('./addresses.fixture.js', import.meta.url).pathname;

/** Polls `check` every `stepMs` until it is true or `withinMs` passed; returns the elapsed ms or null. */
async function eventually(check: () => boolean, withinMs: number, stepMs = 5): Promise<number | null> {
  const t0 = performance.now();
  for (let i = 0; i < Math.ceil(withinMs / stepMs) + 1; i++) {
    if (check()) return performance.now() - t0;
    await sleep(stepMs);
  }
  return null;
}

/** Host addresses on eth0 of a namespace, from the kernel. */
function addressesIn(ns: string): Set<string> {
  const links = JSON.parse(inNs(ns, 'ip', '-j', 'addr', 'show', 'dev', 'eth0')) as Array<{ addr_info: Array<{ local: string }> }>;
  return new Set(links.flatMap((l) => l.addr_info.map((a) => a.local)));
}

const mac = (ns: string): string => inNs(ns, 'cat', '/sys/class/net/eth0/address').trim();
const neighMac = (address: string): string | null => /lladdr (\S+)/.exec(inNs(R, 'ip', 'neigh', 'show', address))?.[1] ?? null;
const ping = (address: string): void => { inNs(R, 'ping', '-c', '1', '-W', '1', address); };

const v4 = (n: number): FloatingAddress => ({ address: `198.18.0.${n}`, ifname: 'eth0' });
const v6 = (n: number): FloatingAddress => ({ address: `fd00:18::${n.toString(16)}`, ifname: 'eth0' });

describe('KernelAddressOwner in namespaces @privileged', function () {
  this.timeout(30_000);
  const stateDirs: string[] = [];
  const children: ChildProcess[] = [];
  const owners: KernelAddressOwner[] = [];
  const newStateDir = (): string => {
    const d = mkdtempSync(join(tmpdir(), 'lbd-fa-'));
    stateDirs.push(d);
    return d;
  };
  const owner = (ns: string, opts: { lifetimeSec?: number; stateDir?: string } = {}): KernelAddressOwner => {
    const o = new KernelAddressOwner({ runner: netnsRunner(ns), stateDir: opts.stateDir ?? newStateDir(), lifetimeSec: opts.lifetimeSec ?? 10 });
    owners.push(o);
    return o;
  };
  /** Runs the fixture agent in `ns`; resolves with its report once it has claimed. */
  const agent = async (ns: string, addresses: FloatingAddress[], lifetimeSec: number): Promise<{ child: ChildProcess; claimMs: number; watchdogPid: number }> => {
    const child = spawn(process.execPath, [fixture, ns, newStateDir(), String(lifetimeSec), JSON.stringify(addresses)], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    const lines = createInterface({ input: child.stdout! });
    const first = await Promise.race([
      new Promise<string>((resolve) => lines.once('line', resolve)),
      new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`fixture exited ${code}`)))),
      sleep(10_000).then(() => { throw new Error('fixture did not report'); }),
    ]);
    lines.close();
    return { child, ...(JSON.parse(first) as { claimMs: number; watchdogPid: number }) };
  };

  before(function () {
    if (process.getuid?.() !== 0) {
      console.warn('    SKIPPED: privileged tests need root (they create network namespaces)');
      this.skip();
    }
    for (const ns of [R, D1, D2]) ip('netns', 'add', ns);
    inNs(R, 'ip', 'link', 'add', 'br0', 'type', 'bridge');
    inNs(R, 'ip', 'link', 'set', 'br0', 'up');
    inNs(R, 'ip', 'addr', 'add', '198.18.0.1/24', 'dev', 'br0');
    inNs(R, 'ip', 'addr', 'add', 'fd00:18::1/64', 'dev', 'br0', 'nodad');
    for (const [ns, port, n] of [[D1, 'p1', 2], [D2, 'p2', 3]] as const) {
      ip('link', 'add', 'eth0', 'netns', ns, 'type', 'veth', 'peer', 'name', port, 'netns', R);
      inNs(R, 'ip', 'link', 'set', port, 'master', 'br0', 'up');
      inNs(ns, 'ip', 'link', 'set', 'lo', 'up');
      inNs(ns, 'ip', 'link', 'set', 'eth0', 'up');
      inNs(ns, 'ip', 'addr', 'add', `198.18.0.${n}/24`, 'dev', 'eth0');
      inNs(ns, 'ip', 'addr', 'add', `fd00:18::${n}/64`, 'dev', 'eth0', 'nodad');
    }
  });

  afterEach(async () => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    for (const o of owners.splice(0)) await o.close({ releaseAll: true }).catch(() => {});
  });

  after(() => {
    for (const c of children) c.kill('SIGKILL');
    for (const ns of [R, D1, D2]) {
      try { ip('netns', 'del', ns); } catch { /* never created */ }
    }
    for (const d of stateDirs) rmSync(d, { recursive: true, force: true });
  });

  it('claims 8 addresses at once: present, reachable from the neighbour, replaced by a second claim, released', async () => {
    const o = owner(D1);
    const eight = [v4(10), v4(11), v4(12), v4(13), v6(0x10), v6(0x11), v6(0x12), v6(0x13)];
    const t0 = performance.now();
    await o.claim('g1', eight, { count: 1, intervalMs: 50 });
    const first = performance.now() - t0;
    // Present the moment claim() resolves: nothing to wait for.
    const there = addressesIn(D1);
    for (const a of eight) assert.ok(there.has(a.address), `${a.address} on eth0`);
    assert.deepEqual(await o.present(eight), eight);
    await o.release('g1');
    const t1 = performance.now();
    await o.claim('g1', eight, { count: 1, intervalMs: 50 });
    const again = performance.now() - t1;
    const t2 = performance.now();
    await o.claim('g1', eight, { count: 1, intervalMs: 50 }); // all present: no-op adds (lifetimes renewed)
    const noop = performance.now() - t2;
    console.log(`      measureClaim: 8 addresses, first claim ${first.toFixed(1)} ms (starts ip -batch), warm ${again.toFixed(1)} ms, already present ${noop.toFixed(1)} ms`);
    for (const a of [v4(10), v4(13), v6(0x10), v6(0x13)]) ping(a.address);
    // A second claim of the group replaces its set.
    await o.claim('g1', [v4(10), v6(0x10), v4(14)], { count: 0, intervalMs: 0 });
    const now = addressesIn(D1);
    assert.ok(now.has('198.18.0.10') && now.has('fd00:18::10') && now.has('198.18.0.14'));
    for (const gone of ['198.18.0.11', '198.18.0.13', 'fd00:18::11', 'fd00:18::13']) assert.ok(!now.has(gone), `${gone} removed`);
    // Lifetimes are set (the backstop).
    assert.match(inNs(D1, 'ip', 'addr', 'show', 'dev', 'eth0', 'to', '198.18.0.10/32'), /valid_lft (9|10)sec/);
    await o.release('g1');
    await o.release('g1'); // idempotent
    const after = addressesIn(D1);
    for (const a of [...eight, v4(14)]) assert.ok(!after.has(a.address), `${a.address} released`);
    assert.deepEqual(await o.present(eight), []);
    assert.ok(after.has('198.18.0.2'), 'the base address is untouched');
  });

  it('reports whether a link is up', async () => {
    const o = owner(D1);
    assert.equal(await o.linkUp('eth0'), true);
    assert.equal(await o.linkUp('nosuch0'), false);
    inNs(D1, 'ip', 'link', 'set', 'eth0', 'down');
    try {
      assert.equal(await o.linkUp('eth0'), false);
    } finally {
      inNs(D1, 'ip', 'link', 'set', 'eth0', 'up');
      // Admin down flushed eth0's IPv6 addresses (keep_addr_on_down=0): put the base address back.
      inNs(D1, 'ip', 'addr', 'replace', 'fd00:18::2/64', 'dev', 'eth0', 'nodad');
    }
    // Peer down: eth0 is admin-up but has no carrier.
    inNs(R, 'ip', 'link', 'set', 'p1', 'down');
    try {
      assert.equal(await o.linkUp('eth0'), false);
    } finally {
      inNs(R, 'ip', 'link', 'set', 'p1', 'up');
    }
  });

  it('an announcing claim moves the neighbour\'s entry to the new director (IPv4 gratuitous ARP, IPv6 unsolicited NA)', async () => {
    const vips = [v4(20), v6(0x20)];
    const a = owner(D1);
    const b = owner(D2);
    await a.claim('g', vips, { count: 1, intervalMs: 50 });
    for (const v of vips) ping(v.address);
    for (const v of vips) assert.equal(neighMac(v.address), mac(D1));
    await a.release('g');
    // Control: a claim without announcements leaves the neighbour pointing at the old director.
    await b.claim('g', vips, { count: 0, intervalMs: 0 });
    await sleep(200);
    for (const v of vips) assert.equal(neighMac(v.address), mac(D1), `${v.address}: nothing announced yet`);
    await b.claim('g', vips, { count: 3, intervalMs: 50 });
    for (const v of vips) {
      const ms = await eventually(() => neighMac(v.address) === mac(D2), 2000);
      assert.ok(ms !== null, `${v.address}: neighbour entry moved to d2 (${neighMac(v.address)} != ${mac(D2)})`);
      console.log(`      ${v.address}: neighbour entry moved after ${ms.toFixed(0)} ms`);
    }
    // And back, while the entry is fresh (within the ARP locktime).
    await b.release('g');
    await a.claim('g', vips, { count: 1, intervalMs: 50 });
    for (const v of vips) assert.ok(await eventually(() => neighMac(v.address) === mac(D1), 2000) !== null, `${v.address} back to d1`);
  });

  it('a claim that solicits the router makes it resolve the address before any traffic (an announcement alone does not)', async () => {
    const plain = [v4(40), v6(0x40)];
    const asked: FloatingAddress[] = [{ ...v4(41), solicit: ['198.18.0.1'] }, { ...v6(0x41), solicit: ['fd00:18::1'] }];
    for (const a of [...plain, ...asked]) inNs(R, 'ip', 'neigh', 'flush', 'to', a.address, 'dev', 'br0');
    const a = owner(D1);
    await a.claim('g', [...plain, ...asked], { count: 1, intervalMs: 50 });
    for (const v of asked) {
      const ms = await eventually(() => neighMac(v.address) === mac(D1), 2000);
      assert.ok(ms !== null, `${v.address}: the router has an entry for it (${neighMac(v.address)} != ${mac(D1)})`);
    }
    // The same round announced the plain addresses first: a Linux router without arp_accept ignores those.
    for (const v of plain) assert.equal(neighMac(v.address), null, `${v.address}: no entry from the announcement alone`);
  });

  it('SIGKILL of the agent: its watchdog removes the addresses', async () => {
    const addrs = [v4(30), v4(31), v6(0x30), v6(0x31)];
    const { child, claimMs } = await agent(D1, addrs, 10);
    const there = addressesIn(D1);
    for (const a of addrs) assert.ok(there.has(a.address));
    child.kill('SIGKILL');
    const ms = await eventually(() => { const now = addressesIn(D1); return addrs.every((a) => !now.has(a.address)); }, 2000, 2);
    assert.ok(ms !== null, 'addresses removed within 2 s of SIGKILL');
    console.log(`      agent claim ${claimMs.toFixed(1)} ms; SIGKILL -> addresses gone: ${ms.toFixed(0)} ms`);
  });

  it('a graceful close keeps the addresses; the next owner re-adopts and releases them', async () => {
    const stateDir = newStateDir();
    const addrs = [v4(40), v6(0x40)];
    const first = new KernelAddressOwner({ runner: netnsRunner(D1), stateDir });
    await first.claim('g', addrs, { count: 1, intervalMs: 50 });
    await first.close();
    await sleep(300);
    for (const a of addrs) assert.ok(addressesIn(D1).has(a.address), `${a.address} kept after close`);
    const second = owner(D1, { stateDir });
    assert.deepEqual(await second.present(addrs), addrs);
    await second.claim('g', addrs, { count: 1, intervalMs: 50 }); // resumes: already there, announced again
    await second.close();
    const third = owner(D1, { stateDir });
    await third.release('g'); // lost the election after the restart: knows what to remove
    for (const a of addrs) assert.ok(!addressesIn(D1).has(a.address), `${a.address} released after re-adoption`);
  });

  it('the lifetime backstop removes the addresses when the agent and its watchdog both die', async () => {
    const addrs = [v4(50), v6(0x50)];
    const lifetime = 3;
    const { child, watchdogPid } = await agent(D1, addrs, lifetime);
    const t0 = performance.now();
    process.kill(watchdogPid, 'SIGKILL');
    child.kill('SIGKILL');
    await sleep(300);
    for (const a of addrs) assert.ok(addressesIn(D1).has(a.address), `${a.address} still there without the watchdog`);
    const ms = await eventually(() => { const now = addressesIn(D1); return addrs.every((a) => !now.has(a.address)); }, (lifetime + 3) * 1000, 20);
    assert.ok(ms !== null, 'addresses expired');
    console.log(`      lifetime ${lifetime} s: addresses gone ${((performance.now() - t0) / 1000).toFixed(2)} s after the kills`);
  });

  // ---- the kernel lease (lease.ts) -----------------------------------------------------------------

  /** Whether `address` answers one ping from the router (the director's input path, or its ARP/ND). */
  const answers = (address: string): boolean => {
    try {
      inNs(R, 'ping', '-c', '1', '-W', '0.5', address);
      return true;
    } catch {
      return false;
    }
  };
  /** Whether the director answers an ARP request for `address` (arping from the router). */
  const arpAnswers = (address: string): boolean => {
    try {
      inNs(R, 'arping', '-q', '-c', '1', '-w', '1', '-I', 'br0', address);
      return true;
    } catch {
      return false;
    }
  };
  /** The lease4/lease6 element for `address` in D1's kernel: its remaining ms, or null when it has none. */
  const leaseExpiresMs = (address: string): number | null => {
    const set = address.includes(':') ? 'lease6' : 'lease4';
    const text = inNs(D1, 'nft', 'list', 'set', 'inet', 'lbd', set);
    const m = new RegExp(`${address.replace(/[.:]/g, (c) => `\\${c}`)} timeout \\S+ expires (?:(\\d+)s)?(?:(\\d+)ms)?`).exec(text);
    return m === null ? null : Number(m[1] ?? 0) * 1000 + Number(m[2] ?? 0);
  };

  it('the kernel serves a guarded address only while its group is leased: none, leased, ended at the deadline, revoked', async () => {
    const o = owner(D1);
    const vip = v4(30);
    const vip6 = v6(0x30);
    await o.guard(new Map([['g', [vip, vip6]]]));
    await o.claim('g', [vip, vip6], { count: 0, intervalMs: 0 });
    inNs(R, 'ip', 'neigh', 'flush', 'dev', 'br0');
    assert.ok(!arpAnswers(vip.address), 'no lease: ARP requests for the vip go unanswered');
    assert.ok(!answers(vip.address), 'no lease: the vip is not served');
    assert.ok(!answers(vip6.address), 'no lease: the IPv6 vip is not served (its neighbour advertisements are dropped)');
    assert.equal(o.leaseLeftMs('g'), null);

    await o.lease('g', 5000);
    assert.ok(arpAnswers(vip.address), 'leased: ARP answered');
    assert.ok(answers(vip.address) && answers(vip6.address), 'leased: both vips served');

    // Shortened to 300 ms: the kernel holds exactly that much, and ends it by itself.
    const t0 = performance.now();
    await o.lease('g', 300);
    for (const a of [vip.address, vip6.address]) {
      const ms = leaseExpiresMs(a);
      assert.ok(ms !== null && ms <= 300 && ms > 0, `${a}'s lease in the kernel expires in ${String(ms)} ms, at most the 300 written`);
    }
    // The router's neighbour entry is still fresh: from here on only the forwarding/input guard decides.
    const tick = async (): Promise<void> => { await sleep(Math.max(0, t0 + 300 + 10 - performance.now())); };
    await tick();
    assert.equal(leaseExpiresMs(vip.address), null, 'the kernel removed the element by the deadline (one jiffy later at most)');
    assert.equal(leaseExpiresMs(vip6.address), null);
    assert.ok(!answers(vip.address) && !answers(vip6.address), 'after the deadline the vips are not served, with no process doing anything');
    assert.ok(!arpAnswers(vip.address), 'nor is ARP answered');
    assert.ok((o.leaseLeftMs('g') ?? 0) < 0, 'the owner knows the kernel ended it');
    assert.deepEqual(await o.present([vip, vip6]), [vip, vip6], 'the addresses are still on the interface: holding is not serving');

    // Leased again, then released: the lease goes first, with the addresses.
    await o.lease('g', 5000);
    assert.ok(answers(vip.address));
    await o.release('g');
    assert.equal(leaseExpiresMs(vip.address), null, 'release ends the lease');
    assert.equal(o.leaseLeftMs('g'), null);
  });

  it('guard() again keeps a leased group serving and leases its new addresses; a new owner starts with no lease at all', async () => {
    const o = owner(D1);
    await o.guard(new Map([['g', [v4(31)]], ['h', [v4(32)]]]));
    await o.claim('g', [v4(31)], { count: 0, intervalMs: 0 });
    await o.lease('g', 5000);
    await o.guard(new Map([['g', [v4(31), v4(33)]], ['h', [v4(32)]]]));
    await o.claim('g', [v4(31), v4(33)], { count: 0, intervalMs: 0 });
    assert.ok((leaseExpiresMs('198.18.0.31') ?? 0) > 4000, 'the leased address keeps its lease');
    assert.ok((leaseExpiresMs('198.18.0.33') ?? 0) > 4000, 'the new address of the leased group is leased with the same deadline');
    assert.equal(leaseExpiresMs('198.18.0.32'), null, 'the group without a lease stays without');
    assert.ok(answers('198.18.0.33'));
    // A restarted agent: a new owner's first guard starts from nothing (it leads nothing yet).
    await o.close();
    const fresh = owner(D1);
    await fresh.guard(new Map([['g', [v4(31), v4(33)]]]));
    assert.equal(leaseExpiresMs('198.18.0.31'), null, 'a previous life\'s lease is gone');
    assert.ok(!answers('198.18.0.31'));
    await fresh.close({ releaseAll: true });
    assert.throws(() => inNs(D1, 'nft', 'list', 'table', 'inet', 'lbd'), 'a graceful stop removes the lease tables');
  });
});
