import { SEVERITIES, hostPort, type Severity } from '@lbd/config';
import type {
  ApplyResponse__Output, ClusterStatus__Output, ConfigHistoryResponse__Output, Connection__Output, Endpoint__Output, Event__Output, Finding__Output,
  GetHealthResponse__Output, GetStatsResponse__Output,
  GetStatusResponse__Output, HealthEvent__Output, Problem__Output, RealServerHealth__Output,
} from '@lbd/proto';

/**
 * lbadm's human views, as pure functions of the admin API's answers (golden-tested). They follow
 * ipvsadm's layouts, which operators of LVS directors read without a legend; columns widen for IPv6.
 * Every function returns the whole text, ending in a newline.
 */

function endpoint(e: Endpoint__Output | null): string {
  return e === null ? '-' : hostPort(e.address, e.port);
}

/** Left-aligned columns: each as wide as its widest cell (at least `min`), one space apart. */
export function columns(rows: readonly (readonly string[])[], min: readonly number[] = []): string[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => { widths[i] = Math.max(widths[i] ?? 0, cell.length, min[i] ?? 0); });
  return rows.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join(' ').trimEnd());
}

/** `--json` output: the value, indented, one trailing newline. */
export function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

export function formatStatus(s: GetStatusResponse__Output): string {
  const lines: string[] = [];
  const a = s.agent;
  if (a) {
    lines.push(`lbd-agent pid ${a.pid}: config ${a.configPath} (revision ${a.configRevision}, sha256 ${a.configSha256.slice(0, 12)}, from ${a.configSource})`);
    const last = a.lastApply;
    if (last) {
      const head = `last apply ${last.time} (${last.trigger}):`;
      if (last.result === 'failed') {
        lines.push(`${head} FAILED: ${last.error}; the previous state stays`);
      } else if (last.result === 'rejected') {
        lines.push(`${head} REJECTED ${last.source}, ${plural(last.problems.length, 'problem')}; the running config stays`);
        for (const p of last.problems) lines.push(`  ${p.text}`);
      } else {
        lines.push(`${head} ${last.result}, ${plural(last.operations, 'operation')}${last.fullRebuild ? ' (full rebuild)' : ''}`);
      }
    }
  }
  const addrWidth = Math.max(
    26,
    ...s.services.flatMap((svc) => svc.realServers.map((rs) => hostPort(rs.address, rs.port).length)),
  );
  lines.push('Prot LocalAddress:Port Scheduler Mode Flags');
  lines.push(`  -> ${'RemoteAddress:Port'.padEnd(addrWidth)} Weight ActiveConn InActConn`);
  for (const svc of s.services) {
    const words = [svc.protocol.toUpperCase().padEnd(4), hostPort(svc.vip, svc.port)];
    if (svc.scheduler) words.push(svc.scheduler);
    if (svc.mode) words.push(svc.mode);
    if (svc.persistenceSec > 0) words.push(`persistent ${svc.persistenceSec}`);
    if (svc.synProxy) words.push('synproxy');
    // The limit, and how many new connections' packets it dropped (the sign of a service under siege).
    if (svc.connectionLimit > 0) words.push(`limit ${svc.connectionLimit}${svc.limitDrops > 0 ? ` (${svc.limitDrops} dropped)` : ''}`);
    words.push(...svc.flags);
    const about = [svc.name, svc.localAddresses ? `local ${svc.localAddresses.first}-${svc.localAddresses.last}` : ''].filter(Boolean);
    if (about.length > 0) words.push(`(${about.join('; ')})`);
    lines.push(words.join(' '));
    for (const rs of svc.realServers) {
      // Health's words (down, held-down, ramping, removed, kept) come in the flags.
      const marks = [...(rs.quiescent ? ['quiescent'] : []), ...rs.flags];
      lines.push([
        `  -> ${hostPort(rs.address, rs.port).padEnd(addrWidth)}`,
        // What is programmed, as ipvsadm shows the kernel's weight: 0 while down, less while ramping.
        String(rs.effectiveWeight).padEnd(6),
        String(rs.activeConnections).padEnd(10),
        marks.length > 0 ? String(rs.inactiveConnections).padEnd(9) : String(rs.inactiveConnections),
        ...marks,
      ].join(' '));
    }
  }
  const sp = s.synProxy;
  if (sp) {
    lines.push(`SYN proxy: ${sp.synReceived} SYNs answered with a cookie, ${sp.cookieValid} handshakes completed, ${sp.cookieInvalid} bad cookies dropped`);
  }
  return `${lines.join('\n')}\n`;
}

/** `TCP  198.18.0.10:80` from the key `198.18.0.10:80/tcp`: ipvsadm's service column. */
function serviceLabel(key: string): string {
  const slash = key.lastIndexOf('/');
  return `${key.slice(slash + 1).toUpperCase().padEnd(4)} ${key.slice(0, slash)}`;
}

/** Right-aligned numbers after a left-aligned name column. */
function numberTable(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  return all.map((r) => r.map((cell, i) => (i === 0 ? cell.padEnd(widths[0]!) : cell.padStart(Math.max(widths[i]!, 8)))).join(' ').trimEnd());
}

export function formatStats(s: GetStatsResponse__Output): string {
  const rows: string[][] = [];
  for (const svc of s.services) {
    const c = svc.counters;
    rows.push([serviceLabel(svc.key), String(c?.connections ?? 0), String(c?.packets ?? 0), String(c?.bytes ?? 0)]);
    for (const rs of svc.realServers) {
      const r = rs.counters;
      rows.push([`  -> ${hostPort(rs.address, rs.port)}`, String(r?.connections ?? 0), String(r?.packets ?? 0), String(r?.bytes ?? 0)]);
    }
  }
  return `${numberTable(['Prot LocalAddress:Port', 'Conns', 'Packets', 'Bytes'], rows).join('\n')}\n`;
}

export interface Rate {
  /** Current connections (a gauge: not a rate). */
  readonly connections: number;
  /** null when the counter went backwards between samples (reset by a rebuild or restart). */
  readonly packetsPerSec: number | null;
  readonly bytesPerSec: number | null;
}

export interface RealServerRate extends Rate {
  readonly address: string;
  readonly port: number;
}

export interface ServiceRate extends Rate {
  readonly name: string;
  readonly key: string;
  readonly realServers: readonly RealServerRate[];
}

export interface Rates {
  readonly intervalMs: number;
  readonly services: readonly ServiceRate[];
}

/**
 * Per-second rates between two samples, over the agent's own sample times (not lbadm's), so call
 * latency does not distort them. Services or servers missing from the first sample count from zero.
 */
export function computeRates(a: GetStatsResponse__Output, b: GetStatsResponse__Output): Rates {
  const intervalMs = Math.max(1, b.sampledAtUnixMs - a.sampledAtUnixMs);
  const perSec = (before: number, after: number): number | null => (after < before ? null : ((after - before) * 1000) / intervalMs);
  const earlier = new Map(a.services.map((s) => [s.key, s]));
  return {
    intervalMs,
    services: b.services.map((svc): ServiceRate => {
      const prev = earlier.get(svc.key);
      const prevRs = new Map((prev?.realServers ?? []).map((r) => [hostPort(r.address, r.port), r]));
      return {
        name: svc.name, key: svc.key, connections: svc.counters?.connections ?? 0,
        packetsPerSec: perSec(prev?.counters?.packets ?? 0, svc.counters?.packets ?? 0),
        bytesPerSec: perSec(prev?.counters?.bytes ?? 0, svc.counters?.bytes ?? 0),
        realServers: svc.realServers.map((rs): RealServerRate => {
          const p = prevRs.get(hostPort(rs.address, rs.port));
          return {
            address: rs.address, port: rs.port, connections: rs.counters?.connections ?? 0,
            packetsPerSec: perSec(p?.counters?.packets ?? 0, rs.counters?.packets ?? 0),
            bytesPerSec: perSec(p?.counters?.bytes ?? 0, rs.counters?.bytes ?? 0),
          };
        }),
      };
    }),
  };
}

function rate(v: number | null): string {
  if (v === null) return 'reset';
  return v >= 100 ? String(Math.round(v)) : v.toFixed(1);
}

export function formatRates(r: Rates): string {
  const rows: string[][] = [];
  for (const svc of r.services) {
    rows.push([serviceLabel(svc.key), String(svc.connections), rate(svc.packetsPerSec), rate(svc.bytesPerSec)]);
    for (const rs of svc.realServers) {
      rows.push([`  -> ${hostPort(rs.address, rs.port)}`, String(rs.connections), rate(rs.packetsPerSec), rate(rs.bytesPerSec)]);
    }
  }
  const table = numberTable(['Prot LocalAddress:Port', 'Conns', 'Pkts/s', 'Bytes/s'], rows);
  return `${table.join('\n')}\nrates over ${(r.intervalMs / 1000).toFixed(1)} s; Conns is the current count\n`;
}

/** mm:ss, as ipvsadm -Lnc prints expiry. */
function expiry(sec: number): string {
  return `${String(Math.floor(sec / 60)).padStart(2, '0')}:${String(sec % 60).padStart(2, '0')}`;
}

export function formatConns(conns: readonly Connection__Output[]): string {
  const rows = [
    ['pro', 'expire', 'state', 'source', 'virtual', 'local', 'destination'],
    ...conns.map((c) => [
      c.protocol.toUpperCase(), expiry(c.expiresInSec), c.state, endpoint(c.client), endpoint(c.vip),
      endpoint(c.localAddress), endpoint(c.realServer),
    ]),
  ];
  return `${columns(rows).join('\n')}\n`;
}

/**
 * Below `lbadm conns`: the dr services (of those the filter names, by name or key), which keep no connection for
 * the director to list, and where to look instead; '' when there are none.
 */
export function formatStatelessNote(services: ReadonlyArray<{ readonly name: string; readonly key: string; readonly mode: string }>, filter?: string): string {
  return services.filter((s) => s.mode === 'dr' && (filter === undefined || filter === s.name || filter === s.key))
    .map((s) => `${s.name} (${s.key}) is a dr service: the director keeps no conntrack entry for it (each packet goes to the real server its flow memory `
      + 'or its slot table names, which answers the client directly), so it has no connections to list; lbadm stats shows its packets and bytes, '
      + `and nft list map ${s.key.startsWith('[') ? 'ip6' : 'ip'} lbd dr_flows_${s.key.endsWith('/udp') ? 'udp' : 'tcp'} the flow memory of every dr service of its family and protocol\n`).join('');
}

export function formatApply(r: ApplyResponse__Output): string {
  const lines: string[] = [];
  if (!r.changed) {
    lines.push('no changes: the kernel already matches this config');
  } else {
    lines.push(...r.operations);
    const what = `${plural(r.operations.length, 'operation')}${r.fullRebuild ? ' (full rebuild)' : ''}`;
    lines.push(r.dryRun ? `dry run: ${what} would be applied` : `applied: ${what} for ${plural(r.serviceCount, 'service')}`);
    if (!r.dryRun && r.expiredConnections > 0) lines.push(`expired ${plural(r.expiredConnections, 'connection')} of removed real servers`);
  }
  if (r.dryRun) lines.push('dry run: nothing was applied');
  if (r.clusterRevision > 0) lines.push(`written to the cluster as config revision ${r.clusterRevision}; every director applies it`);
  return `${lines.join('\n')}\n`;
}

/**
 * `lbadm cluster status`: the cluster line (etcd, timing, worst-case takeover), one line per vip group
 * (leader, why, addresses), one line per director and group (role, priority, health, lease, peer link).
 */
export function formatClusterStatus(c: ClusterStatus__Output, now: number): string {
  if (!c.clustered) return `not clustered: this director runs config revision ${c.configRevision} from its own file (no agent.cluster)\n`;
  const lines: string[] = [];
  lines.push(`cluster seen from ${c.self}: etcd ${c.etcdReachable ? 'reachable' : 'UNREACHABLE'} (${c.etcdEndpoints.join(', ')}), config revision ${c.configRevision}`);
  lines.push(`timing ${c.timingProfile}: beat ${c.beatIntervalMs} ms, safety window ${c.safetyWindowMs} ms, takeover after ${c.takeoverAfterMs} ms; worst-case takeover ${c.worstCaseTakeoverMs} ms + one etcd write and the address claim`);
  if (c.electionPlacement !== '') {
    lines.push(`election: ${c.electionPlacement}; its timer ran late by p99 ${c.electionTickLateP99Ms} ms, max ${c.electionTickLateMaxMs} ms`);
  }
  lines.push('');
  const groupRows: string[][] = [['GROUP', 'LEADER', 'SINCE', 'PREEMPT', 'ADDRESSES', 'WHY']];
  for (const g of c.groups) {
    groupRows.push([
      g.name, g.leader === '' ? '(none)' : g.leader, g.sinceUnixMs > 0 ? formatAge(now - g.sinceUnixMs) : '-',
      g.preempt === 'after-delay' ? `after ${g.preemptDelayMs} ms` : g.preempt === 'after-sync' ? `after ${g.preemptDelayMs} ms + sync` : g.preempt, g.addresses.join(',') || '-', g.reason || '-',
    ]);
  }
  lines.push(...columns(groupRows));
  lines.push('');
  // KERNEL LEASE: how long the director's kernel still serves the group whatever its agent does; LEASE: its
  // registration in etcd.
  const dirRows: string[][] = [['DIRECTOR', 'VERSION', 'GROUP', 'ROLE', 'KERNEL LEASE', 'PRIO', 'HEALTH', 'LEASE', 'PEER LINK', 'LAST TRANSITION']];
  for (const d of c.directors) {
    const health = d.healthy ? 'ok' : `unhealthy: ${d.problems.join('; ')}`;
    const lease = d.leaseLeftMs >= 0 ? `${(d.leaseLeftMs / 1000).toFixed(0)}s` : '-';
    const peer = d.id === c.self ? '(self)' : d.peerReachable ? 'up' : 'DOWN';
    const groups = d.groups.length > 0 ? d.groups : [{ group: '-', role: '-', reason: '', atUnixMs: 0, kernelLeaseLeftMs: -1 }];
    for (const g of groups) {
      const last = g.atUnixMs > 0 ? `${formatAge(now - g.atUnixMs)} ago: ${g.reason}` : '-';
      const kernel = g.kernelLeaseLeftMs > 0 ? `${g.kernelLeaseLeftMs} ms` : g.kernelLeaseLeftMs === 0 ? 'ENDED' : '-';
      dirRows.push([d.id, d.version || '-', g.group, g.role, kernel, String(d.priorities[g.group] ?? '-'), health, lease, peer, last]);
    }
  }
  lines.push(...columns(dirRows));
  const versions = new Map<string, string[]>();
  for (const d of c.directors) if (d.version !== '') versions.set(d.version, [...(versions.get(d.version) ?? []), d.id]);
  if (versions.size > 1) {
    // Two adjacent versions work together (proto/compat); a cluster left mixed is an upgrade half done.
    lines.push(`directors run ${versions.size} versions (${[...versions].map(([v, ids]) => `${v}: ${ids.join(', ')}`).join('; ')}): a rolling upgrade in progress; finish it before the next (operator guide, "Upgrade")`);
  }
  lines.push('', ...formatSync(c));
  const ecmp = formatEcmp(c);
  if (ecmp.length > 0) lines.push('', ...ecmp);
  return `${lines.join('\n')}\n`;
}

/**
 * The ECMP tier's part of `cluster status`: how many slots each director leads (the slots themselves are
 * groups slot-<i> above) and this director's BGP sessions and paths. Empty when the tier is not in use.
 */
function formatEcmp(c: ClusterStatus__Output): string[] {
  const slots = c.groups.filter((g) => /^slot-\d+$/.test(g.name));
  const e = c.ecmp;
  if (slots.length === 0 && e === null) return [];
  const lines: string[] = [];
  const owned = new Map<string, number>();
  for (const g of slots) owned.set(g.leader || '(none)', (owned.get(g.leader || '(none)') ?? 0) + 1);
  lines.push(`ECMP tier: ${plural(slots.length, 'slot')}; leading them: ${[...owned].sort(([a], [b]) => a.localeCompare(b)).map(([d, n]) => `${d} ${n}`).join(', ') || '-'}`);
  if (e === null) {
    lines.push(`  ${c.self} is not in the tier (no agent.cluster.ecmp): it announces nothing`);
    return lines;
  }
  const paths = e.withdrawnBecause !== '' ? `every path WITHDRAWN: ${e.withdrawnBecause}` : `${plural(e.pathsAnnounced, 'path')} announced`;
  lines.push(`  ${c.self}: ${paths}${e.lastError !== '' ? `; speaker error: ${e.lastError}` : ''}`);
  const rows: string[][] = [['ROUTER', 'AS', 'SESSION', 'PATHS SENT']];
  for (const x of e.sessions) rows.push([x.router, String(x.asn), x.state === 'established' ? x.state : x.state.toUpperCase(), Number(x.advertised) >= 0 ? String(x.advertised) : '-']);
  if (e.sessions.length === 0) lines.push('  no BGP session reported by the speaker');
  else lines.push(...columns(rows).map((l) => `  ${l}`));
  return lines;
}

/** The connection-sync part of `cluster status`: one row per stream, to or from this director. */
function formatSync(c: ClusterStatus__Output): string[] {
  const s = c.sync;
  if (!s?.enabled) return [`connection sync: off${s?.disabledReason ? ` (${s.disabledReason})` : ''}`];
  const head = `connection sync: ${c.self} copies ${s.connections} connections${s.lossEvents > 0 ? `; kernel events lost ${plural(s.lossEvents, 'time')} (each time resent whole)` : ''}`;
  if (s.peers.length === 0) return [head, '  no stream: this director leads no group and no leader streams to it'];
  const rows: string[][] = [['PEER', 'DIRECTION', 'STATE', 'CAUGHT UP', 'GROUPS', 'SENT/RECEIVED', 'INJECTED', 'FAILED', 'RESYNCS', 'QUEUED', 'LAG P50/P99', 'LAST ERROR']];
  for (const p of s.peers) {
    rows.push([
      p.peer || '?', p.direction === 'to' ? `${c.self} -> ${p.peer}` : `${p.peer} -> ${c.self}`, p.state, p.caughtUp ? 'yes' : 'NO',
      p.groups.join(',') || '-', String(p.direction === 'to' ? p.sent : p.received), String(p.injected), String(p.failed), String(p.resyncs),
      p.direction === 'to' ? String(p.queued) : '-', p.direction === 'to' ? `${latency(p.lagP50Ms)} / ${latency(p.lagP99Ms)}` : '-', p.lastError || '-',
    ]);
  }
  return [head, ...columns(rows)];
}

/** `lbadm config history`: oldest first, the running revision marked. */
export function formatConfigHistory(h: ConfigHistoryResponse__Output, now: number): string {
  if (h.versions.length === 0) return 'no cluster config yet: lbadm apply -f FILE writes the first\n';
  const rows: string[][] = [['REV', 'WHEN', 'AUTHOR', 'SERVICES', 'SHA256', 'SOURCE']];
  for (const v of h.versions) {
    rows.push([`${v.revision}${v.revision === h.current ? '*' : ''}`, `${formatAge(now - v.atUnixMs)} ago`, v.author || '-', String(v.serviceCount), v.configSha256.slice(0, 12), v.comment || '-']);
  }
  return `${columns(rows).join('\n')}\n(* the revision this director runs)\n`;
}

export function formatProblems(source: string, problems: readonly Problem__Output[]): string {
  return `${source} is invalid (${plural(problems.length, 'problem')}):\n${problems.map((p) => `  ${p.text}\n`).join('')}`;
}

const SEVERITY_TITLE: Readonly<Record<Severity, string>> = { error: 'errors', warning: 'warnings', ok: 'ok' };

/** Findings grouped by severity, worst first; fixes under their finding; a count line last. */
export function formatDoctor(findings: readonly Finding__Output[]): string {
  const lines: string[] = [];
  for (const sev of SEVERITIES) {
    const group = findings.filter((f) => f.severity === sev);
    if (group.length === 0) continue;
    lines.push(`${SEVERITY_TITLE[sev]} (${group.length}):`);
    for (const f of group) {
      lines.push(`  [${f.check}] ${f.subject}: ${f.problem}`);
      if (f.fix) lines.push(`    fix: ${f.fix}`);
    }
  }
  const count = (sev: string): number => findings.filter((f) => f.severity === sev).length;
  lines.push(`${plural(count('error'), 'error')}, ${plural(count('warning'), 'warning')}, ${count('ok')} ok`);
  return `${lines.join('\n')}\n`;
}

/** An age for people: 12s, 5m03s, 2h05m, 3d04h. */
export function formatAge(ms: number): string {
  const sec = Math.max(0, Math.floor(ms / 1000));
  const two = (n: number): string => String(n).padStart(2, '0');
  if (sec < 60) return `${sec}s`;
  if (sec < 3600) return `${Math.floor(sec / 60)}m${two(sec % 60)}s`;
  if (sec < 86_400) return `${Math.floor(sec / 3600)}h${two(Math.floor((sec % 3600) / 60))}m`;
  return `${Math.floor(sec / 86_400)}d${two(Math.floor((sec % 86_400) / 3600))}h`;
}

function latency(ms: number): string {
  return ms < 10 ? `${Number(ms.toFixed(1))} ms` : `${Math.round(ms)} ms`;
}

/** The check in a few words; the probed endpoint only when it is not the real server itself (a health port). */
function checkLabel(rs: RealServerHealth__Output): string {
  const c = rs.check;
  if (c === null) return '-';
  let label: string;
  if (c.kind === 'http' || c.kind === 'https' || c.kind === 'exec') label = c.description;
  else label = c.kind;
  const own = c.kind === 'icmp' ? rs.address : hostPort(rs.address, rs.port);
  return c.kind === 'exec' || c.target === own ? label : `${label} @${c.target}`;
}

/** up, down, and why it is not simply so: held down (for how long), removed, kept, ramping (to what). */
function stateLabel(rs: RealServerHealth__Output, now: number): string {
  const notes: string[] = [];
  if (rs.heldDownUntilUnixMs > now) notes.push(`held ${formatAge(Math.ceil((rs.heldDownUntilUnixMs - now) / 1000) * 1000)}`);
  if (rs.flags.includes('removed')) notes.push('removed');
  if (rs.flags.includes('kept')) notes.push('kept');
  if (rs.flags.includes('ramping')) notes.push(`ramping ${rs.effectiveWeight}/${rs.weight}`);
  return notes.length > 0 ? `${rs.state} (${notes.join(', ')})` : rs.state;
}

/** `lbadm health`: one line per checked real server per service, then the scheduler's figures. */
export function formatHealth(h: GetHealthResponse__Output): string {
  if (h.realServers.length === 0) return 'no real server has a health check\n';
  const now = h.sampledAtUnixMs;
  const rows = [
    ['SERVICE', 'SERVER', 'CHECK', 'STATE', 'SINCE', 'LAST RESULT', 'LATENCY'],
    ...h.realServers.map((rs) => [
      rs.serviceName || rs.service,
      hostPort(rs.address, rs.port),
      checkLabel(rs),
      stateLabel(rs, now),
      formatAge(now - rs.sinceUnixMs),
      rs.lastResult?.message ?? 'no result yet',
      rs.lastResult ? latency(rs.lastResult.latencyMs) : '-',
    ]),
  ];
  const lines = columns(rows);
  const s = h.scheduler;
  if (s) {
    // The scheduler's figures are the director's, whatever --service shows: a shared check counts once.
    lines.push('');
    lines.push(`scheduler: ${plural(s.checks, 'check')}; probes started ${s.started}, timed out ${s.timedOut}, late ${s.late}, `
      + `skipped ${s.skipped}, asked again after a stall ${s.askedAgain}; start delay p50 ${latency(s.startDelayP50Ms)}, p99 ${latency(s.startDelayP99Ms)}`);
  }
  return `${lines.join('\n')}\n`;
}

/** One transition as one line (`lbadm health --watch`). */
export function formatHealthEvent(e: HealthEvent__Output): string {
  const held = e.heldDownUntilUnixMs > 0 ? `; held down until ${new Date(e.heldDownUntilUnixMs).toISOString()}` : '';
  return `${new Date(e.timeUnixMs).toISOString()} ${e.serviceName || e.service} ${hostPort(e.address, e.port)} ${e.from} -> ${e.to}: `
    + `${e.reason} [${latency(e.latencyMs)}]${held}; ${e.action}\n`;
}

/** Minimum widths of the event timeline's columns, so that followed events (printed one by one) line up too. */
const EVENT_WIDTHS = [24, 6, 6, 24, 20];

function eventCells(e: Event__Output): string[] {
  const change = e.from === '' ? e.to : `${e.from} -> ${e.to}`;
  return [new Date(e.timeUnixMs).toISOString(), e.director, e.kind, e.subject, change, e.reason];
}

/** The event timeline (`lbadm events`): time, director, kind, subject, from -> to, reason; oldest first. */
export function formatEvents(events: readonly Event__Output[]): string {
  const rows = [['TIME', 'DIRECTOR', 'KIND', 'SUBJECT', 'CHANGE', 'REASON'], ...events.map(eventCells)];
  return `${columns(rows, EVENT_WIDTHS).join('\n')}\n`;
}

/** One event as one line of the timeline (`lbadm events --follow`). */
export function formatEvent(e: Event__Output): string {
  return `${columns([eventCells(e)], EVENT_WIDTHS)[0]}\n`;
}
