#!/usr/bin/env node
import { readFile } from 'node:fs/promises';
import { DIRECTOR, HOSTS, LOCAL_ADDRESSES, VIPS, directorTopology, realServer } from '../director-topology.js';
import { runCommand } from '../exec.js';
import { listNamespaces, namespacePids } from '../netns.js';

/**
 * The namespace half of deploy/lab/lab: builds the lab with the same topology code as the privileged tests
 * (prefix `lbd-`), and reports on it. Processes (test servers, the agent) are started and stopped by the
 * bash script, so they outlive this process; teardown is also the script's, so it works without a build.
 *
 *   lab.js up       build the topology (fails if any lbd- namespace exists: run `lab down` first)
 *   lab.js check    exit 0 when every lab namespace exists with its addresses, else 1 and what is missing
 *   lab.js status   namespaces and the processes in each
 *   lab.js hosts    one line per real server: NAME IPV4 IPV6
 */

const LAB_PREFIX = 'lbd-';
const LAB_REAL_SERVERS = 3;

const realServers = Array.from({ length: LAB_REAL_SERVERS }, (_, i) => realServer(i + 1));
const hosts = [HOSTS.client, HOSTS.director, HOSTS.switch, ...realServers.map((r) => r.host)];

async function up(): Promise<number> {
  const existing = (await listNamespaces()).filter((n) => n.startsWith(LAB_PREFIX));
  if (existing.length > 0) {
    process.stderr.write(`lab: namespaces already exist (${existing.join(', ')}); run deploy/lab/lab down first\n`);
    return 1;
  }
  await directorTopology({ prefix: LAB_PREFIX, realServers: LAB_REAL_SERVERS });
  process.stdout.write(`lab: namespaces up: ${hosts.map((h) => LAB_PREFIX + h).join(' ')}\n`);
  return 0;
}

async function check(): Promise<number> {
  const present = new Set(await listNamespaces());
  const problems = hosts.filter((h) => !present.has(LAB_PREFIX + h)).map((h) => `namespace ${LAB_PREFIX}${h} is missing`);
  if (problems.length === 0) {
    const { stdout } = await runCommand('ip', ['-n', LAB_PREFIX + DIRECTOR.host, '-br', 'addr']);
    const wanted = [VIPS.ipv4, VIPS.ipv4Nat, VIPS.ipv6, ...LOCAL_ADDRESSES.ipv4, ...LOCAL_ADDRESSES.ipv6];
    for (const a of wanted) if (!stdout.includes(` ${a}/`)) problems.push(`${LAB_PREFIX}${DIRECTOR.host} lacks address ${a}`);
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

async function main(): Promise<number> {
  switch (process.argv[2]) {
    case 'up': return up();
    case 'check': return check();
    case 'status': return status();
    case 'hosts': return printHosts();
    default:
      process.stderr.write('usage: lab.js up|check|status|hosts (run by deploy/lab/lab)\n');
      return 64;
  }
}

main().then((code) => process.exit(code), (e: unknown) => {
  process.stderr.write(`lab: ${(e as Error).message ?? String(e)}\n`);
  process.exit(1);
});
