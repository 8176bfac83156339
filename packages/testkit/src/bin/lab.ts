#!/usr/bin/env node
import { spawn } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import {
  CLUSTER, CUT_TARGETS, DIRECTOR_NAMES, ETCD_MEMBERS, clusterDirector, clusterHostNames, clusterTopology, etcdMember, openClusterTopology,
  type CutTarget, type DirectorName,
} from '../cluster-topology.js';
import { realServer } from '../director-topology.js';
import { AdminApi } from '@lbd/proto';
import { DRILL_PAUSE_MS, DRILL_SCENARIOS, PAUSE_DRILL_SCENARIOS, type DrillScenario } from '@lbd/config';
import { drillProblems, drillRecord, formatDrill, runDrill, summary, type DrillResult, type DrillTarget } from '../drill.js';
import { etcdClientUrl, etcdMemberCommand, makeEtcdPki, type EtcdClusterTls } from '../etcd.js';
import { HA_GROUP, HA_VIP, waitAgentAnswers, waitSteady, type HaAdmin } from '../ha-lab.js';
import { runCommand } from '../exec.js';
import { listNamespaces, namespacePids } from '../netns.js';

/**
 * The namespace half of deploy/lab/lab: builds the active/standby lab with the same topology code as the
 * privileged tests (packages/testkit/src/cluster-topology.ts, prefix `lbd-`), runs its failure drills, and
 * reports on it. Processes (etcd, test servers, the agents) are started and stopped by the bash script, so
 * they outlive this process; teardown is also the script's, so it works without a build.
 *
 *   lab.js up                  build the topology (fails if any lbd- namespace exists: run `lab down` first)
 *   lab.js check               exit 0 when every lab namespace exists with its addresses, else 1 and what is missing
 *   lab.js status              namespaces and the processes in each
 *   lab.js hosts               one line per real server: NAME IPV4 IPV6
 *   lab.js etcd-members        one line per etcd member: HOST CLIENT_URL
 *   lab.js etcd-args K DATADIR etcd member K's whole command (nice -n -20 etcd ...), one argument per line (data in DATADIR/etcdK)
 *   lab.js etcd-pki            the lab's etcd CA and certificates (members, dir1, dir2, root, ops) in /run/lbd/lab-tls/etcd
 *   lab.js cut DIR WHAT        cut dir1|dir2 off etcd|peer|front; `restore DIR WHAT` undoes it
 *   lab.js kill-box DIR        SIGKILL everything in DIR and set its links down; `revive DIR` brings the links back
 *   lab.js drill --scenario SCENARIO [--count N] [--pause-ms MS] [--json]
 *                              runDrill (packages/testkit/src/drill.ts) on the running lab, N times: a client
 *                              load through the vip, SCENARIO caused on the leader (pause-standby: the standby),
 *                              measured, undone. Acts on the lab's own processes: the agents and etcd
 *                              members by their pid files in $LAB_STATE (.lab), an agent restarted with the
 *                              script's command line. Each result goes to the event log (RecordDrill: a
 *                              `drill` event).
 */

const LAB_PREFIX = 'lbd-';
const LAB_REAL_SERVERS = 3;
/** Where deploy/lab/lab keeps the etcd CA and certificates (deploy/lab/dirK.yaml's agent.cluster.etcdTls). */
const LAB_ETCD_TLS: EtcdClusterTls = { dir: '/run/lbd/lab-tls/etcd', ca: '/run/lbd/lab-tls/etcd/etcd-ca.pem' };

const realServers = Array.from({ length: LAB_REAL_SERVERS }, (_, i) => realServer(i + 1));
const hosts = clusterHostNames(LAB_REAL_SERVERS);

async function up(): Promise<number> {
  const existing = (await listNamespaces()).filter((n) => n.startsWith(LAB_PREFIX));
  if (existing.length > 0) {
    process.stderr.write(`lab: namespaces already exist (${existing.join(', ')}); run deploy/lab/lab down first\n`);
    return 1;
  }
  await clusterTopology({ prefix: LAB_PREFIX, realServers: LAB_REAL_SERVERS });
  process.stdout.write(`lab: namespaces up: ${hosts.map((h) => LAB_PREFIX + h).join(' ')}\n`);
  return 0;
}

/**
 * Namespaces and the router's and etcd hosts' addresses. The directors' links are not checked: a lab in
 * the middle of a drill (a cut, a killed box) is still a lab that is up.
 */
async function check(): Promise<number> {
  const present = new Set(await listNamespaces());
  const problems = hosts.filter((h) => !present.has(LAB_PREFIX + h)).map((h) => `namespace ${LAB_PREFIX}${h} is missing`);
  if (problems.length === 0) {
    const r = CLUSTER.router;
    const wanted: [string, string][] = [[r.host, r.frontIpv4], [r.host, r.clientIpv4], ...[1, 2, 3].map((k): [string, string] => [etcdMember(k).host, etcdMember(k).ipv4])];
    for (const [host, a] of wanted) {
      const { stdout } = await runCommand('ip', ['-n', LAB_PREFIX + host, '-br', 'addr']);
      if (!stdout.includes(` ${a}/`)) problems.push(`${LAB_PREFIX}${host} lacks address ${a}`);
    }
  }
  for (const p of problems) process.stderr.write(`lab: ${p}\n`);
  return problems.length === 0 ? 0 : 1;
}

async function status(): Promise<number> {
  const all = (await listNamespaces()).filter((n) => n.startsWith(LAB_PREFIX));
  const expected = hosts.map((h) => LAB_PREFIX + h);
  const names = [...expected, ...all.filter((n) => !expected.includes(n)).sort()];
  for (const ns of names) {
    if (!all.includes(ns)) {
      process.stdout.write(`${ns.padEnd(12)} missing\n`);
      continue;
    }
    const pids = await namespacePids(ns);
    const procs = await Promise.all(pids.map(async (pid) => `${pid} ${await commandLine(pid)}`));
    const extra = expected.includes(ns) ? '' : ' (not part of the lab topology)';
    process.stdout.write(`${ns.padEnd(12)} up${extra}${procs.length ? '' : ', no processes'}\n`);
    for (const p of procs) process.stdout.write(`             ${p}\n`);
  }
  return 0;
}

async function commandLine(pid: number): Promise<string> {
  try {
    return (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').filter(Boolean).join(' ');
  } catch {
    return '(exited)';
  }
}

function printHosts(): number {
  for (const r of realServers) process.stdout.write(`${r.host} ${r.ipv4} ${r.ipv6}\n`);
  return 0;
}

// The lab's etcd serves clients over TLS only (the agents', lbadm's and etcdctl's certificates from the
// lab's etcd CA, made by etcd-pki); its members talk among themselves over plain http on the switch.
function printEtcdMembers(): number {
  for (let k = 1; k <= ETCD_MEMBERS; k++) process.stdout.write(`${etcdMember(k).host} ${etcdClientUrl(etcdMember(k), LAB_ETCD_TLS)}\n`);
  return 0;
}

function printEtcdArgs(k: string | undefined, dataDir: string | undefined): number {
  if (k === undefined || !/^\d+$/.test(k) || dataDir === undefined) return usage();
  for (const a of etcdMemberCommand(Number(k), dataDir, { tls: LAB_ETCD_TLS })) process.stdout.write(`${a}\n`);
  return 0;
}

/** The lab's etcd CA and certificates: each member's, the directors', etcd's root and the operator ops. */
async function makeLabEtcdPki(): Promise<number> {
  await makeEtcdPki(LAB_ETCD_TLS.dir, [...DIRECTOR_NAMES, 'root', 'ops']);
  process.stdout.write(`${LAB_ETCD_TLS.dir}\n`);
  return 0;
}

function director(name: string | undefined): DirectorName {
  if (!DIRECTOR_NAMES.includes(name as DirectorName)) throw new Error(`director must be ${DIRECTOR_NAMES.join(' or ')} (got ${JSON.stringify(name ?? '')})`);
  return clusterDirector(name as DirectorName).host;
}

function cutTarget(what: string | undefined): CutTarget {
  if (!CUT_TARGETS.includes(what as CutTarget)) throw new Error(`what to cut must be ${CUT_TARGETS.join(', ')} (got ${JSON.stringify(what ?? '')})`);
  return what as CutTarget;
}

/** Runs a drill on the running lab and says what it did. */
async function drill(cmd: string, args: readonly string[]): Promise<number> {
  const d = director(args[0]);
  const what = cmd === 'cut' || cmd === 'restore' ? cutTarget(args[1]) : undefined;
  const lab = await openClusterTopology({ prefix: LAB_PREFIX, realServers: LAB_REAL_SERVERS });
  if (cmd === 'cut') await lab.cut(d, what!);
  else if (cmd === 'restore') await lab.restore(d, what!);
  else if (cmd === 'kill-box') await lab.killBox(d);
  else await lab.reviveBox(d);
  process.stdout.write(`lab: ${cmd} ${d}${what ? ` ${what}` : ''}: done\n`);
  return 0;
}

// ---- drills on the running lab ---------------------------------------------------------------------

/** Where the script keeps the lab's processes; set by deploy/lab/lab (paths relative to the repository). */
const LAB_ENV = {
  state: process.env.LAB_STATE ?? '.lab',
  agentJs: process.env.LAB_AGENT_JS ?? 'packages/director-agent/dist/bin/lbd-agent.js',
  socketDir: process.env.LAB_SOCKET_DIR ?? '/run/lbd',
  configDir: process.env.LAB_CONFIG_DIR ?? 'deploy/lab',
};
const MAX_DRILLS = 1000;
const AGENT_EXIT_MS = 5000;

/** The pid in `file` if that process lives and its command line contains `pattern` (a recycled pid is never signalled). */
async function livePid(file: string, pattern: string): Promise<number | undefined> {
  const pid = Number((await readFile(file, 'utf8').catch(() => '')).trim());
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  return (await commandLine(pid)).includes(pattern) ? pid : undefined;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The running lab as a drill target: its namespaces, its agents' admin sockets, its pid files. */
async function labTarget(): Promise<DrillTarget> {
  const cluster = await openClusterTopology({ prefix: LAB_PREFIX, realServers: LAB_REAL_SERVERS });
  const socket = (d: DirectorName): string => `${LAB_ENV.socketDir}/${d}.sock`;
  const agentPidFile = (d: DirectorName): string => `${LAB_ENV.state}/${d}-agent.pid`;
  // The admin API in this process, not through lbadm: on a loaded machine starting one lbadm process per
  // call took longer than the drills' 2 s bound on a status call (seen: 2.7 s), so every call failed.
  const apis = new Map<DirectorName, HaAdmin>();
  const api = (d: DirectorName): HaAdmin => {
    let a = apis.get(d);
    if (a === undefined) apis.set(d, (a = new AdminApi(socket(d))));
    return a;
  };
  /** Agent pids as last seen, so agentRunning can answer synchronously. */
  const agentPids = new Map<DirectorName, number>();
  const refresh = async (d: DirectorName): Promise<number | undefined> => {
    const pid = await livePid(agentPidFile(d), LAB_ENV.agentJs);
    if (pid === undefined) agentPids.delete(d);
    else agentPids.set(d, pid);
    return pid;
  };
  for (const d of DIRECTOR_NAMES) await refresh(d);
  const etcdPids = async (): Promise<number[]> => {
    const pids: number[] = [];
    for (let k = 1; k <= ETCD_MEMBERS; k++) {
      const host = etcdMember(k).host;
      const pid = await livePid(`${LAB_ENV.state}/${host}-etcd.pid`, `--name ${host} `);
      if (pid !== undefined) pids.push(pid);
    }
    return pids;
  };
  const signalEtcd = async (sig: NodeJS.Signals): Promise<void> => {
    for (const pid of await etcdPids()) process.kill(pid, sig);
  };
  return {
    cluster, group: HA_GROUP, vip: HA_VIP, api,
    agentRunning: (d) => { const pid = agentPids.get(d); return pid !== undefined && alive(pid); },
    signalAgent: async (d, signal) => {
      const pid = await refresh(d);
      if (pid !== undefined) process.kill(pid, signal);
    },
    killAgent: async (d, signal = 'SIGKILL') => {
      const pid = await refresh(d);
      if (pid === undefined) return;
      process.kill(pid, signal);
      const deadline = Date.now() + AGENT_EXIT_MS;
      while (alive(pid) && Date.now() < deadline) await delay(10);
      if (alive(pid)) process.kill(pid, 'SIGKILL');
      agentPids.delete(d);
    },
    startAgent: async (d) => {
      if ((await refresh(d)) !== undefined) return;
      // As deploy/lab/lab's start_agent: its own session, output to .lab/dirK-agent.log, the pid in .lab/dirK-agent.pid.
      await rm(socket(d), { force: true });
      const log = openSync(`${LAB_ENV.state}/${d}-agent.log`, 'a');
      const child = spawn('ip', ['netns', 'exec', `${LAB_PREFIX}${d}`, 'node', LAB_ENV.agentJs, '--config', `${LAB_ENV.configDir}/${d}.yaml`, '--admin-socket', socket(d)],
        { detached: true, stdio: ['ignore', log, log] });
      closeSync(log);
      child.unref();
      const pid = child.pid;
      if (pid === undefined) throw new Error(`could not start lbd-agent in ${LAB_PREFIX}${d}`);
      await writeFile(agentPidFile(d), `${pid}\n`);
      agentPids.set(d, pid);
      await waitAgentAnswers(api(d), `lbd-agent in ${LAB_PREFIX}${d} answering on ${socket(d)} (log ${LAB_ENV.state}/${d}-agent.log)`, () => alive(pid));
    },
    pauseEtcd: () => signalEtcd('SIGSTOP'),
    resumeEtcd: () => signalEtcd('SIGCONT'),
    logs: () => `agent logs: ${DIRECTOR_NAMES.map((d) => `${LAB_ENV.state}/${d}-agent.log`).join(', ')}`,
  };
}

/**
 * Stores a drill's result in the cluster's event log (RecordDrill on the first director that answers, the
 * new leader first), so `lbadm events --kind drill` and the dashboard show the last drills.
 */
async function recordDrill(r: DrillResult, say: (line: string) => void): Promise<void> {
  const order = [...new Set([r.newLeader, r.oldLeader, ...DIRECTOR_NAMES].filter((d): d is DirectorName => d !== null))];
  const failures: string[] = [];
  for (const d of order) {
    const api = new AdminApi(`${LAB_ENV.socketDir}/${d}.sock`);
    try {
      const { id } = await api.recordDrill(drillRecord(r), { timeoutMs: 5000 });
      say(`lab: drill result recorded in the event log by ${d} (${id})`);
      return;
    } catch (err) {
      failures.push(`${d}: ${(err as Error).message}`);
    } finally {
      api.close();
    }
  }
  process.stderr.write(`lab: the drill result is not in the event log: no director recorded it (${failures.join('; ')})\n`);
}

async function drillCommand(args: readonly string[]): Promise<number> {
  let scenario: DrillScenario | undefined;
  let count = 1;
  let pauseMs: number | undefined;
  let json = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    // --mode: the old name of --scenario, still read for scripts; no help or message names it.
    if (a === '--scenario' || a === '--mode') scenario = args[++i] as DrillScenario;
    else if (a === '--count') count = Number(args[++i]);
    else if (a === '--pause-ms') pauseMs = Number(args[++i]);
    else if (a === '--json') json = true;
    else throw new Error(`drill: unknown argument ${JSON.stringify(a)}`);
  }
  if (scenario === undefined || !DRILL_SCENARIOS.includes(scenario)) throw new Error(`drill: --scenario must be one of ${DRILL_SCENARIOS.join(', ')}`);
  if (!Number.isInteger(count) || count < 1 || count > MAX_DRILLS) throw new Error(`drill: --count must be 1..${MAX_DRILLS}`);
  if (pauseMs !== undefined) {
    if (!Number.isInteger(pauseMs) || pauseMs < DRILL_PAUSE_MS.min || pauseMs > DRILL_PAUSE_MS.max) throw new Error(`drill: --pause-ms must be ${DRILL_PAUSE_MS.min}..${DRILL_PAUSE_MS.max}`);
    if (!PAUSE_DRILL_SCENARIOS.includes(scenario)) throw new Error(`drill: --pause-ms applies to ${PAUSE_DRILL_SCENARIOS.join(' and ')} only`);
  }
  const target = await labTarget();
  // An interrupted drill leaves nothing broken: agents thawed, etcd resumed, links restored (the script's revive restarts a killed box).
  const onSignal = (): void => {
    void (async () => {
      for (const d of DIRECTOR_NAMES) await target.signalAgent(d, 'SIGCONT').catch(() => undefined);
      await target.resumeEtcd().catch(() => undefined);
      for (const d of DIRECTOR_NAMES) for (const w of ['etcd', 'peer'] as const) await target.cluster.restore(d, w).catch(() => undefined);
      process.stderr.write('lab: drill interrupted; agents thawed, etcd resumed and cuts restored (a killed box: deploy/lab/lab revive DIR)\n');
      process.exit(130);
    })();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const say = (line: string): void => { if (!json) process.stdout.write(`${line}\n`); };
  say(`lab: drill ${scenario} x${count}: waiting for a steady cluster`);
  await waitSteady(target);
  const results: DrillResult[] = [];
  for (let i = 1; i <= count; i++) {
    const r = await runDrill(target, scenario, { ...(pauseMs !== undefined ? { pauseMs } : {}), log: (l) => process.stderr.write(`lab: ${l}\n`) });
    results.push(r);
    say(`lab: drill ${i}/${count} ${scenario}: ${summary(r)}`);
    await recordDrill(r, say);
  }
  if (json) process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
  else process.stdout.write(`\n${formatDrill(results)}`);
  let failed = 0;
  for (const r of results) {
    const problems = drillProblems(r);
    if (problems.length === 0) continue;
    failed++;
    process.stderr.write(`lab: drill ${r.scenario} at ${new Date(r.failedAt).toISOString()} failed: ${problems.join('; ')}\n`);
  }
  return failed > 0 ? 1 : 0;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function usage(): number {
  process.stderr.write('usage: lab.js up|check|status|hosts|etcd-members|etcd-args K DATADIR|etcd-pki|cut DIR WHAT|restore DIR WHAT|kill-box DIR|revive DIR|drill --scenario SCENARIO [--count N] [--pause-ms MS] [--json] (run by deploy/lab/lab)\n');
  return 64;
}

async function main(): Promise<number> {
  const [cmd, ...args] = process.argv.slice(2);
  switch (cmd) {
    case 'up': return up();
    case 'check': return check();
    case 'status': return status();
    case 'hosts': return printHosts();
    case 'etcd-members': return printEtcdMembers();
    case 'etcd-args': return printEtcdArgs(args[0], args[1]);
    case 'etcd-pki': return makeLabEtcdPki();
    case 'cut': case 'restore': case 'kill-box': case 'revive': return drill(cmd, args);
    case 'drill': return drillCommand(args);
    default: return usage();
  }
}

main().then((code) => process.exit(code), (e: unknown) => {
  process.stderr.write(`lab: ${(e as Error).message ?? String(e)}\n`);
  process.exit(1);
});
