#!/usr/bin/env node
import { main } from '../cli.js';

// exitCode rather than exit(): output piped to another program is flushed before the process ends.
process.exitCode = await main(process.argv.slice(2), {
  stdout: (text) => { process.stdout.write(text); },
  stderr: (text) => { process.stderr.write(text); },
  env: process.env,
});
