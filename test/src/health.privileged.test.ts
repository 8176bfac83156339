import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NftDataPlane, netnsRunner } from '@lbd/dataplane-nft';
import {
  CLIENT, DIRECTOR, LOCAL_ADDRESSES, SERVER_PORTS, VIPS, directorTopology, removeOrphans, requireRoot, runCommand,
  runPrefix, runTestClient, spawnTestClient, startTestServers,
  type BackgroundProcess, type DirectorTopology, type HttpResult, type ReadyReport, type StreamResult,
} from '@lbd/testkit';

/**
 * Health checks end to end: lbd-agent (as built) probing real servers in namespaces and programming the
 * kernel. For each way a real server can fail, it must leave rotation within
 * interval × fall + timeout + 200 ms, get no new connection afterwards, leave healthy servers'
 * connections alone, and come back after `rise` successes.
 */

const AGENT_BIN = fileURLToPath(new URL('../../packages/director-agent/dist/bin/lbd-agent.js', import.meta.url));
const LBADM_BIN = fileURLToPath(new URL('../../packages/lbadm/dist/bin/lbadm.js', import.meta.url));

const INTERVAL_MS = 500;
const TIMEOUT_MS = 200;
const RISE = 2;
const FALL = 2;
/** The issue's bound on leaving rotation. */
const LEAVE_BOUND_MS = INTERVAL_MS * FALL + TIMEOUT_MS + 200;

/** Flap damping is off where the drills toggle servers on purpose, and on in the web-flap service. */
const NO_DAMPING = 'flapDamping: { maxTransitions: 0 }';
const DAMPING = 'flapDamping: { maxTransitions: 4, holdDownMs: 3000, maxHoldDownMs: 12000 }';
const check = (extra: string, damping = NO_DAMPING): string =>
  `{ ${extra}, intervalMs: ${INTERVAL_MS}, timeoutMs: ${TIMEOUT_MS}, rise: ${RISE}, fall: ${FALL}, jitterMs: 0, ${damping} }`;

const servers = (port: number): string => [1, 2, 3].map((k) => `      - { address: 198.19.1.${10 + k}, port: ${port} }`).join('\n');

const CONFIG = `services:
  - name: web
    vip: ${VIPS.ipv4}
    port: 80
    mode: fullnat
    scheduler: rr
    fallback: reject
    localAddresses: [${LOCAL_ADDRESSES.ipv4Range}]
    healthCheck: ${check(`kind: http, path: /, bodyPattern: '"server"'`)}
    realServers:
${servers(SERVER_PORTS.http)}
  - name: stream
    vip: ${VIPS.ipv4}
    port: ${SERVER_PORTS.stream}
    mode: fullnat
    scheduler: rr
    localAddresses: [${LOCAL_ADDRESSES.ipv4Range}]
    healthCheck: ${check('kind: tcp')}
    realServers:
${servers(SERVER_PORTS.stream)}
  - name: web-flap
    vip: ${VIPS.ipv4Nat}
    port: 80
    mode: fullnat
    scheduler: rr
    localAddresses: [${LOCAL_ADDRESSES.ipv4Range}]
    healthCheck: ${check(`kind: http, path: /, bodyPattern: '"server"'`, DAMPING)}
    realServers:
${servers(SERVER_PORTS.http)}
`;

const WEB = `${VIPS.ipv4}:80/tcp`;
const WEB_FLAP = `${VIPS.ipv4Nat}:80/tcp`;

describe('health checks take failing real servers out of rotation and bring them back @privileged', function () {
  this.timeout(180_000);
  let lab: DirectorTopology;
  let dir: string;
  let socket: string;
  let agent: BackgroundProcess | undefined;
  let rsProcs: Map<string, BackgroundProcess>;
  let dp: NftDataPlane;

  const lbadm = (...args: string[]) => runCommand(process.execPath, [LBADM_BIN, '--socket', socket, ...args], { allowFailure: true, timeoutMs: 30_000 });
  const fault = (host: string, mode: string) => writeFile(join(dir, `${host}.fault`), mode);

  /** Whether the kernel lets `address:port` take new connections of `service` (it owns slots). */
  async function inRotation(service: string, address: string): Promise<boolean> {
    const svc = (await dp.observe()).services.find((s) => s.key === service);
    const rs = svc?.realServers.find((r) => r.address === address);
    return rs !== undefined && !rs.quiescent;
  }

  /** Polls the kernel every 20 ms until the real server is (or is not) in rotation; returns the time it took. */
  async function waitRotation(service: string, address: string, wanted: boolean, limitMs: number): Promise<number> {
    const start = performance.now();
    while (performance.now() - start < limitMs) {
      if ((await inRotation(service, address)) === wanted) return performance.now() - start;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`${address} did not ${wanted ? 'return to' : 'leave'} rotation of ${service} within ${limitMs} ms`);
  }

  before(async function () {
    await requireRoot(this, { commands: ['nft', 'conntrack', 'ping'] });
    await removeOrphans('lbdt');
    dir = await mkdtemp(join(tmpdir(), 'lbd-health-test-'));
    socket = join(dir, 'admin.sock');
    await writeFile(join(dir, 'lbd.yaml'), CONFIG);
    lab = await directorTopology({ prefix: runPrefix('lbdt', 'hc') });
    const procs = await startTestServers(lab.topology, lab.realServers.map((r) => r.host), SERVER_PORTS, 10_000, dir);
    rsProcs = new Map(lab.realServers.map((r, i) => [r.host, procs[i]!]));
    dp = new NftDataPlane({ runner: netnsRunner(lab.topology.ns(DIRECTOR.host)) });
    agent = lab.topology.spawn(DIRECTOR.host, process.execPath, [AGENT_BIN, '--config', join(dir, 'lbd.yaml'), '--admin-socket', socket], { label: 'lbd-agent' });
    await agent.waitForJson((v) => v.msg === 'started', 15_000);
    for (const k of [1, 2, 3]) await waitRotation(WEB, `198.19.1.${10 + k}`, true, 5_000);
  });
  after(async () => {
    await agent?.stop();
    await lab?.topology.destroy();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  interface FailureMode {
    name: string;
    /** The server's streams may break too (the whole host or process fails, not just HTTP). */
    hostWide: boolean;
    breakIt(): Promise<void>;
    mendIt(): Promise<void>;
  }
  const RS2 = '198.19.1.12';
  const modes: FailureMode[] = [
    {
      name: 'process stopped (refused)', hostWide: true,
      breakIt: async () => { await rsProcs.get('rs2')!.stop(); },
      mendIt: async () => {
        const [p] = await startTestServers(lab.topology, ['rs2'], SERVER_PORTS, 10_000, dir);
        rsProcs.set('rs2', p!);
      },
    },
    { name: 'hung (accepts and never answers)', hostWide: false, breakIt: () => fault('rs2', 'hang'), mendIt: () => fault('rs2', '') },
    { name: 'HTTP 500', hostWide: false, breakIt: () => fault('rs2', '500'), mendIt: () => fault('rs2', '') },
    { name: 'wrong body', hostWide: false, breakIt: () => fault('rs2', 'body'), mendIt: () => fault('rs2', '') },
    {
      name: 'packets dropped in the server\'s namespace', hostWide: true,
      breakIt: async () => {
        await lab.topology.exec('rs2', 'nft', ['add table inet drill; add chain inet drill in { type filter hook input priority -10; policy drop; }']);
      },
      mendIt: async () => { await lab.topology.exec('rs2', 'nft', ['delete table inet drill']); },
    },
    {
      name: 'host unreachable (link down)', hostWide: true,
      breakIt: () => lab.topology.setLink('rs2', 'eth0', false),
      mendIt: async () => {
        await lab.topology.setLink('rs2', 'eth0', true);
        await lab.topology.setDefaultRoute('rs2', DIRECTOR.serverIpv4);
      },
    },
  ];

  for (const mode of modes) {
    it(`${mode.name}: leaves within interval × fall + timeout + 200 ms, gets no new connection, returns after rise`, async () => {
      const streams = spawnTestClient(lab.topology, CLIENT.host, ['stream', '--target', `${VIPS.ipv4}:${SERVER_PORTS.stream}`, '--connections', '9', '--duration-ms', '60000']);
      const ready = await streams.waitForJson<ReadyReport>((v) => 'ready' in v, 15_000);
      assert.equal(ready.ready, true, JSON.stringify(ready));

      await mode.breakIt();
      const leftAfter = await waitRotation(WEB, RS2, false, 10_000);
      assert.ok(leftAfter <= LEAVE_BOUND_MS, `left rotation after ${leftAfter.toFixed(0)} ms > ${LEAVE_BOUND_MS} ms`);

      const r = await runTestClient<HttpResult>(lab.topology, CLIENT.host, ['http', '--url', `http://${VIPS.ipv4}/`, '--count', '30', '--new-connection']);
      assert.equal(r.ok, 30, JSON.stringify(r.errors));
      assert.equal(r.servers.rs2, undefined, `rs2 got new connections: ${JSON.stringify(r.servers)}`);

      const health = await lbadm('health', '--json');
      assert.equal(health.code, 0, health.stderr);
      assert.match(health.stdout, /198\.19\.1\.12/);

      await streams.stop();
      const result = streams.lastJson<StreamResult>()!;
      const healthy = result.perConnection.filter((c) => c.server !== 'rs2');
      assert.ok(healthy.length >= 6, JSON.stringify(result.servers));
      assert.ok(healthy.every((c) => c.error === null), `healthy servers' streams broke: ${JSON.stringify(healthy.filter((c) => c.error))}`);
      if (!mode.hostWide) assert.equal(result.broken, 0, 'an HTTP-only fault broke a stream');

      const mended = performance.now();
      await mode.mendIt();
      const back = await waitRotation(WEB, RS2, true, 15_000);
      // It needs `rise` consecutive successes: at least (rise - 1) intervals after the first one.
      assert.ok(performance.now() - mended >= (RISE - 1) * INTERVAL_MS - 50, `back after ${back.toFixed(0)} ms: sooner than ${RISE} successes allow`);
      for (const svc of [WEB, `${VIPS.ipv4}:${SERVER_PORTS.stream}/tcp`]) await waitRotation(svc, RS2, true, 15_000);
    });
  }

  it('when every server is down, fallback reject resets new connections at once; they come back', async () => {
    for (const h of ['rs1', 'rs2', 'rs3']) await fault(h, '500');
    for (const k of [1, 2, 3]) await waitRotation(WEB, `198.19.1.${10 + k}`, false, 10_000);
    const r = await runTestClient<HttpResult>(lab.topology, CLIENT.host, ['http', '--url', `http://${VIPS.ipv4}/`, '--count', '5', '--new-connection']);
    assert.deepEqual(r.errors, { ECONNREFUSED: 5 });
    for (const h of ['rs1', 'rs2', 'rs3']) await fault(h, '');
    for (const k of [1, 2, 3]) await waitRotation(WEB, `198.19.1.${10 + k}`, true, 15_000);
  });

  it('a flapping server is held down, with the reason shown by lbadm health', async () => {
    // Every change of rs3 counts in web-flap's window (the drill above took it down and up once): within
    // four changes the next down holds it, and successes then do not bring it back until the hold ends.
    for (let i = 0; i < 2; i++) {
      await fault('rs3', '500');
      await waitRotation(WEB_FLAP, '198.19.1.13', false, 10_000);
      await fault('rs3', '');
      await waitRotation(WEB_FLAP, '198.19.1.13', true, 20_000);
    }
    await fault('rs3', '500');
    await waitRotation(WEB_FLAP, '198.19.1.13', false, 10_000);
    await fault('rs3', '');
    // Past rise successes (web, undamped, takes it back), web-flap must still hold it out.
    await waitRotation(WEB, '198.19.1.13', true, 10_000);
    await new Promise((r) => setTimeout(r, INTERVAL_MS));
    assert.equal(await inRotation(WEB_FLAP, '198.19.1.13'), false, 'a flapping server came straight back');
    const health = await lbadm('health', '--service', 'web-flap');
    assert.match(health.stdout, /198\.19\.1\.13:8080 .* down \(held/);
    await waitRotation(WEB_FLAP, '198.19.1.13', true, 30_000);
  });
});
