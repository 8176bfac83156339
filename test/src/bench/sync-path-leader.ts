/**
 * The leader's side of `pnpm bench connsync`'s whole path alone (sync-path.ts), in a worker thread of its own as
 * the sync thread is in lbd-agent: a ConnectionSync whose table reads lbd-ctnl's event lines that this thread
 * makes itself at a pace (the parse and everything after it are the agent's own code; the kernel and the pipe
 * are not in it), sending to the standby at `peerPort` over gRPC and mutual TLS.
 *
 * Messages: in, `{ feed: { seconds, from } }` (connections numbered from `from`), then `{ close: true }`; out,
 * `{ ready: true }`, `{ fed: FeedResult }` after each feed once the standby acknowledged everything, `{ closed: true }`,
 * or `{ error }` at any point.
 */
import { readFileSync } from 'node:fs';
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { parseConfig } from '@lbd/config';
import { ConnectionSync, type SenderStatus } from '@lbd/connsync';
import type { ConnectionApplyResult, ConnectionEvent, ConnectionTable, ConnectionWatch, ConnectionWatchHandlers, SyncedConnection } from '@lbd/dataplane';
import { parseEventLine } from '@lbd/dataplane-nft';
import type { Logger } from '@lbd/director-agent';
import type { LeaderThreadData } from './bulk-leader.js';
import { clockTicks, parseProcStat } from './report.js';

export interface SyncPathLeaderData extends LeaderThreadData {
  /** New connections a second, each an ESTABLISHED event and, lifeMs later, a TIME_WAIT one. */
  readonly rate: number;
  readonly lifeMs: number;
  /** How often a batch of event lines is read, as lbd-ctnl's window sends them up. */
  readonly periodMs: number;
  readonly vip: string;
  readonly realServers: readonly string[];
  readonly localAddresses: readonly string[];
}

export interface FeedResult {
  readonly changes: number;
  /** Messages the leader sent during the feed and its drain. */
  readonly messages: number;
  readonly feedMs: number;
  /** This thread's CPU over the feed and until the standby acknowledged everything. */
  readonly threadCpuSec: number;
  readonly runMs: number;
  readonly sender: SenderStatus;
  readonly warnings: readonly string[];
}

export type SyncPathLeaderMessage =
  | { readonly ready: true }
  | { readonly fed: FeedResult }
  | { readonly closed: true }
  | { readonly error: string };

/** This thread's CPU seconds (user + system), from /proc/thread-self/stat. */
export async function threadCpuSec(): Promise<number> {
  const st = parseProcStat(readFileSync('/proc/thread-self/stat', 'utf8'));
  return (st.utime + st.stime) / (await clockTicks());
}

/** A ConnectionTable whose only content is the events it is handed as lbd-ctnl's lines. */
class LineFedTable implements ConnectionTable {
  private handlers: ConnectionWatchHandlers | null = null;
  async prepare(): Promise<void> {}
  async dump(): Promise<SyncedConnection[]> { return []; }
  async apply(): Promise<ConnectionApplyResult> { return { inserted: 0, replaced: 0, refreshed: 0, removed: 0, failed: 0, errors: [] }; }
  async watch(h: ConnectionWatchHandlers): Promise<ConnectionWatch> {
    this.handlers = h;
    return { close: async () => { this.handlers = null; } };
  }

  /** As ConntrackConnectionTable's watch reads a chunk of the helper's output. */
  read(text: string): void {
    const at = performance.now();
    const events: ConnectionEvent[] = [];
    for (const line of text.split('\n')) {
      const p = parseEventLine(line, at);
      if (p?.type === 'event') events.push(p.event);
    }
    if (events.length > 0) this.handlers?.onEvents(events);
  }
}

/** lbd-ctnl's event line for connection i (fullnat tcp, unique client and reply tuples up to 700 000 connections). */
function eventLine(d: SyncPathLeaderData, i: number, state: string): string {
  const rs = i % d.realServers.length;
  const a = i >> 8;
  const client = `198.18.${16 + (a >> 8)}.${a & 255} ${10_000 + (i & 255)}`;
  const local = `${d.localAddresses[i % d.localAddresses.length]} ${1024 + (Math.floor(i / 12) % 60_000)}`;
  return `U 0 tcp ${client} ${d.vip} 80 ${d.realServers[rs]} 8080 ${local} ${state} 120 ${(1 << 16) | (rs + 1)} - -`;
}

async function main(): Promise<void> {
  const port = parentPort!;
  const d = workerData as SyncPathLeaderData;
  const warnings: string[] = [];
  const keep = (msg: string, f?: Readonly<Record<string, unknown>>): void => { if (warnings.length < 5) warnings.push(`${msg} ${JSON.stringify(f ?? {})}`); };
  const log: Logger = { debug: () => undefined, info: () => undefined, warn: keep, error: keep };
  const security = { kind: 'tls', ca: Buffer.from(d.ca), cert: Buffer.from(d.cert), key: Buffer.from(d.key) } as const;
  const table = new LineFedTable();
  const leader = new ConnectionSync({
    self: 'dir1', peers: [{ id: 'dir2', address: '127.0.0.1', port: d.peerPort }], security, table, log,
  });
  await leader.start();
  await leader.setConfig(parseConfig(d.configText, 'bench connsync', { cluster: true }).services);
  await leader.setLeading(new Set([d.group]));
  // Read once here (it runs getconf), so no feed's CPU holds it.
  await clockTicks();

  const feed = async (seconds: number, from: number): Promise<FeedResult> => {
    const seq0 = leader.status().senders[0]?.sentSeq ?? 0;
    const cpu0 = await threadCpuSec();
    const t0 = performance.now();
    let opened = from;
    let ended = from;
    // Paced by the clock, not by the timer's count: each batch holds every event due by now.
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        const elapsed = performance.now() - t0;
        const done = elapsed >= seconds * 1000;
        const openDue = from + Math.floor((Math.min(elapsed, seconds * 1000) * d.rate) / 1000);
        const endDue = done ? openDue : from + Math.max(0, Math.floor(((elapsed - d.lifeMs) * d.rate) / 1000));
        let text = '';
        for (; opened < openDue; opened++) text += `${eventLine(d, opened, 'ESTABLISHED')}\n`;
        for (; ended < endDue; ended++) text += `${eventLine(d, ended, 'TIME_WAIT')}\n`;
        table.read(text);
        if (done) {
          clearInterval(timer);
          resolve();
        }
      }, d.periodMs);
    });
    const feedMs = performance.now() - t0;
    if (!(await leader.drain('dir2', 30_000))) keep('the standby did not acknowledge everything within 30 s of the feed\'s end');
    const runMs = performance.now() - t0;
    const threadCpu = (await threadCpuSec()) - cpu0;
    const st = leader.status().senders[0];
    if (st === undefined) throw new Error('the leader has no sender');
    return { changes: (opened - from) + (ended - from), messages: st.sentSeq - seq0, feedMs, threadCpuSec: threadCpu, runMs, sender: st, warnings: warnings.splice(0) };
  };

  port.on('message', (m: { feed?: { seconds: number; from: number }; close?: true }) => {
    if (m.feed) {
      feed(m.feed.seconds, m.feed.from).then((fed) => port.postMessage({ fed } satisfies SyncPathLeaderMessage),
        (err: unknown) => port.postMessage({ error: err instanceof Error ? err.stack ?? err.message : String(err) } satisfies SyncPathLeaderMessage));
    }
    if (m.close) {
      void leader.close().catch(() => undefined).then(() => {
        port.postMessage({ closed: true } satisfies SyncPathLeaderMessage);
        port.close();
      });
    }
  });
  port.postMessage({ ready: true } satisfies SyncPathLeaderMessage);
}

if (!isMainThread) main().catch((err: unknown) => parentPort?.postMessage({ error: err instanceof Error ? err.stack ?? err.message : String(err) } satisfies SyncPathLeaderMessage));
