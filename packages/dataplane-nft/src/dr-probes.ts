/**
 * The perl programs `lbadm doctor` runs on a director to check a dr vip's real servers (NftDataPlane's
 * kernelFacts): frames sent and read on a packet socket, because what they ask and what answers are not for
 * the director's own stack (an echo to the vip, its own address, at a real server's MAC; a neighbour
 * solicitation answered from another host). Each is `perl -e SCRIPT DEV ...`; DEV is the interface the
 * director reaches the real servers through.
 *
 * They share a start (packetSocket) and differ by family only in the packets they build and recognise.
 */

export type ProbeFamily = 4 | 6;

const ETHERTYPE: Readonly<Record<ProbeFamily, number>> = { 4: 0x0800, 6: 0x86dd };

/**
 * What the programs share (perl, after `my ($dev, ...) = @ARGV` and `use Time::HiRes qw(time)`): $idx and $mine
 * (the interface's index and MAC), $s (a packet socket bound to it for `ethertype`), and
 * - csum($data): the internet checksum;
 * - mac_bytes($text): a MAC as its 6 bytes;
 * - send_frame($to, $payload): an Ethernet frame of `ethertype` to MAC $to (6 bytes);
 * - listen_for($seconds, $on): calls $on with every frame the socket receives for up to $seconds, until it
 *   returns true.
 */
function packetSocket(ethertype: number): string {
  const type = `0x${ethertype.toString(16).padStart(4, '0')}`;
  return String.raw`my ($idx, $mine);
if (open my $f, '<', "/sys/class/net/$dev/ifindex") { $idx = 0 + <$f>; }
if (open my $f, '<', "/sys/class/net/$dev/address") { my $m = <$f>; chomp $m; $mine = pack 'H12', join '', split /:/, $m; }
die "no interface $dev\n" if !defined $idx || !defined $mine;
my $proto = unpack('S', pack('n', ${type}));
socket(my $s, 17, 3, $proto) or die "packet socket: $!\n";
bind($s, pack('S n i S C C a8', 17, ${type}, $idx, 0, 0, 0, '')) or die "bind: $!\n";
sub csum { my $d = shift; $d .= "\0" if length($d) % 2; my $c = 0; $c += $_ for unpack('n*', $d); $c = ($c >> 16) + ($c & 0xffff) while $c >> 16; return ~$c & 0xffff; }
sub mac_bytes { return pack 'H12', join '', split /:/, shift; }
sub send_frame {
  my ($to, $payload) = @_;
  send($s, $to . $mine . pack('n', ${type}) . $payload, 0, pack('S n i S C C a8', 17, ${type}, $idx, 0, 0, 6, $to)) or die "send: $!\n";
}
sub listen_for {
  my ($secs, $on) = @_;
  my $end = time + $secs;
  for (;;) {
    my $left = $end - time; return if $left <= 0;
    my $rin = ''; vec($rin, fileno($s), 1) = 1;
    return if !select(my $rout = $rin, undef, undef, $left);
    my $buf; recv($s, $buf, 2048, 0) or next;
    return if $on->($buf);
  }
}`;
}

/** The addresses of a probe as bytes ($sa: SRC, $va: VIP), checked to be of `family`. */
function addressBytes(family: ProbeFamily): string {
  const af = family === 4 ? 'AF_INET' : 'AF_INET6';
  return String.raw`my ($sa, $va) = (inet_pton(${af}, $src), inet_pton(${af}, $vip));
die "not IPv${family}: $src $vip\n" if !defined $sa || !defined $va;`;
}

/**
 * echo_packet($seq): an ICMP echo request from $sa to $va with this probe's $id, from the IP header on;
 * echo_reply($frame): the sequence number of an echo reply from the vip to this probe, undef for any other frame.
 */
const ECHO_PACKETS: Readonly<Record<ProbeFamily, string>> = {
  4: String.raw`sub echo_packet {
  my $icmp = pack('CCnnn', 8, 0, 0, $id, shift) . 'lbd doctor: is the vip here?';
  substr($icmp, 2, 2) = pack('n', csum($icmp));
  my $ip = pack('CCnnnCCn', 0x45, 0, 20 + length($icmp), 0, 0x4000, 64, 1, 0) . $sa . $va;
  substr($ip, 10, 2) = pack('n', csum($ip));
  return $ip . $icmp;
}
sub echo_reply {
  my $buf = shift;
  return undef if length($buf) < 42 || unpack('n', substr($buf, 12, 2)) != 0x0800;
  my $ihl = (unpack('C', substr($buf, 14, 1)) & 15) * 4;
  return undef if unpack('C', substr($buf, 23, 1)) != 1 || substr($buf, 26, 4) ne $va;
  my ($type, $code, $sum, $rid, $seq) = unpack('CCnnn', substr($buf, 14 + $ihl, 8));
  return $type == 0 && $rid == $id ? $seq : undef;
}`,
  6: String.raw`sub echo_packet {
  my $icmp = pack('CCnnn', 128, 0, 0, $id, shift) . 'lbd doctor: is the vip here?';
  substr($icmp, 2, 2) = pack('n', csum($sa . $va . pack('N', length $icmp) . pack('x3 C', 58) . $icmp));
  return pack('N n C C', 0x60000000, length $icmp, 58, 64) . $sa . $va . $icmp;
}
sub echo_reply {
  my $buf = shift;
  return undef if length($buf) < 62 || unpack('n', substr($buf, 12, 2)) != 0x86dd || unpack('C', substr($buf, 20, 1)) != 58 || substr($buf, 22, 16) ne $va;
  my ($type, $code, $sum, $rid, $seq) = unpack('CCnnn', substr($buf, 54, 8));
  return $type == 129 && $rid == $id ? $seq : undef;
}`,
};

/**
 * `perl -e vipEchoScript(F) DEV SRC VIP RS=MAC...`: an ICMP (IPv6: ICMPv6) echo from SRC to VIP in a frame to
 * each MAC on DEV (sequence numbers tell them apart), then up to 1.2 s of listening for echo replies from VIP;
 * prints `answered RS` for each real server whose reply came. A real server answers only if it holds the vip.
 * Exit non-zero with the reason on standard error otherwise.
 */
export function vipEchoScript(family: ProbeFamily): string {
  return String.raw`use strict; use Socket qw(AF_INET AF_INET6 inet_pton); use Time::HiRes qw(time);
my ($dev, $src, $vip, @targets) = @ARGV;
${addressBytes(family)}
${packetSocket(ETHERTYPE[family])}
my $id = $$ & 0xffff;
${ECHO_PACKETS[family]}
my %who;
for my $i (0 .. $#targets) {
  my ($rs, $mac) = split /=/, $targets[$i], 2;
  $who{$i + 1} = $rs;
  send_frame(mac_bytes($mac), echo_packet($i + 1));
}
my %seen;
listen_for(1.2, sub {
  my $seq = echo_reply(shift);
  $seen{$seq} = 1 if defined $seq && defined $who{$seq};
  return keys(%seen) == @targets;
});
print "answered $who{$_}\n" for sort keys %seen;
`;
}

/**
 * `perl -e NEIGHBOUR_SOLICIT_SCRIPT DEV SRC VIP`: IPv6's arping: a neighbour solicitation for VIP from SRC to
 * VIP's solicited-node multicast group on DEV (twice), then 1.2 s of listening for neighbour advertisements
 * of VIP; prints `answer MAC` (the advertiser's, lower case) for each host that answered. Exit non-zero
 * with the reason on standard error otherwise.
 */
export const NEIGHBOUR_SOLICIT_SCRIPT = String.raw`use strict; use Socket qw(AF_INET6 inet_pton); use Time::HiRes qw(time);
my ($dev, $src, $vip) = @ARGV;
${addressBytes(6)}
${packetSocket(ETHERTYPE[6])}
my $group = pack('H26', 'ff0200000000000000000001ff') . substr($va, 13, 3);
my $icmp = pack('CCnN', 135, 0, 0, 0) . $va . pack('CC', 1, 1) . $mine;
substr($icmp, 2, 2) = pack('n', csum($sa . $group . pack('N', length $icmp) . pack('x3 C', 58) . $icmp));
my $packet = pack('N n C C', 0x60000000, length $icmp, 58, 255) . $sa . $group . $icmp;
send_frame(pack('H6', '3333ff') . substr($va, 13, 3), $packet) for 1 .. 2;
my %seen;
listen_for(1.2, sub {
  my $buf = shift;
  return 0 if length($buf) < 78 || unpack('n', substr($buf, 12, 2)) != 0x86dd || unpack('C', substr($buf, 20, 1)) != 58;
  return 0 if unpack('C', substr($buf, 54, 1)) != 136 || substr($buf, 62, 16) ne $va || substr($buf, 6, 6) eq $mine;
  $seen{join ':', unpack('(H2)6', substr($buf, 6, 6))} = 1;
  return 0;
});
print "answer $_\n" for sort keys %seen;
`;
