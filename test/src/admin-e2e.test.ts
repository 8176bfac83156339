import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { EXIT, LBD_VERSION } from '@lbd/config';
import { FakeDataPlane } from '@lbd/dataplane/testing';
import { Agent } from '@lbd/director-agent';
import { main } from '@lbd/lbadm';
import { runLbadm, type Run } from './lbadm-run.js';

/**
 * lbadm against a real lbd-agent (FakeDataPlane, temp config and socket), through lbadm's CLI entry point
 * with captured output, plus spawned runs of both built bins. It lives here, not in packages/lbadm,
 * because only test/ may import both programs (see .dependency-cruiser.cjs).
 */

const LBADM_BIN = fileURLToPath(new URL('../../packages/lbadm/dist/bin/lbadm.js', import.meta.url));
const AGENT_BIN = fileURLToPath(new URL('../../packages/director-agent/dist/bin/lbd-agent.js', import.meta.url));

const CONFIG = `services:
  - name: web
    vip: 198.18.0.10
    port: 80
    mode: fullnat
    scheduler: wrr
    localAddresses: [198.18.2.10]
    realServers:
      - { address: 198.19.1.11, port: 8080, weight: 2 }
      - { address: 198.19.1.12, port: 8080, weight: 0 }
  - name: app
    vip: 198.18.0.20
    port: 80
    mode: nat
    realServers:
      - { address: 198.19.1.21, port: 8080 }
`;

describe('lbadm against lbd-agent (end to end)', () => {
  let dir: string;
  let socket: string;
  let configPath: string;
  let dp: FakeDataPlane;
  let agent: Agent;

  function lbadm(...argv: string[]): Promise<Run> {
    return runLbadm(['--socket', socket, ...argv]);
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lbadm-e2e-'));
    socket = join(dir, 'admin.sock');
    configPath = join(dir, 'lbd.yaml');
    await writeFile(configPath, CONFIG);
    dp = new FakeDataPlane();
    dp.conns = [
      {
        protocol: 'tcp', state: 'ESTABLISHED', client: { address: '198.18.9.1', port: 51234 }, vip: { address: '198.18.0.10', port: 80 },
        localAddress: { address: '198.18.2.10', port: 40001 }, realServer: { address: '198.19.1.11', port: 8080 }, expiresInSec: 899,
        unreplied: false, realServerId: 1, service: '198.18.0.10:80/tcp',
      },
      {
        protocol: 'tcp', state: 'SYN_SENT', client: { address: '198.18.9.1', port: 51235 }, vip: { address: '198.18.0.20', port: 80 },
        localAddress: null, realServer: { address: '198.19.1.21', port: 8080 }, expiresInSec: 119,
        unreplied: true, realServerId: 3, service: '198.18.0.20:80/tcp',
      },
    ];
    agent = await Agent.start({ configPath, dataPlane: dp, adminSocket: socket, watch: false });
  });

  after(async () => {
    await agent.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('status prints the table', async () => {
    const r = await lbadm('status');
    assert.equal(r.code, EXIT.ok, r.err);
    assert.match(r.out, /^TCP {2}198\.18\.0\.10:80 wrr fullnat \(web; local 198\.18\.2\.10-198\.18\.2\.10\)$/m);
    assert.match(r.out, /^ {2}-> 198\.19\.1\.11:8080 +2 +1 +0$/m);
    assert.match(r.out, /^ {2}-> 198\.19\.1\.12:8080 +0 +0 +0 +quiescent$/m);
    assert.match(r.out, /^ {2}-> 198\.19\.1\.21:8080 +1 +0 +1$/m);
  });

  it('status --json prints the API answer', async () => {
    const r = await lbadm('status', '--json');
    const s = JSON.parse(r.out) as { agent: { configPath: string }; services: { name: string }[] };
    assert.equal(s.agent.configPath, configPath);
    assert.deepEqual(s.services.map((x) => x.name), ['web', 'app']);
  });

  it('stats and stats --rate', async () => {
    const r = await lbadm('stats');
    assert.equal(r.code, EXIT.ok, r.err);
    assert.match(r.out, /^TCP {2}198\.18\.0\.10:80 +1 +0 +0$/m);
    const rate = await lbadm('stats', '--rate', '--interval-ms', '100', '--json');
    assert.equal(rate.code, EXIT.ok, rate.err);
    const rates = JSON.parse(rate.out) as { services: { key: string; connections: number; packetsPerSec: number }[] };
    assert.deepEqual(rates.services.map((s) => [s.key, s.connections, s.packetsPerSec]), [['198.18.0.10:80/tcp', 1, 0], ['198.18.0.20:80/tcp', 1, 0]]);
  });

  it('conns, filtered by name', async () => {
    const all = await lbadm('conns');
    assert.equal(all.out.split('\n').length, 4, all.out);
    const app = await lbadm('conns', '--service', 'app');
    assert.equal(app.out, [
      'pro expire state    source           virtual        local destination',
      'TCP 01:59  SYN_SENT 198.18.9.1:51235 198.18.0.20:80 -     198.19.1.21:8080',
      '',
    ].join('\n'));
    const none = await lbadm('conns', '--service', 'nope');
    assert.equal(none.code, EXIT.failure);
    assert.match(none.err, /^lbadm: not found: service: "nope" is neither the key nor the name of a configured service\n$/);
  });

  it('validate checks a file locally', async () => {
    const good = await main(['validate', '-f', configPath], { stdout: () => {}, stderr: () => {}, env: { LBD_ADMIN_SOCKET: '/nonexistent' } });
    assert.equal(good, EXIT.ok);
    const bad = join(dir, 'bad.yaml');
    await writeFile(bad, 'services:\n  - { name: web, vip: 1.2.3, port: 80, mode: nat }\n  - { name: web, vip: 198.18.0.1, port: 0, mode: nat }\n');
    const r = await lbadm('validate', '-f', bad);
    assert.equal(r.code, EXIT.config);
    assert.match(r.err, /bad\.yaml is invalid \(2 problems\):\n {2}services\[0\]\.vip: .*\n {2}services\[1\]\.port: /);
    const ok = await lbadm('validate', '-f', configPath);
    assert.equal(ok.out, `${configPath} is valid: 2 services\n`);
  });

  it('apply --dry-run prints the diff and applies nothing', async () => {
    const next = join(dir, 'next.yaml');
    await writeFile(next, CONFIG.replace('weight: 2', 'weight: 3'));
    const before = dp.applyCount;
    const r = await lbadm('apply', '-f', next, '--dry-run');
    assert.equal(r.code, EXIT.ok, r.err);
    assert.equal(r.out, '# fake: 2 services\ndry run: 1 operation would be applied\ndry run: nothing was applied\n');
    assert.equal(dp.applyCount, before);
  });

  it('apply with an invalid file prints every problem and exits 78', async () => {
    const bad = join(dir, 'bad-apply.yaml');
    await writeFile(bad, 'services:\n  - { name: Web, vip: 198.18.0.10, port: 80, mode: fullnat }\n');
    const before = dp.applyCount;
    const r = await lbadm('apply', '-f', bad);
    assert.equal(r.code, EXIT.config);
    assert.match(r.err, /^lbadm: .*bad-apply\.yaml is invalid \(2 problems\):\n {2}services\[0\]\.name: .*\n {2}services\[0\]\.localAddresses: .*\nnothing was applied\n$/);
    assert.equal(dp.applyCount, before);
    const json = await lbadm('apply', '-f', bad, '--json');
    assert.equal(json.code, EXIT.config);
    assert.equal((JSON.parse(json.out) as { problems: unknown[] }).problems.length, 2);
  });

  it('apply applies and the agent persists the file', async () => {
    const next = join(dir, 'next2.yaml');
    const text = CONFIG.replace('weight: 2', 'weight: 4');
    await writeFile(next, text);
    const r = await lbadm('apply', '-f', next);
    assert.equal(r.code, EXIT.ok, r.err);
    assert.equal(r.out, '# fake: 2 services\napplied: 1 operation for 2 services\n');
    assert.equal(await readFile(configPath, 'utf8'), text);
    const again = await lbadm('apply', '-f', next);
    assert.equal(again.out, 'no changes: the kernel already matches this config\n');
  });

  it('doctor prints findings and exits 1 when something needs attention', async () => {
    dp.facts = { ...dp.facts, realServerReachable: { '198.19.1.21:8080': true } };
    const r = await lbadm('doctor');
    assert.equal(r.code, EXIT.failure);
    assert.match(r.out, /^errors \(1\):\n {2}\[nat-return-path\] real server 198\.19\.1\.21:8080 of service "app"/);
    assert.match(r.out, /\n1 error, 0 warnings, 9 ok\n$/);
    dp.conns = dp.conns.filter((c) => !c.unreplied);
    const clean = await lbadm('doctor', '--json');
    assert.equal(clean.code, EXIT.ok);
    assert.equal((JSON.parse(clean.out) as { findings: unknown[] }).findings.length, 10);
  });

  it('says when no agent is listening, and how to point at one', async () => {
    let err = '';
    const code = await main(['status'], { stdout: () => {}, stderr: (t) => { err += t; }, env: { LBD_ADMIN_SOCKET: join(dir, 'none.sock') } });
    assert.equal(code, EXIT.unavailable);
    assert.match(err, /none\.sock/, 'LBD_ADMIN_SOCKET is used');
    const again = await lbadm('--socket', join(dir, 'none.sock'), 'status');
    assert.equal(again.code, EXIT.unavailable);
    assert.match(again.err, /no admin socket at .*none\.sock: is lbd-agent running\?.*use --socket PATH or set LBD_ADMIN_SOCKET/);
  });

  it('exits 64 with the usage line for an unknown command', async () => {
    const r = await lbadm('restart');
    assert.equal(r.code, EXIT.usage);
    assert.match(r.err, /^lbadm: unknown command "restart"; commands: .*\nusage: lbadm .*\nRun lbadm --help/);
  });

  it('the built bin runs against the agent', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [LBADM_BIN, 'status', '--json'], { env: { ...process.env, LBD_ADMIN_SOCKET: socket } });
    assert.deepEqual((JSON.parse(stdout) as { services: { key: string }[] }).services.map((s) => s.key), ['198.18.0.10:80/tcp', '198.18.0.20:80/tcp']);
  });

  it('every built program prints lbd\'s version for --version', async () => {
    const dashboard = join(dirname(AGENT_BIN), 'lbd-dashboard.js');
    for (const [bin, name] of [[LBADM_BIN, 'lbadm'], [AGENT_BIN, 'lbd-agent'], [dashboard, 'lbd-dashboard']] as const) {
      const { stdout } = await promisify(execFile)(process.execPath, [bin, '--version']);
      assert.equal(stdout, `${name} ${LBD_VERSION}\n`);
    }
  });

  it('the built lbd-agent bin exits 78 on a bad config, applying nothing', async () => {
    const bad = join(dir, 'agent-bad.yaml');
    await writeFile(bad, 'services:\n  - { name: web, vip: 198.18.0.300, port: 0, mode: nat, realServers: [{ address: 198.19.1.11, port: 8080, weight: -1 }] }\n');
    const err = await promisify(execFile)(process.execPath, [AGENT_BIN, '--config', bad, '--admin-socket', join(dir, 'agent.sock')]).then(() => null, (e: unknown) => e);
    const e = err as { code: number; stderr: string; stdout: string };
    assert.equal(e.code, EXIT.config);
    assert.match(e.stderr, /^lbd-agent: .*agent-bad\.yaml is invalid \(3 problems\):\n {2}services\[0\]\.vip: .*\n {2}services\[0\]\.port: .*\n {2}services\[0\]\.realServers\[0\]\.weight: /);
    assert.equal(e.stdout, '', 'nothing started, nothing logged');
  });
});
