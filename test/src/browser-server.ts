#!/usr/bin/env node
import { connect } from 'node:net';
import { chromium } from 'playwright-core';
import { CHROMIUM, CHROMIUM_ARGS, relayServer } from './browser.js';

/**
 * browser-server.js --socket PATH: Debian's Chromium under a Playwright server, meant to run inside a
 * network namespace (`ip netns exec`), reachable through the unix socket PATH, which no namespace stops
 * (see connectChromiumInNamespace). The Playwright server is where a context's client certificates are
 * presented (Playwright proxies the browser's TLS connections through itself for that), so it must sit in
 * the namespace with the browser: both then reach what that namespace reaches, with the certificates the
 * test gives. NODE_EXTRA_CA_CERTS in its environment makes it trust a lab CA, as a browser whose operator
 * imported it would. Prints {"wsPath": ...} once ready; SIGTERM closes the browser.
 */

async function main(argv: readonly string[]): Promise<void> {
  const i = argv.indexOf('--socket');
  const path = argv[i + 1];
  if (i < 0 || path === undefined) throw new Error('usage: browser-server.js --socket PATH');
  const server = await chromium.launchServer({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true, host: '127.0.0.1', port: 0, timeout: 30_000 });
  const ws = new URL(server.wsEndpoint());
  const relay = relayServer(() => connect(Number(ws.port), '127.0.0.1'));
  await new Promise<void>((resolve, reject) => relay.once('error', reject).listen(path, resolve));
  const stop = (): void => {
    relay.close();
    void server.close().finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdout.write(`${JSON.stringify({ msg: 'browser server ready', wsPath: ws.pathname })}\n`);
}

main(process.argv.slice(2)).catch((e: unknown) => {
  process.stderr.write(`browser-server: ${(e as Error).message ?? String(e)}\n`);
  process.exit(1);
});
