#!/usr/bin/env node
import { createConnection, createServer, type Socket } from 'node:net';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AdminApi } from '@lbd/proto';
import { ECMP_DRILL_SCENARIOS, ecmpDrillProblems, ecmpDrillRecord, ecmpDrillSummary, runEcmpDrill, type EcmpDrillScenario } from '../ecmp-drill.js';
import { ECMP_DIRECTORS, ECMP_DR_VIP, ECMP_SPARE, ECMP_VIP, ecmpNextHop, startEcmpLab, type EcmpDirector, type EcmpLab, type RouterMode } from '../ecmp-lab.js';

/**
 * The ECMP half of deploy/lab/lab (`lab up --ecmp`): the tier's lab of packages/testkit/src/ecmp-lab.ts (an
 * FRR router, dir1..dir3 running lbd-agent and gobgpd, dir4 provisioned for a scale-out, etcd, real
 * servers, a client) kept up by one process until it is told to stop. Unlike the active/standby lab, whose
 * processes the bash script starts one by one, this lab's processes are this process's children: stopping
 * it (SIGTERM, `lab down`) takes the whole lab down, and a killed one leaves its namespaces to `lab down`.
 *
 *   ecmp-lab.js serve --state DIR [--slots N] [--prefix P]
 *                              builds the lab, writes DIR/ready.json (the admin sockets), each agent's log to
 *                              DIR/dirK-agent.log (its last lines, every 2 s), and answers commands on
 *                              DIR/control.sock until SIGTERM or SIGINT
 *   ecmp-lab.js ctl --state DIR COMMAND [ARG]
 *                              one command to a serving lab, its answer on stdout: status, scale-out,
 *                              scale-in, kill-box dirK, revive dirK, drill SCENARIO [--victim dirK]
 *                              [--router hash-threshold|resilient] [--count N] (packages/testkit/src/ecmp-drill.ts,
 *                              each result also recorded in the event log); exit 1 when it failed
 */

const SLOTS_DEFAULT = 8;
const LOG_EVERY_MS = 2000;
/** How long a command may take (a scale-out waits for a bulk sync and gobgpd's first connect); a drill, each. */
const CTL_TIMEOUT_MS = 180_000;
const MAX_DRILLS = 10;

function usage(): number {
  process.stderr.write('usage: ecmp-lab.js serve --state DIR [--slots N] [--prefix P] | ctl --state DIR status|scale-out|scale-in|kill-box DIR|revive DIR|drill SCENARIO [--victim DIR] [--router MODE] [--count N]\n');
  return 64;
}

function option(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const v = args[i + 1];
  args.splice(i, 2);
  return v;
}

async function serve(args: string[]): Promise<number> {
  const state = option(args, '--state');
  const slotsText = option(args, '--slots') ?? String(SLOTS_DEFAULT);
  const prefix = option(args, '--prefix') ?? 'lbd-';
  if (state === undefined || args.length > 0) return usage();
  const slots = Number(slotsText);
  if (![1, 2, 4, 8, 16, 32, 64].includes(slots)) {
    process.stderr.write(`ecmp-lab: --slots ${slotsText}: the lab splits 64 local addresses evenly, so slots must be a power of two from 1 to 64\n`);
    return 64;
  }
  await mkdir(state, { recursive: true });
  const control = join(state, 'control.sock');
  await rm(control, { force: true });
  process.stdout.write(`ecmp-lab: building the tier's lab (${slots} slots; gobgpd waits 5-10 s before its first connect)\n`);
  const lab = await startEcmpLab({ prefix, slots, spare: true, admin: (socket) => new AdminApi(socket) });
  const sockets = Object.fromEntries(([...ECMP_DIRECTORS, ECMP_SPARE] as EcmpDirector[]).map((d) => [d, lab.socket(d)]));
  let closing: Promise<void> | null = null;
  const writeLogs = async (): Promise<void> => {
    for (const d of [...ECMP_DIRECTORS, ECMP_SPARE] as EcmpDirector[]) await writeFile(join(state, `${d}-agent.log`), `${lab.agentLog(d, 500)}\n`).catch(() => undefined);
  };
  const logTimer = setInterval(() => { void writeLogs(); }, LOG_EVERY_MS);
  let queue: Promise<unknown> = Promise.resolve();
  const server = createServer((conn) => {
    let line = '';
    conn.setEncoding('utf8');
    conn.on('data', (chunk: string) => {
      line += chunk;
      if (!line.includes('\n')) return;
      const words = line.split('\n')[0]!.trim().split(/\s+/);
      // One command at a time: a kill-box during a scale-out would make either's answer meaningless.
      queue = queue.then(() => command(lab, words).then(
        (text) => { conn.end(`ok\n${text}\n`); },
        (e: unknown) => { conn.end(`failed\n${e instanceof Error ? e.message : String(e)}\n`); },
      ));
    });
    conn.on('error', () => undefined);
  });
  await new Promise<void>((resolve, reject) => { server.once('error', reject); server.listen(control, resolve); });
  await writeLogs();
  await writeFile(join(state, 'ready.json'), `${JSON.stringify({ pid: process.pid, slots, vip: ECMP_VIP, sockets }, null, 2)}\n`);
  process.stdout.write(`ecmp-lab: up; commands on ${control}\n`);
  const stop = (): void => {
    closing ??= (async () => {
      process.stdout.write('ecmp-lab: stopping\n');
      clearInterval(logTimer);
      server.close();
      await writeLogs();
      await lab.destroy();
      await rm(join(state, 'ready.json'), { force: true });
      await rm(control, { force: true });
      process.stdout.write('ecmp-lab: down\n');
      process.exit(0);
    })();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  return new Promise<number>(() => undefined);
}

function director(name: string | undefined, lab: EcmpLab<AdminApi>): EcmpDirector {
  const all: string[] = [...ECMP_DIRECTORS, ECMP_SPARE];
  if (name === undefined || !all.includes(name)) throw new Error(`director must be one of ${all.join(', ')} (got ${JSON.stringify(name ?? '')}); running: ${lab.running().join(', ')}`);
  return name as EcmpDirector;
}

async function command(lab: EcmpLab<AdminApi>, words: string[]): Promise<string> {
  const [cmd, arg] = words;
  switch (cmd) {
    case 'status': return status(lab);
    case 'scale-out': {
      if (lab.running().includes(ECMP_SPARE)) throw new Error(`${ECMP_SPARE} runs already: the lab has one director to add (scale-in removes it)`);
      await lab.startDirector(ECMP_SPARE);
      await lab.waitSteady(120_000);
      return `${ECMP_SPARE} added; its slots moved to it after their bulk sync\n${await status(lab)}`;
    }
    case 'scale-in': {
      if (!lab.running().includes(ECMP_SPARE)) throw new Error(`${ECMP_SPARE} is not running: nothing to remove (scale-out adds it)`);
      await lab.stopDirector(ECMP_SPARE);
      await lab.waitSteady(120_000);
      return `${ECMP_SPARE} stopped (its slots went to their standbys, which held their connections)\n${await status(lab)}`;
    }
    case 'kill-box': {
      const d = director(arg, lab);
      if (!lab.running().includes(d)) throw new Error(`${d} is not running`);
      await lab.killBox(d);
      return `${d}: every process SIGKILLed, every link down; its slots go to their standbys (revive ${d} brings it back)`;
    }
    case 'revive': {
      const d = director(arg, lab);
      if (lab.running().includes(d)) throw new Error(`${d} runs: nothing to revive`);
      await lab.reviveBox(d);
      await lab.waitSteady(120_000);
      return `${d} is back and leads its slots again after their bulk sync\n${await status(lab)}`;
    }
    case 'drill': return drill(lab, words.slice(1));
    default: throw new Error(`unknown command ${JSON.stringify(cmd ?? '')}: status, scale-out, scale-in, kill-box DIR, revive DIR, drill SCENARIO`);
  }
}

/** `drill SCENARIO [--victim DIR] [--router MODE] [--count N]`: N drills, each recorded as an event; fails if one failed. */
async function drill(lab: EcmpLab<AdminApi>, args: string[]): Promise<string> {
  const scenario = args.shift();
  const victimName = option(args, '--victim');
  const router = option(args, '--router') ?? 'hash-threshold';
  const countText = option(args, '--count') ?? '1';
  if (scenario === undefined || !(ECMP_DRILL_SCENARIOS as readonly string[]).includes(scenario)) {
    throw new Error(`drill: the scenario must be one of ${ECMP_DRILL_SCENARIOS.join(', ')} (got ${JSON.stringify(scenario ?? '')})`);
  }
  if (router !== 'hash-threshold' && router !== 'resilient') throw new Error(`drill: --router must be hash-threshold or resilient (got ${JSON.stringify(router)})`);
  const count = Number(countText);
  if (!Number.isInteger(count) || count < 1 || count > MAX_DRILLS) throw new Error(`drill: --count must be 1..${MAX_DRILLS} (got ${JSON.stringify(countText)})`);
  if (args.length > 0) throw new Error(`drill: unknown argument ${JSON.stringify(args[0])}`);
  const victim = victimName === undefined ? undefined : director(victimName, lab);
  if (scenario === 'scale-out' && victim !== undefined) throw new Error(`drill: scale-out always adds ${ECMP_SPARE}; --victim does not apply`);
  const lines: string[] = [];
  let failed = 0;
  for (let i = 1; i <= count; i++) {
    const r = await runEcmpDrill(lab, scenario as EcmpDrillScenario, { victim, router: router as RouterMode, log: (l) => process.stdout.write(`ecmp-lab: ${l}\n`) });
    const problems = ecmpDrillProblems(r);
    if (problems.length > 0) failed++;
    lines.push(`drill ${i}/${count} ${problems.length === 0 ? 'PASS' : `FAIL (${problems.join('; ')})`}: ${ecmpDrillSummary(r)}`);
    await recordDrill(lab, ecmpDrillRecord(r)).then((where) => lines.push(`  recorded in the event log by ${where}`), (e: Error) => lines.push(`  not recorded in the event log: ${e.message}`));
  }
  if (failed > 0) throw new Error(lines.join('\n'));
  return lines.join('\n');
}

/** Stores a drill's result through the first running director that takes it; resolves with its name. */
async function recordDrill(lab: EcmpLab<AdminApi>, record: ReturnType<typeof ecmpDrillRecord>): Promise<string> {
  const errors: string[] = [];
  for (const d of lab.running()) {
    try {
      await lab.api(d).recordDrill(record, { timeoutMs: 5000 });
      return d;
    } catch (e) {
      errors.push(`${d}: ${(e as Error).message}`);
    }
  }
  throw new Error(errors.join('; ') || 'no director runs');
}

/** Slots and their owners, the router's route and BGP view: what an operator checks first. */
async function status(lab: EcmpLab<AdminApi>): Promise<string> {
  const owners = await lab.slotOwners();
  const paths = await lab.routerPaths();
  const route = await lab.routerRoute();
  const lines = [`vips ${ECMP_VIP} (fullnat) and ${ECMP_DR_VIP} (dr): ${lab.slots} slots, directors running: ${lab.running().join(', ')}`];
  for (let i = 0; i < lab.slots; i++) lines.push(`  slot ${i}  next hop ${ecmpNextHop(i)}  owner ${owners.get(i) ?? '(none)'}`);
  lines.push(`router BGP: ${[...paths].map(([d, n]) => `${d} ${n} paths`).join(', ') || 'no session established'}`);
  lines.push(`router route: ${route || '(none)'}`);
  return lines.join('\n');
}

async function ctl(args: string[]): Promise<number> {
  const state = option(args, '--state');
  if (state === undefined || args.length === 0) return usage();
  const socket: Socket = createConnection(join(state, 'control.sock'));
  socket.setEncoding('utf8');
  let out = '';
  const done = new Promise<number>((resolve) => {
    // A drill command runs --count drills, each within CTL_TIMEOUT_MS.
    const count = args[0] === 'drill' && args.includes('--count') ? Math.min(MAX_DRILLS, Math.max(1, Number(args[args.indexOf('--count') + 1]) || 1)) : 1;
    const timeoutMs = CTL_TIMEOUT_MS * count;
    const timer = setTimeout(() => { process.stderr.write(`ecmp-lab: no answer within ${timeoutMs / 1000} s\n`); socket.destroy(); resolve(1); }, timeoutMs);
    socket.on('data', (c: string) => { out += c; });
    socket.on('error', (e) => { clearTimeout(timer); process.stderr.write(`ecmp-lab: the lab does not answer on ${join(state, 'control.sock')} (${e.message}): is it up? (deploy/lab/lab up --ecmp)\n`); resolve(1); });
    socket.on('close', () => {
      clearTimeout(timer);
      const [word, ...rest] = out.split('\n');
      const text = rest.join('\n').trimEnd();
      if (word === 'ok') { process.stdout.write(`${text}\n`); resolve(0); } else { process.stderr.write(`ecmp-lab: ${text || 'no answer'}\n`); resolve(1); }
    });
  });
  socket.write(`${args.join(' ')}\n`);
  return done;
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === 'serve') return serve(rest);
  if (cmd === 'ctl') return ctl(rest);
  return usage();
}

main(process.argv.slice(2)).then((code) => { process.exitCode = code; }, (e: unknown) => {
  process.stderr.write(`ecmp-lab: ${e instanceof Error ? e.stack ?? e.message : String(e)}\n`);
  process.exitCode = 1;
});
