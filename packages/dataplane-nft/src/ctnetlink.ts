import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { DataPlaneError, withProxyState, type Endpoint, type SeqAdjust, type SynProxyState, type ConnectionBinding, type ConnectionEvent, type ConnectionEventKind, type ConnectionIdentity, type SyncedConnection } from '@lbd/dataplane';
import type { ConntrackEntry } from './conntrack.js';
import { OneAtATime } from './one-at-a-time.js';

/*
 * ctnetlink without conntrack-tools: a small perl program (perl-base is Essential in Debian; `Socket` and
 * pack/unpack only) on a NETLINK_NETFILTER socket, for the two things conntrack 1.4.7 cannot do fast enough.
 * It runs through the table's CommandRunner (`perl -e CTNL_SCRIPT <mode> <bytes>`), so `ip netns exec` works.
 *
 * Both modes have a compiled twin, dist/lbd-ctnl (native/lbd-ctnl.c), which the connection table runs
 * where it was built (ConntrackConnectionTableOptions.ctnlHelper): the same protocol at a fraction of the
 * CPU. This program stays the fallback, and the reference the compiled one is tested against.
 *
 * Mode `events BYTES`: subscribes to NFNLGRP_CONNTRACK_NEW|UPDATE|DESTROY with SO_RCVBUFFORCE = BYTES (root
 * may exceed net.core.rmem_max; the kernel doubles it). `conntrack -E -b` sets the buffer of another socket,
 * so its event socket keeps the 208 KiB default and loses events in bursts of a few hundred new connections.
 * Lines on stdout, written once per burst of reads:
 *   R <rcvbuf>                              the subscription is live (SO_RCVBUF as the kernel set it)
 *   L ENOBUFS                               the kernel dropped events (one line per failed read)
 *   L TRUNCATED                             (lbd-ctnl only) an event was cut short: lost as well
 *   A <microseconds>                        (lbd-ctnl only) the events up to the next A line were read from
 *                                           the kernel, the first of them this long ago: lbd-ctnl lets events
 *                                           gather for 2 ms before it writes them (one wake-up of the agent
 *                                           per window, not per event), and the agent dates them by this
 *   <N|U|D> <injected 0|1> <tcp|udp> <orig src> <orig sport> <orig dst> <orig dport>
 *           <reply src> <reply sport> <reply dst> <reply dport> <state|-> <timeout s> <mark> <synproxy|-> <seqadj|->
 * N is a CT_NEW message with NLM_F_CREATE, U one without, D a CT_DELETE. injected = the message's nlmsg_pid
 * is not 0 (the netlink port of the program whose request caused it), the rule conntrack uses for
 * [USERSPACE]. state: the TCP state by conntrack-tools' names (9 = LISTEN, the kernel's SYN_SENT2), for udp
 * UNREPLIED / ASSURED / REPLIED from the status bits, `-` when the message has none. Entries with mark 0 and
 * other protocols are dropped in perl, except udp 127.0.0.1 → 127.0.0.1:9: watch's probe. synproxy is
 * CTA_SYNPROXY as `isn,its,tsoff`, seqadj CTA_SEQ_ADJ_ORIG and _REPLY as `pos,before,after,pos,before,after`
 * (a SYN-proxied connection's numbers: parseProxyFields); an event has them only when they changed. The
 * program exits on EOF on stdin, so it never outlives the agent.
 * lbd-ctnl only, `events BYTES keep-young`: the events of marked TCP handshakes (SYN_SENT, SYN_RECV, LISTEN)
 * are kept in lbd-ctnl, not written, and so is the destroy of an assured TCP connection in TIME_WAIT or
 * CLOSE (its update into that state was written). A line `Y` on stdin asks for the kept handshakes:
 *   Y <injected> tcp ...                    a kept handshake, its latest event line with the kind Y (then forgotten)
 *   K <count>                               the end of the answer
 *
 * Mode `write BYTES`: requests on stdin, one a line, in batches ended by a line `.`:
 *   D <tcp|udp> <src> <sport> <dst> <dport>                                   delete by original tuple
 *   X <tcp|udp> <src> <sport> <dst> <dport>                                   delete by reply tuple (after NAT:
 *                                                                               the real server, then the local address or client)
 *   U <tcp|udp> <src> <sport> <dst> <dport> <status> <timeout> <mark> <tcp state|-1> <synproxy|-> <seqadj|->
 *                                                                             update an entry
 *   I <tcp|udp> <src> <sport> <dst> <dport> <status> <timeout> <mark> <tcp state|-1>
 *     <dnat addr> <dnat port> <snat addr|-> <snat port|-> <synproxy|-> <seqadj|->  insert an entry with its binding
 * A delete is IPCTNL_MSG_CT_DELETE and an update IPCTNL_MSG_CT_NEW without NLM_F_CREATE (the kernel changes
 * the entry with that original tuple, or answers ENOENT); status 0 = leave the status bits (set bits can
 * only be added). An insert is IPCTNL_MSG_CT_NEW with NLM_F_CREATE | NLM_F_EXCL, both tuples (the reply one
 * before NAT) and CTA_NAT_DST (and CTA_NAT_SRC for fullnat): the kernel sets the binding up as its nat hooks
 * would, or answers EEXIST. Each is one hash lookup in the kernel, where `conntrack -D/-U` walk the whole
 * table (~70 ms a line with 20 000 entries) and `conntrack -R` stops at the first line it cannot make
 * without naming it. Requests go out up to 64 KiB per send(), each acked (NLM_F_ACK). One line answers a batch:
 *   R <done> <absent> <failed> <codes> <first error: "errno text" | ->
 * codes has one character per request, in order: + done, - absent (ENOENT), = there already (EEXIST),
 * ! failed ("." for none). Acks wait at most 5 s (SO_RCVTIMEO); a request without one is failed.
 * dist/lbd-ctnl speaks the same protocol in this mode too.
 *
 * Mode `dump` (its reference is `conntrack -L`, whose text lacks a SYN-proxied connection's numbers): one
 * netlink dump of the whole table, both families, then exit 0 (exit 1 with the reason on stderr otherwise):
 *   E <status> <tcp|udp> <orig src> <orig sport> <orig dst> <orig dport>
 *     <reply src> <reply sport> <reply dst> <reply dport> <state|-> <timeout s> <mark> <synproxy|-> <seqadj|->
 * for every tcp and udp entry, marked or not; status is CTA_STATUS (IPS_SEEN_REPLY 2, IPS_ASSURED 4).
 */
export const CTNL_SCRIPT = String.raw`
use strict; use warnings; use Socket qw(AF_INET AF_INET6 SOL_SOCKET SO_RCVBUF SO_RCVTIMEO MSG_DONTWAIT inet_ntop inet_pton);
my $mode = shift(@ARGV) // '';
my $bytes = 0 + (shift(@ARGV) // 16777216);
socket(my $s, 16, 3, 12) or die "socket: $!\n";
setsockopt($s, SOL_SOCKET, 33, pack('i', $bytes)) or setsockopt($s, SOL_SOCKET, SO_RCVBUF, pack('i', $bytes)) or die "setsockopt: $!\n";
bind($s, pack('S x2 L L', 16, 0, $mode eq 'events' ? 7 : 0)) or die "bind: $!\n";
my @TCP = qw(NONE SYN_SENT SYN_RECV ESTABLISHED FIN_WAIT CLOSE_WAIT LAST_ACK TIME_WAIT CLOSE LISTEN);
sub out { my $o = 0; while ($o < length $_[0]) { my $w = syswrite(STDOUT, $_[0], length($_[0]) - $o, $o); if (!defined $w) { next if $!{EINTR}; exit 0; } $o += $w; } }
sub attrs {
  my %a; my $o = 0; my $n = length $_[0];
  while ($o + 4 <= $n) { my ($l, $t) = unpack('S S', substr($_[0], $o, 4)); last if $l < 4; $a{$t & 0x3fff} = substr($_[0], $o + 4, $l - 4); $o += ($l + 3) & ~3; }
  return \%a;
}
sub tuple {
  my $t = attrs($_[0] // ''); my $ip = attrs($t->{1} // ''); my $p = attrs($t->{2} // '');
  my ($f, $x, $y) = defined $ip->{1} ? (AF_INET, $ip->{1}, $ip->{2}) : (AF_INET6, $ip->{3}, $ip->{4});
  return () unless defined $x && defined $y && defined $p->{1};
  return (unpack('C', $p->{1}), inet_ntop($f, $x), unpack('n', $p->{2} // "\0\0"), inet_ntop($f, $y), unpack('n', $p->{3} // "\0\0"));
}
sub event {
  my ($body, $msg, $flags, $pid) = @_;
  return entry($body, $msg == 2 ? 'D' : ($flags & 0x400) ? 'N' : 'U', $pid ? 1 : 0, 0);
}
sub entry {
  my ($body, $kind, $second, $dumped) = @_;
  my $a = attrs($body);
  my $mark = defined $a->{8} ? unpack('N', $a->{8}) : 0;
  my @o = tuple($a->{1});
  return '' unless @o && ($o[0] == 6 || $o[0] == 17);
  return '' unless $dumped || $mark || ($o[0] == 17 && $o[1] eq '127.0.0.1' && $o[3] eq '127.0.0.1' && $o[4] == 9);
  my @r = tuple($a->{2});
  return '' unless @r;
  my $status = defined $a->{3} ? unpack('N', $a->{3}) : 0;
  my $state = '-';
  if ($o[0] == 17) { $state = !($status & 2) ? 'UNREPLIED' : ($status & 4) ? 'ASSURED' : 'REPLIED'; }
  elsif (defined $a->{4}) { my $tcp = attrs(attrs($a->{4})->{1} // ''); $state = $TCP[unpack('C', $tcp->{1})] // '-' if defined $tcp->{1}; }
  $second = $status if $dumped;
  my $timeout = defined $a->{7} ? unpack('N', $a->{7}) : 0;
  my ($sp, $so, $sr) = (three($a->{24}), three($a->{15}), three($a->{16}));
  return join(' ', $kind, $second, $o[0] == 6 ? 'tcp' : 'udp', @o[1..4], @r[1..4], $state, $timeout, $mark, $sp, $so ne '-' && $sr ne '-' ? "$so,$sr" : '-') . "\n";
}
sub three { return '-' unless defined $_[0]; my $n = attrs($_[0]); return '-' if grep { !defined $n->{$_} || length $n->{$_} < 4 } 1..3; return join(',', map { unpack('N', $n->{$_}) } 1..3); }
if ($mode eq 'events') {
  my $got = unpack('i', getsockopt($s, SOL_SOCKET, SO_RCVBUF));
  out("R $got\n");
  my $rin = ''; vec($rin, fileno($s), 1) = 1; vec($rin, fileno(STDIN), 1) = 1;
  my $buf;
  while (1) {
    my $n = select(my $rout = $rin, undef, undef, undef);
    if ($n < 0) { next if $!{EINTR}; die "select: $!\n"; }
    if (vec($rout, fileno(STDIN), 1)) { my $r = sysread(STDIN, my $x, 4096); exit 0 unless $r; }
    next unless vec($rout, fileno($s), 1);
    my $text = '';
    for (my $i = 0; $i < 512; $i++) {
      if (!defined recv($s, $buf, 1 << 20, MSG_DONTWAIT)) {
        if ($!{ENOBUFS}) { $text .= "L ENOBUFS\n"; next; }
        last if $!{EAGAIN} || $!{EWOULDBLOCK} || $!{EINTR};
        die "recv: $!\n";
      }
      my $o = 0; my $len = length $buf;
      while ($o + 20 <= $len) {
        my ($l, $type, $flags, undef, $pid) = unpack('L S S L L', substr($buf, $o, 16));
        last if $l < 16 || $o + $l > $len;
        $text .= event(substr($buf, $o + 20, $l - 20), $type & 0xff, $flags, $pid) if $type >> 8 == 1 && ($type & 0xff) != 1;
        $o += ($l + 3) & ~3;
      }
    }
    out($text) if length $text;
  }
} elsif ($mode eq 'write') {
  setsockopt($s, 270, 10, pack('i', 1));
  setsockopt($s, SOL_SOCKET, SO_RCVTIMEO, pack('l! l!', 5, 0)) or die "setsockopt: $!\n";
  sub nla { my $l = 4 + length $_[1]; return pack('S S', $l, $_[0]) . $_[1] . ("\0" x ((4 - $l % 4) % 4)); }
  my ($seq, @codes, $first, $chunk, $base, $count) = (0);
  my $flush = sub {
    return unless $count;
    if (!send($s, $chunk, 0, pack('S x2 L L', 16, 0, 0))) { my $e = 0 + $!; $first //= "$e $!"; $codes[$base + $_] = '!' for 0 .. $count - 1; }
    else {
      my $left = $count; my $buf;
      while ($left > 0) {
        if (!defined recv($s, $buf, 1 << 20, 0)) {
          next if $!{EINTR};
          my $e = 0 + $!; $first //= "$e $!";
          for (0 .. $count - 1) { $codes[$base + $_] //= '!'; }
          last;
        }
        my $o = 0; my $len = length $buf;
        while ($o + 20 <= $len) {
          my ($l, $type, undef, $sq) = unpack('L S S L', substr($buf, $o, 16));
          last if $l < 16 || $o + $l > $len;
          if ($type == 2) {
            my $i = $sq - $seq + $count - 1;
            if ($i >= 0 && $i < $count && !defined $codes[$base + $i]) {
              my $err = -unpack('l', substr($buf, $o + 16, 4));
              if ($err == 0) { $codes[$base + $i] = '+'; }
              elsif ($err == 2) { $codes[$base + $i] = '-'; }
              elsif ($err == 17) { $codes[$base + $i] = '='; }
              else { $codes[$base + $i] = '!'; $! = $err; $first //= "$err $!"; }
              $left--;
            }
          }
          $o += ($l + 3) & ~3;
        }
      }
    }
    ($chunk, $count) = ('', 0);
  };
  ($chunk, $count, $base) = ('', 0, 0);
  while (my $line = <STDIN>) {
    chomp $line;
    if ($line eq '.') {
      $flush->();
      my $c = join('', map { $_ // '!' } @codes);
      out(sprintf("R %d %d %d %s %s\n", ($c =~ tr/+//), ($c =~ tr/-//), ($c =~ tr/!//), length($c) ? $c : '.', $first // '-'));
      (@codes, $first) = ();
      ($chunk, $count, $base) = ('', 0, 0);
      next;
    }
    my @f = split(/ /, $line);
    my ($op, $proto, $src, $sport, $dst, $dport, $status, $timeout, $mark, $state) = @f;
    my ($dnat, $dnatp, $snat, $snatp) = ($op // '') eq 'I' ? @f[10..13] : ();
    my ($sp, $sa) = ($op // '') eq 'I' ? @f[14, 15] : ($op // '') eq 'U' ? @f[10, 11] : ('-', '-');
    my @spv = ($sp // '') =~ /^(\d{1,10}),(\d{1,10}),(\d{1,10})$/; my @sav = ($sa // '') =~ /^(\d{1,10}),(\d{1,10}),(\d{1,10}),(\d{1,10}),(\d{1,10}),(\d{1,10})$/;
    @spv = () if grep { $_ > 4294967295 } @spv; @sav = () if grep { $_ > 4294967295 } @sav;
    my $f = ($src // '') =~ /:/ ? AF_INET6 : AF_INET;
    my ($x, $y) = (inet_pton($f, $src // ''), inet_pton($f, $dst // ''));
    my ($dn, $sn) = (inet_pton($f, $dnat // ''), ($snat // '-') eq '-' ? '' : inet_pton($f, $snat));
    my $p = ($proto // '') eq 'tcp' ? 6 : ($proto // '') eq 'udp' ? 17 : 0;
    my $del = $op eq 'D' || $op eq 'X';
    if (!defined $x || !defined $y || !$p || (!$del && $op ne 'U' && $op ne 'I') || (!$del && !defined $state)
        || ($op eq 'I' && (!defined $dn || !defined $sn || !defined $snatp))
        || (!$del && (!defined $sp || !defined $sa || ($sp ne '-' && (!@spv || $p != 6)) || ($sa ne '-' && (!@sav || $p != 6))))) {
      $flush->(); push @codes, '!'; $first //= "0 bad request: $line"; $base = @codes; next;
    }
    my $ipt = $f == AF_INET6 ? 3 : 1;
    my $tuple = sub { nla($_[0], nla(0x8001, nla($ipt, $_[1]) . nla($ipt + 1, $_[3])) . nla(0x8002, nla(1, pack('C', $p)) . nla(2, pack('n', $_[2])) . nla(3, pack('n', $_[4])))) };
    my $nt = $f == AF_INET6 ? 4 : 1;
    my $nat = sub { nla($_[0], nla($nt, $_[1]) . nla($nt + 1, $_[1]) . nla(0x8003, nla(1, pack('n', $_[2])) . nla(2, pack('n', $_[2])))) };
    my $body = pack('C C n', $f, 0, 0) . $tuple->($op eq 'X' ? 0x8002 : 0x8001, $x, $sport, $y, $dport);
    if ($op eq 'I') {
      $body .= $tuple->(0x8002, $y, $dport, $x, $sport) . $nat->(0x800d, $dn, $dnatp);
      $body .= $nat->(0x8006, $sn, $snatp) if length $sn;
    }
    if (!$del) {
      $body .= nla(3, pack('N', $status)) if $status;
      $body .= nla(7, pack('N', $timeout)) . nla(8, pack('N', $mark));
      $body .= nla(0x8004, nla(0x8001, nla(1, pack('C', $state)))) if $state >= 0;
      $body .= nla(0x8018, join('', map { nla($_ + 1, pack('N', $spv[$_])) } 0..2)) if @spv;
      $body .= nla(0x800f, join('', map { nla($_ + 1, pack('N', $sav[$_])) } 0..2)) . nla(0x8010, join('', map { nla($_ - 2, pack('N', $sav[$_])) } 3..5)) if @sav;
    }
    my $len = 16 + length $body;
    $flush->() if length($chunk) + $len > 65536;
    $base = @codes if !$count;
    $chunk .= pack('L S S L L', $len, $del ? 0x102 : 0x100, $op eq 'I' ? 0x605 : 5, ++$seq, 0) . $body; $count++; push @codes, undef;
  }
} elsif ($mode eq 'dump') {
  # IPCTNL_MSG_CT_GET with NLM_F_REQUEST | NLM_F_DUMP, family AF_UNSPEC: every entry of both families.
  send($s, pack('L S S L L', 20, 0x101, 0x301, 1, 0) . pack('C C n', 0, 0, 0), 0, pack('S x2 L L', 16, 0, 0)) or die "send: $!\n";
  my $buf;
  while (1) {
    if (!defined recv($s, $buf, 1 << 20, 0)) { next if $!{EINTR}; die "recv: $!\n"; }
    my ($o, $len, $text) = (0, length $buf, '');
    while ($o + 16 <= $len) {
      my ($l, $type) = unpack('L S', substr($buf, $o, 6));
      last if $l < 16 || $o + $l > $len;
      if ($type == 3) { out($text); exit 0; }
      if ($type == 2) { my $err = -unpack('l', substr($buf, $o + 16, 4)); if ($err) { $! = $err; die "dump: $!\n"; } }
      $text .= entry(substr($buf, $o + 20, $l - 20), 'E', 0, 1) if $type == 0x100;
      $o += ($l + 3) & ~3;
    }
    out($text);
  }
} else { die "usage: perl -e SCRIPT events BYTES | write BYTES | dump\n"; }
`;

/** conntrack-tools' names of the kernel's TCP states, by number (9 is the kernel's SYN_SENT2). */
export const TCP_STATE_NAMES = ['NONE', 'SYN_SENT', 'SYN_RECV', 'ESTABLISHED', 'FIN_WAIT', 'CLOSE_WAIT', 'LAST_ACK', 'TIME_WAIT', 'CLOSE', 'LISTEN'];
const IPS_SEEN_REPLY = 2;
const IPS_ASSURED = 4;
/** Part of every status an update sends: the kernel refuses (EBUSY) a status that would clear it. */
const IPS_CONFIRMED = 8;

/**
 * The connection conntrack's entry stands for: original = client → vip, reply = realServer → (local address | client).
 * In nat mode the real server answers the client itself; in fullnat, the local address the director chose.
 */
export function connectionOf(
  protocol: SyncedConnection['protocol'], original: { src: Endpoint; dst: Endpoint }, reply: { src: Endpoint; dst: Endpoint },
  rest: Pick<SyncedConnection, 'mark' | 'state' | 'timeoutSec' | 'synProxy' | 'seqAdjust'>,
): SyncedConnection {
  const back = reply.dst;
  const nat = back.address === original.src.address && back.port === original.src.port;
  return withProxyState<SyncedConnection>({
    protocol, client: original.src, vip: original.dst, realServer: reply.src, localAddress: nat ? null : back, mark: rest.mark, state: rest.state, timeoutSec: rest.timeoutSec,
  }, rest);
}

/** The status bits a connection's state implies: an unreplied connection has none (conntrack shows it [UNREPLIED]). */
function impliedStatus(f: Pick<SyncedConnection, 'protocol' | 'state'>): { readonly replied: boolean; readonly assured: boolean } {
  const replied = f.protocol === 'tcp' ? f.state !== 'SYN_SENT' && f.state !== 'NONE' : f.state !== 'UNREPLIED';
  const assured = f.protocol === 'tcp' ? replied && f.state !== 'SYN_RECV' : f.state === 'ASSURED';
  return { replied, assured };
}

export type EventLine =
  | { readonly type: 'ready'; readonly rcvbufBytes: number }
  | { readonly type: 'loss'; readonly reason: string }
  /** The events that follow were read this long before the line arrived. */
  | { readonly type: 'age'; readonly ageMs: number }
  /** Every event line; mark 0 only for watch's probe (the caller drops those). */
  | { readonly type: 'event'; readonly event: ConnectionEvent }
  /** lbd-ctnl keep-young's answer to `Y`: a handshake it kept (as an update), then `kept` saying how many there were. */
  | { readonly type: 'young'; readonly event: ConnectionEvent }
  | { readonly type: 'kept'; readonly count: number };

const KINDS: Record<string, ConnectionEventKind> = { N: 'new', U: 'update', D: 'destroy', Y: 'update' };

const U32 = /^\d{1,10}$/;
const NO_PROXY: Pick<SyncedConnection, 'synProxy' | 'seqAdjust'> = Object.freeze({});

/**
 * The two SYN-proxy fields of an event or dump line: `isn,its,tsoff` (CTA_SYNPROXY; all zero, as on every
 * entry ctnetlink made, is none) and `opos,obefore,oafter,rpos,rbefore,rafter` (CTA_SEQ_ADJ_ORIG and _REPLY),
 * each `-` when the message had none. undefined: not such fields.
 */
export function parseProxyFields(synProxy: string, seqAdjust: string): Pick<SyncedConnection, 'synProxy' | 'seqAdjust'> | undefined {
  // Nearly every connection: no SYN proxy (one object for all of them, none made per event).
  if (seqAdjust === '-' && (synProxy === '-' || synProxy === '0,0,0')) return NO_PROXY;
  const nums = (text: string, n: number): number[] | null => {
    const t = text.split(',');
    return t.length === n && t.every((x) => U32.test(x) && Number(x) <= 0xffffffff) ? t.map(Number) : null;
  };
  const out: { synProxy?: SynProxyState; seqAdjust?: SeqAdjust } = {};
  if (synProxy !== '-') {
    const v = nums(synProxy, 3);
    if (!v) return undefined;
    if (v.some((x) => x !== 0)) out.synProxy = { isn: v[0]!, its: v[1]!, tsoff: v[2]! };
  }
  if (seqAdjust !== '-') {
    const v = nums(seqAdjust, 6);
    if (!v) return undefined;
    out.seqAdjust = {
      original: { correctionPos: v[0]!, offsetBefore: v[1]!, offsetAfter: v[2]! },
      reply: { correctionPos: v[3]!, offsetBefore: v[4]!, offsetAfter: v[5]! },
    };
  }
  return out;
}

/** The two SYN-proxy fields of a `write` request (as parseProxyFields reads them); `- -` for a connection without. */
export function renderProxyFields(f: Pick<SyncedConnection, 'synProxy' | 'seqAdjust'>): string {
  const sp = f.synProxy ? `${f.synProxy.isn},${f.synProxy.its},${f.synProxy.tsoff}` : '-';
  const a = f.seqAdjust;
  const sa = a ? [a.original, a.reply].map((d) => `${d.correctionPos},${d.offsetBefore},${d.offsetAfter}`).join(',') : '-';
  return `${sp} ${sa}`;
}

/** One line of CTNL_SCRIPT's `events` mode (see the top of this file); null for anything else. */
export function parseEventLine(line: string, seenAtMs: number): EventLine | null {
  const t = line.split(' ');
  if (t[0] === 'R' && t.length === 2) return { type: 'ready', rcvbufBytes: Number(t[1]) };
  if (t[0] === 'A' && t.length === 2) {
    const us = Number(t[1]);
    return Number.isFinite(us) && us >= 0 ? { type: 'age', ageMs: us / 1000 } : null;
  }
  if (t[0] === 'L') return { type: 'loss', reason: t.slice(1).join(' ') || 'loss' };
  if (t[0] === 'K' && t.length === 2) return U32.test(t[1]!) ? { type: 'kept', count: Number(t[1]) } : null;
  const kind = KINDS[t[0] ?? ''];
  if (!kind || t.length !== 16) return null;
  const protocol = t[2];
  if (protocol !== 'tcp' && protocol !== 'udp') return null;
  const proxy = parseProxyFields(t[14]!, t[15]!);
  if (!proxy) return null;
  const ep = (i: number): Endpoint => ({ address: t[i]!, port: Number(t[i + 1]) });
  const connection = connectionOf(protocol, { src: ep(3), dst: ep(5) }, { src: ep(7), dst: ep(9) }, {
    mark: Number(t[13]), state: t[11] === '-' ? '' : t[11]!, timeoutSec: Number(t[12]), synProxy: proxy.synProxy, seqAdjust: proxy.seqAdjust,
  });
  return { type: t[0] === 'Y' ? 'young' : 'event', event: { kind, connection, injected: t[1] === '1', seenAtMs } };
}

/**
 * One E line of lbd-ctnl's `dump` mode, as `conntrack -L` reads it (parseConntrackLine); null for anything else.
 * A udp entry's state comes from its status bits, as conntrack's listing gives it.
 */
export function parseDumpLine(line: string): ConntrackEntry | null {
  const t = line.split(' ');
  if (t[0] !== 'E' || t.length !== 16) return null;
  const protocol = t[2];
  if (protocol !== 'tcp' && protocol !== 'udp') return null;
  const proxy = parseProxyFields(t[14]!, t[15]!);
  if (!proxy) return null;
  const status = Number(t[1]);
  const unreplied = (status & IPS_SEEN_REPLY) === 0;
  const assured = (status & IPS_ASSURED) !== 0;
  const ep = (i: number): Endpoint => ({ address: t[i]!, port: Number(t[i + 1]) });
  return withProxyState<ConntrackEntry>({
    protocol, state: protocol === 'udp' ? (unreplied ? 'UNREPLIED' : assured ? 'ASSURED' : 'REPLIED') : t[11] === '-' ? '' : t[11]!,
    expiresInSec: Number(t[12]), unreplied, assured, mark: Number(t[13]),
    original: { src: ep(3), dst: ep(5) }, reply: { src: ep(7), dst: ep(9) },
  }, proxy);
}

/** Every entry of a `dump` run's output (lines other than E lines are skipped). */
export function parseDump(output: string): ConntrackEntry[] {
  const out: ConntrackEntry[] = [];
  for (const line of output.split('\n')) {
    const e = parseDumpLine(line);
    if (e) out.push(e);
  }
  return out;
}

const tupleFields = (f: ConnectionIdentity): string => `${f.protocol} ${f.client.address} ${f.client.port} ${f.vip.address} ${f.vip.port}`;

/** The status an update or insert sends for these bits: CONFIRMED always (the kernel refuses, EBUSY, a status that would clear it). */
function statusValue(replied: boolean, assured: boolean): number {
  return replied ? IPS_CONFIRMED | IPS_SEEN_REPLY | (assured ? IPS_ASSURED : 0) : 0;
}

/**
 * A `write` request that inserts the connection's entry with its NAT binding (the real server as DNAT, the
 * local address as SNAT in fullnat), so the kernel translates the connection's next packet the same way.
 */
export function renderInsertRequest(f: SyncedConnection): string {
  const { replied, assured } = impliedStatus(f);
  const state = f.protocol === 'tcp' ? TCP_STATE_NAMES.indexOf(f.state) : -1;
  const snat = f.localAddress ? `${f.localAddress.address} ${f.localAddress.port}` : '- -';
  return `I ${tupleFields(f)} ${statusValue(replied, assured)} ${Math.ceil(f.timeoutSec)} ${f.mark} ${state} ${f.realServer.address} ${f.realServer.port} ${snat} ${renderProxyFields(f)}`;
}

/** A `write` request that deletes the connection's entry. */
export function renderDeleteRequest(f: ConnectionIdentity): string {
  return `D ${tupleFields(f)}`;
}

/** A `write` request that deletes the entry with this connection's reply tuple: this binding's entry, and no other. */
export function renderDeleteBindingRequest(f: ConnectionBinding): string {
  const to = f.localAddress ?? f.client;
  return `X ${f.protocol} ${f.realServer.address} ${f.realServer.port} ${to.address} ${to.port}`;
}

/**
 * A `write` request that sets timeout, mark and (tcp) state of the connection's entry, and adds the status bits its
 * state implies. The kernel refuses (EBUSY) a status without a bit the entry has (SEEN_REPLY and ASSURED can
 * only be set), so the bits of the kernel's entry as last dumped are sent too: a state further back than the
 * kernel's (ESTABLISHED → SYN_RECV) changes the state and leaves the bits.
 */
export function renderUpdateRequest(f: SyncedConnection, kernel: SyncedConnection | null = null): string {
  const want = impliedStatus(f);
  const has = kernel ? impliedStatus(kernel) : { replied: false, assured: false };
  const status = statusValue(want.replied || has.replied, want.assured || has.assured);
  const state = f.protocol === 'tcp' ? TCP_STATE_NAMES.indexOf(f.state) : -1;
  return `U ${tupleFields(f)} ${status} ${Math.ceil(f.timeoutSec)} ${f.mark} ${state} ${renderProxyFields(f)}`;
}

export interface WriteResult {
  readonly done: number;
  readonly absent: number;
  readonly failed: number;
  /** One per request, in order: '+' done, '-' absent (ENOENT), '=' there already (EEXIST), '!' failed. */
  readonly codes: string;
  /** `errno text` of the first failure, or null. */
  readonly firstError: string | null;
}

/** The `R` line that answers a `write` batch; null for anything else. */
export function parseWriteResult(line: string): WriteResult | null {
  const m = /^R (\d+) (\d+) (\d+) ([-+=!.]+) (.*)$/.exec(line);
  if (!m) return null;
  return { done: Number(m[1]), absent: Number(m[2]), failed: Number(m[3]), codes: m[4] === '.' ? '' : m[4]!, firstError: m[5] === '-' ? null : m[5]! };
}

/** The DataPlaneError for a helper that died or could not start, from what it printed on stderr. */
export function helperError(op: string, stderr: string, what: string): DataPlaneError {
  const detail = stderr.trim() || `${what} exited`;
  if (/command not found|ENOENT|exec of "perl" failed|No such file/.test(detail)) {
    return new DataPlaneError('CommandMissing', op, { detail: 'perl not found: install perl-base' });
  }
  if (/not permitted|permission denied|must be root/i.test(detail)) {
    return new DataPlaneError('PermissionDenied', op, { detail: `${what}: ${detail} (lbd-agent needs CAP_NET_ADMIN)` });
  }
  return new DataPlaneError('Unknown', op, { detail: `${what}: ${detail}` });
}

/** Requests rendered and written at a time by a BatchWriter (about 100 KiB of inserts). */
export const WRITE_CHUNK = 1024;

/** Requests [from, to) of a batch as the lines a writer sends: rendered just before they go, so none outlives its chunk. */
export function renderChunk(from: number, to: number, render: (i: number) => string): string {
  let text = '';
  for (let i = from; i < to; i++) text += `${render(i)}\n`;
  return text;
}

/** What carries a connection table's write batches to the kernel: the helper (CtnlWriter) or the addon (InProcessCtnlWriter). */
export interface BatchWriter {
  /** Sends `count` requests as one batch, `render(i)` giving request i; resolves with the batch's answer. */
  run(count: number, render: (i: number) => string): Promise<WriteResult>;
  close(): Promise<void>;
}

/**
 * One long-lived helper in `write` mode (lbd-ctnl or CTNL_SCRIPT, as `start` makes it), started on first use
 * and ended (EOF on its stdin) after idleMs without a batch, or by close(). Batches run one at a time.
 */
export class CtnlWriter implements BatchWriter {
  private child: ChildProcessWithoutNullStreams | null = null;
  private exited: Promise<void> = Promise.resolve();
  private waiting: { resolve: (r: WriteResult) => void; reject: (e: Error) => void } | null = null;
  private stderr = '';
  private idleTimer: NodeJS.Timeout | null = null;
  private readonly turns = new OneAtATime();

  constructor(private readonly startHelper: () => ChildProcessWithoutNullStreams, private readonly opts: { readonly idleMs: number; readonly timeoutMs: (requests: number) => number }) {}

  /**
   * Sends `count` requests as one batch, rendered as they are written: `render(i)` gives request i. Resolves with
   * the batch's result, rejects when the helper fails or is too slow.
   */
  run(count: number, render: (i: number) => string): Promise<WriteResult> {
    return this.turns.run(() => this.runNow(count, render));
  }

  private async runNow(count: number, render: (i: number) => string): Promise<WriteResult> {
    if (count === 0) return { done: 0, absent: 0, failed: 0, codes: '', firstError: null };
    if (this.idleTimer) { clearTimeout(this.idleTimer); this.idleTimer = null; }
    const child = this.child ?? this.start();
    const timeoutMs = this.opts.timeoutMs(count);
    try {
      return await new Promise<WriteResult>((resolve, reject) => {
        const timer = setTimeout(() => {
          this.waiting = null;
          reject(new DataPlaneError('Unknown', 'apply', { detail: `ctnetlink helper: no answer to ${count} request(s) within ${timeoutMs} ms` }));
          child.kill('SIGKILL');
        }, timeoutMs);
        this.waiting = {
          resolve: (r) => { clearTimeout(timer); resolve(r); },
          reject: (e) => { clearTimeout(timer); reject(e); },
        };
        this.feed(child, count, render).catch((err: unknown) => {
          // A request that cannot be rendered: the batch is cut short, so the helper goes (the next batch starts
          // another) and the batch fails with the reason.
          if (this.child === child) this.child = null;
          child.kill('SIGKILL');
          this.waiting?.reject(err instanceof Error ? err : new Error(String(err)));
        });
      });
    } finally {
      this.waiting = null;
      if (this.child) {
        this.idleTimer = setTimeout(() => {
          // Forgotten at once: a batch from now on starts a new helper rather than write to one that is ending.
          const idle = this.child;
          this.idleTimer = null;
          this.child = null;
          idle?.stdin.end();
        }, this.opts.idleMs);
        this.idleTimer.unref();
      }
    }
  }

  /**
   * Writes a batch's requests a chunk at a time, each rendered just before it is written, waiting for the pipe
   * when it is full: the helper and the kernel work on one chunk while the next is rendered, and no request's
   * text outlives its chunk. (Rendered whole and kept until written, 100 000 inserts cost this process several
   * times as much, most of it the garbage collector moving strings that lived too long: docs/kernel-io.md.)
   */
  private async feed(child: ChildProcessWithoutNullStreams, count: number, render: (i: number) => string): Promise<void> {
    for (let from = 0; from < count; from += WRITE_CHUNK) {
      const to = Math.min(count, from + WRITE_CHUNK);
      let text = renderChunk(from, to, render);
      if (to === count) text += '.\n';
      if (child.stdin.write(text) || to === count) continue;
      // Full: wait until it drains, or for the helper's end (its close rejects the batch).
      const gone = await new Promise<boolean>((resolve) => {
        const drained = (): void => { child.off('close', closed); resolve(false); };
        const closed = (): void => { child.stdin.off('drain', drained); resolve(true); };
        child.stdin.once('drain', drained);
        child.once('close', closed);
      });
      if (gone) return;
    }
  }

  private start(): ChildProcessWithoutNullStreams {
    const child = this.startHelper();
    this.child = child;
    this.stderr = '';
    this.exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
    let partial = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        const r = parseWriteResult(line);
        if (r) this.waiting?.resolve(r);
      }
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { this.stderr = `${this.stderr}${d}`.slice(-2000); });
    child.stdin.on('error', () => { /* the helper died: reported by 'close' */ });
    child.on('error', (err) => { this.stderr += `${String(err)}\n`; });
    child.once('close', (code, signal) => {
      if (this.child !== child) return; // ended for being idle
      this.child = null;
      if (this.idleTimer) { clearTimeout(this.idleTimer); this.idleTimer = null; }
      this.waiting?.reject(helperError('apply', this.stderr, `ctnetlink helper exited (${signal ?? `code ${String(code)}`})`));
    });
    return child;
  }

  /** Ends the helper (if running) and waits for it to exit. */
  async close(): Promise<void> {
    if (this.idleTimer) { clearTimeout(this.idleTimer); this.idleTimer = null; }
    const child = this.child;
    if (!child) return;
    child.stdin.end();
    const killer = setTimeout(() => child.kill('SIGKILL'), 1000);
    await this.exited;
    clearTimeout(killer);
  }
}
