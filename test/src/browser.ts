import { accessSync, constants, mkdirSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type LaunchOptions } from 'playwright-core';

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

/**
 * Starts Chromium headless (playwright gives every launch a new, empty user data dir). `executablePath`:
 * a wrapper script, to run it somewhere else (in a network namespace).
 */
export function launchChromium(opts: { executablePath?: string } = {}): Promise<Browser> {
  const launch: LaunchOptions = { executablePath: opts.executablePath ?? CHROMIUM, headless: true, args: CHROMIUM_ARGS, timeout: 30_000 };
  return chromium.launch(launch);
}

/**
 * A script (in `dir`) that starts Debian's Chromium in network namespace `ns`, for `launchChromium`'s
 * executablePath: the browser then reaches what listens inside that namespace, and playwright still
 * drives it over its pipe, which no namespace stops.
 */
export async function chromiumInNamespace(ns: string, dir: string): Promise<string> {
  if (!/^[a-z0-9][a-z0-9-]*$/.test(ns)) throw new Error(`chromiumInNamespace: "${ns}" is not a namespace name`);
  const path = join(dir, `chromium-in-${ns}`);
  await writeFile(path, `#!/bin/sh\nexec ip netns exec ${ns} ${CHROMIUM} "$@"\n`, { mode: 0o755 });
  return path;
}
