import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { AdminApi, type HealthEvent__Output } from '@lbd/proto';
import { removeOrphans, requireRoot, runPrefix, startHaLab, waitFor, type BackgroundProcess, type HaLab } from '@lbd/testkit';
import { artifactsDir, chromiumInNamespace, launchChromium, requireChromium } from './browser.js';

/**
 * The dashboard in real headless Chromium on a real cluster: two directors running lbd-agent, three etcd
 * members and three real servers in namespaces (startHaLab), the real kernel and real health checks.
 * A real server's HTTP answers are broken for real (its lbd-testserver's fault file); the page must show
 * it down within 2 s of dir1's health checker taking it out (dir1's own transition time, from WatchHealth),
 * then up again once mended.
 *
 * The page is served inside dir1's namespace by lbd-dashboard, over dir1's admin socket, on dir1's
 * loopback; Chromium runs in dir1's namespace too (a wrapper script as its executable). The agent's HTTPS
 * ops listener serves the same routes inside the agent.
 */

const DASHBOARD_BIN = fileURLToPath(new URL('../../packages/director-agent/dist/bin/lbd-dashboard.js', import.meta.url));

const WEB = '198.18.0.10:80/tcp';
const RS2 = { host: 'rs2', address: '198.19.1.12', port: 8080 };
const WEB_SERVERS = ['198.19.1.11:8080', '198.19.1.12:8080', '198.19.1.13:8080'];
/** From the agent's transition to the page showing it. */
const SHOW_WITHIN_MS = 2000;

describe('dashboard in Chromium on a two-director cluster @privileged', function () {
  this.timeout(60_000);
  let lab: HaLab<AdminApi>;
  let faultDir: string;
  let dashboard: BackgroundProcess;
  let url: string;
  let browser: Browser;
  let page: Page;

  before(async function () {
    this.timeout(150_000);
    await requireRoot(this, { commands: ['nft', 'ip', 'etcd', 'etcdctl', 'arping'] });
    requireChromium(this);
    await removeOrphans('lbdt');
    faultDir = await mkdtemp(join(tmpdir(), 'lbd-dash-faults-'));
    lab = await startHaLab({ prefix: runPrefix('lbdt', 'dash'), admin: (socket) => new AdminApi(socket), faultDir });
    dashboard = lab.cluster.topology.spawn('dir1', process.execPath, [DASHBOARD_BIN, '--socket', lab.socket('dir1'), '--listen', '127.0.0.1:0'], { label: 'dir1:lbd-dashboard' });
    ({ url } = await dashboard.waitForJson<{ url: string }>((v) => v.msg === 'serving the dashboard', 10_000));
    browser = await launchChromium({ executablePath: await chromiumInNamespace(lab.cluster.topology.ns('dir1'), faultDir) });
    page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  });
  after(async function () {
    this.timeout(60_000);
    await writeFile(join(faultDir, `${RS2.host}.fault`), '').catch(() => undefined);
    await page?.close().catch(() => undefined);
    await browser?.close().catch(() => undefined);
    const stopped = await dashboard?.stop();
    assert.ok(stopped === undefined || stopped.code === 0, `lbd-dashboard stopped with ${JSON.stringify(stopped)}: ${dashboard?.stderr}`);
    await lab?.destroy();
    if (faultDir) await rm(faultDir, { recursive: true, force: true });
  });

  const tile = (server: string, state: string): string => `.rs[data-service="${WEB}"][data-server="${server}"][data-state="${state}"]`;

  /** dir1's next transition of rs2 in the web service to `to`, as its health checker made it. */
  async function transition(events: HealthEvent__Output[], to: 'up' | 'down'): Promise<HealthEvent__Output> {
    return waitFor(`dir1 takes ${RS2.address}:${RS2.port} ${to}`, 15_000, async () =>
      events.find((e) => e.service === WEB && e.address === RS2.address && e.port === RS2.port && e.to === to), 20);
  }

  /** Waits for the page to show `state`, and returns how long after the agent's transition it did. */
  async function shownAfter(e: HealthEvent__Output, state: string): Promise<number> {
    await page.locator(tile(`${RS2.address}:${RS2.port}`, state)).waitFor({ timeout: 10_000 });
    return Date.now() - e.timeUnixMs;
  }

  it('shows the cluster, then a real server the health checker takes out within 2 s, and back in once mended', async function () {
    await page.goto(url);
    await page.locator('#conn[data-state="live"]').waitFor({ timeout: 10_000 });
    for (const s of WEB_SERVERS) await page.locator(tile(s, 'up')).waitFor({ timeout: 15_000 });
    await page.locator('.director[data-director="dir1"] .badge[data-role="leader"]').waitFor({ timeout: 10_000 });
    await page.locator('.director[data-director="dir2"] .badge[data-role="standby"]').waitFor({ timeout: 10_000 });
    assert.match(await page.locator('#groups tr[data-group="default"] .leader').innerText(), /dir1/);
    // Probe latencies come in as the checks run (every second in the lab).
    await page.locator(`.rs[data-service="${WEB}"][data-server="198.19.1.11:8080"] .spark circle.ok`).waitFor({ timeout: 10_000 });
    const art = artifactsDir();
    await page.screenshot({ path: join(art, 'dashboard-cluster-up.png'), fullPage: true });

    const events: HealthEvent__Output[] = [];
    const watching = new AbortController();
    const watch = (async () => {
      for await (const e of lab.api('dir1').watchHealth(Date.now(), { signal: watching.signal })) events.push(e);
    })();
    try {
      await writeFile(join(faultDir, `${RS2.host}.fault`), '500\n');
      const down = await transition(events, 'down');
      const downMs = await shownAfter(down, 'down');
      await page.screenshot({ path: join(art, 'dashboard-cluster-rs2-down.png'), fullPage: true });
      assert.ok(downMs <= SHOW_WITHIN_MS, `the page showed rs2 down ${downMs} ms after dir1 took it out (bound ${SHOW_WITHIN_MS} ms)`);
      // The others stay up.
      for (const s of WEB_SERVERS.filter((x) => !x.startsWith(RS2.address))) assert.equal(await page.locator(tile(s, 'up')).count(), 1, s);

      await writeFile(join(faultDir, `${RS2.host}.fault`), '');
      const up = await transition(events, 'up');
      const upMs = await shownAfter(up, 'up');
      await page.screenshot({ path: join(art, 'dashboard-cluster-rs2-back.png'), fullPage: true });
      assert.ok(upMs <= SHOW_WITHIN_MS, `the page showed rs2 back up ${upMs} ms after dir1 took it in (bound ${SHOW_WITHIN_MS} ms)`);
      process.stderr.write(`      dashboard: rs2 down shown ${downMs} ms after the transition, up ${upMs} ms after\n`);
    } finally {
      watching.abort();
      await watch.catch(() => undefined);
    }
  });
});
