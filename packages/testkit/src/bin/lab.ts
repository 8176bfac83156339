#!/usr/bin/env node
import { readFile } from 'node:fs/promises';
import {
  CLUSTER, CUT_TARGETS, DIRECTOR_NAMES, ETCD_MEMBERS, clusterDirector, clusterHostNames, clusterTopology, etcdMember, openClusterTopology,
  type CutTarget, type DirectorName,
} from '../cluster-topology.js';
import { realServer } from '../director-topology.js';
import { etcdMemberArgs } from '../etcd.js';
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
 *   lab.js etcd-args K DATADIR etcd member K's command line, one argument per line (data in DATADIR/etcdK)
 *   lab.js cut DIR WHAT        cut dir1|dir2 off etcd|peer|front; `restore DIR WHAT` undoes it
 *   lab.js kill-box DIR        SIGKILL everything in DIR and set its links down; `revive DIR` brings the links back
 */

const LAB_PREFIX = 'lbd-';
const LAB_REAL_SERVERS = 3;

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

function printEtcdMembers(): number {
  for (let k = 1; k <= ETCD_MEMBERS; k++) process.stdout.write(`${etcdMember(k).host} ${etcdMember(k).clientUrl}\n`);
  return 0;
}

function printEtcdArgs(k: string | undefined, dataDir: string | undefined): number {
  if (k === undefined || !/^\d+$/.test(k) || dataDir === undefined) return usage();
  for (const a of etcdMemberArgs(Number(k), dataDir)) process.stdout.write(`${a}\n`);
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

function usage(): number {
  process.stderr.write('usage: lab.js up|check|status|hosts|etcd-members|etcd-args K DATADIR|cut DIR WHAT|restore DIR WHAT|kill-box DIR|revive DIR (run by deploy/lab/lab)\n');
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
    case 'cut': case 'restore': case 'kill-box': case 'revive': return drill(cmd, args);
    default: return usage();
  }
}

main().then((code) => process.exit(code), (e: unknown) => {
  process.stderr.write(`lab: ${(e as Error).message ?? String(e)}\n`);
  process.exit(1);
});
