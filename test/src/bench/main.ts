/**
 * `pnpm bench <name> [options]`: lbd's benchmarks. Each prints its figures as ratios to baselines measured
 * in the same run; none asserts speed (that is not what tests are for).
 */
import { DRILL_SCENARIOS, TIMING_PROFILE_NAMES, type TimingProfileName } from '@lbd/config';
import { AGENT_V8_FLAGS, applyAgentV8Flags } from '@lbd/director-agent';
import { benchConnsync } from './connsync.js';
import { benchDataplane } from './dataplane.js';
import { benchEcmp } from './ecmp.js';
import { benchFailover } from './failover.js';
import { benchHealth } from './health.js';
import { MAX_MINUTES, benchStability } from './stability.js';
import { benchSynFlood } from './synflood.js';

const EXIT_USAGE = 64;

const USAGE = `usage: pnpm bench <benchmark> [--quick] [--count N] [--load-count N] [--scenarios S,S] [--minutes N] [--slots N] [--timing P]

benchmarks:
  dataplane   throughput of direct, routed, lbd fullnat/nat/dr, minimal nft and haproxy paths;
              rule scale at 1 .. 10 000 services, and the kernel lease's renewal at each size (about 8
              minutes; needs root, wrk, nginx, haproxy)
  health      5 000 tcp checks at 1 s: the agent's CPU, due -> start delay, detection latency of
              100 targets failing at once (about 2 minutes; needs root, nft)
  failover    failure drills on two directors with etcd: N of each scenario (switchover, kill-agent,
              box-death, etcd-partition, peer-partition, etcd-outage; pause-leader and pause-standby
              for 1, 3 and 10 s each), default and fast timing, quiet and with a CPU load on every
              core; p50/p99/max, dual forwarding and ARP answering seen from the router, next to the
              targets (about N x 9 minutes; needs root, nft, etcd, tcpdump).
              --count N: drills per scenario (and pause) and variant (default 20);
              --load-count N: drills per scenario in the CPU-load variants (default: --count);
              --scenarios S,S: only these drill scenarios (e.g. --scenarios box-death,etcd-partition);
              --quick: one drill each, without the CPU-load variants
  connsync    connection sync: bulk of 100 000 connections (kernel alone and the whole path), sync lag and
              CPU under about 5 000 new connections/s (and without sync), connections broken per
              switchover and box death with and without sync (about 2 + N x 0.7 minutes: 4 minutes with
              the default --count 3; needs root, nft, etcd, conntrack, openssl, wrk, nginx).
              --count N: drills of each kind, with and without sync (default 3)
  stability   does the directors' own traffic move the vip group? The connsync lab, idle for 60 s (the
              control), then under a saturating new-connection load (wrk -t2 -c50, Connection: close):
              A. sync on; B. sync on with a busy loop on every core; C. sync off (60 s). Per phase:
              conn/s, wrk errors, vip group transitions and fences (target 0), and conn/s with sync /
              without (about 2 x N + 5 minutes; needs root, nft, etcd, conntrack, openssl, wrk, nginx,
              curl). --minutes N: how long phases A and B last (default 10); --quick: every phase 1 minute

  ecmp        the ECMP tier (FRR router, three directors with gobgpd, 8 slots): 30 s at rest (CPU of the
              directors and etcd members, etcd writes/s, slot transitions); 6 000 new connections
              per director against its share of the slots; N box deaths (rotating the director) with
              200 long-lived streams, each followed by the box's return and its slots moving back:
              no service for new connections (p50/p99/max) and streams broken (about 1.5 + N x 1.2
              minutes; needs root, nft, etcd, conntrack, openssl, gobgpd, vtysh). --count N: box
              deaths (default 5); --slots N: the tier's slots (a power of two, default 8);
              --timing P: the agents' election timing (default, fast or relaxed; default: the lab's);
              --quick: one, 10 s at rest and 2 000 connections
  synflood    a spoofed-source SYN flood beside legitimate one-request connections, with and without the
              SYN proxy (synProxy): legitimate requests/s and errors, conntrack entries left, table drops,
              CPU (about 1 minute; needs root, nft, conntrack, wrk, nginx, perl)

options:
  --quick     a short smoke run (about a minute) that checks the benchmark works; its figures are rough
`;

interface Bench {
  readonly run: (opts: { quick: boolean; count?: number; loadCount?: number; minutes?: number; scenarios?: readonly string[]; slots?: number; timing?: TimingProfileName }) => Promise<number>;
  /** Takes --count N. */
  readonly counted?: boolean;
}

const BENCHES: Record<string, Bench> = {
  dataplane: { run: benchDataplane },
  health: { run: benchHealth },
  failover: { run: benchFailover, counted: true },
  connsync: { run: benchConnsync, counted: true },
  stability: { run: benchStability },
  ecmp: { run: benchEcmp, counted: true },
  synflood: { run: benchSynFlood },
};

async function main(argv: readonly string[]): Promise<number> {
  // The benches run the agent's sync code in this process and its worker threads too (connsync's sections 1):
  // with the V8 flags the agent sets for itself, or they would measure code the agent does not run. Set now, they
  // hold for the worker threads made from here on, as in the agent, but measured less surely for this thread,
  // whose heap exists already (docs/kernel-io.md, "V8's pretenuring off"): `pnpm bench` gives them on node's
  // command line as well (package.json), and a run without them there says so.
  const missing = AGENT_V8_FLAGS.filter((flag) => !process.execArgv.includes(flag));
  if (missing.length > 0) {
    process.stderr.write(`bench: node runs without ${missing.join(' ')} on its command line (the agent's V8 flags, AGENT_V8_FLAGS): `
      + 'set now, for the threads to come; this thread\'s figures are less sure. pnpm bench gives them (package.json)\n');
  }
  applyAgentV8Flags();
  const [name, ...rest] = argv;
  if (name === '-h' || name === '--help') {
    process.stdout.write(USAGE);
    return 0;
  }
  const bench = name === undefined ? undefined : BENCHES[name];
  let count: number | undefined;
  let loadCount: number | undefined;
  let minutes: number | undefined;
  let slots: number | undefined;
  let timing: TimingProfileName | undefined;
  let scenarios: string[] | undefined;
  const unknown: string[] = [];
  for (let i = 0; i < rest.length; i++) {
    if (rest[i] === '--quick') continue;
    if (rest[i] === '--count' && bench?.counted) {
      count = Number(rest[++i]);
      if (!Number.isInteger(count) || count < 1) unknown.push(`--count ${rest[i] ?? ''}`);
    } else if (rest[i] === '--load-count' && name === 'failover') {
      loadCount = Number(rest[++i]);
      if (!Number.isInteger(loadCount) || loadCount < 1) unknown.push(`--load-count ${rest[i] ?? ''}`);
    } else if ((rest[i] === '--scenarios' || rest[i] === '--modes') && name === 'failover') {
      // --modes: the old name of --scenarios, still read for scripts; USAGE does not name it.
      scenarios = (rest[++i] ?? '').split(',').filter((m) => m !== '');
      const wrong = scenarios.find((m) => !(DRILL_SCENARIOS as readonly string[]).includes(m));
      if (scenarios.length === 0 || wrong !== undefined) unknown.push(`${rest[i - 1]!} ${rest[i] ?? ''} (drill scenarios, comma-separated: ${DRILL_SCENARIOS.join(', ')})`);
    } else if (rest[i] === '--slots' && name === 'ecmp') {
      slots = Number(rest[++i]);
      if (![1, 2, 4, 8, 16, 32, 64].includes(slots)) unknown.push(`--slots ${rest[i] ?? ''}`);
    } else if (rest[i] === '--timing' && name === 'ecmp') {
      const t = rest[++i] ?? '';
      if ((TIMING_PROFILE_NAMES as readonly string[]).includes(t)) timing = t as TimingProfileName;
      else unknown.push(`--timing ${t} (one of ${TIMING_PROFILE_NAMES.join(', ')})`);
    } else if (rest[i] === '--minutes' && name === 'stability') {
      minutes = Number(rest[++i]);
      if (!Number.isFinite(minutes) || minutes <= 0 || minutes > MAX_MINUTES) unknown.push(`--minutes ${rest[i] ?? ''}`);
    } else unknown.push(rest[i]!);
  }
  if (bench === undefined || unknown.length > 0) {
    const what = bench === undefined ? (name === undefined ? 'no benchmark named' : `unknown benchmark ${JSON.stringify(name)}`) : `unknown option ${JSON.stringify(unknown[0])}`;
    process.stderr.write(`${what}\n${USAGE}`);
    return EXIT_USAGE;
  }
  return bench.run({ quick: rest.includes('--quick'), ...(count !== undefined ? { count } : {}), ...(loadCount !== undefined ? { loadCount } : {}), ...(minutes !== undefined ? { minutes } : {}), ...(scenarios !== undefined ? { scenarios } : {}), ...(slots !== undefined ? { slots } : {}), ...(timing !== undefined ? { timing } : {}) });
}

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
