import { addressToBigInt, bigIntToAddress, familyOf, hostPort, serviceKey, type AddressRange, type Config, type RealServer, type Service, type Severity } from '@lbd/config';
import type { ArpProbe, Connection, Endpoint, KernelFacts } from '@lbd/dataplane';

/**
 * `lbadm doctor`'s judgement: known ways a director fails silently, recognised from kernel facts and
 * conntrack. Pure (config, facts, connections in; findings out), so every rule is a table-driven test;
 * gathering the facts is the data plane's job. Every finding names the thing, the evidence and the fix;
 * a check that finds nothing wrong says so once, so "ok" means "checked", not "not looked at".
 */

export type CheckId = 'nat-return-path' | 'ip-forward' | 'rp-filter' | 'conntrack-table' | 'fullnat-ports' | 'real-server-reachable' | 'own-address' | 'etcd-tls' | 'dr-arp' | 'dr-vip';

export interface Finding {
  readonly severity: Severity;
  readonly check: CheckId;
  /** The thing the finding is about: a real server in a service, a sysctl. */
  readonly subject: string;
  /** What is wrong with the evidence, or for `ok` what was checked. */
  readonly problem: string;
  /** What to do; empty for `ok`. */
  readonly fix: string;
}

/** Thresholds, named so the tests and the messages agree with the code. */
export const CONNTRACK_WARN = 0.8;
export const CONNTRACK_ERROR = 0.95;
export const PORTS_WARN = 0.5;
export const PORTS_ERROR = 0.9;

/**
 * Endpoints whose reachability doctor wants probed: the real servers of TCP services. The data plane's
 * probe is a TCP connect, which says nothing about a UDP server (a refused connect to a port that only
 * speaks UDP looks like a dead host), so UDP real servers are not probed.
 */
export function probeTargets(config: Config): Endpoint[] {
  const seen = new Map<string, Endpoint>();
  for (const svc of config.services) {
    if (svc.protocol !== 'tcp') continue;
    for (const rs of svc.realServers) seen.set(hostPort(rs.address, rs.port), { address: rs.address, port: rs.port });
  }
  return [...seen.values()];
}

/** The dr vips whose neighbours doctor asks about (ARP for IPv4, neighbour solicitation for IPv6), each with the real servers it is asked towards. */
export function arpProbes(config: Config): ArpProbe[] {
  const byVip = new Map<string, Set<string>>();
  for (const svc of config.services) {
    if (svc.mode !== 'dr') continue;
    const set = byVip.get(svc.vip) ?? new Set<string>();
    for (const rs of svc.realServers) set.add(rs.address);
    byVip.set(svc.vip, set);
  }
  return [...byVip].map(([vip, rs]) => ({ vip, realServers: [...rs] }));
}

export function diagnose(config: Config, facts: KernelFacts, connections: readonly Connection[]): Finding[] {
  return [
    ...checkNatReturnPath(config, facts, connections),
    ...checkForwarding(config, facts),
    ...checkRpFilter(facts),
    ...checkConntrackTable(facts),
    ...checkFullnatPorts(config, facts, connections),
    ...checkReachability(config, facts),
    ...checkOwnAddresses(config, facts),
    ...checkEtcdTls(config),
    ...checkDrArp(config, facts),
    ...checkDrVip(config, facts),
  ];
}

/**
 * (j) A dr real server receives the vip's packets unchanged, so it must hold the vip (on a loopback): one that
 * does not drops them all, while its health checks (to its own address) pass.
 */
function checkDrVip(config: Config, facts: KernelFacts): Finding[] {
  const dr = config.services.filter((s) => s.mode === 'dr');
  const out: Finding[] = [];
  for (const e of facts.vipOnRealServer) {
    if (e.answered === true) continue;
    const owner = dr.find((s) => s.vip === e.vip && s.realServers.some((r) => r.address === e.realServer));
    const rs = owner?.realServers.find((r) => r.address === e.realServer);
    const subject = owner && rs ? rsSubject(owner, rs) : `real server ${e.realServer}`;
    out.push(e.answered === false
      ? {
        severity: 'error', check: 'dr-vip', subject,
        problem: `did not answer an ICMP echo to the dr vip ${e.vip} sent to its MAC (as the director sends it the vip's packets): it does not hold the vip, so it drops them (or it drops ICMP echo)`,
        fix: familyOf(e.vip) === 6 ? `on that real server: ip -6 addr add ${e.vip}/128 dev lo (on lo only: there it answers no neighbour solicitation for it)`
          : `on that real server: ip addr add ${e.vip}/32 dev lo, with sysctl -w net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2`,
      }
      : {
        severity: 'warning', check: 'dr-vip', subject,
        problem: `could not be asked whether it holds the dr vip ${e.vip}: ${e.why ?? 'no answer'}`,
        fix: 'a dr real server must be on a network the director is directly attached to; check its address and the director\'s routes',
      });
  }
  if (out.length === 0) {
    const n = facts.vipOnRealServer.length;
    out.push(ok('dr-vip', 'dr real servers', dr.length === 0 ? 'no service uses dr mode'
      : `all ${n} real server${n === 1 ? '' : 's'} of dr vips answered for their vip`));
  }
  return out;
}

/**
 * (i) A dr real server holds the vip on a loopback and must not answer ARP for it: one that does tells its
 * network (a router there, the other hosts) that it is the vip, and takes the vip's traffic from the directors.
 */
function checkDrArp(config: Config, facts: KernelFacts): Finding[] {
  const dr = config.services.filter((s) => s.mode === 'dr');
  const out: Finding[] = [];
  for (const a of facts.vipArpAnswers) {
    const owners = dr.filter((s) => s.vip === a.vip);
    const rs = owners.flatMap((s) => s.realServers.map((r) => ({ s, r }))).find(({ r }) => r.address === a.address);
    const who = rs ? rsSubject(rs.s, rs.r) : a.address !== null ? `host ${a.address}` : `host with MAC ${a.mac}`;
    // Not a real server of the vip: another director that holds the vip answers so too (unless its arp_ignore
    // is 1), which is harmless; anything else is worth a look, not an alarm.
    const v6 = familyOf(a.vip) === 6;
    out.push({
      severity: rs ? 'error' : 'warning', check: 'dr-arp', subject: who,
      problem: `answers ${v6 ? 'neighbour solicitations' : 'ARP'} for the dr vip ${a.vip} on ${a.ifname} (MAC ${a.mac}): a router or host on that network may send the vip's traffic to it instead of a director${rs ? '' : ' (if it is another director holding the vip, that is harmless)'}`,
      fix: v6 ? `on that real server: move the vip to lo (ip -6 addr del ${a.vip}/128 dev <the interface that has it>; ip -6 addr add ${a.vip}/128 dev lo): Linux answers a neighbour solicitation only for an address of the interface it came in on`
        : 'on that real server: sysctl -w net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2 (and put them in /etc/sysctl.d/), and keep the vip on lo only (ip addr add VIP/32 dev lo)',
    });
  }
  if (out.length === 0) {
    const probes = arpProbes(config);
    const v4 = probes.filter((p) => familyOf(p.vip) === 4).length;
    const v6 = probes.length - v4;
    const asked = [v4 > 0 ? `ARP for the ${v4} IPv4 dr vip${v4 === 1 ? '' : 's'}` : '', v6 > 0 ? `a neighbour solicitation for the ${v6} IPv6 dr vip${v6 === 1 ? '' : 's'}` : ''].filter(Boolean).join(' or ');
    out.push(ok('dr-arp', 'dr vips', dr.length === 0 ? 'no service uses dr mode' : `no host answered ${asked} where their real servers are`));
  }
  return out;
}

/**
 * (h) A cluster's config lives in etcd and may hold exec health checks, which every director runs as root:
 * whoever can write etcd is root on the directors. Plain etcd lets anyone who reaches its port do that.
 */
function checkEtcdTls(config: Config): Finding[] {
  const cluster = config.agent.cluster;
  if (cluster === null) return [ok('etcd-tls', 'etcd', 'none: a director without agent.cluster uses no etcd')];
  const plain = cluster.etcd.filter((u) => u.startsWith('http:'));
  if (plain.length === 0 && cluster.etcdTls !== null) {
    return [ok('etcd-tls', 'etcd', `mutual TLS: ${cluster.etcd.length} https:// endpoint${cluster.etcd.length === 1 ? '' : 's'}, this director's client certificate ${cluster.etcdTls.cert}`)];
  }
  return [{
    severity: 'warning', check: 'etcd-tls', subject: 'agent.cluster.etcd',
    problem: `PLAIN ETCD: ${plain.join(', ')} is reached without TLS or a client certificate, so anyone who can reach etcd's port can write the cluster config, and the exec health checks in it run as root on every director`,
    fix: 'run etcd with --client-cert-auth and certificates from the cluster\'s etcd CA, list its https:// endpoints in agent.cluster.etcd and this director\'s client certificate in agent.cluster.etcdTls (operator guide, "etcd with mutual TLS")',
  }];
}

/**
 * (g) A floating address (a vip, a local address, an ECMP slot's next hop or local address) that is also one
 * of the box's own, permanent addresses: the agent would claim it with a lifetime and delete it on release,
 * taking the address from the box. Validation cannot see a director's interfaces: each director checks here.
 * Only clustered directors float addresses.
 */
function checkOwnAddresses(config: Config, facts: KernelFacts): Finding[] {
  // A director on its own claims nothing: its vips and local addresses are the operator's, on its interfaces.
  if (config.agent.cluster === null) return [ok('own-address', 'floating addresses', 'none: a director without agent.cluster claims no address, its vips and local addresses are its own')];
  // Every address the agent may claim, as ranges: each permanent address is looked up in them (a pool is
  // not spelled out address by address).
  const claims: Array<{ range: AddressRange; what: string; subject: string }> = [];
  const one = (address: string): AddressRange => ({ first: address, last: address, size: 1 });
  for (const s of config.services) {
    const subject = `service "${s.name}" (${serviceKey(s)})`;
    claims.push({ range: one(s.vip), what: 'its vip', subject });
    if (s.localAddresses) claims.push({ range: s.localAddresses, what: 'one of its local addresses', subject });
  }
  for (const g of config.vipGroups) for (const gw of g.gateways) claims.push({ range: one(gw), what: 'its gateway', subject: `vip group "${g.name}"` });
  for (const fam of [config.ecmp?.ipv4, config.ecmp?.ipv6]) {
    fam?.nextHops.forEach((h, i) => claims.push({ range: one(h), what: `slot ${i}'s next hop`, subject: 'ecmp' }));
    fam?.localAddresses.forEach((r, i) => claims.push({ range: r, what: `one of slot ${i}'s local addresses`, subject: 'ecmp' }));
  }
  const out: Finding[] = [];
  const named = new Set<string>();
  for (const claim of claims) {
    const family = familyOf(claim.range.first);
    const [first, last] = [addressToBigInt(claim.range.first), addressToBigInt(claim.range.last)];
    for (const { address, ifname } of facts.permanentAddresses) {
      if (named.has(address) || familyOf(address) !== family || !inRange(address, first, last)) continue;
      named.add(address);
      out.push({
        severity: 'error', check: 'own-address', subject: claim.subject,
        problem: `${address} (${claim.what}) is a permanent address of this director's ${ifname}: the agent would claim it as a floating address with a lifetime and delete it when another director takes over, taking it from the box`,
        fix: `give ${claim.what} an address no director has as its own, or remove ${address} from ${ifname} if it was only put there by hand`,
      });
    }
  }
  if (out.length === 0) {
    out.push(ok('own-address', 'floating addresses', 'no vip, local address or slot address is one of this director\'s own addresses'));
  }
  return out;
}

function rsSubject(svc: Service, rs: RealServer): string {
  return `real server ${hostPort(rs.address, rs.port)} of service "${svc.name}" (${serviceKey(svc)})`;
}

function sameEndpoint(e: Endpoint, rs: RealServer): boolean {
  return e.address === rs.address && e.port === rs.port;
}

function percent(ratio: number): string {
  return `${Math.floor(ratio * 100)}%`;
}

function reachableOf(facts: KernelFacts, rs: RealServer): boolean | undefined {
  return facts.realServerReachable[hostPort(rs.address, rs.port)];
}

/**
 * (a) The classic NAT failure (shared/seeds): in nat mode the real server must send its replies back
 * through the director, which un-DNATs them. When its default route points elsewhere, the replies go
 * straight to the client from the real server's address; the client drops them, and on the director the
 * connections stay UNREPLIED (SYN_SENT for TCP). A server that is down looks the same in conntrack, so
 * it is an error only when the director can reach the server; with no probe result (UDP) it is a
 * warning. A few unreplied entries next to many answered ones are handshakes in flight, so the rule is
 * "at least half of its connections are unreplied".
 */
/**
 * The address a nat-mode real server should route through: in a cluster, the service's vip group's
 * floating gateway of the server's family (whoever leads holds it); alone, this director's own address.
 */
function gatewayFor(config: Config, svc: Config['services'][number], address: string, facts: KernelFacts): string {
  const family = address.includes(':') ? 6 : 4;
  const floating = config.vipGroups.find((g) => g.name === svc.vipGroup)?.gateways.find((g) => (g.includes(':') ? 6 : 4) === family);
  if (config.agent.cluster !== null && floating !== undefined) return floating;
  return facts.directorAddressTowards[address] ?? '<director address>';
}

function checkNatReturnPath(config: Config, facts: KernelFacts, connections: readonly Connection[]): Finding[] {
  const out: Finding[] = [];
  let checked = 0;
  for (const svc of config.services) {
    if (svc.mode !== 'nat') continue;
    const key = serviceKey(svc);
    for (const rs of svc.realServers) {
      checked++;
      const conns = connections.filter((c) => c.service === key && sameEndpoint(c.realServer, rs));
      const stuck = conns.filter((c) => c.unreplied);
      if (stuck.length === 0 || stuck.length * 2 < conns.length) continue;
      const reachable = reachableOf(facts, rs);
      if (reachable === false) continue; // A dead server, not a routing problem: check (f) reports it.
      const states = [...new Set(stuck.map((c) => c.state))].sort().join(', ');
      const evidence = `${stuck.length} of its ${conns.length} connections are unreplied in conntrack (${states}: no reply has come back through the director)`;
      out.push({
        severity: reachable === true ? 'error' : 'warning',
        check: 'nat-return-path',
        subject: rsSubject(svc, rs),
        problem: reachable === true
          ? `${evidence}, yet the director can reach it: in nat mode its replies must return through the director, and they do not, so clients drop them`
          : `${evidence}; the director could not probe it (${svc.protocol}), so it is either down or its replies bypass the director (in nat mode they must return through it)`,
        fix: `route the real server's replies via the director (make the director its default gateway: \`ip route replace default via ${gatewayFor(config, svc, rs.address, facts)}\` on the real server) or use mode: fullnat`,
      });
    }
  }
  if (out.length === 0) {
    out.push(ok('nat-return-path', 'nat-mode real servers', checked === 0
      ? 'no service uses nat mode'
      : `none of the ${checked} nat-mode real servers has mostly unreplied connections`));
  }
  return out;
}

/** (b) Without forwarding the director receives connections and never passes them on. */
function checkForwarding(config: Config, facts: KernelFacts): Finding[] {
  const out: Finding[] = [];
  const v4 = config.services.filter((s) => s.family === 4).length;
  const v6 = config.services.filter((s) => s.family === 6).length;
  if (!facts.ipv4Forwarding) {
    out.push({
      severity: 'error', check: 'ip-forward', subject: 'net.ipv4.ip_forward',
      problem: `is 0: the director does not forward IPv4 packets, so connections to its ${v4} IPv4 service${v4 === 1 ? '' : 's'} never reach a real server`,
      fix: 'sysctl -w net.ipv4.ip_forward=1, and put net.ipv4.ip_forward = 1 in /etc/sysctl.d/ so it survives a reboot',
    });
  }
  if (v6 > 0 && !facts.ipv6Forwarding) {
    out.push({
      severity: 'error', check: 'ip-forward', subject: 'net.ipv6.conf.all.forwarding',
      problem: `is 0: the director does not forward IPv6 packets, so connections to its ${v6} IPv6 service${v6 === 1 ? '' : 's'} never reach a real server`,
      fix: 'sysctl -w net.ipv6.conf.all.forwarding=1, and put net.ipv6.conf.all.forwarding = 1 in /etc/sysctl.d/ so it survives a reboot',
    });
  }
  if (out.length === 0) {
    out.push(ok('ip-forward', 'ip forwarding', v6 > 0 ? 'IPv4 and IPv6 forwarding are on' : 'IPv4 forwarding is on'));
  }
  return out;
}

/**
 * (c) Strict reverse-path filtering drops packets whose source is not routed back out of the interface
 * they came in on: asymmetric paths (ECMP, vips reached over one link, replies over another) break.
 * Loose mode (2) keeps the spoofing check without requiring symmetry. It is an error once the kernel
 * has counted drops. `lo` is skipped: the kernel never filters loopback traffic.
 */
function checkRpFilter(facts: KernelFacts): Finding[] {
  const strict = Object.entries(facts.rpFilter).filter(([iface, v]) => v === 1 && iface !== 'lo').map(([iface]) => iface).sort();
  const dropped = facts.rpFilterDrops > 0;
  const evidence = dropped
    ? `the kernel has dropped ${facts.rpFilterDrops} packets by reverse-path filtering since boot (TcpExt IPReversePathFilter)`
    : 'no drops counted yet';
  const out: Finding[] = strict.map((iface) => ({
    severity: dropped ? 'error' : 'warning',
    check: 'rp-filter',
    subject: `net.ipv4.conf.${iface}.rp_filter`,
    problem: `is 1 (strict) on ${iface}: packets whose source is not routed back out of ${iface} are dropped, which breaks asymmetric paths; ${evidence}`,
    fix: `sysctl -w net.ipv4.conf.${iface}.rp_filter=2 (loose), and persist it in /etc/sysctl.d/`,
  }));
  if (out.length === 0) {
    const n = Object.keys(facts.rpFilter).length;
    out.push(ok('rp-filter', 'rp_filter', `no interface has strict rp_filter (${n} interface${n === 1 ? '' : 's'} checked)`));
  }
  return out;
}

/** (d) A full conntrack table drops new connections ("nf_conntrack: table full, dropping packet"). */
function checkConntrackTable(facts: KernelFacts): Finding[] {
  const subject = 'net.netfilter.nf_conntrack_max';
  if (facts.conntrackMax <= 0) {
    return [{
      severity: 'warning', check: 'conntrack-table', subject,
      problem: 'could not be read, so the conntrack table\'s use is unknown',
      fix: 'check that the nf_conntrack module is loaded (lsmod | grep nf_conntrack) and that lbd-agent can read /proc/sys/net/netfilter',
    }];
  }
  const ratio = facts.conntrackCount / facts.conntrackMax;
  const usage = `the conntrack table is ${percent(ratio)} full (${facts.conntrackCount} of ${facts.conntrackMax} entries)`;
  if (ratio < CONNTRACK_WARN) return [ok('conntrack-table', subject, usage)];
  return [{
    severity: ratio >= CONNTRACK_ERROR ? 'error' : 'warning', check: 'conntrack-table', subject,
    problem: `${usage}: when it is full the kernel drops new connections`,
    fix: `raise nf_conntrack_max, e.g. sysctl -w net.netfilter.nf_conntrack_max=${facts.conntrackMax * 2} (and persist it in /etc/sysctl.d/), or find what fills the table with conntrack -L`,
  }];
}

/**
 * (e) fullnat SNATs every connection to one of the service's local addresses and a port from
 * ip_local_port_range; towards one real server each (local address, port) pair can be used once, so a
 * real server can hold at most pool size × range size connections from this director. Connections from
 * other services to the same real server through the same local addresses share that space, so all of
 * them count.
 */
function checkFullnatPorts(config: Config, facts: KernelFacts, connections: readonly Connection[]): Finding[] {
  const [lo, hi] = facts.localPortRange;
  const ports = Math.max(0, hi - lo + 1);
  const out: Finding[] = [];
  let worst: { ratio: number; text: string } | undefined;
  for (const svc of config.services) {
    const pool = svc.localAddresses;
    if (svc.mode !== 'fullnat' || pool === null) continue;
    const first = addressToBigInt(pool.first);
    const last = addressToBigInt(pool.last);
    const capacity = pool.size * ports;
    for (const rs of svc.realServers) {
      const used = connections.filter((c) => c.protocol === svc.protocol && sameEndpoint(c.realServer, rs) && c.localAddress !== null
        && inRange(c.localAddress.address, first, last)).length;
      const ratio = capacity === 0 ? 1 : used / capacity;
      if (worst === undefined || ratio > worst.ratio) {
        worst = { ratio, text: `highest use is ${percent(ratio)} (${used} of ${capacity}) for ${hostPort(rs.address, rs.port)} of service "${svc.name}"` };
      }
      if (ratio < PORTS_WARN) continue;
      const bigger = bigIntToAddress(first + BigInt(pool.size) * 2n - 1n, svc.family);
      out.push({
        severity: ratio >= PORTS_ERROR ? 'error' : 'warning',
        check: 'fullnat-ports',
        subject: rsSubject(svc, rs),
        problem: `${used} connections to it use ${percent(ratio)} of the ${capacity} source (address, port) pairs its local addresses ${pool.first}-${pool.last} (${pool.size}) × ports ${lo}-${hi} (net.ipv4.ip_local_port_range) allow; when they run out, new connections to it fail`,
        fix: `add local addresses to service "${svc.name}", e.g. localAddresses: [${pool.first}-${bigger}] (addresses this director owns), or widen net.ipv4.ip_local_port_range`,
      });
    }
  }
  if (out.length === 0) {
    out.push(ok('fullnat-ports', 'fullnat local addresses', worst === undefined ? 'no service uses fullnat' : `source ports are plentiful: ${worst.text}`));
  }
  return out;
}

function inRange(address: string, first: bigint, last: bigint): boolean {
  try {
    const v = addressToBigInt(address);
    return v >= first && v <= last;
  } catch {
    return false;
  }
}

/** (f) A real server the director cannot connect to fails every connection scheduled to it. */
function checkReachability(config: Config, facts: KernelFacts): Finding[] {
  const out: Finding[] = [];
  const probed = new Set<string>();
  for (const svc of config.services) {
    for (const rs of svc.realServers) {
      const reachable = reachableOf(facts, rs);
      if (reachable === undefined) continue;
      probed.add(hostPort(rs.address, rs.port));
      if (reachable) continue;
      out.push({
        severity: 'warning', check: 'real-server-reachable', subject: rsSubject(svc, rs),
        problem: 'the director cannot open a TCP connection to it (refused or timed out): connections scheduled to it fail',
        fix: `check that it is up and listening on port ${rs.port} and that the director has a route to ${rs.address}; set its weight to 0 while it is down`,
      });
    }
  }
  if (out.length === 0) {
    out.push(ok('real-server-reachable', 'real servers', probed.size === 0
      ? 'no real server was probed (only TCP real servers are)'
      : `the director can connect to all ${probed.size} probed real servers`));
  }
  return out;
}

function ok(check: CheckId, subject: string, problem: string): Finding {
  return { severity: 'ok', check, subject, problem, fix: '' };
}
