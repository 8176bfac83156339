import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { CTNL_WRITER_ADDON, ctnlWriterAddon } from './ctnl-writer.js';

/**
 * In a process of its own (the suite's own heap and threads would blur its size): `threads` worker threads one after
 * another, each loading the addon, answering a batch of `answers` requests (each "." is refused: no kernel needed)
 * and ending. Prints how much the process's resident size grew over them, in MiB, after three to warm up.
 */
const THREADS_SCRIPT = `
const { Worker } = require('node:worker_threads');
const { readFileSync } = require('node:fs');
const [addon, threads, answers] = [process.argv[1], Number(process.argv[2]), Number(process.argv[3])];
const rss = () => Number(/VmRSS:\\s+(\\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))[1]) / 1024;
const code = "const { workerData: d } = require('node:worker_threads'); const a = require(d.addon); a.begin(); a.write(-1, '.\\\\n'.repeat(d.answers)); a.abort();";
const one = () => new Promise((resolve, reject) => {
  const w = new Worker(code, { eval: true, workerData: { addon, answers } });
  w.on('error', reject);
  w.on('exit', (c) => (c === 0 ? resolve() : reject(new Error('a worker exited with ' + c))));
});
(async () => {
  for (let i = 0; i < 3; i++) await one();
  const before = rss();
  for (let i = 0; i < threads; i++) await one();
  console.log((rss() - before).toFixed(1));
})().catch((e) => { console.error(e); process.exit(1); });
`;

describe('ctnl-writer.node without a kernel', () => {
  it('a thread that ends takes its batch\'s answers with it (the agent makes a sync thread again after a failure)', async function () {
    this.timeout(60_000);
    const { addon, error } = ctnlWriterAddon();
    assert.ok(addon, `the addon is built with the package (test/run builds it): ${error ?? ''}`);
    // Each batch's answers grow to 1 MiB: 24 threads that each left them behind leave about 24 MiB (measured without
    // the cleanup hook: 24.6 and 25.0).
    const { stdout } = await promisify(execFile)(process.execPath, ['-e', THREADS_SCRIPT, CTNL_WRITER_ADDON, '24', '1000000'], { timeout: 50_000 });
    const grown = Number(stdout.trim());
    assert.ok(Number.isFinite(grown) && grown < 12, `the process grew by ${stdout.trim()} MiB over 24 threads that each answered a batch of 1 000 000 and ended`);
  });
});
