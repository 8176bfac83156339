import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { DataPlaneError } from '@lbd/dataplane';
import { LineSession } from './line-session.js';

/*
 * The kernel lease's renewals straight to nf_tables over netlink, without `nft`.
 *
 * Why: a leader renews its lease after every confirmed beat (40 times a second with `fast`). Through
 * `nft -i` each renewal cost 5-9 ms of CPU: nft refreshes its cache of the whole ruleset (every table,
 * chain and set of every family, the data plane's included) whenever the ruleset's generation changed,
 * which every renewal itself does, and then lists the sentinel. Measured in the lab with `fast`: the
 * leader's `nft -i` used 24-36% of a core, at the election's real-time priority, ahead of everything at
 * normal priority (etcd in the lab). The same renewal as one netlink batch costs about 0.14 ms (2 000
 * renewals of three elements in 0.28 s here).
 *
 * A small perl program (perl-base is Essential in Debian; `Socket` and pack only, as ctnetlink.ts) holds a
 * NETLINK_NETFILTER socket. Each line on stdin is one transaction: words
 *
 *   A/<family>/<table>/<set>/<address>/<ms>   add the element with `timeout <ms> expires <ms>` (an existing
 *                                             element gets both: the remaining time is set, up or down)
 *   D/<family>/<table>/<set>/<address>        delete the element (ENOENT if it is not there)
 *
 * sent as one nfnetlink batch (NFNL_MSG_BATCH_BEGIN, one NFT_MSG_NEWSETELEM / NFT_MSG_DELSETELEM per word,
 * each with NLM_F_ACK, NFNL_MSG_BATCH_END): the kernel applies all of it or none, as nft does a line. These
 * are the messages `nft add element ... { A timeout Tms expires Tms }` sends (NLM_F_CREATE without
 * NLM_F_EXCL). The answer is one line: `ok`, or `failed <why>...` naming each refused word and the errno
 * text. A batch refused as a whole (EPERM without CAP_NET_ADMIN) is answered for its BATCH_BEGIN. Acks are
 * waited for at most 2 s (SO_RCVTIMEO). The program exits at EOF, so it never outlives the agent; spawned
 * from the election thread, it runs at that thread's real-time priority.
 */
export const LEASE_WRITER_SCRIPT = String.raw`
use strict; use Socket qw(AF_INET AF_INET6 SOL_SOCKET SO_RCVTIMEO inet_pton);
$| = 1;
socket(my $s, 16, 3, 12) or die "netlink socket: $!\n";
bind($s, pack('S x2 L L', 16, 0, 0)) or die "netlink bind: $!\n";
setsockopt($s, 270, 10, pack('i', 1));
setsockopt($s, SOL_SOCKET, SO_RCVTIMEO, pack('l! l!', 2, 0)) or die "setsockopt: $!\n";
my %FAMILY = (inet => 1, ip => 2, arp => 3, ip6 => 10);
my $seq = time() & 0xffffff;
sub nla { my $l = 4 + length $_[1]; return pack('S S', $l, $_[0]) . $_[1] . ("\0" x ((4 - $l % 4) % 4)); }
sub msg {
  my ($type, $flags, $family, $resid, $body) = @_;
  $seq = ($seq + 1) & 0xffffffff;
  return (pack('L S S L L', 20 + length $body, $type, $flags, $seq, 0) . pack('C C n', $family, 0, $resid) . $body, $seq);
}
while (my $line = <STDIN>) {
  my ($begin, $bseq) = msg(0x10, 1, 0, 10, '');
  my ($out, %want, $bad) = ($begin);
  for my $w (split ' ', $line) {
    my ($op, $fam, $table, $set, $addr, $ms) = split /\//, $w;
    my $f = $FAMILY{$fam // ''};
    my $key = inet_pton(($addr // '') =~ /:/ ? AF_INET6 : AF_INET, $addr // '');
    if (!defined $f || !defined $key || !defined $set || ($op ne 'A' && $op ne 'D') || ($op eq 'A' && ($ms // '') !~ /^\d+$/)) { $bad = "bad word $w"; last; }
    my $el = nla(0x8001, nla(1, $key));
    $el .= nla(4, pack('Q>', $ms)) . nla(5, pack('Q>', $ms)) if $op eq 'A';
    my ($m, $q) = msg($op eq 'A' ? 0x0a0c : 0x0a0e, $op eq 'A' ? 0x405 : 0x5, $f, 0, nla(1, "$table\0") . nla(2, "$set\0") . nla(0x8003, nla(0x8001, $el)));
    $out .= $m;
    $want{$q} = $w;
  }
  if (defined $bad || !%want) { print 'failed ', $bad // 'empty request', "\n"; next; }
  $out .= (msg(0x11, 1, 0, 10, ''))[0];
  if (!send($s, $out, 0, pack('S x2 L L', 16, 0, 0))) { print "failed send: $!\n"; next; }
  my @err;
  my $left = keys %want;
  while ($left > 0) {
    my $buf;
    if (!defined recv($s, $buf, 65536, 0)) { next if $!{EINTR}; push @err, "no answer from the kernel: $!"; last; }
    my $o = 0;
    while ($o + 20 <= length $buf) {
      my ($l, $type, undef, $sq) = unpack('L S S L', substr($buf, $o, 16));
      last if $l < 16;
      if ($type == 2) {
        my $e = -unpack('l', substr($buf, $o + 16, 4));
        if ($sq == $bseq) { local $! = $e; push @err, "batch: $!"; $left = 0; }
        elsif (exists $want{$sq}) { if ($e) { local $! = $e; push @err, "$want{$sq}: $!"; } delete $want{$sq}; $left--; }
      }
      $o += ($l + 3) & ~3;
    }
  }
  print @err ? "failed @err\n" : "ok\n";
}
`;

/**
 * One read of a named counter of an `inet` table, straight from nf_tables: `perl -e SCRIPT TABLE NAME`
 * sends NFT_MSG_GETOBJ (NFTA_OBJ_TABLE, NFTA_OBJ_NAME, NFTA_OBJ_TYPE counter) and prints `packets N bytes
 * M` from the answer's NFTA_OBJ_DATA (NFTA_COUNTER_PACKETS, NFTA_COUNTER_BYTES); an error answer prints
 * `failed <errno text>` and exits 1 (ENOENT: no such table or counter). Waits at most 2 s (SO_RCVTIMEO).
 */
export const LEASE_DROPS_SCRIPT = String.raw`
use strict; use Socket qw(SOL_SOCKET SO_RCVTIMEO);
my ($table, $name) = @ARGV;
socket(my $s, 16, 3, 12) or die "netlink socket: $!\n";
bind($s, pack('S x2 L L', 16, 0, 0)) or die "netlink bind: $!\n";
setsockopt($s, SOL_SOCKET, SO_RCVTIMEO, pack('l! l!', 2, 0)) or die "setsockopt: $!\n";
sub nla { my $l = 4 + length $_[1]; return pack('S S', $l, $_[0]) . $_[1] . ("\0" x ((4 - $l % 4) % 4)); }
my $body = pack('C C n', 1, 0, 0) . nla(1, "$table\0") . nla(2, "$name\0") . nla(3, pack('N', 1));
send($s, pack('L S S L L', 16 + length $body, 0x0a13, 1, 1, 0) . $body, 0, pack('S x2 L L', 16, 0, 0)) or die "send: $!\n";
while (1) {
  my $buf;
  if (!defined recv($s, $buf, 65536, 0)) { next if $!{EINTR}; print "failed no answer from the kernel: $!\n"; exit 1; }
  my $o = 0;
  while ($o + 16 <= length $buf) {
    my ($l, $type, undef, $sq) = unpack('L S S L', substr($buf, $o, 16));
    last if $l < 16;
    if ($sq == 1 && $type == 2) { local $! = -unpack('l', substr($buf, $o + 16, 4)); print "failed $!\n"; exit 1; }
    if ($sq == 1 && $type == 0x0a12) {
      my %c;
      my $at_o = $o + 20;
      while ($at_o + 4 <= $o + $l) {
        my ($al, $at) = unpack('S S', substr($buf, $at_o, 4));
        last if $al < 4;
        if (($at & 0x3fff) == 4) {
          my $in_o = $at_o + 4;
          while ($in_o + 4 <= $at_o + $al) {
            my ($bl, $bt) = unpack('S S', substr($buf, $in_o, 4));
            last if $bl < 4;
            $c{$bt & 0x3fff} = unpack('Q>', substr($buf, $in_o + 4, 8)) if $bl == 12;
            $in_o += ($bl + 3) & ~3;
          }
        }
        $at_o += ($al + 3) & ~3;
      }
      if (!defined $c{2}) { print "failed the answer holds no packet count\n"; exit 1; }
      print "packets $c{2} bytes ", $c{1} // 0, "\n";
      exit 0;
    }
    $o += ($l + 3) & ~3;
  }
}
`;

/** One word of a writer line (see LEASE_WRITER_SCRIPT). */
export type LeaseWord =
  | { readonly op: 'add'; readonly family: 'inet' | 'arp'; readonly table: string; readonly set: string; readonly address: string; readonly ms: number }
  | { readonly op: 'delete'; readonly family: 'inet' | 'arp'; readonly table: string; readonly set: string; readonly address: string };

/** A word's remaining time as written: whole ms, at least 1. */
export function leaseMs(ms: number): number {
  return Math.max(1, Math.floor(ms));
}

function formatLeaseWord(w: LeaseWord): string {
  const head = `${w.op === 'add' ? 'A' : 'D'}/${w.family}/${w.table}/${w.set}/${w.address}`;
  return w.op === 'add' ? `${head}/${leaseMs(w.ms)}` : head;
}

/** The writer could not take the request (not startable, or it died under it): nothing was applied. */
export class LeaseWriterUnavailable extends Error {}

/** Restarted at most this often after it ended (the caller's fallback covers the gap). */
const RESTART_AFTER_MS = 1000;
/** A request unanswered this long gives the writer up (the program's own acks wait at most 2 s). */
const ANSWER_TIMEOUT_MS = 2500;

/**
 * The long-lived writer process. A request the kernel refused throws a DataPlaneError naming each refused
 * word; a request the process could not take throws LeaseWriterUnavailable (the caller writes it another way).
 */
export class LeaseWriter {
  private readonly session: LineSession;

  constructor(spawnPerl: () => ChildProcessWithoutNullStreams, answerTimeoutMs = ANSWER_TIMEOUT_MS) {
    this.session = new LineSession(spawnPerl, 'the kernel lease writer', { restartAfterMs: RESTART_AFTER_MS, answerTimeoutMs });
  }

  /** Writes the words as one transaction (words computed by the caller right before this call). */
  async write(words: readonly LeaseWord[]): Promise<void> {
    if (words.length === 0) return;
    let answer: string;
    try {
      answer = await this.session.request(`${words.map(formatLeaseWord).join(' ')}\n`);
    } catch (e) {
      throw new LeaseWriterUnavailable((e as Error).message, { cause: e });
    }
    if (answer === 'ok') return;
    const detail = answer.replace(/^failed /, '');
    throw new DataPlaneError(/not permitted/i.test(detail) ? 'PermissionDenied' : 'Unknown', 'kernel lease write (netlink)', { detail });
  }

  /** Starts the process ahead of the first renewal: perl takes tens of ms to start, a takeover has none to spare. */
  warm(): void {
    this.session.warm();
  }

  close(): void {
    this.session.close();
  }
}
