import { type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { canonicalAddress, familyOf } from '@lbd/config';
import { DataPlaneError, type AddressOwner, type Announce, type FloatingAddress } from '@lbd/dataplane';
import { KernelLease } from './lease.js';
import { localRunner, type CommandRunner } from './runner.js';
import { OneAtATime } from './one-at-a-time.js';
import { LineSession } from './line-session.js';

/**
 * Floating addresses of vip groups, on the kernel: `ip` for the addresses, `arping` and a raw ICMPv6
 * socket for the announcements, a watchdog process for crash safety, address lifetimes as the backstop.
 *
 * Announcements (tested on Linux 6.18, neighbour = a Linux router with default sysctls):
 * - IPv4: an unsolicited ARP request (sender ip = target ip = the vip), what `arping -U` sends. A Linux
 *   neighbour treats it as gratuitous ARP, which overrides an existing entry even within `locktime` (an ARP
 *   reply does too; without `arp_accept` neither creates an entry, which is fine: a neighbour without one
 *   resolves afresh). Not fine for a router's ECMP next hop, which must be resolved before its first packet
 *   (FloatingAddress.solicit): such an address also sends an ARP request / neighbour solicitation to the
 *   router, which creates the router's entry (tested: an ARP request creates a STALE entry).
 * - Both are sent by one long-lived perl process (ANNOUNCER: a packet socket and a raw ICMPv6 socket), a
 *   line per round with every address in it: a takeover's first round leaves within a millisecond of the
 *   claim, all addresses at once. One `arping` process per address per round (what this did before) took
 *   about 17 ms in the lab from the claim to the last server-side address's announcement, and the real
 *   servers answer the SNAT addresses only once they have theirs. Where the announcer cannot run, each
 *   round falls back to `arping -c 1` (which sends at once, then lingers a second: spawned, not awaited).
 *   Either way the agent's timers pace the rounds, so nothing announces after the agent dies or freezes.
 * - IPv6: the kernel does NOT announce an address added with `nodad`, even with `ndisc_notify=1` (that knob
 *   only covers link up and a link-layer address change; observed: no NA on the wire). `ndisc6` only
 *   solicits. So the owner sends the unsolicited NA itself (Override flag, target link-layer option, to
 *   ff02::1, hop limit 255, as keepalived does) from a raw ICMPv6 socket in a few lines of perl: perl-base is
 *   Essential in Debian, so no package is needed, and the kernel fills in the ICMPv6 checksum.
 *   A Linux neighbour replaces the lladdr of its existing entry (state STALE).
 *
 * The kernel lease (lease.ts) decides whether the kernel serves what is held: a release ends the lease
 * first, a caller leases before it claims, and lease writes never queue behind address changes.
 *
 * Lifetimes: addresses are added with `valid_lft`/`preferred_lft` = lifetimeSec and refreshed every
 * lifetimeSec/3, so if the agent and its watchdog both die the kernel drops them. Observed expiry granularity
 * is about one second (an address with valid_lft 3 went at 3.2 s, IPv4 and IPv6 alike). Consequence: an agent
 * that closes without releaseAll (a restart) must claim again within lifetimeSec or the addresses expire.
 */

export interface KernelAddressOwnerOptions {
  readonly runner?: CommandRunner;
  /** Called on transitions worth a log line; never per steady-state tick. */
  readonly onEvent?: (msg: string, fields: Record<string, unknown>) => void;
  /** Lifetime of claimed addresses in seconds (refreshed every third of it). Default 10. */
  readonly lifetimeSec?: number;
  /** Where the held-address files live (one owner per directory). Default /run/lbd. */
  readonly stateDir?: string;
  /** Start the crash watchdog. Default true (turn off only in tests of other things). */
  readonly watchdog?: boolean;
}

interface Held {
  readonly addresses: readonly FloatingAddress[];
  /** Found in the state file of a previous (gracefully closed) owner: released on request, never refreshed. */
  readonly adopted: boolean;
}

interface LinkInfo {
  readonly ifname: string;
  readonly flags?: readonly string[];
  readonly operstate?: string;
  readonly addr_info?: ReadonlyArray<{ readonly local?: string; readonly prefixlen?: number; readonly tentative?: boolean; readonly dadfailed?: boolean }>;
}

const IFNAME = /^[A-Za-z0-9_.:@-]{1,15}$/;
const key = (a: FloatingAddress): string => `${a.address}%${a.ifname}`;
const prefix = (a: FloatingAddress): string => `${a.address}/${familyOf(a.address) === 6 ? 128 : 32}`;

/** The watchdog: ignores signals (systemd's stop sends TERM to the whole cgroup at once), waits for EOF on
 *  stdin; a `keep` line first means a deliberate close: leave everything. Otherwise deletes what the file lists. */
const WATCHDOG = `trap '' HUP INT TERM PIPE
while IFS= read -r line; do [ "$line" = keep ] && exit 0; done
ip -force -batch "$1" >/dev/null 2>&1
rm -f "$1" "$2"`;

/** Sends one unsolicited neighbour advertisement per IF=ADDR argument (see the comment at the top). */
const SEND_NA = `use strict; use Socket qw(:DEFAULT inet_pton pack_sockaddr_in6);
my $rc = 0;
for my $t (@ARGV) {
  my ($if, $addr) = split /=/, $t, 2;
  my ($idx, $mac);
  if (open my $f, '<', "/sys/class/net/$if/ifindex") { $idx = 0 + <$f>; } else { warn "no interface $if\\n"; $rc = 1; next; }
  if (open my $f, '<', "/sys/class/net/$if/address") { my $m = <$f>; chomp $m; $mac = pack 'H12', join '', split /:/, $m; }
  socket(my $s, AF_INET6, SOCK_RAW, 58) or die "socket: $!\\n";
  setsockopt($s, 41, 16, pack 'i', 255); setsockopt($s, 41, 18, pack 'i', 255); setsockopt($s, 41, 17, pack 'i', $idx);
  my $pkt = pack('CCnN', 136, 0, 0, 0x20000000) . inet_pton(AF_INET6, $addr) . pack('CC', 2, 1) . $mac;
  send($s, $pkt, 0, pack_sockaddr_in6(0, inet_pton(AF_INET6, 'ff02::1'), $idx)) or do { warn "send $addr: $!\\n"; $rc = 1; };
}
exit $rc;`;

/**
 * The announcer: per line of IF=ADDR words, one gratuitous ARP request (IPv4) or unsolicited NA (IPv6) per
 * word, all at once; answers `ok` or `failed <why>` per line. Exits at EOF (the agent is gone). A word
 * IF=ADDR>N1,N2 also asks each neighbour N from ADDR (an ARP request, or a neighbour solicitation to N's
 * solicited-node group with our link-layer address): see FloatingAddress.solicit.
 */
const ANNOUNCER = `use strict; use Socket qw(:DEFAULT inet_aton inet_pton pack_sockaddr_in6);
$| = 1;
socket(my $arp, 17, 3, 0) or die "packet socket: $!\\n";
socket(my $na, AF_INET6, SOCK_RAW, 58) or die "icmpv6 socket: $!\\n";
setsockopt($na, 41, 16, pack 'i', 255); setsockopt($na, 41, 18, pack 'i', 255);
my $bcast = "\\xff" x 6;
while (my $line = <STDIN>) {
  my @failed;
  for my $t (split ' ', $line) {
    my ($if, $rest) = split /=/, $t, 2;
    my ($addr, $ask) = split />/, $rest, 2;
    my @ask = defined $ask ? split(/,/, $ask) : ();
    my ($idx, $mac);
    if (open my $f, '<', "/sys/class/net/$if/ifindex") { $idx = 0 + <$f>; }
    if (open my $f, '<', "/sys/class/net/$if/address") { my $m = <$f>; chomp $m; $mac = pack 'H12', join '', split /:/, $m; }
    if (!defined $idx || !defined $mac) { push @failed, "$t: no interface $if"; next; }
    if ($addr =~ /:/) {
      setsockopt($na, 41, 17, pack 'i', $idx);
      my $pkt = pack('CCnN', 136, 0, 0, 0x20000000) . inet_pton(AF_INET6, $addr) . pack('CC', 2, 1) . $mac;
      send($na, $pkt, 0, pack_sockaddr_in6(0, inet_pton(AF_INET6, 'ff02::1'), $idx)) or push @failed, "$t: $!";
      for my $n (@ask) {
        # A neighbour solicitation for $n from $addr (so bound to it), with our link-layer address.
        my $target = inet_pton(AF_INET6, $n);
        my $s;
        if (!socket($s, AF_INET6, SOCK_RAW, 58) || !bind($s, pack_sockaddr_in6(0, inet_pton(AF_INET6, $addr), $idx))) { push @failed, "$t: solicit $n: $!"; next; }
        setsockopt($s, 41, 16, pack 'i', 255); setsockopt($s, 41, 18, pack 'i', 255); setsockopt($s, 41, 17, pack 'i', $idx);
        my $group = inet_pton(AF_INET6, 'ff02::1:ff00:0'); substr($group, 13, 3) = substr($target, 13, 3);
        send($s, pack('CCnN', 135, 0, 0, 0) . $target . pack('CC', 1, 1) . $mac, 0, pack_sockaddr_in6(0, $group, $idx)) or push @failed, "$t: solicit $n: $!";
        close $s;
      }
    } else {
      my $ip = inet_aton($addr);
      my $to = pack('S n i S C C a8', 17, 0x0806, $idx, 1, 0, 6, $mac);
      my $frame = $bcast . $mac . pack('n', 0x0806) . pack('nnCCn', 1, 0x0800, 6, 4, 1) . $mac . $ip . $bcast . $ip;
      send($arp, $frame, 0, $to) or push @failed, "$t: $!";
      for my $n (@ask) {
        my $request = $bcast . $mac . pack('n', 0x0806) . pack('nnCCn', 1, 0x0800, 6, 4, 1) . $mac . $ip . ("\\0" x 6) . inet_aton($n);
        send($arp, $request, 0, $to) or push @failed, "$t: solicit $n: $!";
      }
    }
  }
  print @failed ? "failed @failed\\n" : "ok\\n";
}`;

/** One long-lived `ip -j -force -batch -`: every request is some lines plus `addr show`, whose one JSON line
 *  is the answer (so completion is known, and the answer is the kernel's state right after the changes). */
class IpBatch {
  private readonly session: LineSession | null;
  stderr = '';

  constructor(spawnIp: (() => ChildProcessWithoutNullStreams) | null, private readonly runner: CommandRunner,
    private readonly onEvent: (msg: string, fields: Record<string, unknown>) => void) {
    this.session = spawnIp === null ? null
      : new LineSession(spawnIp, 'ip -batch', { onStderr: (chunk) => { this.stderr = (this.stderr + chunk).slice(-4096); } });
  }

  async exec(lines: readonly string[]): Promise<LinkInfo[]> {
    if (this.session) {
      try {
        const answer = await this.session.request(`${[...lines, 'addr show'].join('\n')}\n`);
        try {
          return JSON.parse(answer) as LinkInfo[];
        } catch (e) {
          throw new Error(`unparsable ip -j output: ${answer.slice(0, 200)}`, { cause: e });
        }
      } catch (e) {
        // The session died under this request (or answered nonsense): its lines are idempotent, so do them
        // once more, one by one.
        this.onEvent('ip -batch session ended; running ip per command', { error: String(e) });
      }
    }
    return this.viaRun(lines);
  }

  private async viaRun(lines: readonly string[]): Promise<LinkInfo[]> {
    for (const line of lines) {
      const r = await this.runner.run('ip', line.split(' '));
      if (r.code !== 0) this.stderr = (this.stderr + r.stderr).slice(-4096);
    }
    const r = await this.runner.run('ip', ['-j', 'addr', 'show']);
    if (r.code === 127) throw new DataPlaneError('CommandMissing', 'ip addr', { detail: r.stderr });
    if (r.code !== 0) throw new DataPlaneError(/not permitted/i.test(r.stderr) ? 'PermissionDenied' : 'Unknown', 'ip addr', { detail: r.stderr.trim() });
    return JSON.parse(r.stdout) as LinkInfo[];
  }

  takeStderr(): string {
    const s = this.stderr.trim();
    this.stderr = '';
    return s;
  }

  close(): void {
    this.session?.close();
  }
}

/**
 * The long-lived ANNOUNCER process: one line per round, answered by one line. Started with the owner, and
 * again on use after it ended, at most once a second; a request it cannot take (ended, resting or not
 * startable: EPERM without CAP_NET_RAW under a tight unit, say) rejects, and the caller falls back to
 * arping, which then says what is wrong.
 */
class AnnouncerProcess {
  private readonly session: LineSession | null;

  constructor(spawnPerl: (() => ChildProcessWithoutNullStreams) | null) {
    this.session = spawnPerl === null ? null : new LineSession(spawnPerl, 'announcer', { restartAfterMs: 1000 });
  }

  /** Sends one announcement per `ifname=address[>neighbour,...]` word at once; resolves with the failures (null: none). */
  async send(words: readonly string[]): Promise<string | null> {
    if (this.session === null) throw new Error('no announcer process: the runner cannot spawn one');
    const line = await this.session.request(`${words.join(' ')}\n`);
    return line === 'ok' ? null : line.replace(/^failed /, '');
  }

  /** Starts the process ahead of the first round: perl takes tens of ms to start, a takeover has none to spare. */
  warm(): void {
    this.session?.warm();
  }

  close(): void {
    this.session?.close();
  }
}

export class KernelAddressOwner implements AddressOwner {
  private readonly runner: CommandRunner;
  private readonly onEvent: (msg: string, fields: Record<string, unknown>) => void;
  private readonly lifetimeSec: number;
  private readonly stateDir: string;
  private readonly batch: IpBatch;
  private readonly announcer: AnnouncerProcess;
  private readonly held = new Map<string, Held>();
  /** Being removed right now: still listed for the watchdog until the kernel confirms. */
  private readonly leaving = new Map<string, FloatingAddress>();
  private readonly announcers = new Map<string, { timer: NodeJS.Timeout | null; children: Set<ChildProcessWithoutNullStreams>; cancelled: boolean }>();
  private watchdog: ChildProcessWithoutNullStreams | null = null;
  private refreshTimer: NodeJS.Timeout | null = null;
  /** Addresses found missing by a refresh (so that the event is logged once, not per tick). */
  private missing = new Set<string>();
  /** All changes are serialised. */
  private readonly turns = new OneAtATime();
  private readonly ready: Promise<void>;
  private closed = false;
  private readonly written: { batch: string | null; state: string | null } = { batch: null, state: null };
  private readonly kernelLease: KernelLease;

  constructor(opts: KernelAddressOwnerOptions = {}) {
    this.runner = opts.runner ?? localRunner();
    this.onEvent = opts.onEvent ?? (() => { /* nobody listens */ });
    this.lifetimeSec = Math.max(3, Math.round(opts.lifetimeSec ?? 10));
    this.stateDir = opts.stateDir ?? '/run/lbd';
    const spawnFn = this.runner.spawn?.bind(this.runner);
    this.batch = new IpBatch(spawnFn ? () => spawnFn('ip', ['-j', '-force', '-batch', '-']) : null, this.runner, this.onEvent);
    this.announcer = new AnnouncerProcess(spawnFn ? () => spawnFn('perl', ['-e', ANNOUNCER]) : null);
    this.kernelLease = new KernelLease({ runner: this.runner });
    this.ready = this.start(opts.watchdog !== false);
    this.ready.catch(() => { /* reported by the first call that awaits it */ });
  }

  get batchFile(): string { return join(this.stateDir, 'floating-addresses.batch'); }
  get stateFile(): string { return join(this.stateDir, 'floating-addresses.json'); }

  /** Process id of the watchdog (tests kill it to exercise the lifetime backstop). */
  get watchdogPid(): number | undefined { return this.watchdog?.pid; }

  private async start(watchdog: boolean): Promise<void> {
    await mkdir(this.stateDir, { recursive: true, mode: 0o700 });
    // A previous owner that closed without releasing (a restart) left what it held: adopt it, so that a
    // release of one of its groups removes its addresses, and so that our watchdog covers them.
    try {
      const previous = JSON.parse(await readFile(this.stateFile, 'utf8')) as Record<string, FloatingAddress[]>;
      for (const [group, addresses] of Object.entries(previous)) this.held.set(group, { addresses, adopted: true });
      if (this.held.size > 0) this.onEvent('adopted floating addresses of a previous owner', { groups: [...this.held.keys()] });
    } catch { /* none */ }
    await this.writeState();
    if (watchdog && this.runner.spawn) this.startWatchdog();
    this.announcer.warm();
  }

  private startWatchdog(): void {
    // setsid: its own session, so a signal to the agent's process group does not reach it.
    const child = this.runner.spawn!('setsid', ['sh', '-c', WATCHDOG, 'lbd-address-watchdog', this.batchFile, this.stateFile]);
    child.on('error', (e) => this.onEvent('address watchdog failed', { error: e.message }));
    child.on('exit', (code, signal) => {
      if (this.watchdog !== child) return;
      this.watchdog = null;
      if (this.closed) return;
      // Someone killed it: start another, at most once a second (the lifetime backstop covers the gap).
      this.onEvent('address watchdog exited; restarting it', { code, signal });
      setTimeout(() => { if (!this.closed && !this.watchdog) this.startWatchdog(); }, 1000).unref();
    });
    child.stdin.on('error', () => { /* the watchdog's exit is what we act on; a write to a dead child says nothing more */ });
    child.stdout.resume();
    child.stderr.resume();
    this.watchdog = child;
  }

  claim(group: string, addresses: readonly FloatingAddress[], announce: Announce): Promise<void> {
    const wanted = dedupe(addresses.map(normalise));
    return this.serialise(async () => {
      const before = this.held.get(group)?.addresses ?? [];
      const wantedKeys = new Set(wanted.map(key));
      this.held.set(group, { addresses: wanted, adopted: false });
      const leaving = before.filter((a) => !wantedKeys.has(key(a)) && !this.heldElsewhere(a, group));
      for (const a of leaving) this.leaving.set(key(a), a);
      this.cancelAnnouncements(group);
      // The watchdog's list first: an agent that dies half-way through this claim is still cleaned up after.
      await this.writeState();
      const links = await this.batch.exec([...wanted.map((a) => this.addLine('replace', a)), ...leaving.map(delLine)]);
      const present = presentKeys(links);
      const notAdded = wanted.filter((a) => !present.has(key(a)));
      const notRemoved = leaving.filter((a) => present.has(key(a)));
      // The first round at once: until the neighbours (the router, and the real servers for the SNAT
      // addresses) have it, traffic still goes to the old owner's MAC.
      if (notAdded.length === 0 && announce.count > 0 && wanted.length > 0) this.announce(group, wanted, announce);
      for (const a of leaving) if (!present.has(key(a))) this.leaving.delete(key(a));
      for (const a of wanted) this.missing.delete(key(a));
      await this.writeState();
      const stderr = this.batch.takeStderr();
      if (notAdded.length > 0 || notRemoved.length > 0) {
        throw new DataPlaneError('Unknown', `claim ${group}`, {
          detail: `${notAdded.length ? `not added: ${notAdded.map(key).join(' ')}` : ''}${notRemoved.length ? ` not removed: ${notRemoved.map(key).join(' ')}` : ''}${stderr ? ` (${stderr})` : ''}`.trim(),
        });
      }
      this.ensureRefresh();
    });
  }

  async guard(groups: ReadonlyMap<string, readonly FloatingAddress[]>): Promise<void> {
    await this.ready;
    if (this.closed) throw new Error('address owner is closed');
    await this.kernelLease.guard(new Map([...groups].map(([g, xs]) => [g, xs.map((a) => normalise(a).address)])));
  }

  lease(group: string, forMs: number): Promise<void> {
    // The deadline is fixed now, on this thread's monotonic clock; the writer counts down from it.
    return this.kernelLease.lease(group, performance.now() + forMs);
  }

  leaseLeftMs(group: string): number | null {
    return this.kernelLease.leftMs(group);
  }

  async release(group: string): Promise<void> {
    // The lease first: the kernel stops serving before the addresses (and their announcements) go.
    let leaseError: unknown = null;
    await this.kernelLease.revoke(group).catch((e: unknown) => { leaseError = e; });
    await this.releaseAddresses(group);
    if (leaseError !== null) throw leaseError;
  }

  private releaseAddresses(group: string): Promise<void> {
    return this.serialise(async () => {
      this.cancelAnnouncements(group);
      const held = this.held.get(group);
      if (!held) return;
      const leaving = held.addresses.filter((a) => !this.heldElsewhere(a, group));
      for (const a of leaving) this.leaving.set(key(a), a);
      this.held.delete(group);
      await this.remove(leaving, `release ${group}`);
    });
  }

  async present(addresses: readonly FloatingAddress[]): Promise<FloatingAddress[]> {
    await this.ready;
    if (this.closed) throw new Error('address owner is closed');
    const present = presentKeys(await this.batch.exec([]));
    return addresses.filter((a) => present.has(key(normalise(a))));
  }

  async linkUp(ifname: string): Promise<boolean> {
    await this.ready;
    if (this.closed) throw new Error('address owner is closed');
    const link = (await this.batch.exec([])).find((l) => l.ifname === ifname);
    if (!link) return false;
    const flags = link.flags ?? [];
    return flags.includes('UP') && flags.includes('LOWER_UP') && link.operstate !== 'DOWN' && link.operstate !== 'LOWERLAYERDOWN';
  }

  async close(opts: { releaseAll?: boolean } = {}): Promise<void> {
    if (this.closed) return;
    await this.serialise(async () => {
      this.closed = true;
      if (this.refreshTimer) clearInterval(this.refreshTimer);
      this.refreshTimer = null;
      for (const group of [...this.announcers.keys()]) this.cancelAnnouncements(group);
      if (opts.releaseAll) {
        await this.kernelLease.remove().catch((e: unknown) => this.onEvent('removing the kernel lease tables failed', { error: String(e) }));
        const all = this.allHeld();
        for (const a of all) this.leaving.set(key(a), a);
        this.held.clear();
        await this.remove(all, 'close');
      }
    });
    this.batch.close();
    this.announcer.close();
    this.kernelLease.close();
    const watchdog = this.watchdog;
    this.watchdog = null;
    if (watchdog && watchdog.exitCode === null) {
      // A deliberate close: the watchdog must leave the addresses (a restarting agent resumes its leadership).
      const exited = new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 1000);
        watchdog.once('exit', () => { clearTimeout(t); resolve(); });
      });
      watchdog.stdin.end('keep\n');
      await exited;
    }
  }

  // ---- internals ------------------------------------------------------------------------------------

  private serialise<T>(fn: () => Promise<T>): Promise<T> {
    return this.turns.run(async () => {
      await this.ready;
      if (this.closed) throw new Error('address owner is closed');
      return fn();
    });
  }

  private async remove(leaving: readonly FloatingAddress[], op: string): Promise<void> {
    if (leaving.length === 0) {
      await this.writeState();
      return;
    }
    const present = presentKeys(await this.batch.exec(leaving.map(delLine)));
    const stuck = leaving.filter((a) => present.has(key(a)));
    for (const a of leaving) if (!present.has(key(a))) this.leaving.delete(key(a));
    await this.writeState();
    const stderr = this.batch.takeStderr();
    if (stuck.length > 0) throw new DataPlaneError('Unknown', op, { detail: `not removed: ${stuck.map(key).join(' ')}${stderr ? ` (${stderr})` : ''}` });
    if (this.allHeld().length === 0 && this.refreshTimer) {
      clearInterval(this.refreshTimer);
      this.refreshTimer = null;
    }
  }

  private heldElsewhere(a: FloatingAddress, group: string): boolean {
    for (const [g, h] of this.held) if (g !== group && h.addresses.some((b) => key(b) === key(a))) return true;
    return false;
  }

  private allHeld(): FloatingAddress[] {
    return dedupe([...this.held.values()].flatMap((h) => h.addresses));
  }

  private addLine(verb: 'replace' | 'change', a: FloatingAddress): string {
    const lft = `valid_lft ${this.lifetimeSec} preferred_lft ${this.lifetimeSec}`;
    return `addr ${verb} ${prefix(a)} dev ${a.ifname}${familyOf(a.address) === 6 ? ' nodad' : ''} ${lft}`;
  }

  /** The watchdog's delete list and the group map, each written atomically (temporary file + rename). */
  private async writeState(): Promise<void> {
    const groups: Record<string, readonly FloatingAddress[]> = {};
    for (const [g, h] of this.held) groups[g] = h.addresses;
    const all = dedupe([...this.allHeld(), ...this.leaving.values()]);
    const batch = all.map((a) => `${delLine(a)}\n`).join('');
    const state = `${JSON.stringify(groups)}\n`;
    // Unchanged files are not rewritten (a claim of addresses already held costs no write).
    if (batch !== this.written.batch) await atomicWrite(this.batchFile, batch);
    this.written.batch = batch;
    if (state !== this.written.state) await atomicWrite(this.stateFile, state);
    this.written.state = state;
  }

  private ensureRefresh(): void {
    if (this.refreshTimer) return;
    this.refreshTimer = setInterval(() => {
      void this.serialise(() => this.refresh()).catch((e) => this.onEvent('floating address refresh failed', { error: String(e) }));
    }, (this.lifetimeSec * 1000) / 3);
    this.refreshTimer.unref();
  }

  /** Extends the lifetime of every claimed (not adopted) address; `change` never re-adds a removed one. */
  private async refresh(): Promise<void> {
    const claimed = dedupe([...this.held.values()].filter((h) => !h.adopted).flatMap((h) => h.addresses));
    if (claimed.length === 0) return;
    const present = presentKeys(await this.batch.exec(claimed.map((a) => this.addLine('change', a))));
    this.batch.takeStderr();
    const gone = claimed.filter((a) => !present.has(key(a)) && !this.missing.has(key(a)));
    for (const a of claimed) if (present.has(key(a))) this.missing.delete(key(a));
    for (const a of gone) this.missing.add(key(a));
    if (gone.length > 0) this.onEvent('claimed floating addresses are missing from their interfaces', { addresses: gone.map(key) });
  }

  /** count rounds, intervalMs apart; each round announces every address at once (one process per IPv4
   *  address, one for all IPv6 ones). Paced by our timers, so nothing is announced after we stop or die. */
  private announce(group: string, addresses: readonly FloatingAddress[], announce: Announce): void {
    if (this.closed || this.held.get(group)?.addresses !== addresses) return; // released or re-claimed meanwhile
    const state = { timer: null as NodeJS.Timeout | null, children: new Set<ChildProcessWithoutNullStreams>(), cancelled: false };
    this.announcers.set(group, state);
    let failed = false;
    const fail = (what: string, detail: string): void => {
      if (failed || state.cancelled) return;
      failed = true;
      this.onEvent('floating address announcement failed', { group, what, detail });
    };
    const v4 = addresses.filter((a) => familyOf(a.address) === 4);
    const v6 = addresses.filter((a) => familyOf(a.address) === 6);
    const send = (command: string, args: string[]): void => {
      if (!this.runner.spawn) {
        void this.runner.run(command, args).then((r) => { if (r.code !== 0) fail(command, r.stderr.trim()); });
        return;
      }
      let child: ChildProcessWithoutNullStreams;
      try {
        child = this.runner.spawn(command, args);
      } catch (err) {
        // Node throws, rather than emitting 'error', when the kernel refuses the exec itself (EPERM
        // without CAP_NET_RAW under a tight unit): an announcement must never take the agent down.
        fail(command, err instanceof Error ? err.message : String(err));
        return;
      }
      state.children.add(child);
      let stderr = '';
      child.stdout.resume();
      child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
      child.on('error', (e) => fail(command, e.message));
      child.on('exit', (code) => {
        state.children.delete(child);
        if (code !== 0 && code !== null) fail(command, stderr.trim());
      });
    };
    let round = 0;
    const fire = (): void => {
      state.timer = null;
      if (state.cancelled) return;
      round++;
      const spawnRound = (): void => {
        // arping -c 1 has sent its one packet within milliseconds; it lingers a second waiting for replies.
        for (const a of v4) {
          send('arping', ['-q', '-U', '-c', '1', '-I', a.ifname, a.address]);
          for (const n of a.solicit ?? []) send('arping', ['-q', '-c', '1', '-I', a.ifname, '-s', a.address, n]);
        }
        // (IPv6 solicitations need the announcer: this fallback only advertises.)
        if (v6.length > 0) send('perl', ['-e', SEND_NA, ...v6.map((a) => `${a.ifname}=${a.address}`)]);
      };
      this.announcer.send(addresses.map(announcerWord)).then(
        (failure) => { if (failure !== null) fail('announcer', failure); },
        () => { if (!state.cancelled) spawnRound(); },
      );
      if (round < announce.count) {
        state.timer = setTimeout(fire, Math.max(0, announce.intervalMs));
        state.timer.unref();
      } else if (this.announcers.get(group) === state) {
        this.announcers.delete(group);
      }
    };
    fire();
  }

  private cancelAnnouncements(group: string): void {
    const state = this.announcers.get(group);
    if (!state) return;
    state.cancelled = true;
    if (state.timer) clearTimeout(state.timer);
    for (const child of state.children) child.kill();
    this.announcers.delete(group);
  }
}

function normalise(a: FloatingAddress): FloatingAddress {
  const address = a.address.replace(/\/(32|128)$/, '');
  const family = familyOf(address);
  if (family === null) throw new DataPlaneError('Unknown', 'claim', { detail: `not a host address: ${a.address}` });
  if (!IFNAME.test(a.ifname)) throw new DataPlaneError('Unknown', 'claim', { detail: `not an interface name: ${a.ifname}` });
  const out = { address: canonicalAddress(address), ifname: a.ifname };
  if (a.solicit === undefined || a.solicit.length === 0) return out;
  for (const n of a.solicit) {
    if (familyOf(n) !== family) throw new DataPlaneError('Unknown', 'claim', { detail: `${a.address} cannot solicit ${n}: not an IPv${family} address` });
  }
  return { ...out, solicit: a.solicit.map(canonicalAddress) };
}

/** The announcer's word for an address (see ANNOUNCER). */
const announcerWord = (a: FloatingAddress): string =>
  `${a.ifname}=${a.address}${a.solicit && a.solicit.length > 0 ? `>${a.solicit.join(',')}` : ''}`;

function dedupe(list: readonly FloatingAddress[]): FloatingAddress[] {
  const seen = new Map<string, FloatingAddress>();
  for (const a of list) seen.set(key(a), a);
  return [...seen.values()];
}

const delLine = (a: FloatingAddress): string => `addr del ${prefix(a)} dev ${a.ifname}`;

/** Host addresses (/32, /128) usable on each interface, as `address%ifname` keys. */
function presentKeys(links: readonly LinkInfo[]): Set<string> {
  const out = new Set<string>();
  for (const link of links) {
    for (const ai of link.addr_info ?? []) {
      if (!ai.local || ai.tentative || ai.dadfailed) continue;
      if (ai.prefixlen !== (familyOf(ai.local) === 6 ? 128 : 32)) continue;
      out.add(`${canonicalAddress(ai.local)}%${link.ifname}`);
    }
  }
  return out;
}

let tmpCounter = 0;
async function atomicWrite(file: string, text: string): Promise<void> {
  const tmp = `${file}.${process.pid}.${++tmpCounter}.tmp`;
  try {
    await writeFile(tmp, text, { mode: 0o600 });
    await rename(tmp, file);
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  }
}
