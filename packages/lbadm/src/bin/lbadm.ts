#!/usr/bin/env node
import { parseArgs } from '../args.js';
import { main } from '../cli.js';

const argv = process.argv.slice(2);

// With --etcd, grpc-js reaches etcd's members by address over TLS (their certificates name their IPs) and
// Node warns about that (DEP0123, a notice for developers) on an operator's terminal; other warnings print.
process.removeAllListeners('warning');
process.on('warning', (w: Error & { code?: string }) => {
  if (w.code !== 'DEP0123') process.stderr.write(`(node) ${w.name}: ${w.message}\n`);
});

// Ctrl-C ends `lbadm health --watch` and `lbadm events --follow` cleanly (exit 0), so a script can watch for a while and stop it.
// Every other command keeps the default: Ctrl-C kills it at once.
const interrupt = new AbortController();
if (watches(argv)) process.once('SIGINT', () => interrupt.abort());

// exitCode rather than exit(): output piped to another program is flushed before the process ends.
process.exitCode = await main(argv, {
  stdout: (text) => { process.stdout.write(text); },
  stderr: (text) => { process.stderr.write(text); },
  env: process.env,
  interrupt: interrupt.signal,
});

function watches(args: readonly string[]): boolean {
  try {
    const inv = parseArgs(args, process.env);
    return (inv.command === 'health' && inv.watch) || (inv.command === 'events' && inv.follow);
  } catch {
    return false; // main reports the usage error
  }
}
