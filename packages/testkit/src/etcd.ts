import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { get } from 'node:http';
import { get as httpsGet } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeCa, issueCert } from './certs.js';
import { ETCD_MEMBERS, etcdMember, type EtcdMember } from './cluster-topology.js';
import type { BackgroundProcess, ExecOptions, ExecResult } from './exec.js';
import type { Topology } from './netns.js';

/**
 * etcd for tests: `startEtcd`, one member on loopback, and `startEtcdCluster`, three members in the
 * namespaces of a cluster topology.
 *
 * One etcd member on loopback for tests: random free client and peer ports, a temp data dir, and the
 * `etcd` binary (Debian `etcd-server`). Only spawns the process and waits for `/health` over plain HTTP:
 * the testkit does not talk the etcd API (that is the coordinator's job). `pause()`/`resume()` freeze and
 * thaw the process (SIGSTOP/SIGCONT) to simulate an etcd that stops answering without closing sockets.
 */
export interface RunningEtcd {
  readonly endpoints: string[];
  /** Kills etcd (SIGKILL, after SIGCONT if paused) and removes a data dir this launcher created. Idempotent. */
  stop(): Promise<void>;
  /** SIGSTOP: etcd keeps its sockets open but answers nothing. */
  pause(): Promise<void>;
  /** SIGCONT. */
  resume(): Promise<void>;
}

export interface EtcdOptions {
  readonly name?: string;
  /** Default: a fresh temp dir (in /dev/shm where there is one), removed by stop(). A given dir is left in place. */
  readonly dataDir?: string;
  /** etcd `--heartbeat-interval` (default 100). */
  readonly heartbeatMs?: number;
  /** etcd `--election-timeout` (default 1000). */
  readonly electionMs?: number;
  /** How long to wait for `/health` (default 15 s). */
  readonly startTimeoutMs?: number;
  /**
   * Clients over TLS only, each with a certificate `ca` signed (etcd's --client-cert-auth): the server's
   * certificate and key, and a client's, with which the launcher checks `/health`.
   */
  readonly tls?: { readonly ca: string; readonly cert: string; readonly key: string; readonly client: { readonly cert: string; readonly key: string } };
}

/** A TCP port on 127.0.0.1 that nothing listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/**
 * `count` ports for directors' agent.cluster.peerListen on 127.0.0.1: each free, and the next one too
 * (connection sync listens there, @lbd/config's connSyncPort), no two pairs overlapping.
 */
export async function freePeerPorts(count: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < 50 * count && out.length < count; i++) {
    const port = await freePort();
    const overlaps = out.some((p) => Math.abs(p - port) <= 1);
    if (port < 65535 && !overlaps && await canListen(port + 1)) out.push(port);
  }
  if (out.length < count) throw new Error(`no ${count} pairs of free consecutive ports on 127.0.0.1`);
  return out;
}

function healthy(url: string, tls?: EtcdOptions['tls']): Promise<boolean> {
  return new Promise((resolve) => {
    const opts = tls ? { timeout: 1000, ca: readFileSync(tls.ca), cert: readFileSync(tls.client.cert), key: readFileSync(tls.client.key) } : { timeout: 1000 };
    const req = (tls ? httpsGet : get)(`${url}/health`, opts, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve(res.statusCode === 200 && /"health"\s*:\s*"true"/.test(body)));
      res.on('error', () => resolve(false));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
  });
}

export async function startEtcd(opts: EtcdOptions = {}): Promise<RunningEtcd> {
  const name = opts.name ?? 'lbd-test';
  const ownDir = opts.dataDir === undefined;
  const dataDir = opts.dataDir ?? (await freshDataRoot());
  const [clientPort, peerPort] = [await freePort(), await freePort()];
  const client = `${opts.tls ? 'https' : 'http'}://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const args = [
    '--name', name, '--data-dir', dataDir,
    '--listen-client-urls', client, '--advertise-client-urls', client,
    '--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer,
    '--initial-cluster', `${name}=${peer}`, '--initial-cluster-state', 'new',
    '--heartbeat-interval', String(opts.heartbeatMs ?? 100), '--election-timeout', String(opts.electionMs ?? 1000),
    '--logger', 'zap', '--log-level', 'warn',
    ...(opts.tls ? ['--cert-file', opts.tls.cert, '--key-file', opts.tls.key, '--trusted-ca-file', opts.tls.ca, '--client-cert-auth'] : []),
  ];
  // At the labs' weight (ETCD_NICE, below): the loopback tests share this box's CPU with the agents and any
  // load beside the suite, and an etcd starved past a safety window fences a leader the test expects to stay.
  // Without the privilege to raise it, nice says so on stderr and runs etcd at its own weight.
  const child = spawn('nice', ['-n', String(ETCD_NICE), 'etcd', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (c: string) => { stderr = (stderr + c).slice(-8192); });
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    child.once('exit', () => { exited = true; resolve(); });
    child.once('error', (err) => { exited = true; stderr += String(err); resolve(); });
  });
  let paused = false;
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => (stopped ??= (async () => {
    if (!exited) {
      if (paused) child.kill('SIGCONT');
      child.kill('SIGKILL');
      await exit;
    }
    if (ownDir) await rm(dataDir, { recursive: true, force: true });
  })());

  const deadline = Date.now() + (opts.startTimeoutMs ?? 15_000);
  try {
    for (;;) {
      if (exited) throw new Error(`etcd exited before it was healthy: ${stderr.trim() || 'no output'}`);
      if (await healthy(client, opts.tls)) break;
      if (Date.now() > deadline) throw new Error(`etcd not healthy after ${opts.startTimeoutMs ?? 15_000} ms: ${stderr.trim()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    endpoints: [client],
    stop,
    pause: async () => { if (!exited && !paused) { child.kill('SIGSTOP'); paused = true; } },
    resume: async () => { if (!exited && paused) { child.kill('SIGCONT'); paused = false; } },
  };
}

// ---- a three-member cluster in a cluster topology ---------------------------------------------------

/** Options of one cluster member's command line (shared by tests and the lab). */
export interface EtcdMemberTiming {
  /** etcd `--heartbeat-interval` (default 100). */
  readonly heartbeatMs?: number;
  /** etcd `--election-timeout` (default 1000). */
  readonly electionMs?: number;
}

/**
 * A cluster's etcd with TLS for clients and client-certificate authentication (--client-cert-auth), from a
 * CA of its own (makeEtcdPki): `dir` holds etcd-ca.pem, each member's etcdK.pem/.key (naming its address)
 * and each client's <name>.pem/.key, root's among them (etcd's administrator: the launcher's own etcdctl
 * calls, and the role setup). Peers stay plain http on the management switch.
 */
export interface EtcdClusterTls {
  readonly dir: string;
  readonly ca: string;
}

/** A client's certificate and key in an etcd PKI (makeEtcdPki made one for `name`). */
export function etcdClientFiles(tls: EtcdClusterTls, name: string): { readonly cert: string; readonly key: string } {
  return { cert: join(tls.dir, `${name}.pem`), key: join(tls.dir, `${name}.key`) };
}

/** etcdctl's environment for `name`'s certificate (root: etcd's administrator). */
export function etcdctlTlsEnv(tls: EtcdClusterTls, name = 'root'): Record<string, string> {
  const f = etcdClientFiles(tls, name);
  return { ETCDCTL_CACERT: tls.ca, ETCDCTL_CERT: f.cert, ETCDCTL_KEY: f.key };
}

/** A CA for etcd, a server certificate per cluster member (naming its address) and one per client name. */
export async function makeEtcdPki(dir: string, clients: readonly string[]): Promise<EtcdClusterTls> {
  const ca = await makeCa(dir, 'etcd-ca');
  for (let k = 1; k <= ETCD_MEMBERS; k++) await issueCert(ca, dir, etcdMember(k).host, [etcdMember(k).ipv4]);
  for (const c of clients) await issueCert(ca, dir, c);
  return { dir, ca: ca.certPath };
}

/** Member m's client URL: https with TLS. */
export function etcdClientUrl(m: EtcdMember, tls?: EtcdClusterTls): string {
  return tls === undefined ? m.clientUrl : m.clientUrl.replace(/^http:/, 'https:');
}

export interface EtcdClusterOptions extends EtcdMemberTiming {
  /** Clients over TLS with certificates (see EtcdClusterTls); default plain http. */
  readonly tls?: EtcdClusterTls;
  /** Parent of the members' data dirs. Default: a fresh dir under /dev/shm (cheap fsync), removed by stop(). */
  readonly dataDir?: string;
  /** How long to wait for every member to be healthy (default 30 s). */
  readonly startTimeoutMs?: number;
}

/** Three etcd members, each in its own namespace of a cluster topology (etcd1..etcd3 on the mgmt switch). */
export interface RunningEtcdCluster {
  /** Client URLs in member order: http://198.18.3.11:2379, ... (https:// with TLS) */
  readonly endpoints: string[];
  readonly members: readonly EtcdMember[];
  /** Parent of the members' data dirs (`<dataDir>/etcdK`). */
  readonly dataDir: string;
  /** SIGKILLs member k (1-based), like a crash; its data dir stays. Idempotent. */
  stopMember(k: number): Promise<void>;
  /** Starts member k again on its data dir (it rejoins) and waits until it is healthy. No-op if running. */
  startMember(k: number): Promise<void>;
  /** The raft leader's member number; waits (bounded by timeoutMs, default 10 s) while an election runs. */
  leader(timeoutMs?: number): Promise<number>;
  /** Runs `etcdctl --endpoints <all> ARGS` in member 1's namespace (any namespace on the mgmt switch would do); with TLS as root. */
  etcdctl(args: readonly string[], opts?: ExecOptions): Promise<ExecResult>;
  /** SIGSTOP every running member: a whole-cluster outage that loses no data. */
  pause(): Promise<void>;
  /** SIGCONT every paused member. */
  resume(): Promise<void>;
  /** Kills every member and removes a data dir this launcher created. Idempotent. */
  stop(): Promise<void>;
}

/** Bound on one etcdctl call: a paused or cut member must not stall a health poll. */
const ETCDCTL_TIMEOUT_MS = 3000;

/**
 * How the labs favour their etcd members: in a lab etcd shares the directors' CPUs (production would give
 * etcd boxes of its own), and at an ordinary weight a loaded lab starves etcd and every beat waits for it.
 * The directors' election threads run at SCHED_FIFO; etcd does not: Go's runtime spins between its own
 * threads, and under SCHED_FIFO (which never time-slices threads of one priority) three members on two
 * cores hung at start for 30 s in 2 of 6 tries here (0 of 6 at normal priority). The highest CFS weight
 * (nice -20, about 88 times a default process's share) gets it the CPU under load without that.
 */
export const ETCD_NICE = -20;

/** The whole command of cluster member k (`nice -n -20 etcd ...`), with its data in `<dataRoot>/etcdK`. */
export function etcdMemberCommand(k: number, dataRoot: string, opts: EtcdMemberTiming & { readonly tls?: EtcdClusterTls } = {}): string[] {
  return ['nice', '-n', String(ETCD_NICE), 'etcd', ...etcdMemberArgs(k, dataRoot, opts)];
}

/** The etcd command line (without `etcd`) of cluster member k, with its data in `<dataRoot>/etcdK`. */
export function etcdMemberArgs(k: number, dataRoot: string, opts: EtcdMemberTiming & { readonly tls?: EtcdClusterTls } = {}): string[] {
  const m = etcdMember(k);
  const clientUrl = etcdClientUrl(m, opts.tls);
  const tls = opts.tls === undefined ? [] : [
    '--cert-file', join(opts.tls.dir, `${m.host}.pem`), '--key-file', join(opts.tls.dir, `${m.host}.key`), '--trusted-ca-file', opts.tls.ca, '--client-cert-auth',
  ];
  const cluster = Array.from({ length: ETCD_MEMBERS }, (_, i) => etcdMember(i + 1)).map((x) => `${x.host}=${x.peerUrl}`).join(',');
  return [
    '--name', m.host, '--data-dir', join(dataRoot, m.host),
    '--listen-client-urls', clientUrl, '--advertise-client-urls', clientUrl, ...tls,
    '--listen-peer-urls', m.peerUrl, '--initial-advertise-peer-urls', m.peerUrl,
    // Ignored once the data dir holds a member: a restarted member rejoins with what it has.
    '--initial-cluster', cluster, '--initial-cluster-state', 'new', '--initial-cluster-token', 'lbd-cluster',
    '--heartbeat-interval', String(opts.heartbeatMs ?? 100), '--election-timeout', String(opts.electionMs ?? 1000),
    '--logger', 'zap', '--log-level', 'warn',
  ];
}

/** Runs etcdctl (API v3) in `host`'s namespace against `endpoints`. */
export function etcdctlIn(topology: Topology, host: string, endpoints: readonly string[], args: readonly string[], opts: ExecOptions = {}): Promise<ExecResult> {
  return topology.exec(host, 'etcdctl', ['--endpoints', endpoints.join(','), '--command-timeout', '1s', ...args], {
    timeoutMs: ETCDCTL_TIMEOUT_MS, ...opts, env: { ...process.env, ETCDCTL_API: '3', ...opts.env },
  });
}

/** Whether member m answers `endpoint health` (a quorum read, so false while it has no leader). */
async function memberHealthy(topology: Topology, m: EtcdMember, tls?: EtcdClusterTls): Promise<boolean> {
  const env = tls === undefined ? {} : etcdctlTlsEnv(tls);
  const r = await etcdctlIn(topology, m.host, [etcdClientUrl(m, tls)], ['endpoint', 'health'], { allowFailure: true, env }).catch(() => undefined);
  return r?.code === 0;
}

/** `[member_id, leader]` as decimal strings (they are uint64: JSON.parse would round them). */
async function memberStatus(topology: Topology, m: EtcdMember, tls?: EtcdClusterTls): Promise<[string, string] | undefined> {
  const env = tls === undefined ? {} : etcdctlTlsEnv(tls);
  const r = await etcdctlIn(topology, m.host, [etcdClientUrl(m, tls)], ['endpoint', 'status', '-w', 'json'], { allowFailure: true, env }).catch(() => undefined);
  const id = /"member_id":(\d+)/.exec(r?.stdout ?? '')?.[1];
  const leader = /"leader":(\d+)/.exec(r?.stdout ?? '')?.[1];
  return r?.code === 0 && id !== undefined && leader !== undefined ? [id, leader] : undefined;
}

/** A fresh temp dir, in /dev/shm when there is one: etcd fsyncs every write, which is cheap in tmpfs. */
async function freshDataRoot(): Promise<string> {
  const base = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
  return mkdtemp(join(base, 'lbd-etcd-'));
}

/**
 * Starts the three members in a cluster topology (`clusterTopology`) and waits until each is healthy. On
 * failure it stops what it started and rethrows. The topology's `destroy()` also kills the members, but
 * only `stop()` removes the data.
 */
export async function startEtcdCluster(topology: Topology, opts: EtcdClusterOptions = {}): Promise<RunningEtcdCluster> {
  const members = Array.from({ length: ETCD_MEMBERS }, (_, i) => etcdMember(i + 1));
  const ownDir = opts.dataDir === undefined;
  const dataRoot = opts.dataDir ?? (await freshDataRoot());
  const procs = new Map<number, BackgroundProcess>();
  let paused = false;

  const member = (k: number): EtcdMember => {
    const m = members[k - 1];
    if (m === undefined) throw new Error(`etcd member ${k} is not in 1..${members.length}`);
    return m;
  };
  const spawnMember = (k: number): void => {
    const m = member(k);
    const [command, ...args] = etcdMemberCommand(k, dataRoot, opts);
    procs.set(k, topology.spawn(m.host, command!, args, { label: `${m.host}:etcd` }));
  };
  const waitHealthy = async (ks: readonly number[], timeoutMs: number): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    let pending = [...ks];
    while (pending.length > 0) {
      for (const k of pending) {
        const p = procs.get(k);
        if (p === undefined || !p.running) throw new Error(`etcd member ${k} exited before it was healthy: ${p?.stderr.trim().slice(-2000) || 'no output'}`);
      }
      const ok = await Promise.all(pending.map((k) => memberHealthy(topology, member(k), opts.tls)));
      pending = pending.filter((_, i) => !ok[i]);
      if (pending.length === 0) return;
      if (Date.now() > deadline) throw new Error(`etcd members ${pending.join(', ')} not healthy after ${timeoutMs} ms: ${pending.map((k) => procs.get(k)?.stderr.trim().slice(-500)).join(' | ')}`);
      await delay(100);
    }
  };
  const stopMember = async (k: number): Promise<void> => {
    const p = procs.get(member(k).k);
    if (p === undefined) return;
    p.signal('SIGCONT');
    p.signal('SIGKILL');
    await p.exited;
    procs.delete(k);
  };
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => (stopped ??= (async () => {
    await Promise.all(members.map((m) => stopMember(m.k)));
    if (ownDir) await rm(dataRoot, { recursive: true, force: true });
  })());

  const timeoutMs = opts.startTimeoutMs ?? 30_000;
  try {
    for (const m of members) spawnMember(m.k);
    await waitHealthy(members.map((m) => m.k), timeoutMs);
  } catch (e) {
    await stop();
    throw e;
  }
  const endpoints = members.map((m) => etcdClientUrl(m, opts.tls));
  const rootEnv = opts.tls === undefined ? {} : etcdctlTlsEnv(opts.tls);
  return {
    endpoints,
    members,
    dataDir: dataRoot,
    stopMember,
    startMember: async (k) => {
      if (procs.get(member(k).k)?.running) return;
      spawnMember(k);
      await waitHealthy([k], timeoutMs);
    },
    leader: (ms = 10_000) => findLeader(topology, members.filter((m) => procs.get(m.k)?.running), ms, opts.tls),
    etcdctl: (args, execOpts) => etcdctlIn(topology, members[0]!.host, endpoints, args, { ...execOpts, env: { ...rootEnv, ...execOpts?.env } }),
    pause: async () => { for (const p of procs.values()) p.signal('SIGSTOP'); paused = true; },
    resume: async () => { if (paused) for (const p of procs.values()) p.signal('SIGCONT'); paused = false; },
    stop,
  };
}

/** Polls the running members' status until one of them is the leader they agree on. */
async function findLeader(topology: Topology, running: readonly EtcdMember[], timeoutMs: number, tls?: EtcdClusterTls): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const statuses = await Promise.all(running.map((m) => memberStatus(topology, m, tls)));
    const leaderIds = new Set(statuses.map((s) => s?.[1]).filter((id) => id !== undefined && id !== '0'));
    const k = running.findIndex((_, i) => leaderIds.size === 1 && leaderIds.has(statuses[i]?.[0]));
    if (k >= 0) return running[k]!.k;
    if (Date.now() > deadline) throw new Error(`no etcd leader among members ${running.map((m) => m.k).join(', ')} after ${timeoutMs} ms`);
    await delay(100);
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
