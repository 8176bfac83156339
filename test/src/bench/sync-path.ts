import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { parseConfig, serviceKey } from '@lbd/config';
import { ConnectionSync, realServerName } from '@lbd/connsync';
import { ConntrackConnectionTable, netnsRunner, type CtnlWriterKind } from '@lbd/dataplane-nft';
import type { Logger } from '@lbd/director-agent';
import { connSyncServiceDefinition, peerServerCredentials, type PeerSecurity } from '@lbd/proto';
import { Topology, freePort, makeClusterPki, waitFor } from '@lbd/testkit';
import { kernelIoCpuSec } from './cpu.js';
import { formatMs, formatNumber, passMiss, table } from './report.js';
import type { BenchScope } from './scope.js';
import { threadCpuSec, type FeedResult, type SyncPathLeaderData, type SyncPathLeaderMessage } from './sync-path-leader.js';
import { GROUP, LOCAL_ADDRESSES, ONE_SERVICE_CONFIG, RS_HOSTS, VIP, writesOf } from './sync-lab.js';
import { WorkerLink } from './worker-link.js';

/**
 * `pnpm bench connsync`, section 1e: the whole sync path alone, with the CPU to itself. The leader's ConnectionSync
 * in a worker thread (sync-path-leader.ts: lbd-ctnl's event lines, parsed as the agent reads them, at 5 000 new
 * connections/s, each ended 100 ms later) -> gRPC + mutual TLS on loopback -> the standby's ConnectionSync on
 * this thread -> conntrack in a fresh namespace (written as the agent's sync thread writes: ctnl-writer.node). What sync costs each director, measured per thread
 * (/proc/thread-self/stat), without wrk, nginx and etcd taking the CPUs: the lab's figures (section 2) move with
 * what else runs. Each round starts a new leader thread; the rounds' spread is this machine's noise.
 */

const PATH = {
  rate: 5000,
  /** Long enough that a connection's two changes never fold into one in a sender's queue. */
  lifeMs: 100,
  /** lbd-ctnl's window (COALESCE_NS). */
  periodMs: 2,
  /** Unmeasured feed before each measured one: a fresh thread's code is not compiled yet. */
  warmupSec: 2,
  /** Connection numbers of each feed start this far apart (unique tuples; a feed makes rate × its seconds). */
  feedStride: 100_000,
} as const;

interface SyncPathRun {
  readonly round: number;
  readonly changes: number;
  readonly changesPerSec: number;
  readonly messages: number;
  /** Cores over the run (feed and drain): the leader's thread, the standby's (this one), the standby's helper processes (lbd-ctnl where it writes, conntrack runs). */
  readonly leaderCores: number;
  readonly standbyCores: number;
  readonly helperCores: number;
  /** This process's other threads (V8's collector helpers, libuv's pool; both ends'). */
  readonly otherCores: number;
  readonly lagP50Ms: number;
  readonly lagP99Ms: number;
  /** Injects the standby failed (the warm-up's too). */
  readonly failed: number;
  readonly warnings: readonly string[];
}

export interface SyncPathResult {
  readonly seconds: number;
  /** Where the standby's table wrote (ConntrackConnectionTable.writerKind). */
  readonly writer: CtnlWriterKind;
  readonly runs: readonly SyncPathRun[];
}

export async function benchSyncPath(scope: BenchScope, prefix: string, seconds: number, rounds: number, log: (msg: string) => void): Promise<SyncPathResult> {
  const t = (scope.topology = new Topology(prefix));
  const pki = await makeClusterPki(join(scope.tmp!, 'pki-path'), ['dir1', 'dir2']);
  const security = async (id: string): Promise<PeerSecurity> => ({
    kind: 'tls', ca: await readFile(pki.ca.certPath), cert: await readFile(pki.certs[id]!.certPath), key: await readFile(pki.certs[id]!.keyPath),
  });
  const leaderSec = await security('dir1');
  const standbySec = await security('dir2');
  if (leaderSec.kind !== 'tls') throw new Error('the sync path runs with TLS');
  await t.addHost('path');
  const ns = t.ns('path');
  log(`whole path alone: leader thread (lbd-ctnl lines) -> gRPC + mutual TLS -> standby -> conntrack in ${ns}, ${formatNumber(PATH.rate)} connections/s, ${rounds} round(s) of ${seconds} s`);
  const warnings: string[] = [];
  const keep = (m: string, f?: Readonly<Record<string, unknown>>): void => { if (warnings.length < 5) warnings.push(`${m} ${JSON.stringify(f ?? {})}`); };
  const syncLog: Logger = { debug: () => undefined, info: () => undefined, warn: keep, error: keep };
  const services = parseConfig(ONE_SERVICE_CONFIG, 'bench connsync', { cluster: true }).services;
  const marks = new Map<string, number>();
  for (const svc of services) svc.realServers.forEach((rs, i) => marks.set(realServerName(serviceKey(svc), rs), (1 << 16) | (i + 1)));
  const sink = new ConntrackConnectionTable({ runner: netnsRunner(ns) });
  const standby = new ConnectionSync({ self: 'dir2', peers: [{ id: 'dir1', address: '127.0.0.1', port: 1 }], security: standbySec, table: sink, log: syncLog });
  const server = new grpc.Server();
  const forgetCleanup = scope.onCleanup(() => server.forceShutdown());
  const runs: SyncPathRun[] = [];
  let feeds = 0;
  try {
    await sink.prepare();
    await standby.start();
    await standby.setConfig(services);
    standby.setMarks(marks);
    server.addService(connSyncServiceDefinition(), standby.handlers());
    const port = await freePort();
    await new Promise<void>((resolve, reject) => server.bindAsync(`127.0.0.1:${port}`, peerServerCredentials(standbySec), (err) => (err ? reject(err) : resolve())));
    for (let round = 0; round < rounds; round++) {
      const data: SyncPathLeaderData = {
        peerPort: port, ca: leaderSec.ca, cert: leaderSec.cert, key: leaderSec.key, configText: ONE_SERVICE_CONFIG, group: GROUP, rate: PATH.rate,
        lifeMs: PATH.lifeMs, periodMs: PATH.periodMs, vip: VIP, realServers: RS_HOSTS, localAddresses: LOCAL_ADDRESSES,
      };
      const leader = await LeaderThread.start(data);
      try {
        await waitFor('the standby caught up with a new leader', 30_000, async () => standby.notCaughtUp(GROUP) === null, 10);
        await leader.feed(PATH.warmupSec, PATH.feedStride * feeds++);
        const standby0 = await threadCpuSec();
        const process0 = process.cpuUsage();
        const helper0 = await kernelIoCpuSec(ns);
        const fed = await leader.feed(seconds, PATH.feedStride * feeds++);
        const standbyCpuSec = (await threadCpuSec()) - standby0;
        const p = process.cpuUsage(process0);
        const helperSec = (await kernelIoCpuSec(ns)) - helper0;
        const runSec = fed.runMs / 1000;
        const run: SyncPathRun = {
          round, changes: fed.changes, changesPerSec: fed.changes / (fed.feedMs / 1000), messages: fed.messages,
          leaderCores: fed.threadCpuSec / runSec, standbyCores: standbyCpuSec / runSec, helperCores: helperSec / runSec,
          otherCores: ((p.user + p.system) / 1e6 - fed.threadCpuSec - standbyCpuSec) / runSec,
          lagP50Ms: fed.sender.lagP50Ms, lagP99Ms: fed.sender.lagP99Ms, failed: fed.sender.failed, warnings: [...fed.warnings, ...warnings.splice(0)],
        };
        runs.push(run);
        log(`whole path alone, round ${round + 1}: ${formatNumber(run.changesPerSec)} changes/s in ${formatNumber(run.messages)} messages; `
          + `cores leader ${run.leaderCores.toFixed(3)}, standby ${run.standbyCores.toFixed(3)} + helpers ${run.helperCores.toFixed(3)}, other threads ${run.otherCores.toFixed(3)}; `
          + `lag p50 ${formatMs(run.lagP50Ms)} p99 ${formatMs(run.lagP99Ms)}${run.warnings.length ? `; ${run.warnings.join(' | ')}` : ''}`);
      } finally {
        await leader.close();
      }
    }
    return { seconds, runs, writer: sink.writerKind };
  } finally {
    await standby.close().catch(() => undefined);
    server.forceShutdown();
    forgetCleanup();
    await sink.dispose();
    await t.destroy();
    scope.topology = undefined;
  }
}

/** The leader's worker thread (sync-path-leader.ts). */
class LeaderThread {
  private constructor(private readonly link: WorkerLink<SyncPathLeaderMessage>) {}

  static async start(data: SyncPathLeaderData): Promise<LeaderThread> {
    return new LeaderThread(await WorkerLink.start<SyncPathLeaderMessage>(new URL('./sync-path-leader.js', import.meta.url), data));
  }

  async feed(seconds: number, from: number): Promise<FeedResult> {
    const m = await this.link.ask({ feed: { seconds, from } }, (x) => 'fed' in x)
      .catch((err: Error) => { throw new Error(`the sync path's leader thread: ${err.message}`); });
    if (!('fed' in m)) throw new Error('the leader thread did not feed');
    return m.fed;
  }

  async close(): Promise<void> {
    await this.link.close();
  }
}

/** Section 1e of the report, and its rows for the targets table. */
export function reportSyncPath(r: SyncPathResult, out: (line?: string) => void, targets: { readonly lagP99Ms: number; readonly coresPerDirector: number }): string[][] {
  out(`\n== 1e. the whole sync path alone at ${formatNumber(PATH.rate)} new connections/s (no wrk, no lab), ${r.seconds} s a round`);
  out(table(['round', 'changes/s', 'messages/s', 'changes/message', 'leader thread', 'standby thread', 'standby helpers', 'other threads', 'lag p50', 'lag p99', 'injects failed'],
    r.runs.map((x) => [String(x.round + 1), formatNumber(x.changesPerSec), formatNumber(x.messages / r.seconds),
      (x.changes / x.messages).toFixed(1), x.leaderCores.toFixed(3), x.standbyCores.toFixed(3), x.helperCores.toFixed(3), x.otherCores.toFixed(3),
      formatMs(x.lagP50Ms), formatMs(x.lagP99Ms), String(x.failed)])));
  out('the leader: ConnectionSync in a worker thread (as lbd-agent\'s sync thread) reading lbd-ctnl\'s event lines it makes itself every 2 ms (ESTABLISHED, then TIME_WAIT 100 ms later: '
    + 'two changes a connection), parsed by the agent\'s code; gRPC + mutual TLS on loopback; the standby: ConnectionSync on this process\'s main thread into conntrack in a fresh '
    + `namespace (${writesOf(r.writer)}). Cores per thread from /proc/thread-self/stat over the round (feed and drain); other threads: this process\'s rest (V8\'s collector helpers, libuv\'s pool; both ends). `
    + 'With the CPUs free, acks come back within a few ms and clock many small messages: the lab (section 2), busier, sends fewer and fuller ones');
  const worst = (f: (x: SyncPathRun) => number): number => Math.max(...r.runs.map(f));
  return [
    ['whole path alone (no wrk, no lab): sync costs the leader (its sync thread; lbd-ctnl\'s events reader not in it, worst round, cores)', worst((x) => x.leaderCores).toFixed(3), `<= ${targets.coresPerDirector}`,
      passMiss(worst((x) => x.leaderCores) <= targets.coresPerDirector)],
    ['whole path alone (no wrk, no lab): sync costs the standby (its thread + helper processes, worst round, cores)', worst((x) => x.standbyCores + x.helperCores).toFixed(3),
      `<= ${targets.coresPerDirector}`, passMiss(worst((x) => x.standbyCores + x.helperCores) <= targets.coresPerDirector)],
    ['whole path alone (no wrk, no lab): lag p99 (worst round)', formatMs(worst((x) => x.lagP99Ms)), `<= ${targets.lagP99Ms} ms`, passMiss(worst((x) => x.lagP99Ms) <= targets.lagP99Ms)],
  ];
}
