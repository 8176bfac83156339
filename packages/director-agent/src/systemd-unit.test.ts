import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_ADMIN_SOCKET, EXIT } from '@lbd/config';
import { REGISTRATION_TTL_SEC, TIMING_PROFILES, worstCaseTakeoverMs } from '@lbd/coordinator';
import { KernelAddressOwner } from '@lbd/dataplane-nft';
import { parseAgentArgs } from './main.js';

/**
 * deploy/systemd/lbd-agent.service against the code it runs: the capabilities of the kernel tools the
 * data plane and health checks start, the paths the agent writes, its signals and exit codes, and a
 * restart delay longer than the lease and takeover rules need. A change on either side that breaks the
 * other fails here instead of on a director at 3 a.m.
 */

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const UNIT = join(REPO, 'deploy/systemd/lbd-agent.service');

/**
 * What each program the agent starts needs beyond root's own files. test/src/systemd-unit.privileged.test.ts
 * runs them under the unit's bounding set (without CAP_NET_RAW, arping and ping do not even start).
 */
const TOOL_CAPABILITIES: Readonly<Record<string, readonly string[]>> = {
  nft: ['CAP_NET_ADMIN'], // nf_tables netlink
  conntrack: ['CAP_NET_ADMIN'], // ctnetlink: list, insert (-I, -R), delete
  ip: ['CAP_NET_ADMIN'], // addresses of vip groups; the watchdog's delete list
  perl: ['CAP_NET_ADMIN', 'CAP_NET_RAW'], // ctnetlink events with SO_RCVBUFFORCE; raw ICMPv6 for unsolicited NAs
  arping: ['CAP_NET_RAW'], // gratuitous ARP on an AF_PACKET socket
  ping: ['CAP_NET_RAW'], // icmp health checks (Debian's ping_group_range leaves ICMP sockets to root)
  chrt: ['CAP_SYS_NICE'], // the election thread at SCHED_FIFO (realtime.ts)
  sysctl: [], // net.netfilter.* of the agent's own namespace: root-owned files, writable via ReadWritePaths
  cat: [], // /proc/sys and /proc/net reads (doctor)
  grep: [], // /proc/sys reads of the slot interfaces' settings (slot-interfaces.ts)
  setsid: [], // the address watchdog's own session
  timeout: [], // doctor's TCP reachability check (bash /dev/tcp)
};

/** The unit as `section.Key` -> every value given, in order. */
async function readUnit(): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  let section = '';
  for (const raw of (await readFile(UNIT, 'utf8')).split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(\w+)\]$/.exec(line);
    if (header) { section = header[1]!; continue; }
    const eq = line.indexOf('=');
    assert.ok(eq > 0, `not Key=value: ${line}`);
    const key = `${section}.${line.slice(0, eq)}`;
    out.set(key, [...(out.get(key) ?? []), line.slice(eq + 1)]);
  }
  return out;
}

function one(unit: Map<string, string[]>, key: string): string {
  const v = unit.get(key);
  assert.ok(v !== undefined && v.length === 1, `${key} must be set once (found ${JSON.stringify(v)})`);
  return v[0]!;
}

function words(unit: Map<string, string[]>, key: string): string[] {
  return (unit.get(key) ?? []).flatMap((v) => v.split(/\s+/)).filter((w) => w !== '');
}

/** A systemd time span as milliseconds: `6s`, `15` (seconds), `100ms`, `5min`. */
function spanMs(text: string): number {
  const m = /^(\d+)\s*(ms|s|sec|min)?$/.exec(text);
  assert.ok(m, `cannot read time span ${JSON.stringify(text)}`);
  const n = Number(m[1]);
  return m[2] === 'ms' ? n : m[2] === 'min' ? n * 60_000 : n * 1000;
}

/** Every program the data plane and the probers start, from their sources (`run('nft', …)`, `spawn('perl', …)`, `file = 'ping'`). */
async function programsStarted(): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  for (const dir of ['packages/dataplane-nft/src', 'packages/health-checker/src/probers']) {
    for (const name of await readdir(join(REPO, dir))) {
      if (!name.endsWith('.ts') || name.endsWith('.test.ts') || name.endsWith('.fixture.ts')) continue;
      const text = await readFile(join(REPO, dir, name), 'utf8');
      for (const m of text.matchAll(/\b(?:run|spawn|spawnFn|send)!?\(\s*'([\w.-]+)'|\[file = '([\w.-]+)'/g)) {
        found.set(m[1] ?? m[2]!, `${dir}/${name}`);
      }
    }
  }
  return found;
}

describe('deploy/systemd/lbd-agent.service', () => {
  let unit: Map<string, string[]>;
  before(async () => { unit = await readUnit(); });

  it('bounds capabilities to exactly what the programs the agent starts need', async () => {
    const started = await programsStarted();
    assert.ok(started.has('nft') && started.has('arping'), `the source scan found too little: ${[...started.keys()].join(', ')}`);
    for (const [program, where] of started) {
      assert.ok(program in TOOL_CAPABILITIES, `${where} starts ${program}: add it to TOOL_CAPABILITIES with the capabilities it needs, and to the unit's CapabilityBoundingSet`);
    }
    const needed = new Set([...started.keys()].flatMap((p) => TOOL_CAPABILITIES[p]!));
    assert.deepEqual(new Set(words(unit, 'Service.CapabilityBoundingSet')), needed);
    assert.equal(unit.get('Service.AmbientCapabilities'), undefined, 'runs as root: the bounding set is the whole grant');
    assert.equal(unit.get('Service.User'), undefined, 'root: the config, keys and /run/lbd are root-owned and there is no CAP_DAC_OVERRIDE');
    assert.equal(one(unit, 'Service.NoNewPrivileges'), 'yes');
  });

  it('allows the socket families of gRPC, netlink and arping', () => {
    const families = new Set(words(unit, 'Service.RestrictAddressFamilies'));
    for (const f of ['AF_UNIX', 'AF_INET', 'AF_INET6', 'AF_NETLINK', 'AF_PACKET']) assert.ok(families.has(f), `${f} missing`);
  });

  it('lets the agent write exactly where it writes', async () => {
    const exec = one(unit, 'Service.ExecStart').split(/\s+/);
    // The Debian package's wrapper, which execs node on lbd-agent.js (packages/debian).
    assert.equal(exec[0], '/usr/bin/lbd-agent', 'ExecStart runs the packaged lbd-agent');
    const parsed = parseAgentArgs(exec.slice(1));
    assert.equal(parsed.kind, 'run', 'ExecStart has flags lbd-agent accepts');
    const rw = words(unit, 'Service.ReadWritePaths');
    assert.equal(one(unit, 'Service.ProtectSystem'), 'strict');
    // Applied configs are persisted next to the config file (a temp file renamed into place).
    if (parsed.kind === 'run') assert.ok(rw.includes(dirname(parsed.args.configPath)), `ReadWritePaths lacks ${dirname(parsed.args.configPath)}`);
    // The default admin socket and the address owner's /run/lbd/<director> live in the runtime directory.
    assert.equal(dirname(DEFAULT_ADMIN_SOCKET), `/run/${one(unit, 'Service.RuntimeDirectory')}`);
    assert.equal(one(unit, 'Service.RuntimeDirectoryMode'), '0700');
    // Connection sync sets net.netfilter.* with sysctl -w; the rest of /proc/sys stays read-only.
    const connectionTable = await readFile(join(REPO, 'packages/dataplane-nft/src/connection-table.ts'), 'utf8');
    const keys = [...connectionTable.matchAll(/'(net\.[\w.]+)=\d+'/g)].map((m) => m[1]!);
    assert.ok(keys.length > 0, 'no sysctl keys found in connection-table.ts');
    for (const k of keys) assert.ok(rw.some((p) => `/proc/sys/${k.replace(/\./g, '/')}`.startsWith(`${p}/`)), `${k} is not under a ReadWritePaths entry`);
    assert.equal(one(unit, 'Service.ProtectKernelTunables'), 'yes');
    // nft -f batch files go to os.tmpdir().
    assert.equal(one(unit, 'Service.PrivateTmp'), 'yes');
  });

  it('removes what the address watchdog would have, after the agent and watchdog die together', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lbd-unit-'));
    try {
      const owner = new KernelAddressOwner({ stateDir: join(dir, 'dir1'), watchdog: false, runner: { run: async () => ({ code: 0, stdout: '[]', stderr: '' }) } });
      await owner.close();
      const stopPost = one(unit, 'Service.ExecStopPost');
      assert.ok(stopPost.includes(`/run/lbd/*/${basename(owner.batchFile)}`), `ExecStopPost must run /run/lbd/*/${basename(owner.batchFile)}`);
      assert.match(stopPost, /ip -force -batch/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    // The watchdog must outlive a crashed agent long enough to run its list: SIGTERM to the whole group
    // (which it ignores), never an immediate SIGKILL of the rest as KillMode=mixed does.
    assert.equal(one(unit, 'Service.KillMode'), 'control-group');
  });

  it('stops with SIGTERM, reloads with SIGHUP, and has no sd_notify readiness', async () => {
    assert.equal(one(unit, 'Service.KillSignal'), 'SIGTERM');
    assert.match(one(unit, 'Service.ExecReload'), /^\/bin\/kill -HUP \$MAINPID$/);
    const main = await readFile(join(REPO, 'packages/director-agent/src/main.ts'), 'utf8');
    assert.match(main, /signals\.on\('SIGTERM'/);
    assert.match(main, /signals\.on\('SIGHUP'/);
    const notifies = /NOTIFY_SOCKET|sd_notify/.test(main);
    assert.equal(one(unit, 'Service.Type'), notifies ? 'notify' : 'exec');
  });

  it('restarts only failures a restart can fix', () => {
    assert.equal(one(unit, 'Service.Restart'), 'on-failure');
    const prevented = words(unit, 'Service.RestartPreventExitStatus').map(Number).sort((a, b) => a - b);
    assert.deepEqual(prevented, [EXIT.usage, EXIT.unavailable, EXIT.noPermission, EXIT.config].sort((a, b) => a - b));
  });

  it('waits out the takeover and the dead life\'s registration before a restart, and gives up on a crash loop', () => {
    const restartMs = spanMs(one(unit, 'Service.RestartSec'));
    const takeover = Math.max(...Object.values(TIMING_PROFILES).map(worstCaseTakeoverMs));
    assert.ok(restartMs > takeover, `RestartSec ${restartMs} ms must exceed the worst-case takeover ${takeover} ms`);
    assert.ok(restartMs > REGISTRATION_TTL_SEC * 1000, `RestartSec ${restartMs} ms must exceed the registration lease ${REGISTRATION_TTL_SEC} s`);
    const burst = Number(one(unit, 'Unit.StartLimitBurst'));
    const intervalMs = spanMs(one(unit, 'Unit.StartLimitIntervalSec'));
    assert.ok(burst >= 2, 'StartLimitBurst below 2 would refuse the first restart');
    assert.ok(intervalMs > burst * restartMs, `StartLimitIntervalSec ${intervalMs} ms must exceed StartLimitBurst x RestartSec = ${burst * restartMs} ms, or the limit never trips`);
    assert.equal(one(unit, 'Service.RuntimeDirectoryPreserve'), 'restart');
  });
});
