import type { Topology } from './netns.js';

/**
 * A SYN flood from spoofed sources, bounded in count and time: what a director's SYN defence is tested
 * against. Raw IPv4 packets from perl (no hping3 to install), each a bare SYN from one of 4096 addresses of
 * `sources` (a /20 the test routes back to the flooding namespace, where the SYN-ACKs die) and a varying port,
 * so no two packets share a connection tuple. Only addresses the test made: the target is a lab vip.
 */

/**
 * Where a test's spoofed SYNs come from: a /20 inside the lab's 198.18.0.0/15 that no host holds. The test
 * routes it on the director back to the flooding namespace, where the SYN-ACKs die.
 */
export const SPOOFED_SOURCES = { first: '198.18.96.0', prefix: '198.18.96.0/20' } as const;

export interface SynFloodOptions {
  /** The vip and port to flood. IPv4 only. */
  readonly target: { readonly address: string; readonly port: number };
  /** First address of the /20 the spoofed sources come from (e.g. 198.18.96.0). */
  readonly sources: string;
  /** At most this many SYNs... */
  readonly count: number;
  /** ...and for at most this long. */
  readonly maxSeconds: number;
  /** SYNs per second to pace the flood at (sent in bursts of 256); default: as fast as it can. */
  readonly ratePerSec?: number;
}

export interface SynFloodResult {
  readonly sent: number;
  /** Sends the kernel refused for lack of buffer (the flood outran the link); not counted in `sent`. */
  readonly refused: number;
  readonly seconds: number;
  /** CPU time the flood tool itself used (user + system), seconds. */
  readonly cpuSeconds: number;
}

/** A TcpExt counter of a host's namespace (/proc/net/netstat), or null when its kernel has no such counter. */
export async function tcpExtCounter(topology: Topology, host: string, name: string): Promise<number | null> {
  const lines = (await topology.exec(host, 'cat', ['/proc/net/netstat'])).stdout.split('\n').filter((l) => l.startsWith('TcpExt:'));
  const at = lines[0]?.split(/\s+/).indexOf(name) ?? -1;
  return at < 0 || lines[1] === undefined ? null : Number(lines[1].split(/\s+/)[at]);
}

export async function synFlood(topology: Topology, host: string, opts: SynFloodOptions): Promise<SynFloodResult> {
  if (!Number.isInteger(opts.count) || opts.count < 1 || opts.count > 10_000_000) throw new Error(`synFlood: count ${opts.count} is not from 1 to 10000000`);
  if (!(opts.maxSeconds > 0 && opts.maxSeconds <= 120)) throw new Error(`synFlood: maxSeconds ${opts.maxSeconds} is not from 0 to 120`);
  const rate = opts.ratePerSec ?? 0;
  if (!(rate >= 0 && rate <= 10_000_000)) throw new Error(`synFlood: ratePerSec ${rate} is not from 0 to 10000000`);
  const r = await topology.exec(host, 'perl', ['-e', SYN_FLOOD_SCRIPT, opts.target.address, String(opts.target.port), String(opts.count), String(opts.maxSeconds), opts.sources, String(rate)], {
    timeoutMs: (opts.maxSeconds + 30) * 1000,
  });
  const m = /^sent (\d+) refused (\d+) seconds ([\d.]+) cpu ([\d.]+)$/m.exec(r.stdout);
  if (r.code !== 0 || m === null) throw new Error(`synFlood on ${host} failed (exit ${r.code}): ${r.stderr.trim() || r.stdout.trim()}`);
  return { sent: Number(m[1]), refused: Number(m[2]), seconds: Number(m[3]), cpuSeconds: Number(m[4]) };
}

/** `perl -e SYN_FLOOD_SCRIPT DST PORT COUNT SECONDS SOURCE_BASE RATE`: prints `sent N refused R seconds S cpu C`. */
const SYN_FLOOD_SCRIPT = String.raw`use strict; use Socket qw(inet_aton sockaddr_in AF_INET SOCK_RAW); use Time::HiRes qw(time);
my ($dst, $dport, $count, $seconds, $base, $rate) = @ARGV;
socket(my $s, AF_INET, SOCK_RAW, 255) or die "raw socket: $!\n";
my $daddr = inet_aton($dst) or die "not an IPv4 address: $dst\n";
my $first = unpack('N', inet_aton($base));
my $to = sockaddr_in(0, $daddr);
my $start = time; my $deadline = $start + $seconds; my ($sent, $refused, $i) = (0, 0, 0);
sub csum { my $sum = 0; $sum += $_ for unpack('n*', $_[0]); $sum = ($sum >> 16) + ($sum & 0xffff) while $sum >> 16; return ~$sum & 0xffff; }
while ($sent < $count) {
  if (($i & 255) == 0) {
    my $now = time;
    last if $now > $deadline;
    if ($rate > 0) { my $wait = $start + $i / $rate - $now; select(undef, undef, undef, $wait) if $wait > 0; }
  }
  my $src = pack('N', $first + ($i & 4095));
  my $sport = 1024 + (($i >> 12) * 7 + $i) % 64000;
  # data offset 5 words, SYN; window 64240
  my $tcp = pack('nnNNnnnn', $sport, $dport, ($i * 2654435761) & 0xffffffff, 0, 0x5002, 64240, 0, 0);
  substr($tcp, 16, 2) = pack('n', csum($src . $daddr . pack('nn', 6, 20) . $tcp));
  # IP_HDRINCL (IPPROTO_RAW): the kernel fills in the id and the header checksum
  my $ip = pack('CCnnnCCn', 0x45, 0, 40, 0, 0x4000, 64, 6, 0) . $src . $daddr;
  $i++;
  if (send($s, $ip . $tcp, 0, $to)) { $sent++ } elsif ($!{ENOBUFS} || $!{EAGAIN}) { $refused++ } else { die "send: $!\n" }
}
my ($user, $system) = times;
printf "sent %d refused %d seconds %.3f cpu %.3f\n", $sent, $refused, time - $start, $user + $system;
`;
