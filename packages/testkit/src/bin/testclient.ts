#!/usr/bin/env node
import { EXIT_USAGE, TESTCLIENT_USAGE, UsageError, parseTestClientArgs, type ClientCommand } from '../args.js';
import { runHttp, runHttpPaced, runStream, runTcpOnce, runUdp, runUdpFlows } from '../testclient.js';

/**
 * lbd-testclient: runs inside a namespace (`ip netns exec NS node testclient.js MODE ...`) and prints one
 * JSON object on stdout (stream and udp-flows: a `{"ready":...}` line first; http-paced: `{"started":...}`). Exit 0 when the run completed, even
 * with failed requests: the counts are the result; 64 on a bad command line.
 */

async function run(cmd: ClientCommand): Promise<unknown> {
  switch (cmd.mode) {
    case 'http': return runHttp(cmd);
    case 'http-paced': {
      const stop = new AbortController();
      process.once('SIGTERM', () => stop.abort());
      process.once('SIGINT', () => stop.abort());
      return runHttpPaced(cmd, { signal: stop.signal, onStart: (s) => process.stdout.write(`${JSON.stringify(s)}\n`) });
    }
    case 'udp': return runUdp(cmd);
    case 'tcp-once': return runTcpOnce(cmd);
    case 'stream': {
      const stop = new AbortController();
      process.once('SIGTERM', () => stop.abort());
      process.once('SIGINT', () => stop.abort());
      return runStream(cmd, { signal: stop.signal, onReady: (r) => process.stdout.write(`${JSON.stringify(r)}\n`) });
    }
    case 'udp-flows': {
      const stop = new AbortController();
      process.once('SIGTERM', () => stop.abort());
      process.once('SIGINT', () => stop.abort());
      return runUdpFlows(cmd, { signal: stop.signal, onReady: (r) => process.stdout.write(`${JSON.stringify(r)}\n`) });
    }
  }
}

async function main(): Promise<number> {
  let cmd: ClientCommand;
  try {
    cmd = parseTestClientArgs(process.argv.slice(2));
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`lbd-testclient: ${e.message}\n${TESTCLIENT_USAGE}\n`);
    return EXIT_USAGE;
  }
  const result = await run(cmd);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  return 0;
}

main().then((code) => {
  // Exit only once stdout is flushed (it is a pipe when a test reads it).
  process.stdout.write('', () => process.exit(code));
}, (e: unknown) => {
  process.stderr.write(`lbd-testclient: ${(e as Error).message ?? String(e)}\n`);
  process.exit(1);
});
