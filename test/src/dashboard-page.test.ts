import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { Dashboard, opsRequestHandler } from '@lbd/operator-surfaces';
import { issueCert, makeCa } from '@lbd/testkit';
import { FakeDashboardBackend, MemoryEventSource, serveOpsRoutes, type PlainOpsServer } from '@lbd/operator-surfaces/testing';
import type { ClusterStatus, GetHealthResponse, GetStatusResponse, RealServerHealth } from '@lbd/proto';
import { artifactsDir, launchChromium, requireChromium } from './browser.js';

/**
 * The dashboard page in real headless Chromium, over a fake agent (the routes are the real ones): what
 * it draws for each kind of state, that it follows the stream live, that it reconnects when the
 * agent comes back, and that it works over HTTPS with a client certificate (playwright's
 * clientCertificates), as the agent's ops listener will serve it. The same page against a real cluster, with a real server broken for real, is
 * dashboard.privileged.test.ts.
 */

const WEB = '198.18.0.10:80/tcp';
const DNS = '198.18.0.10:53/udp';

function servers(): GetStatusResponse['services'] {
  const rs = (address: string, port: number, weight: number, health: string, flags: string[] = []) => ({
    address, port, weight, quiescent: !(weight > 0 && health !== 'down'), eligible: weight > 0 && health !== 'down', activeConnections: 4, inactiveConnections: 9, packets: 1000, bytes: 90_000,
    flags, health, effectiveWeight: health === 'down' ? 0 : weight,
  });
  return [
    {
      name: 'web', key: WEB, vip: '198.18.0.10', port: 80, protocol: 'tcp', mode: 'fullnat', scheduler: 'wrr', flags: [],
      realServers: [rs('198.19.1.11', 8080, 1, 'up'), rs('198.19.1.12', 8080, 2, 'up'), rs('198.19.1.13', 8080, 3, 'down', ['down', 'held-down'])],
    },
    {
      name: 'dns', key: DNS, vip: '198.18.0.10', port: 53, protocol: 'udp', mode: 'fullnat', scheduler: 'rr', flags: [],
      realServers: [rs('198.19.1.11', 5353, 1, 'up'), rs('198.19.1.12', 5353, 0, 'up')],
    },
  ];
}

function health(): GetHealthResponse {
  const h = (service: string, address: string, port: number, state: string, o: Partial<RealServerHealth> = {}): RealServerHealth => ({
    service, address, port, state, sinceUnixMs: Date.now() - 65_000, successes: 5, failures: 0,
    check: { kind: 'http', description: 'http GET /', key: `${service}|${address}`, intervalMs: 1000 },
    lastResult: state === 'up' ? { ok: true, reason: 'ok', message: 'http GET /: got 200', latencyMs: 3.2 } : { ok: false, reason: 'status', message: 'http GET /: got 500, want 200-399', latencyMs: 2.1 },
    heldDownUntilUnixMs: 0, flags: state === 'down' ? ['down'] : [], weight: 1, effectiveWeight: state === 'down' ? 0 : 1, ...o,
  });
  return {
    realServers: [
      h(WEB, '198.19.1.11', 8080, 'up'), h(WEB, '198.19.1.12', 8080, 'up'),
      h(WEB, '198.19.1.13', 8080, 'down', { flags: ['down', 'held-down'], heldDownUntilUnixMs: Date.now() + 30_000 }),
      h(DNS, '198.19.1.11', 5353, 'up'), h(DNS, '198.19.1.12', 5353, 'up', { weight: 0, effectiveWeight: 0 }),
    ],
  };
}

const CLUSTER: ClusterStatus = {
  clustered: true, self: 'dir1', etcdReachable: true, worstCaseTakeoverMs: 840, timingProfile: 'default', configRevision: 3,
  directors: [
    { id: 'dir1', version: '0.1.0', healthy: true, problems: [], priorities: { default: 150 }, leaseLeftMs: 1800, peerAddress: '198.18.3.1:7411', peerReachable: true,
      groups: [{ group: 'default', role: 'leader', reason: 'elected: priority 150 > 100', atUnixMs: Date.now() - 60_000 }] },
    { id: 'dir2', version: '0.1.0', healthy: true, problems: [], priorities: { default: 100 }, leaseLeftMs: 1700, peerAddress: '198.18.3.2:7411', peerReachable: false,
      groups: [{ group: 'default', role: 'standby', reason: 'backup: priority 100 < leader\'s 150', atUnixMs: Date.now() - 60_000 }] },
  ],
  groups: [{ name: 'default', leader: 'dir1', term: 2, sinceUnixMs: Date.now() - 60_000, reason: 'elected', addresses: ['198.18.0.10', '198.19.1.100'], role: 'leader', beatAgeMs: 10, preempt: 'after-sync' }],
  sync: { enabled: true, disabledReason: '', peers: [{ peer: 'dir2', direction: 'to', state: 'streaming', caughtUp: true, lagP99Ms: 1.2, lastError: '' }] },
};

describe('dashboard page in Chromium', function () {
  this.timeout(60_000);
  let browser: Browser;
  let page: Page;
  let backend: FakeDashboardBackend;
  let events: MemoryEventSource;
  let dashboard: Dashboard;
  let server: PlainOpsServer;
  let closeServer: (() => Promise<void>) | undefined;

  before(async function () {
    requireChromium(this);
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
  });

  async function serve(withEvents: boolean, port = 0): Promise<void> {
    dashboard = new Dashboard({ backend, events: withEvents ? events : null, pollMs: 60_000, healthPollMs: 60_000 });
    server = await serveOpsRoutes(dashboard.routes(), undefined, port);
    closeServer = () => server.close();
  }

  beforeEach(async () => {
    backend = new FakeDashboardBackend({ agent: { configRevision: 3 }, services: servers() }, health(), structuredClone(CLUSTER));
    events = new MemoryEventSource();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  });
  afterEach(async () => {
    await page?.close();
    dashboard?.close();
    await closeServer?.();
    closeServer = undefined;
  });

  const stateOf = (service: string, server: string): Promise<string | null> =>
    page.locator(`.rs[data-service="${service}"][data-server="${server}"]`).getAttribute('data-state', { timeout: 5000 });

  it('draws the topology, the health grid, the timeline and the drill results', async () => {
    events.add('drill', 'box-death', '', 'pass', { reason: 'standby took over in 612 ms', fields: { failedRequests: '0', requests: '120', noServiceMs: '612' } });
    events.add('role', 'default', 'standby', 'leader', { reason: 'elected: priority 150 > 100' });
    events.add('health', `${WEB} 198.19.1.13:8080`, 'up', 'down', { reason: 'http GET /: got 500, want 200-399 (2 failures)' });
    await serve(true);
    await page.goto(`${server.url}/`);
    await page.locator('#conn[data-state="live"]').waitFor({ timeout: 5000 });
    await page.locator('.rs').first().waitFor();

    assert.equal(await stateOf(WEB, '198.19.1.11:8080'), 'up');
    assert.equal(await stateOf(WEB, '198.19.1.13:8080'), 'held-down');
    assert.equal(await stateOf(DNS, '198.19.1.12:5353'), 'drained');
    assert.match(await page.locator(`.rs[data-server="198.19.1.11:8080"][data-service="${WEB}"]`).innerText(), /weight 1 · conns 4 active, 9 other/);

    assert.equal(await page.locator('.director[data-director="dir1"] .badge[data-role="leader"]').count(), 1);
    assert.equal(await page.locator('.director[data-director="dir2"] .badge[data-role="standby"]').count(), 1);
    assert.equal(await page.locator('.director[data-director="dir2"] [data-peer-link="down"]').count(), 1, 'the broken peer link shows');
    assert.match(await page.locator('#groups tr[data-group="default"]').innerText(), /dir1[\s\S]*198\.18\.0\.10, 198\.19\.1\.100/);

    assert.equal(await page.locator('#timeline li').count(), 3);
    assert.match(await page.locator('#timeline li').first().innerText(), /198\.19\.1\.13:8080: up → down/);
    assert.match(await page.locator('#drills tbody tr[data-result="pass"]').innerText(), /box-death[\s\S]*0 of 120[\s\S]*612 ms/);
    await page.screenshot({ path: join(artifactsDir(), 'dashboard-page.png'), fullPage: true });
  });

  it('follows the stream live: a server goes down and comes back, its sparkline grows, a new event shows', async () => {
    await serve(true);
    await page.goto(`${server.url}/`);
    await page.locator('#conn[data-state="live"]').waitFor({ timeout: 5000 });
    assert.equal(await stateOf(WEB, '198.19.1.12:8080'), 'up');
    const probe = (latencyMs: number): void => {
      const h = backend.healthAnswer.realServers!.find((r) => r.service === WEB && r.address === '198.19.1.11')!;
      h.successes = (h.successes ?? 0) + 1;
      h.lastResult = { ok: true, reason: 'ok', message: 'http GET /: got 200', latencyMs };
    };

    probe(7);
    backend.transition(WEB, '198.19.1.12', 8080, 'down');
    await page.locator(`.rs[data-service="${WEB}"][data-server="198.19.1.12:8080"][data-state="down"]`).waitFor({ timeout: 2000 });
    probe(12);
    backend.transition(WEB, '198.19.1.12', 8080, 'up');
    await page.locator(`.rs[data-service="${WEB}"][data-server="198.19.1.12:8080"][data-state="up"]`).waitFor({ timeout: 2000 });

    // Three reads of health, three probe results of 198.19.1.11: three points, the last one the highest.
    const line = page.locator(`.rs[data-server="198.19.1.11:8080"][data-service="${WEB}"] .spark polyline`);
    const points = (await line.getAttribute('points'))!.split(' ').map((p) => Number(p.split(',')[1]));
    assert.equal(points.length, 3);
    assert.ok(points[2]! < points[1]! && points[1]! < points[0]!, `y falls as latency grows: ${points.join(' ')}`);

    events.add('admin', 'server drain', '', 'done', { reason: 'by ops-alice' });
    await page.locator('#timeline li[data-kind="admin"]').waitFor({ timeout: 2000 });
  });

  it('without an event log it shows no timeline and no drills', async () => {
    await serve(false);
    await page.goto(`${server.url}/`);
    await page.locator('.rs').first().waitFor({ timeout: 5000 });
    assert.equal(await page.locator('#timeline-section').isHidden(), true);
    assert.equal(await page.locator('#drills-section').isHidden(), true);
  });

  it('reconnects when the agent comes back, and shows what changed meanwhile', async () => {
    await serve(true);
    await page.goto(`${server.url}/`);
    await page.locator('#conn[data-state="live"]').waitFor({ timeout: 5000 });
    const port = Number(new URL(server.url).port);
    dashboard.close();
    await server.close();
    await page.locator('#conn:not([data-state="live"])').waitFor({ timeout: 5000 });
    backend.transition(WEB, '198.19.1.11', 8080, 'down');
    await serve(true, port);
    await page.locator('#conn[data-state="live"]').waitFor({ timeout: 10_000 });
    await page.locator(`.rs[data-service="${WEB}"][data-server="198.19.1.11:8080"][data-state="down"]`).waitFor({ timeout: 2000 });
  });

  it('works over HTTPS with a client certificate (as the agent\'s ops listener serves it); without one the page does not load', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lbd-dash-tls-'));
    const contexts: Awaited<ReturnType<Browser['newContext']>>[] = [];
    try {
      const ca = await makeCa(dir, 'ca');
      const agentCert = await issueCert(ca, dir, 'dir1');
      const viewer = await issueCert(ca, dir, 'viewer');
      dashboard = new Dashboard({ backend, events, pollMs: 60_000, healthPollMs: 60_000 });
      const tls = createServer({
        ca: await readFile(ca.certPath), cert: await readFile(agentCert.certPath), key: await readFile(agentCert.keyPath),
        requestCert: true, rejectUnauthorized: true,
      }, opsRequestHandler(dashboard.routes(), { role: 'read', name: 'viewer' }));
      tls.listen(0, '127.0.0.1');
      await once(tls, 'listening');
      const url = `https://127.0.0.1:${(tls.address() as AddressInfo).port}`;
      closeServer = () => new Promise<void>((resolve) => { tls.closeAllConnections(); tls.close(() => resolve()); });

      // The agent's certificate names dir1, not 127.0.0.1, and its CA is not the browser's: the client certificate is what counts here.
      const without = await browser.newContext({ ignoreHTTPSErrors: true });
      contexts.push(without);
      const refused = await without.newPage();
      await assert.rejects(refused.goto(`${url}/`, { timeout: 10_000 }), /ERR_|socket hang up|closed/);

      const ctx = await browser.newContext({ ignoreHTTPSErrors: true, clientCertificates: [{ origin: url, certPath: viewer.certPath, keyPath: viewer.keyPath }] });
      contexts.push(ctx);
      const tlsPage = await ctx.newPage();
      await tlsPage.goto(`${url}/`);
      await tlsPage.locator('#conn[data-state="live"]').waitFor({ timeout: 10_000 });
      backend.transition(WEB, '198.19.1.11', 8080, 'down');
      await tlsPage.locator(`.rs[data-service="${WEB}"][data-server="198.19.1.11:8080"][data-state="down"]`).waitFor({ timeout: 2000 });
    } finally {
      for (const c of contexts) await c.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
