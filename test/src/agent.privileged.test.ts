import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EXIT } from '@lbd/config';
import {
  BYPASS_GATEWAY, CLIENT, DIRECTOR, LOCAL_ADDRESSES, SERVER_PORTS, VIPS, directorTopology, removeOrphans, requireRoot,
  runCommand, runPrefix, runTestClient, spawnTestClient, startTestServers,
  type BackgroundProcess, type DirectorTopology, type HttpResult, type ReadyReport, type StreamResult,
} from '@lbd/testkit';

/**
 * lbd-agent and lbadm, as built, on the real kernel: the agent runs in the director's namespace with
 * the nftables data plane, lbadm talks to it over its admin socket from the host, like an operator.
 */

const AGENT_BIN = fileURLToPath(new URL('../../packages/director-agent/dist/bin/lbd-agent.js', import.meta.url));
const LBADM_BIN = fileURLToPath(new URL('../../packages/lbadm/dist/bin/lbadm.js', import.meta.url));

const CONFIG = `services:
  - name: web
    vip: ${VIPS.ipv4}
    port: 80
    mode: fullnat
    scheduler: wrr
    localAddresses: [${LOCAL_ADDRESSES.ipv4Range}]
    realServers:
      - { address: 198.19.1.11, port: ${SERVER_PORTS.http}, weight: 1 }
      - { address: 198.19.1.12, port: ${SERVER_PORTS.http}, weight: 1 }
      - { address: 198.19.1.13, port: ${SERVER_PORTS.http}, weight: 1 }
  - name: stream
    vip: ${VIPS.ipv4}
    port: ${SERVER_PORTS.stream}
    mode: fullnat
    scheduler: mh
    localAddresses: [${LOCAL_ADDRESSES.ipv4Range}]
    realServers:
      - { address: 198.19.1.11, port: ${SERVER_PORTS.stream} }
      - { address: 198.19.1.12, port: ${SERVER_PORTS.stream} }
      - { address: 198.19.1.13, port: ${SERVER_PORTS.stream} }
  - name: web-nat
    vip: ${VIPS.ipv4Nat}
    port: 80
    mode: nat
    scheduler: rr
    realServers:
      - { address: 198.19.1.11, port: ${SERVER_PORTS.http} }
      - { address: 198.19.1.12, port: ${SERVER_PORTS.http} }
      - { address: 198.19.1.13, port: ${SERVER_PORTS.http} }
`;

describe('lbd-agent and lbadm on the nftables data plane @privileged', function () {
  this.timeout(120_000);
  let lab: DirectorTopology;
  let dir: string;
  let configPath: string;
  let socket: string;
  let agent: BackgroundProcess | undefined;

  const lbadm = (...args: string[]) =>
    runCommand(process.execPath, [LBADM_BIN, '--socket', socket, ...args], { allowFailure: true, timeoutMs: 30_000 });
  // Stateless (-s): without counter values, which traffic changes and a write does not explain.
  const nftRuleset = async (): Promise<string> => (await lab.topology.exec(DIRECTOR.host, 'nft', ['-s', 'list', 'ruleset'])).stdout;

  async function startAgent(): Promise<BackgroundProcess> {
    const proc = lab.topology.spawn(DIRECTOR.host, process.execPath, [AGENT_BIN, '--config', configPath, '--admin-socket', socket], { label: 'lbd-agent' });
    await proc.waitForJson((v) => v.msg === 'started', 15_000);
    for (let i = 0; i < 100; i++) {
      if ((await lbadm('status')).code === 0) return proc;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`lbd-agent did not answer on ${socket}: ${proc.stdout.slice(-2000)} ${proc.stderr.slice(-2000)}`);
  }

  before(async function () {
    await requireRoot(this, { commands: ['nft', 'conntrack'] });
    await removeOrphans('lbdt');
    dir = await mkdtemp(join(tmpdir(), 'lbd-agent-test-'));
    configPath = join(dir, 'lbd.yaml');
    socket = join(dir, 'admin.sock');
    await writeFile(configPath, CONFIG);
    lab = await directorTopology({ prefix: runPrefix('lbdt', 'ag') });
    await startTestServers(lab.topology, lab.realServers.map((r) => r.host));
    agent = await startAgent();
  });
  after(async () => {
    await agent?.stop();
    await lab?.topology.destroy();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('serves the config: lbadm status lists every service and real server', async () => {
    const r = await lbadm('status', '--json');
    assert.equal(r.code, 0, r.stderr);
    const status = JSON.parse(r.stdout) as { services: Array<{ key: string; realServers: unknown[] }> };
    assert.deepEqual(status.services.map((s) => s.key).sort(), ['198.18.0.10:80/tcp', '198.18.0.10:9000/tcp', '198.18.0.11:80/tcp']);
    assert.ok(status.services.every((s) => s.realServers.length === 3));
    const http = await runTestClient<HttpResult>(lab.topology, CLIENT.host, ['http', '--url', `http://${VIPS.ipv4}/`, '--count', '30', '--new-connection']);
    assert.equal(http.ok, 30);
  });

  it('restarting lbd-agent under 50 streaming connections breaks none and writes no rule', async () => {
    const streams = spawnTestClient(lab.topology, CLIENT.host, ['stream', '--target', `${VIPS.ipv4}:${SERVER_PORTS.stream}`, '--connections', '50', '--duration-ms', '60000']);
    const ready = await streams.waitForJson<ReadyReport>((v) => 'ready' in v, 20_000);
    assert.equal(ready.ready, true, JSON.stringify(ready));
    // nft monitor prints every change to the ruleset as it is committed.
    const monitor = lab.topology.spawn(DIRECTOR.host, 'nft', ['monitor', 'ruleset'], { label: 'nft monitor' });
    await new Promise((r) => setTimeout(r, 300)); // let the monitor subscribe before the restart
    const before = await nftRuleset();
    await agent!.stop();
    agent = await startAgent();
    assert.equal(await nftRuleset(), before);
    await monitor.stop();
    assert.equal(monitor.stdout.trim(), '', `the restarted agent wrote to the ruleset:\n${monitor.stdout}`);
    const log = agent.stdout;
    assert.match(log, /re-adopted existing nft table/);
    await streams.stop();
    const result = streams.lastJson<StreamResult>()!;
    assert.equal(result.connections, 50);
    assert.equal(result.broken, 0, JSON.stringify(result.perConnection.filter((c) => c.error !== null)));
  });

  it('a bad config is rejected with every problem listed and the kernel rules unchanged', async () => {
    const before = await nftRuleset();
    const bad = CONFIG.replace(`vip: ${VIPS.ipv4Nat}`, 'vip: 198.18.0.300').replace('scheduler: mh', 'scheduler: maglev').replace('weight: 1 }', 'weight: 70000 }');
    const badPath = join(dir, 'bad.yaml');
    await writeFile(badPath, bad);
    const r = await lbadm('apply', '-f', badPath);
    assert.equal(r.code, EXIT.config);
    assert.match(r.stderr, /is invalid \(3 problems\)/);
    assert.match(r.stderr, /services\[0\]\.realServers\[0\]\.weight: 70000/);
    assert.match(r.stderr, /services\[1\]\.scheduler: "maglev"/);
    assert.match(r.stderr, /services\[2\]\.vip: "198\.18\.0\.300"/);
    // The same config written over the agent's file: logged, rejected, the old config keeps running.
    await writeFile(configPath, bad);
    await agent!.waitForLine((l) => l.includes('config rejected') && l.includes('198.18.0.300'), 10_000);
    assert.equal(await nftRuleset(), before);
    await writeFile(configPath, CONFIG);
    const status = await lbadm('status');
    assert.equal(status.code, 0);
  });

  it('apply --dry-run prints the rule diff and changes nothing; apply changes the kernel and the file', async () => {
    const quiescent = CONFIG.replace(`- { address: 198.19.1.13, port: ${SERVER_PORTS.http}, weight: 1 }`, `- { address: 198.19.1.13, port: ${SERVER_PORTS.http}, weight: 0 }`);
    const path = join(dir, 'quiescent.yaml');
    await writeFile(path, quiescent);
    const before = await nftRuleset();
    const dry = await lbadm('apply', '-f', path, '--dry-run');
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(dry.stdout, /delete element ip lbd slots \{ 198\.18\.0\.10 \. tcp \. 80 \. 2 \}/);
    assert.equal(await nftRuleset(), before);
    const real = await lbadm('apply', '-f', path);
    assert.equal(real.code, 0, real.stderr);
    assert.notEqual(await nftRuleset(), before);
    assert.equal(await readFile(configPath, 'utf8'), quiescent);
    const http = await runTestClient<HttpResult>(lab.topology, CLIENT.host, ['http', '--url', `http://${VIPS.ipv4}/`, '--count', '20', '--new-connection']);
    assert.equal(http.servers.rs3, undefined);
    const again = await lbadm('apply', '-f', path);
    assert.match(again.stdout, /no changes/);
  });

  it('doctor names a nat-mode real server whose default route bypasses the director', async () => {
    const ok = await lbadm('doctor');
    assert.equal(ok.code, 0, ok.stdout);
    await lab.topology.setDefaultRoute('rs3', BYPASS_GATEWAY.ipv4);
    try {
      const http = await runTestClient<HttpResult>(lab.topology, CLIENT.host, ['http', '--url', `http://${VIPS.ipv4Nat}/`, '--count', '9', '--new-connection', '--concurrency', '9']);
      assert.equal(http.servers.rs3, undefined);
      assert.ok(http.failed >= 3, JSON.stringify(http));
      const r = await lbadm('doctor', '--json');
      assert.equal(r.code, EXIT.failure);
      const findings = JSON.parse(r.stdout) as { findings: Array<{ severity: string; check: string; subject: string; fix: string }> };
      const nat = findings.findings.filter((f) => f.check === 'nat-return-path' && f.severity === 'error');
      assert.equal(nat.length, 1, JSON.stringify(findings));
      assert.match(nat[0]!.subject, /198\.19\.1\.13:8080/);
      assert.match(nat[0]!.fix, /ip route replace default via 198\.19\.1\.1` on the real server\) or use mode: fullnat/);
      const human = await lbadm('doctor');
      assert.match(human.stdout, /198\.19\.1\.13:8080/);
    } finally {
      await lab.topology.setDefaultRoute('rs3', DIRECTOR.serverIpv4);
    }
  });
});
