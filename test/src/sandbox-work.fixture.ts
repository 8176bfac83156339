import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ConntrackConnectionTable, KernelAddressOwner, localRunner } from '@lbd/dataplane-nft';

/**
 * Run by systemd-unit.privileged.test.ts inside the sandbox it builds (a new network namespace, /proc/sys
 * read-only but /proc/sys/net, a private /tmp, the unit's capability bounding set): everything a clustered
 * director with connection sync asks of the kernel, through the production code, then lbd-agent itself.
 * Argument: the interface to use (up, with 198.18.0.1/24 and fd00:0:0:1::1/64). One JSON line per step on
 * stdout: {"step", "ok", "detail"}.
 */

const AGENT_BIN = fileURLToPath(new URL('../../packages/director-agent/dist/bin/lbd-agent.js', import.meta.url));
const ifname = process.argv[2] ?? 'd0';

function report(step: string, ok: boolean, detail = ''): void {
  process.stdout.write(`${JSON.stringify({ step, ok, detail })}\n`);
}

async function step(name: string, fn: () => Promise<string | void>): Promise<void> {
  try {
    report(name, true, (await fn()) ?? '');
  } catch (e) {
    report(name, false, (e as Error).message);
  }
}

async function main(): Promise<void> {
  // The sandbox is real only if the rest of /proc/sys is read-only (same value written back: harmless).
  await step('kernel.core_pattern is read-only', async () => {
    const r = await localRunner().run('sh', ['-c', 'cat /proc/sys/kernel/core_pattern > /proc/sys/kernel/core_pattern']);
    if (!/Read-only file system/.test(r.stderr)) throw new Error(`writing it gave exit ${r.code}: ${r.stderr.trim()}`);
  });

  const events: string[] = [];
  const owner = new KernelAddressOwner({ stateDir: join(tmpdir(), 'lbd-state'), onEvent: (m, f) => events.push(`${m} ${JSON.stringify(f)}`) });
  const addresses = [{ address: '198.18.0.10', ifname }, { address: 'fd00:0:0:1::10', ifname }];
  await step('floating addresses: ip -batch, watchdog', async () => {
    await owner.claim('default', addresses, { count: 1, intervalMs: 100 });
    const present = await owner.present(addresses);
    if (present.length !== addresses.length) throw new Error(`present after claim: ${JSON.stringify(present)}`);
  });
  // arping -c 1 stays a second for replies; its exit status is what the owner reports.
  await new Promise((r) => setTimeout(r, 1500));
  await step('announcements: arping -U, raw ICMPv6 neighbour advertisement', async () => {
    const failed = events.filter((e) => e.includes('announcement failed'));
    if (failed.length > 0) throw new Error(failed.join('; '));
  });
  await step('kernel lease: nft tables inet/arp lbd, a lease written through nft -i', async () => {
    await owner.guard(new Map([['default', addresses]]));
    await owner.lease('default', 5000);
    const left = owner.leaseLeftMs('default');
    if (left === null || left <= 0) throw new Error(`no lease after writing one: ${String(left)}`);
  });
  await step('the election thread at SCHED_FIFO (chrt, CAP_SYS_NICE)', async () => {
    const lib = new URL('../../packages/dataplane-nft/dist/realtime.js', import.meta.url).href;
    const worker = new Worker(`const { parentPort } = require('node:worker_threads');
      import(${JSON.stringify(lib)}).then((m) => m.raiseThreadToRealtime(10)).then((said) => parentPort.postMessage({ said }), (e) => parentPort.postMessage({ error: String(e) }));`, { eval: true });
    const reply = await new Promise<{ said?: string; error?: string }>((resolve) => worker.once('message', resolve));
    await worker.terminate();
    if (reply.error !== undefined) throw new Error(reply.error);
    return reply.said;
  });
  await step('release and close', async () => {
    await owner.release('default');
    await owner.close({ releaseAll: true });
  });

  const table = new ConntrackConnectionTable({});
  await step('sysctl -w net.netfilter.*', () => table.prepare());
  await step('ctnetlink events (SO_RCVBUFFORCE) and conntrack -I', async () => {
    const watch = await table.watch({ onEvents: () => {}, onLoss: () => {} });
    await watch.close();
  });
  await step('conntrack dump', async () => `${(await table.dump()).length} connections`);

  await step('lbd-agent applies, probes with ping and stops on SIGTERM', async () => {
    const dir = tmpdir();
    const config = join(dir, 'lbd.yaml');
    await writeFile(config, `services:
  - name: web
    vip: 198.18.0.10
    port: 80
    mode: fullnat
    localAddresses: [198.18.0.100-198.18.0.101]
    healthCheck: { kind: icmp, intervalMs: 300, timeoutMs: 250, rise: 1, fall: 1 }
    realServers:
      - { address: 198.18.0.1, port: 8080 }
`);
    const agent = spawn(process.execPath, [AGENT_BIN, '--config', config, '--admin-socket', join(dir, 'admin.sock')], { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    agent.stdout.setEncoding('utf8').on('data', (d: string) => { log += d; });
    agent.stderr.setEncoding('utf8').on('data', (d: string) => { log += d; });
    const exited = new Promise<number | null>((resolve) => agent.on('exit', (code) => resolve(code)));
    const deadline = Date.now() + 15_000;
    while (!log.includes('"config applied"') && Date.now() < deadline && agent.exitCode === null) await new Promise((r) => setTimeout(r, 50));
    if (!log.includes('"config applied"')) throw new Error(`no apply: ${log.slice(-500)}`);
    // Several probe intervals: a ping that cannot run would take the real server down.
    await new Promise((r) => setTimeout(r, 1500));
    const nft = await localRunner().run('nft', ['list', 'table', 'ip', 'lbd']);
    agent.kill('SIGTERM');
    const code = await exited;
    if (nft.code !== 0) throw new Error(`nft list table ip lbd: ${nft.stderr.trim()}`);
    if (log.includes('"real server down"')) throw new Error(`icmp check failed: ${log.slice(-500)}`);
    if (code !== 0) throw new Error(`agent exited ${code}: ${log.slice(-500)}`);
  });
}

void main().then(() => process.exit(0));
