import { KernelAddressOwner } from './addresses.js';
import { netnsRunner } from './runner.js';

/**
 * A stand-in agent for addresses.privileged.test.ts: claims addresses in a namespace with a
 * KernelAddressOwner, prints `{"claimMs":…,"watchdogPid":…}` and waits to be killed.
 * argv: namespace stateDir lifetimeSec addresses-json
 */
const [ns, stateDir, lifetime, addresses] = process.argv.slice(2);
if (!ns || !stateDir || !lifetime || !addresses) throw new Error('usage: addresses.fixture.js ns stateDir lifetimeSec addresses-json');
const owner = new KernelAddressOwner({ runner: netnsRunner(ns), stateDir, lifetimeSec: Number(lifetime) });
const t0 = performance.now();
await owner.claim('g', JSON.parse(addresses), { count: 1, intervalMs: 100 });
process.stdout.write(`${JSON.stringify({ claimMs: performance.now() - t0, watchdogPid: owner.watchdogPid })}\n`);
setInterval(() => {}, 60_000); // until killed
