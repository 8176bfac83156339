/**
 * `pnpm bench <name> [options]`: lbd's benchmarks. Each prints its figures as ratios to baselines measured
 * in the same run; none asserts speed (that is not what tests are for).
 */
import { benchDataplane } from './dataplane.js';
import { benchHealth } from './health.js';

const EXIT_USAGE = 64;

const USAGE = `usage: pnpm bench <benchmark> [--quick]

benchmarks:
  dataplane   throughput of direct, routed, lbd fullnat/nat, minimal nft and haproxy paths;
              rule scale at 1 .. 10 000 services (about 8 minutes; needs root, wrk, nginx, haproxy)
  health      5 000 tcp checks at 1 s: the agent's CPU, due -> start delay, detection latency of
              100 targets failing at once (about 2 minutes; needs root, nft)

options:
  --quick     a short smoke run (about a minute) that checks the benchmark works; its figures are rough
`;

interface Bench {
  readonly run: (opts: { quick: boolean }) => Promise<number>;
}

const BENCHES: Record<string, Bench> = {
  dataplane: { run: benchDataplane },
  health: { run: benchHealth },
};

async function main(argv: readonly string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '-h' || name === '--help') {
    process.stdout.write(USAGE);
    return 0;
  }
  const bench = name === undefined ? undefined : BENCHES[name];
  const unknown = rest.filter((a) => a !== '--quick');
  if (bench === undefined || unknown.length > 0) {
    const what = bench === undefined ? (name === undefined ? 'no benchmark named' : `unknown benchmark ${JSON.stringify(name)}`) : `unknown option ${JSON.stringify(unknown[0])}`;
    process.stderr.write(`${what}\n${USAGE}`);
    return EXIT_USAGE;
  }
  return bench.run({ quick: rest.includes('--quick') });
}

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
