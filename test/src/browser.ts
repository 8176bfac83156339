import { accessSync, constants, mkdirSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from 'playwright-core';
import type { BackgroundProcess, Topology } from '@lbd/testkit';

/**
 * Debian's Chromium driven by playwright-core, for the dashboard's browser tests. playwright-core never
 * downloads a browser: it starts /usr/bin/chromium (test/run installs the `chromium` package) and talks
 * to it over a pipe, so a wrapper that starts it in a network namespace works the same.
 */

export const CHROMIUM = '/usr/bin/chromium';

/**
 * Flags for a closed machine: no background connections (they are refused here, many at a time, and
 * every start would try to look up Google's hosts), no GPU, no sandbox (the tests run as root).
 */
export const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync',
];

/** Where screenshots go: $LBD_ARTIFACTS, else test-artifacts/ at the repository root (ignored by git). */
export function artifactsDir(): string {
  const dir = process.env.LBD_ARTIFACTS ?? join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'test-artifacts');
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** Skips the suite, loudly, without Chromium; in CI (LBD_REQUIRE_PRIVILEGED=1) a missing Chromium fails instead. */
export function requireChromium(ctx: Mocha.Context): void {
  try {
    accessSync(CHROMIUM, constants.X_OK);
    return;
  } catch {
    const title = ctx.test?.parent?.fullTitle() ?? 'browser suite';
    const problem = `${CHROMIUM} is missing (apt-get install chromium; test/run installs it)`;
    if (process.env.LBD_REQUIRE_PRIVILEGED === '1') throw new Error(`${title}: ${problem}`);
    process.stderr.write(`\n!!! SKIPPING "${title}": ${problem}.\n\n`);
    ctx.skip();
  }
}

/** Starts Chromium headless (playwright gives every launch a new, empty user data dir). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, timeout: 30_000 });
}

/** A server whose every connection is piped both ways to a new connection from `dial`. */
export function relayServer(dial: () => Socket): Server {
  return createServer((c: Socket) => {
    const u = dial();
    c.pipe(u).pipe(c);
    c.on('error', () => u.destroy());
    u.on('error', () => c.destroy());
  });
}

const BROWSER_SERVER_JS = fileURLToPath(new URL('./browser-server.js', import.meta.url));

export interface NamespacedBrowser {
  readonly browser: Browser;
  /** Closes the browser and its server (idempotent). */
  stop(): Promise<void>;
}

/**
 * Chromium and its Playwright server both in `host`'s namespace (browser-server.js), driven from here:
 * what a browser with client certificates on that host sees. Contexts may use `clientCertificates`, which
 * Playwright presents from its server (in the namespace, as it must be: it makes the TLS connections);
 * `trustCa` (a PEM file) is trusted there for them. The Playwright server is reached through a unix
 * socket in `dir` and a loopback relay here, since no address of this namespace reaches the other.
 */
export async function connectChromiumInNamespace(topology: Topology, host: string, dir: string, trustCa?: string): Promise<NamespacedBrowser> {
  const socket = join(dir, `browser-${host}.sock`);
  const server: BackgroundProcess = topology.spawn(host, process.execPath, [BROWSER_SERVER_JS, '--socket', socket], {
    label: `${host}:browser-server`, env: { ...process.env, ...(trustCa ? { NODE_EXTRA_CA_CERTS: trustCa } : {}) },
  });
  const relay = relayServer(() => connect(socket));
  let stopped = false;
  const stop = async (browser?: Browser): Promise<void> => {
    if (stopped) return;
    stopped = true;
    await browser?.close().catch(() => undefined);
    relay.close();
    await server.stop();
  };
  try {
    const { wsPath } = await server.waitForJson<{ wsPath: string }>((v) => v.msg === 'browser server ready', 40_000);
    await new Promise<void>((resolve, reject) => relay.once('error', reject).listen(0, '127.0.0.1', resolve));
    const port = (relay.address() as AddressInfo).port;
    const browser = await chromium.connect(`ws://127.0.0.1:${port}${wsPath}`, { timeout: 30_000 });
    return { browser, stop: () => stop(browser) };
  } catch (e) {
    await stop();
    throw new Error(`Chromium in ${host}'s namespace: ${(e as Error).message}\n${server.stderr.slice(-2000)}`);
  }
}
