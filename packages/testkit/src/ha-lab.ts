import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CLUSTER, DIRECTOR_NAMES, clusterDirector, clusterTopology, type ClusterTopology, type DirectorName } from './cluster-topology.js';
import { makeClusterPki, type CertFiles } from './certs.js';
import { etcdClientFiles, etcdctlTlsEnv, makeEtcdPki, startEtcdCluster, type RunningEtcdCluster } from './etcd.js';
import { runCommand, type BackgroundProcess } from './exec.js';
import { startTestServers } from './processes.js';

/**
 * A whole active/standby cluster for privileged tests, drills and benchmarks: the cluster topology, three
 * etcd members, lbd-testserver on every real server, and lbd-agent on dir1 and dir2 with the lab's agent
 * files (deploy/lab/dirK.yaml) made private to this lab (admin sockets in a temp dir, an etcd prefix of
 * its own, a peer-link CA and certificates of its own). Everything it starts runs under the Topology, so
 * `destroy()` removes it all.
 *
 * This module does not depend on @lbd/proto: the admin API comes in through `admin` (tests pass
 * `(socket) => new AdminApi(socket)`); without it, `lbadmAdmin` drives the built lbadm (slower, one
 * process per call: too slow for the drills' 2 s status bound on a loaded machine).
 */

/** What the labs and drills need of the admin API: a structural subset of @lbd/proto's AdminApi. */
export interface HaAdmin {
  getClusterStatus(opts?: { timeoutMs?: number }): Promise<ClusterStatusView>;
  failover(group: string, to?: string, opts?: { timeoutMs?: number }): Promise<unknown>;
  apply(req: { configText: string; source: string; author?: string }, opts?: { timeoutMs?: number }): Promise<unknown>;
  close(): void;
}

/** The fields of ClusterStatus (admin.proto) the labs and drills read. */
export interface ClusterStatusView {
  readonly clustered: boolean;
  readonly self: string;
  readonly etcdReachable: boolean;
  readonly worstCaseTakeoverMs: number;
  readonly timingProfile: string;
  readonly configRevision: number;
  /** Connection sync as this director sees it: each peer it sends to ('to') or receives from ('from'). */
  readonly sync?: { readonly enabled: boolean; readonly peers: readonly { readonly peer: string; readonly direction: string; readonly state: string; readonly caughtUp: boolean }[] } | null;
  readonly directors: readonly {
    readonly id: string;
    readonly healthy: boolean;
    readonly problems: readonly string[];
    readonly priorities: Readonly<Record<string, number>>;
    readonly peerReachable: boolean;
    readonly groups: readonly { readonly group: string; readonly role: string; readonly reason: string; readonly atUnixMs: number }[];
  }[];
  readonly groups: readonly {
    readonly name: string;
    readonly leader: string;
    readonly term: number;
    readonly sinceUnixMs: number;
    readonly reason: string;
    readonly role: string;
    readonly preempt: string;
    readonly preemptDelayMs?: number;
  }[];
}

/** Repository paths, from this module (packages/testkit/dist/ha-lab.js or src/ha-lab.ts). */
const REPO = fileURLToPath(new URL('../../../', import.meta.url));
export const AGENT_BIN = join(REPO, 'packages/director-agent/dist/bin/lbd-agent.js');
export const LBADM_BIN = join(REPO, 'packages/lbadm/dist/bin/lbadm.js');
const LAB_DIR = join(REPO, 'deploy/lab');
/** Where deploy/lab/dirK.yaml expects the peer-link PKI (made by deploy/lab/lab up). */
const LAB_TLS_DIR = '/run/lbd/lab-tls';

/** The vip group of the lab config, and the vip the drills watch. */
export const HA_GROUP = 'default';
export const HA_VIP = CLUSTER.vips.ipv4;

/**
 * The operators' certificates the lab's CA issues, with the role deploy/lab/dirK.yaml's agent.admin.clients
 * gives each name: `ops` writes (lbadm server drain, apply, failover), `viewer` (a browser) and
 * `prometheus` (a scraper) only read.
 */
export const OPS_CLIENTS = [
  { name: 'ops', role: 'write' },
  { name: 'viewer', role: 'read' },
  { name: 'prometheus', role: 'read' },
] as const;
export type OpsClientName = (typeof OPS_CLIENTS)[number]['name'];

/** Where a director's agent.admin listeners are (deploy/lab/dirK.yaml): its management address, from the ops host. */
export function adminListeners(d: DirectorName): { readonly address: string; readonly grpcPort: number; readonly httpPort: number } {
  return { address: clusterDirector(d).mgmtIpv4, grpcPort: 7412, httpPort: 9443 };
}

/** Bounds (ms). */
const AGENT_READY_MS = 30_000;
const LEADER_MS = 30_000;
const ADMIN_CALL_MS = 2000;
const LBADM_CALL_MS = 5000;

export interface HaLabOptions<A extends HaAdmin> {
  /** Namespace prefix: runPrefix('lbdt') or runPrefix('lbdb'). */
  readonly prefix: string;
  /** The cluster config applied at start (default: deploy/lab/lab.yaml). */
  readonly configText?: string;
  /** The agents' timing profile (default: what deploy/lab/dirK.yaml says, `default`). */
  readonly timing?: 'default' | 'fast';
  readonly etcd?: { readonly heartbeatMs?: number; readonly electionMs?: number };
  /**
   * 'rbac': etcd over TLS with client certificates and lbadm etcd roles' roles, as deploy/lab/lab runs it (the
   * config written with the operator's certificate); default 'plain': http without authentication.
   */
  readonly etcdAccess?: 'plain' | 'rbac';
  /** The admin client on a socket path (default: lbadmAdmin). */
  readonly admin?: (socketPath: string) => A;
  /** Copy agent output to stderr (debugging). */
  readonly echo?: boolean;
  /** Writing 500 (or body, hang, close) to <faultDir>/<host>.fault breaks that real server's HTTP answers; emptying it mends them. */
  readonly faultDir?: string;
}

export interface HaLab<A extends HaAdmin = HaAdmin> {
  readonly cluster: ClusterTopology;
  readonly etcd: RunningEtcdCluster;
  /** Temp dir with the agent files and admin sockets. */
  readonly dir: string;
  /** The agents' etcd prefix (unique per lab). */
  readonly etcdPrefix: string;
  /**
   * With etcdAccess 'rbac': lbadm's flags that write the cluster config to etcd with the operator's
   * certificate (--etcd ... --etcd-key), from a host on the management switch (ops); null on plain etcd.
   */
  readonly operatorEtcd: readonly string[] | null;
  /** The lab CA (it signed the directors' certificates: the agent.admin listeners' and the peer link's). */
  readonly caPath: string;
  /** An operator's certificate and key, signed by the lab CA (OPS_CLIENTS). */
  clientCert(name: OpsClientName): CertFiles;
  readonly group: string;
  readonly vip: string;
  /** Admin API on the director's socket (one client per director, closed by destroy()). */
  api(dir: DirectorName): A;
  socket(dir: DirectorName): string;
  /** Signals the director's agent (only the agent: its address watchdog lives on) and waits for it to exit. */
  killAgent(dir: DirectorName, signal?: NodeJS.Signals): Promise<void>;
  /** Signals the director's agent and returns at once (SIGSTOP freezes it, SIGCONT thaws it); no-op when none runs. */
  signalAgent(dir: DirectorName, signal: NodeJS.Signals): Promise<void>;
  /** Starts the director's agent (no-op while one runs) and waits until its admin API answers. */
  startAgent(dir: DirectorName): Promise<void>;
  agentRunning(dir: DirectorName): boolean;
  /** The director leading the group (see leaderOf), undefined while vacant or unknown. */
  leader(): Promise<DirectorName | undefined>;
  /** Which directors hold the vip on their front interface right now. */
  holders(): Promise<DirectorName[]>;
  pauseEtcd(): Promise<void>;
  resumeEtcd(): Promise<void>;
  /** The last `lines` output lines of the director's agent (all agents run so far), for failure messages. */
  agentLog(dir: DirectorName, lines?: number): string;
  /** Both agents' log tails, labelled. */
  logs(lines?: number): string;
  destroy(): Promise<void>;
}

/** The lab's cluster config, deploy/lab/lab.yaml. */
export function labConfigText(): Promise<string> {
  return readFile(join(LAB_DIR, 'lab.yaml'), 'utf8');
}

/**
 * deploy/lab/dirK.yaml with the admin socket, etcd prefix and (optionally) timing and the directory of the
 * peer-link TLS files replaced. Fails if one of those lines is not found, so a reworded lab file cannot
 * silently leave a test on the lab's socket or certificates.
 */
export async function agentFileText(
  dir: DirectorName, o: { adminSocket: string; etcdPrefix: string; timing?: 'default' | 'fast'; tlsDir?: string; etcdTlsDir?: string | null },
): Promise<string> {
  let text = await readFile(join(LAB_DIR, `${dir}.yaml`), 'utf8');
  const swap = (re: RegExp, value: string, what: string): void => {
    if (!re.test(text)) throw new Error(`deploy/lab/${dir}.yaml: no ${what} line to replace`);
    text = text.replace(re, (_m, indent: string) => `${indent}${value}`);
  };
  swap(/^(\s*)adminSocket:.*$/m, `adminSocket: ${o.adminSocket}`, 'adminSocket');
  swap(/^(\s*)prefix:.*$/m, `prefix: ${o.etcdPrefix}`, 'agent.cluster.prefix');
  if (o.timing !== undefined) swap(/^(\s*)timing:.*$/m, `timing: ${o.timing}`, 'agent.cluster.timing');
  if (o.tlsDir !== undefined) {
    const tlsDir = o.tlsDir;
    // Only the directory changes: the file names stay the lab's (ca.pem, dirK.pem, dirK.key, as makeClusterPki writes them).
    const line = /^(\s*)(tls:.*)$/m;
    const m = line.exec(text);
    if (!m?.[2]?.includes(`${LAB_TLS_DIR}/`)) throw new Error(`deploy/lab/${dir}.yaml: no agent.cluster.tls line with ${LAB_TLS_DIR}/ to replace`);
    swap(line, m[2].split(`${LAB_TLS_DIR}/`).join(`${tlsDir}/`), 'agent.cluster.tls');
  }
  if (o.etcdTlsDir !== undefined) {
    // etcd over TLS with the director's certificate from `etcdTlsDir` (its files named as makeEtcdPki
    // writes them), or, with null, plain etcd: the https endpoints become http and etcdTls goes.
    const etcdTls = /^(\s*)(etcdTls:.*)$/m;
    const m = etcdTls.exec(text);
    if (!m?.[2]?.includes(`${LAB_TLS_DIR}/etcd/`)) throw new Error(`deploy/lab/${dir}.yaml: no agent.cluster.etcdTls line with ${LAB_TLS_DIR}/etcd/ to replace`);
    if (o.etcdTlsDir === null) {
      text = text.replace(/^\s*etcdTls:.*\n/m, '');
      swap(/^(\s*)etcd: \[(https:.*)\]$/m, `etcd: [${/etcd: \[(https:.*)\]$/m.exec(text)?.[1]?.replace(/https:/g, 'http:') ?? ''}]`, 'agent.cluster.etcd (https)');
    } else {
      swap(etcdTls, m[2].split(`${LAB_TLS_DIR}/etcd/`).join(`${o.etcdTlsDir}/`), 'agent.cluster.etcdTls');
    }
  }
  return text;
}

/**
 * The director leading `group`: the one whose own status says it leads (role leader or fail-static);
 * when no answer says so, the leader named by etcd in the first answer. Undefined when both claim it.
 */
export async function leaderOf(api: (d: DirectorName) => HaAdmin, group = HA_GROUP): Promise<DirectorName | undefined> {
  const answers = await Promise.all(DIRECTOR_NAMES.map((d) => api(d).getClusterStatus({ timeoutMs: ADMIN_CALL_MS }).catch(() => undefined)));
  const claims = DIRECTOR_NAMES.filter((d, i) => {
    const role = answers[i]?.groups.find((g) => g.name === group)?.role;
    return role === 'leader' || role === 'fail-static';
  });
  if (claims.length === 1) return claims[0];
  if (claims.length > 1) return undefined;
  const named = answers.find((a) => a !== undefined)?.groups.find((g) => g.name === group)?.leader;
  return DIRECTOR_NAMES.includes(named as DirectorName) ? (named as DirectorName) : undefined;
}

/** Directors holding `address` on the front interface, sampled concurrently. */
export async function holdersOf(cluster: ClusterTopology, address: string = HA_VIP): Promise<DirectorName[]> {
  const held = await Promise.all(DIRECTOR_NAMES.map((d) => cluster.holdsAddress(d, CLUSTER.interfaces.front, address).catch(() => false)));
  return DIRECTOR_NAMES.filter((_, i) => held[i]);
}

/** Waits (bounded) until `check` returns a value other than undefined/false; rejects with `what` and the last error. */
export async function waitFor<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined | false>, intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined && v !== false) return v;
    } catch (e) {
      if ((e as { fatal?: boolean }).fatal) throw e;
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms${last ? ` (last error: ${(last as Error).message ?? String(last)})` : ''}`);
    await delay(intervalMs);
  }
}

/** Waits until the agent answers its cluster status; gives up at once when `alive()` turns false. */
export async function waitAgentAnswers(api: HaAdmin, what: string, alive: () => boolean, timeoutMs = AGENT_READY_MS): Promise<void> {
  await waitFor(what, timeoutMs, async () => {
    if (!alive()) throw Object.assign(new Error(`${what}: the agent exited`), { fatal: true });
    return (await api.getClusterStatus({ timeoutMs: 1000 })).clustered;
  }, 100);
}

/** What waitSteady needs of a cluster (an HaLab or the lab's processes). */
export interface SteadyTarget {
  readonly cluster: ClusterTopology;
  readonly group: string;
  readonly vip: string;
  api(dir: DirectorName): HaAdmin;
  agentRunning(dir: DirectorName): boolean;
  /** Agent log tails for failure messages. */
  logs?(lines?: number): string;
}

/**
 * Waits (bounded) until the cluster is steady: both agents run and answer, both directors are healthy and
 * reach etcd, exactly one leads and it alone holds the vip, and, unless the group never preempts, the
 * leader is the highest-priority director (so no preemption is pending).
 */
export async function waitSteady(target: SteadyTarget, timeoutMs?: number): Promise<DirectorName> {
  const first = await waitFor('cluster status', 10_000, async () => [...(await statuses(target)).values()][0]);
  const g = first.groups.find((x) => x.name === target.group);
  const bound = timeoutMs ?? (g?.preemptDelayMs ?? 0) + 30_000;
  try {
    return await waitFor('the cluster steady (both agents healthy, one leader holding the vip alone)', bound, async () => {
      if (!DIRECTOR_NAMES.every((d) => target.agentRunning(d))) return undefined;
      const all = await statuses(target);
      if (all.size !== DIRECTOR_NAMES.length) return undefined;
      const leader = await leaderOf((d) => target.api(d), target.group);
      if (leader === undefined) return undefined;
      for (const s of all.values()) {
        if (!s.etcdReachable) return undefined;
        if (!DIRECTOR_NAMES.every((d) => s.directors.find((x) => x.id === d)?.healthy)) return undefined;
      }
      const view = all.get(leader)!;
      const grp = view.groups.find((x) => x.name === target.group);
      if (grp?.leader !== leader) return undefined;
      if (grp.preempt !== 'never') {
        const prio = (d: DirectorName): number => view.directors.find((x) => x.id === d)?.priorities[target.group] ?? 0;
        if (DIRECTOR_NAMES.some((d) => prio(d) > prio(leader))) return undefined;
      }
      const holders = await holdersOf(target.cluster, target.vip);
      return holders.length === 1 && holders[0] === leader ? leader : undefined;
    }, 200);
  } catch (e) {
    throw new Error(`${(e as Error).message}${target.logs ? `\n${target.logs(30)}` : ''}`);
  }
}

/** Each answering director's cluster status. */
export async function statuses(target: SteadyTarget): Promise<Map<DirectorName, ClusterStatusView>> {
  const answers = await Promise.all(DIRECTOR_NAMES.map((d) =>
    target.agentRunning(d) ? target.api(d).getClusterStatus({ timeoutMs: ADMIN_CALL_MS }).catch(() => undefined) : undefined));
  const out = new Map<DirectorName, ClusterStatusView>();
  DIRECTOR_NAMES.forEach((d, i) => { if (answers[i] !== undefined) out.set(d, answers[i]!); });
  return out;
}

export async function startHaLab<A extends HaAdmin = HaAdmin>(opts: HaLabOptions<A>): Promise<HaLab<A>> {
  const cluster = await clusterTopology({ prefix: opts.prefix });
  const t = cluster.topology;
  let tmp: string | undefined;
  const apis = new Map<DirectorName, A>();
  const agents = new Map<DirectorName, BackgroundProcess>();
  /** Output of agents that exited (killed or restarted), kept for failure messages. */
  const pastLogs = new Map<DirectorName, string[]>();
  let etcd: RunningEtcdCluster | undefined;
  const makeAdmin = opts.admin ?? ((s: string) => lbadmAdmin(s) as unknown as A);

  const destroy = async (): Promise<void> => {
    for (const a of apis.values()) a.close();
    apis.clear();
    await t.destroy().catch(() => undefined);
    await etcd?.stop().catch(() => undefined);
    if (tmp !== undefined) await rm(tmp, { recursive: true, force: true });
  };

  try {
    tmp = await mkdtemp(join(tmpdir(), 'lbd-halab-'));
    const etcdPrefix = `/lbd/test/${opts.prefix.replace(/-$/, '')}`;
    // etcd with client certificates and roles (lbadm etcd roles), as the lab runs it, or plain.
    const etcdTls = opts.etcdAccess === 'rbac' ? await makeEtcdPki(join(tmp, 'etcd-tls'), [...DIRECTOR_NAMES, 'root', 'ops']) : undefined;
    etcd = await startEtcdCluster(t, { ...opts.etcd, ...(etcdTls ? { tls: etcdTls } : {}) });
    let operatorEtcd: readonly string[] | null = null;
    if (etcdTls !== undefined) {
      const roles = await runCommand(process.execPath, [LBADM_BIN, 'etcd', 'roles', '--etcd-prefix', etcdPrefix, '--directors', DIRECTOR_NAMES.join(','), '--operators', 'ops']);
      await writeFile(join(tmp, 'etcd-roles.sh'), roles.stdout);
      await t.exec('etcd1', 'sh', [join(tmp, 'etcd-roles.sh')], { timeoutMs: 30_000, env: { ...process.env, ...etcdctlTlsEnv(etcdTls), ETCDCTL_ENDPOINTS: etcd.endpoints.join(',') } });
      const ops = etcdClientFiles(etcdTls, 'ops');
      operatorEtcd = ['--etcd', etcd.endpoints.join(','), '--etcd-prefix', etcdPrefix, '--etcd-ca', etcdTls.ca, '--etcd-cert', ops.cert, '--etcd-key', ops.key];
    }
    await startTestServers(t, cluster.realServers.map((r) => r.host), { http: 8080, stream: 9000, udp: 5353 }, 10_000, opts.faultDir);
    const socket = (d: DirectorName): string => join(tmp!, `${d}.sock`);
    const file = (d: DirectorName): string => join(tmp!, `${d}.yaml`);
    // The agents' own CA and certificates (peer link and admin listeners), not the lab's (which may not
    // exist, or be another lab's), and the operators' certificates it signs.
    const tlsDir = join(tmp, 'tls');
    const pki = await makeClusterPki(tlsDir, [...DIRECTOR_NAMES, ...OPS_CLIENTS.map((c) => c.name)],
      Object.fromEntries(DIRECTOR_NAMES.map((d) => [d, [adminListeners(d).address]])));
    for (const d of DIRECTOR_NAMES) {
      await writeFile(file(d), await agentFileText(d, { adminSocket: socket(d), etcdPrefix, tlsDir, etcdTlsDir: etcdTls?.dir ?? null, ...(opts.timing ? { timing: opts.timing } : {}) }));
    }
    const api = (d: DirectorName): A => {
      let a = apis.get(d);
      if (a === undefined) apis.set(d, (a = makeAdmin(socket(d))));
      return a;
    };
    const agentRunning = (d: DirectorName): boolean => agents.get(d)?.running ?? false;
    const agentLog = (d: DirectorName, lines = 40): string => {
      const current = agents.get(d);
      const all = [...(pastLogs.get(d) ?? []), ...(current ? (current.stdout + current.stderr).split('\n') : [])].filter((l) => l !== '');
      return all.slice(-lines).join('\n');
    };
    const retire = (d: DirectorName): void => {
      const p = agents.get(d);
      if (p === undefined) return;
      const past = pastLogs.get(d) ?? [];
      past.push(...(p.stdout + p.stderr).split('\n').filter((l) => l !== ''), `--- agent exited ${JSON.stringify(p.running ? 'running' : 'exited')}`);
      pastLogs.set(d, past.slice(-2000));
      agents.delete(d);
    };
    const startAgent = async (d: DirectorName): Promise<void> => {
      if (agentRunning(d)) return;
      retire(d);
      await rm(socket(d), { force: true });
      const p = t.spawn(d, process.execPath, [AGENT_BIN, '--config', file(d), '--admin-socket', socket(d)], { label: `${d}:lbd-agent`, ...(opts.echo ? { echo: true } : {}) });
      agents.set(d, p);
      try {
        await waitAgentAnswers(api(d), `lbd-agent on ${d} answering on ${socket(d)}`, () => p.running);
      } catch (e) {
        throw new Error(`${(e as Error).message}\n${agentLog(d)}`);
      }
    };
    const signalAgent = async (d: DirectorName, signal: NodeJS.Signals): Promise<void> => {
      const p = agents.get(d);
      // The agent only: `ip netns exec` execs node, so the pid is the agent's. Its watchdog has its own session.
      if (p?.running && p.pid !== undefined) process.kill(p.pid, signal);
    };
    const killAgent = async (d: DirectorName, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> => {
      const p = agents.get(d);
      if (p === undefined || !p.running) return;
      await signalAgent(d, signal);
      const timer = setTimeout(() => p.signal('SIGKILL'), 5000);
      await p.exited;
      clearTimeout(timer);
    };

    for (const d of DIRECTOR_NAMES) await startAgent(d);
    const configText = opts.configText ?? (await labConfigText());
    if (operatorEtcd === null) {
      await api('dir1').apply({ configText, source: 'ha-lab', author: 'ha-lab' }, { timeoutMs: 15_000 });
    } else {
      // A director may not write the config: the operator writes it to etcd, from the ops host.
      await writeFile(join(tmp, 'cluster.yaml'), configText);
      await t.exec('ops', process.execPath, [LBADM_BIN, 'apply', '-f', join(tmp, 'cluster.yaml'), ...operatorEtcd], { timeoutMs: 30_000 });
    }
    const lab: HaLab<A> = {
      cluster, etcd, dir: tmp, etcdPrefix, operatorEtcd, group: HA_GROUP, vip: HA_VIP,
      caPath: pki.ca.certPath,
      clientCert: (name) => pki.certs[name]!,
      api, socket, killAgent, signalAgent, startAgent, agentRunning, agentLog,
      leader: () => leaderOf(api),
      holders: () => holdersOf(cluster),
      pauseEtcd: () => etcd!.pause(),
      resumeEtcd: () => etcd!.resume(),
      logs: (lines = 40) => DIRECTOR_NAMES.map((d) => `== ${d} agent (last ${lines} lines)\n${agentLog(d, lines)}`).join('\n'),
      destroy,
    };
    try {
      await waitFor('a director leads the vip group and holds the vip', LEADER_MS, async () => {
        const l = await lab.leader();
        return l !== undefined && (await lab.holders()).join() === l ? l : undefined;
      });
    } catch (e) {
      throw new Error(`${(e as Error).message}\n${lab.logs()}`);
    }
    // And no preemption pending: the preferred director leads.
    await waitSteady(lab);
    return lab;
  } catch (e) {
    await destroy();
    throw e;
  }
}

// ---- the admin API through lbadm (no @lbd/proto in the testkit) ----------------------------------

/**
 * HaAdmin through the built lbadm (`--json`, one process per call). lbadm prints the admin API's messages
 * as JSON with the same field names as @lbd/proto's generated types.
 */
export function lbadmAdmin(socketPath: string, lbadmBin = LBADM_BIN): HaAdmin {
  const run = async (args: readonly string[], timeoutMs = LBADM_CALL_MS, input?: string): Promise<string> => {
    let file: string | undefined;
    if (input !== undefined) {
      const dir = await mkdtemp(join(tmpdir(), 'lbd-lbadm-'));
      file = join(dir, 'config.yaml');
      await writeFile(file, input);
    }
    try {
      const r = await runCommand(process.execPath, [lbadmBin, '--socket', socketPath, '--json', ...args, ...(file ? ['-f', file] : [])], { timeoutMs, allowFailure: true });
      if (r.code !== 0) throw new Error(`lbadm ${args.join(' ')} (exit ${r.code}): ${(r.stderr || r.stdout).trim().slice(-1000)}`);
      return r.stdout;
    } finally {
      if (file !== undefined) await rm(join(file, '..'), { recursive: true, force: true });
    }
  };
  return {
    getClusterStatus: async (o = {}) => JSON.parse(await run(['cluster', 'status'], o.timeoutMs)) as ClusterStatusView,
    failover: async (group, to = '', o = {}) => JSON.parse(await run(['failover', '--vip-group', group, ...(to ? ['--to', to] : [])], o.timeoutMs)) as unknown,
    apply: async (req, o = {}) => run(['apply'], o.timeoutMs ?? 15_000, req.configText),
    close: () => undefined,
  };
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
