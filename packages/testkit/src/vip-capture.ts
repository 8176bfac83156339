import { mkdtemp, open, rm, writeFile, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { BackgroundProcess } from './exec.js';
import type { Topology } from './netns.js';

/**
 * Who forwarded and who answered for a vip, seen from one capture point: the drills' authoritative
 * measure of dual ownership. A director *holding* the vip address (OwnershipWatch, from address events)
 * is not what harms clients: a director whose kernel keeps forwarding for the vip or answering ARP for it
 * while another does is. With the kernel lease (DESIGN.md, High availability) a frozen director keeps the
 * address but its kernel stops both at the lease's deadline, so only this measure tells the two apart.
 *
 * The capture point is the router's interface on the front segment: everything the directors send
 * towards clients for the vip (replies after de-NAT, source = the vip) and every ARP packet naming the
 * vip as its sender (replies, gratuitous announcements, requests) arrives there. `tcpdump -tt -e -n`
 * gives each packet its kernel receive timestamp (µs, the wall clock) and its source MAC, which names the
 * director; one capture on one interface gives one timeline, in the kernel's order.
 *
 * Not a throughput tool: the drills' load is a few thousand packets a second at most.
 */

/** A host that may send for the vip, known by the MAC of its interface on the captured segment. */
export interface CaptureSubject {
  readonly name: string;
  readonly mac: string;
}

/** What a captured packet was. */
export type VipPacketKind = 'forwarded' | 'arp';

export interface VipPacket {
  /** Kernel receive time at the capture point, µs since the Unix epoch. */
  readonly atUs: number;
  /** `forwarded`: an IPv4 packet from the vip; `arp`: an ARP packet whose sender address is the vip. */
  readonly kind: VipPacketKind;
  /** The subject whose MAC sent it, null for any other MAC. */
  readonly from: string | null;
  readonly mac: string;
}

const CAPTURE_LINE = /^(\d+)\.(\d{6}) ([0-9a-f]{2}(?::[0-9a-f]{2}){5}) > [0-9a-f:]+, ethertype (IPv4|ARP) /;

/**
 * Parses one `tcpdump -tt -e -n` line; undefined for anything else (tcpdump's own messages). The capture
 * filter already chose the packets, so the ethertype alone says which kind it is.
 */
export function parseCaptureLine(line: string, subjects: readonly CaptureSubject[]): VipPacket | undefined {
  const m = CAPTURE_LINE.exec(line);
  if (!m) return undefined;
  const [, sec, us, mac, type] = m;
  const from = subjects.find((s) => s.mac.toLowerCase() === mac)?.name ?? null;
  return { atUs: Number(sec) * 1_000_000 + Number(us), kind: type === 'ARP' ? 'arp' : 'forwarded', from, mac: mac! };
}

/** What one subject sent of one kind from a given instant on. */
export interface SentFigures {
  readonly packets: number;
  /** The first and the last, relative to that instant (ms, µs precision); null without packets. */
  readonly firstMs: number | null;
  readonly lastMs: number | null;
}

/** Overlap of two senders of one kind. */
export interface DualFigures {
  /** Packets of `old` during `successor`'s tenure (see dualFigures): 0 when they never overlapped. */
  readonly packets: number;
  /** From the tenure's start to the last of those (ms, µs precision); 0 when none. */
  readonly spanMs: number;
}

/** What `name` sent of `kind` at or after `fromUs`. */
export function sentFigures(packets: readonly VipPacket[], kind: VipPacketKind, name: string, fromUs: number): SentFigures {
  const mine = packets.filter((p) => p.kind === kind && p.from === name && p.atUs >= fromUs);
  const rel = (us: number | undefined): number | null => (us === undefined ? null : (us - fromUs) / 1000);
  return { packets: mine.length, firstMs: rel(mine[0]?.atUs), lastMs: rel(mine.at(-1)?.atUs) };
}

/**
 * Whether `old` (the leader at the failure) still sent packets of `kind` while `successor` (the other
 * director) served, counting from `fromUs` (the failure): the packets of `old` in the successor's tenure,
 * and the span from the tenure's start to the last of them. The tenure runs from the successor's first
 * packet (of any kind) until `old` takes the vip back: its first forwarded packet after the successor's
 * last one. So a clean handover is 0 and 0 (the old leader's last packet comes before the new one's
 * first), and so is a handover that bounced back (the old leader serves again only once the successor has
 * stopped: a flap, which drills report apart); a frozen leader still forwarding beside the new one is not.
 * Packets must be in capture order.
 */
export function dualFigures(packets: readonly VipPacket[], kind: VipPacketKind, old: string, successor: string, fromUs: number): DualFigures {
  const after = packets.filter((p) => p.atUs >= fromUs);
  const first = after.find((p) => p.from === successor);
  if (first === undefined) return { packets: 0, spanMs: 0 };
  const lastForwarded = after.findLast((p) => p.from === successor && p.kind === 'forwarded');
  const back = lastForwarded === undefined ? undefined : after.find((p) => p.from === old && p.kind === 'forwarded' && p.atUs > lastForwarded.atUs);
  const end = back?.atUs ?? Number.POSITIVE_INFINITY;
  const late = after.filter((p) => p.kind === kind && p.from === old && p.atUs >= first.atUs && p.atUs < end);
  return { packets: late.length, spanMs: late.length === 0 ? 0 : (late.at(-1)!.atUs - first.atUs) / 1000 };
}

export interface VipCaptureResult {
  /** Every packet captured, in capture order. */
  readonly packets: readonly VipPacket[];
  /** tcpdump's own count at the end (to check nothing was lost between it and us). */
  readonly captured: number;
}

/** Bounds: tcpdump's startup, the lines kept, the wait for packets the kernel queued just before the stop. */
const CAPTURE_READY_MS = 5000;
const CAPTURE_MAX_LINES = 1_000_000;
const CAPTURE_DRAIN_MS = 50;
const CAPTURE_STOP_MS = 2000;
/** How often the capture file is read while the drill runs (a waiter sees a packet at most this late). */
const CAPTURE_TAIL_MS = 10;

/**
 * A running `tcpdump` on one interface for one IPv4 vip. `start` returns once tcpdump says it is
 * listening (its filter is attached by then); `stop` ends and reaps it and rejects when the timeline
 * cannot be exact: tcpdump died early, the kernel dropped packets, or lines were lost.
 */
export class VipCapture {
  private readonly lines: string[] = [];
  private overflow = false;
  private partial = '';
  private stopped: Promise<void> | undefined;
  private readonly waiters = new Set<(p: VipPacket) => void>();

  private readonly tail: ReturnType<typeof setInterval>;
  private offset = 0;
  private reading: Promise<void> = Promise.resolve();
  private readError: Error | undefined;

  /** One read buffer for the whole capture (the file is read every CAPTURE_TAIL_MS). */
  private readonly buf = Buffer.alloc(1 << 16);

  private constructor(
    private readonly dump: BackgroundProcess, private readonly subjects: readonly CaptureSubject[],
    private readonly file: string, private readonly output: FileHandle,
  ) {
    this.tail = setInterval(() => { void this.readMore(); }, CAPTURE_TAIL_MS);
  }

  static async start(topology: Topology, host: string, ifname: string, vip: string, subjects: readonly CaptureSubject[]): Promise<VipCapture> {
    if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(vip)) throw new Error(`vip capture: ${JSON.stringify(vip)} is not an IPv4 address (ND for IPv6 vips is not captured yet)`);
    // tcpdump writes to a file, not to a pipe to us: on a loaded machine this process reads a pipe late, a
    // full pipe blocks tcpdump's write, and the stop's SIGTERM then interrupts it ("Unable to write output:
    // Interrupted system call"): tcpdump exits without its closing statistics, and the drill cannot tell
    // whether it missed packets. A file never blocks; we read it as it grows.
    const dir = await mkdtemp(join(tmpdir(), 'lbd-capture-'));
    const file = join(dir, 'capture.txt');
    await writeFile(file, '');
    const output = await open(file, 'r');
    // -Q in: what reaches the router, not what it sends; -l and --immediate-mode: each packet printed as it
    // arrives (a waiter sees it, and nothing is left in a buffer at the stop); -B: a 4 MiB ring so a
    // loaded machine's scheduling does not make the kernel drop packets before tcpdump reads them.
    const dump = topology.spawn(host, 'sh', ['-c', 'exec tcpdump "$@" >"$0"', file,
      '-i', ifname, '-Q', 'in', '-n', '-e', '-tt', '-l', '--immediate-mode', '-B', '4096', '-s', '96',
      `ip src host ${vip} or arp src host ${vip}`,
    ], { label: `${host}:tcpdump` });
    const capture = new VipCapture(dump, subjects, file, output);
    try {
      // tcpdump prints this once the socket is bound and the filter attached, right before its loop.
      await dump.waitForLine((l) => l.startsWith(`listening on ${ifname},`), CAPTURE_READY_MS, 'stderr');
    } catch (e) {
      await capture.abort();
      throw new Error(`vip capture on ${host}:${ifname} did not start: ${(e as Error).message}`);
    }
    return capture;
  }

  /** Reads what tcpdump wrote since the last read (one read at a time); never rejects (stop() reports a failure). */
  private readMore(): Promise<void> {
    const next = this.reading.then(async () => {
      for (;;) {
        const { bytesRead } = await this.output.read(this.buf, 0, this.buf.length, this.offset);
        if (bytesRead === 0) break;
        this.offset += bytesRead;
        this.take(this.buf.subarray(0, bytesRead).toString('latin1'));
      }
    });
    this.reading = next.catch((err: unknown) => { this.readError ??= err as Error; });
    return this.reading;
  }

  private take(chunk: string): void {
    const parts = (this.partial + chunk).split('\n');
    this.partial = parts.pop()!;
    for (const l of parts) {
      if (this.lines.length >= CAPTURE_MAX_LINES) {
        this.overflow = true;
        continue;
      }
      this.lines.push(l);
      if (this.waiters.size > 0) {
        const p = parseCaptureLine(l, this.subjects);
        if (p !== undefined) for (const w of [...this.waiters]) w(p);
      }
    }
  }

  /** The packets captured so far. */
  packets(): VipPacket[] {
    return this.lines.map((l) => parseCaptureLine(l, this.subjects)).filter((p): p is VipPacket => p !== undefined);
  }

  /** Resolves with the first packet (already captured or to come) that `match` accepts; rejects after `timeoutMs` or if tcpdump exits. */
  waitForPacket(match: (p: VipPacket) => boolean, timeoutMs: number): Promise<VipPacket> {
    const seen = this.packets().find(match);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const done = (fn: () => void): void => { clearTimeout(timer); this.waiters.delete(onPacket); fn(); };
      const onPacket = (p: VipPacket): void => { if (match(p)) done(() => resolve(p)); };
      const timer = setTimeout(() => done(() => reject(new Error(`vip capture: no matching packet within ${timeoutMs} ms`))), timeoutMs);
      this.waiters.add(onPacket);
      void this.dump.exited.then(() => done(() => reject(new Error(`vip capture: tcpdump exited: ${this.dump.stderr.trim().slice(-500)}`))));
    });
  }

  /** Stops and reaps tcpdump; every packet captured. Rejects when the timeline may have gaps. */
  async stop(): Promise<VipCaptureResult> {
    const diedEarly = !this.dump.running;
    if (!diedEarly) await delay(CAPTURE_DRAIN_MS);
    await this.abort();
    const stderr = this.dump.stderr;
    // tcpdump's closing statistics (printed on SIGTERM): what it saw and what the kernel could not give it.
    const stat = (what: string): number | null => {
      const m = new RegExp(`^(\\d+) packets? ${what}$`, 'm').exec(stderr);
      return m ? Number(m[1]) : null;
    };
    const captured = stat('captured');
    const dropped = stat('dropped by kernel');
    const packets = this.packets();
    const problem = diedEarly ? 'tcpdump exited before the end of the drill'
      : this.readError ? `reading its output failed: ${this.readError.message}`
      : this.overflow ? `more than ${CAPTURE_MAX_LINES} lines`
      : captured === null || dropped === null ? 'tcpdump printed no statistics at its end'
      : dropped > 0 ? `the kernel dropped ${dropped} packets before tcpdump read them`
      : captured !== packets.length ? `tcpdump captured ${captured} packets but printed ${packets.length}`
      : null;
    if (problem !== null) throw new Error(`vip capture: ${problem}; stderr: ${stderr.trim().slice(-500) || '(empty)'}`);
    return { packets, captured: captured! };
  }

  /** Stops and reaps tcpdump, then reads the rest of its output and removes the file (idempotent); for error paths. */
  abort(): Promise<void> {
    this.stopped ??= (async () => {
      await this.dump.stop(CAPTURE_STOP_MS);
      clearInterval(this.tail);
      await this.readMore();
      await this.output.close();
      await rm(dirname(this.file), { recursive: true, force: true });
    })();
    return this.stopped;
  }
}

/**
 * Broadcast ARP requests for the vip from the router, as a router asks when its neighbour entry has
 * expired. Without a question nobody answers: this makes ARP *answering* observable, so a director whose
 * kernel still answers for a vip it should no longer own shows up (and, as in a real network, pulls the
 * router's traffic back to itself once the router's neighbour locktime has passed).
 *
 * iputils arping takes whole seconds as its interval, so `1000 / intervalMs` of them run staggered. Each
 * ends by itself after `maxMs` (bounded count); stop() ends them sooner.
 */
export class ArpProbe {
  private constructor(private readonly probes: BackgroundProcess[], private readonly timers: NodeJS.Timeout[]) {}

  static start(topology: Topology, host: string, ifname: string, source: string, vip: string, intervalMs: number, maxMs: number): ArpProbe {
    if (!(intervalMs >= 100 && intervalMs <= 1000 && 1000 % intervalMs === 0)) throw new Error(`arp probe: intervalMs must divide 1000 and be 100..1000 (got ${intervalMs})`);
    const count = Math.ceil(maxMs / 1000) + 1;
    const probe = new ArpProbe([], []);
    const spawnOne = (): void => {
      probe.probes.push(topology.spawn(host, 'arping', ['-b', '-q', '-I', ifname, '-s', source, '-i', '1', '-c', String(count), vip], { label: `${host}:arping` }));
    };
    for (let i = 0; i < 1000 / intervalMs; i++) {
      if (i === 0) spawnOne();
      else probe.timers.push(setTimeout(spawnOne, i * intervalMs));
    }
    return probe;
  }

  async stop(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    await Promise.all(this.probes.map((p) => p.stop(1000)));
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
