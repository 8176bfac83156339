#!/usr/bin/env node
import { EXIT_USAGE, TESTSERVER_USAGE, UsageError, parseTestServerArgs } from '../args.js';
import { startTestServer } from '../testserver.js';

/** lbd-testserver: a real server for tests and the lab. See ../testserver.ts for what it answers. */

/** After SIGTERM, connections get this long to close before the process exits anyway. */
const EXIT_GRACE_MS = 1000;

async function main(): Promise<number> {
  let opts;
  try {
    opts = parseTestServerArgs(process.argv.slice(2));
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`lbd-testserver: ${e.message}\n${TESTSERVER_USAGE}\n`);
    return EXIT_USAGE;
  }
  const server = await startTestServer(opts);
  process.stderr.write(`${JSON.stringify({ msg: 'lbd-testserver listening', server: opts.name, bind: opts.bind, ...server.ports, pid: process.pid })}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  setTimeout(() => process.exit(0), EXIT_GRACE_MS).unref();
  await server.close();
  return 0;
}

main().then((code) => process.exit(code), (e: unknown) => {
  process.stderr.write(`lbd-testserver: ${(e as Error).message ?? String(e)}\n`);
  process.exit(1);
});
