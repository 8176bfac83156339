import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { isIP } from 'node:net';
import { fileURLToPath } from 'node:url';
import {
  DataPlaneError, connectionKey, sameBinding, sameProxyState, type ConnectionBinding, type Endpoint, type ConnectionApplyOptions, type ConnectionApplyResult, type ConnectionChange, type ConnectionEvent, type ConnectionIdentity,
  type ConnectionTable, type ConnectionWatch, type ConnectionWatchHandlers, type SyncedConnection,
} from '@lbd/dataplane';
import { parseConntrack, type ConntrackEntry } from './conntrack.js';
import {
  CTNL_SCRIPT, CtnlWriter, TCP_STATE_NAMES, type BatchWriter, connectionOf, helperError, parseDump, parseEventLine, renderDeleteBindingRequest, renderDeleteRequest, renderInsertRequest, renderUpdateRequest,
} from './ctnetlink.js';
import { InProcessCtnlWriter, ctnlWriterAddon } from './ctnl-writer.js';
import { localRunner, type CommandResult, type CommandRunner } from './runner.js';
import { OneAtATime } from './one-at-a-time.js';

/*
 * How this file reaches the kernel: every change (insert, delete, update) and every event goes through the
 * ctnetlink helper (lbd-ctnl, or its perl twin), one long-lived process per table and one netlink socket, each
 * request answered on its own. conntrack-tools 1.4.7 is left for listings without lbd-ctnl (`-L`; sync's own
 * reading of the table then takes the perl helper's dump) and watch's probe (`-I`): its
 * `-R` batches stop at the first line they cannot make without naming it, `-D`/`-U` walk the whole table,
 * and `-E -b` sizes the wrong socket (docs/measurements/conntrack-tools.md); a batch of it was a process
 * start, a file and, on a conflict, a dump (docs/kernel-io.md has what that cost a standby).
 */

export interface ConntrackConnectionTableOptions {
  /** Runs `conntrack` and `sysctl`, and starts the ctnetlink helpers (it must be able to spawn). */
  readonly runner?: CommandRunner;
  /** Rounds of an apply: changes the kernel answered unexpectedly are planned against a dump and sent again. Default 5. */
  readonly maxRounds?: number;
  /** Receive buffer of the events helper's netlink socket (SO_RCVBUFFORCE; the kernel doubles it). Default 16 MiB. */
  readonly eventBufferBytes?: number;
  /** How long the write helper stays after its last batch. Default 10 000. */
  readonly helperIdleMs?: number;
  /** How long `watch` waits for its probe event before it gives up. Default 3000. */
  readonly watchReadyTimeoutMs?: number;
  /**
   * What talks ctnetlink, for events and for changes: `native` (dist/lbd-ctnl, built from native/lbd-ctnl.c)
   * or `perl` (CTNL_SCRIPT); both speak the same protocol. Default: native when it is built, else perl.
   */
  readonly ctnlHelper?: CtnlHelper;
  /**
   * Where writes go (inserts, updates, deletes): `in-process`, the addon (dist/ctnl-writer.node, lbd-ctnl's write
   * mode on a socket of the calling thread), or `helper`, the write helper process (lbd-ctnl write, or perl's).
   * Default: in-process where the addon loads, the helper is lbd-ctnl, and the runner says its namespace; else helper.
   */
  readonly writer?: CtnlWriterKind;
  /**
   * With lbd-ctnl: a watch leaves TCP handshakes (and the destroy of an established connection that ended in
   * TIME_WAIT or CLOSE) in the helper instead of reporting them, and takeYoung reads the handshakes (lbd-ctnl's
   * keep-young). Default true; false reports every event as the perl helper does (a test compares the two).
   */
  readonly keepYoung?: boolean;
}

export type CtnlHelper = 'native' | 'perl';
export type CtnlWriterKind = 'in-process' | 'helper';

/** Where the build puts lbd-ctnl: beside this module in dist/ (a deployed tree keeps that layout). */
export const NATIVE_CTNL_HELPER = fileURLToPath(new URL('./lbd-ctnl', import.meta.url));

/** The helper a table uses when none is asked for: the compiled one where the build made it. */
export function defaultCtnlHelper(): CtnlHelper {
  return existsSync(NATIVE_CTNL_HELPER) ? 'native' : 'perl';
}

/**
 * Every tcp and udp entry of conntrack's table, both families: one netlink dump through `lbd-ctnl dump` with the
 * compiled helper. Without it, `conntrack -L -o extended` parsed, unless the caller needs SYN-proxied
 * connections' numbers (`proxyNumbers`: sync's reading of the table, which it copies), which conntrack's text
 * lacks: then the perl helper's `dump`, which has them at three times conntrack -L's time (2.7 s against 0.9 s
 * for 100 000 entries in `pnpm bench connsync`). conntrack's listing is what both dumps are tested against. At
 * 100 000 entries lbd-ctnl's dump and its parsing take half to two thirds of conntrack -L's time
 * (docs/kernel-io.md); a status, a metrics scrape, `lbadm conns` and apply's replanning read it.
 */
export async function listConntrack(runner: CommandRunner, helper: CtnlHelper, op: string, opts: { readonly proxyNumbers?: boolean } = {}): Promise<ConntrackEntry[]> {
  if (helper === 'native' || opts.proxyNumbers) {
    const res = helper === 'native' ? await runner.run(NATIVE_CTNL_HELPER, ['dump']) : await runner.run('perl', ['-e', CTNL_SCRIPT, 'dump']);
    if (res.code !== 0) throw kernelError(op, res, helper === 'native' ? 'lbd-ctnl' : 'perl');
    return parseDump(res.stdout);
  }
  const res = await runner.run('conntrack', ['-L', '-o', 'extended']);
  if (res.code !== 0) throw kernelError(op, res, 'conntrack');
  return parseConntrack(res.stdout);
}

/** TCP states `conntrack --state` accepts. */
const TCP_STATES = new Set(TCP_STATE_NAMES);
const UDP_RANK: Record<string, number> = { UNREPLIED: 0, REPLIED: 1, ASSURED: 2 };
const MAX_ERRORS = 5;
/**
 * How long takeYoung waits for lbd-ctnl's kept handshakes. It delays a planned switchover by at most this; past
 * it the handshakes are not handed over (they are copied once established, as any connection).
 */
const YOUNG_ANSWER_MS = 1000;
/** An insert the kernel answers EEXIST this many times while no entry has its original tuple is given up. */
const MAX_CONFLICTS = 2;

/** The connection conntrack's entry stands for: original = client → vip, reply = realServer → (local address | client). */
export function connectionFromEntry(e: ConntrackEntry): SyncedConnection {
  return connectionOf(e.protocol, e.original, e.reply, { mark: e.mark, state: e.state, timeoutSec: e.expiresInSec, synProxy: e.synProxy, seqAdjust: e.seqAdjust });
}

/** Why the kernel (or the helper) would refuse the connection, or null: such a change fails alone, before it is sent. */
export function invalidConnection(f: ConnectionIdentity & Partial<SyncedConnection>): string | null {
  if (f.protocol !== 'tcp' && f.protocol !== 'udp') return `protocol ${String(f.protocol)} is not tcp or udp`;
  // Every change of every apply comes through here (a standby's 10 000 a second): each address is read once,
  // and nothing is allocated for one that passes without SYN-proxy state.
  const family = isIP(f.client.address);
  const endpoint = invalidEndpoint('client', f.client, family) ?? invalidEndpoint('vip', f.vip, family)
    ?? invalidEndpoint('realServer', f.realServer, family) ?? invalidEndpoint('localAddress', f.localAddress, family);
  if (endpoint !== null) return endpoint;
  if (f.mark !== undefined && (!Number.isInteger(f.mark) || f.mark < 0 || f.mark > 0xffffffff)) return `mark ${f.mark} is not a 32-bit unsigned integer`;
  if (f.timeoutSec !== undefined && !(f.timeoutSec >= 1)) return `timeoutSec ${f.timeoutSec} is less than 1`;
  if (f.state !== undefined && f.protocol === 'tcp' && !TCP_STATES.has(f.state)) return `tcp state ${f.state} is not one conntrack can set`;
  if (f.state !== undefined && f.protocol === 'udp' && UDP_RANK[f.state] === undefined) return `udp state ${f.state} is not ASSURED, REPLIED or UNREPLIED`;
  if ((f.synProxy || f.seqAdjust) && f.protocol !== 'tcp') return 'SYN-proxy state on a udp connection';
  if (f.synProxy && ![f.synProxy.isn, f.synProxy.its, f.synProxy.tsoff].every(isU32)) return `synProxy ${JSON.stringify(f.synProxy)} has a number that is not a 32-bit unsigned integer`;
  const a = f.seqAdjust;
  if (a && ![a.original, a.reply].every((d) => [d.correctionPos, d.offsetBefore, d.offsetAfter].every(isU32))) {
    return `seqAdjust ${JSON.stringify(a)} has a number that is not a 32-bit unsigned integer`;
  }
  return null;
}

/** What is wrong with one endpoint of a connection whose client is of IP `family`, or null (also when it is absent). */
function invalidEndpoint(name: string, ep: Endpoint | null | undefined, family: number): string | null {
  if (!ep) return null;
  const epFamily = isIP(ep.address);
  if (epFamily === 0) return `${name} ${ep.address} is not an IP address`;
  if (epFamily !== family) return `${name} ${ep.address} is not of the client's address family`;
  if (!Number.isInteger(ep.port) || ep.port < 1 || ep.port > 65535) return `${name} port ${ep.port} is not in 1-65535`;
  return null;
}

function isU32(v: number): boolean {
  return Number.isInteger(v) && v >= 0 && v <= 0xffffffff;
}

const tupleArgs = (f: ConnectionIdentity): string[] =>
  ['-p', f.protocol, '-s', f.client.address, '-d', f.vip.address, '--sport', String(f.client.port), '--dport', String(f.vip.port)];

/**
 * Whether an entry with the right binding still needs an update: its state is behind, its mark differs, or
 * it would expire clearly earlier than the source's. A slightly older timeout is left: a resync of a table
 * that has everything then writes nothing.
 */
export function needsRefresh(kernel: SyncedConnection, desired: SyncedConnection): boolean {
  if (kernel.mark !== desired.mark) return true;
  // A proxied connection's numbers (a copy made before the real server answered the proxy has none yet).
  if ((desired.synProxy !== undefined || desired.seqAdjust !== undefined) && !sameProxyState(kernel, desired)) return true;
  if (desired.protocol === 'tcp' ? kernel.state !== desired.state : (UDP_RANK[desired.state] ?? 0) > (UDP_RANK[kernel.state] ?? 0)) return true;
  return kernel.timeoutSec < desired.timeoutSec - Math.max(10, desired.timeoutSec / 10);
}

type Outcome = 'inserted' | 'replaced' | 'refreshed' | 'removed' | 'skipped' | 'failed';
/** `evict`: delete the entry holding the connection's reply tuple (`holder`), then insert. */
type Intent = 'insert' | 'replace' | 'refresh' | 'remove' | 'remove-binding' | 'skip' | 'evict';

interface Op {
  readonly change: ConnectionChange;
  readonly key: string;
  intent: Intent;
  outcome: Outcome | null;
  /** Inserts the kernel answered EEXIST although the last dump had no entry with its original tuple. */
  conflicts: number;
  /** The kernel's entry for the connection when the op was last planned (null: absent or not looked at). */
  kernel: SyncedConnection | null;
  /** Another entry holding the connection's reply tuple, which the caller let go (intent `evict`). */
  holder: SyncedConnection | null;
}

/** What one request of a change is: a change becomes one or two (a replace deletes, then inserts). */
type Part = 'delete' | 'delete-binding' | 'delete-holder' | 'update' | 'insert';

function renderPart(o: Op, part: Part): string {
  const f = o.change.connection;
  switch (part) {
    case 'delete': return renderDeleteRequest(f);
    case 'delete-binding': return renderDeleteBindingRequest(f as ConnectionBinding);
    case 'delete-holder': return renderDeleteRequest(o.holder!);
    case 'update': return renderUpdateRequest(f as SyncedConnection, o.kernel);
    case 'insert': return renderInsertRequest(f as SyncedConnection);
  }
}

/** A kernel entry as apply sees it: the connection and when it was read. */
type KernelTable = Map<string, SyncedConnection>;

/**
 * ConnectionTable over a ctnetlink helper (events, inserts, deletes, updates, and dumps where lbd-ctnl was built;
 * conntrack -L otherwise).
 * Every command and helper runs through the injected runner, so the same code works in another namespace.
 */
export class ConntrackConnectionTable implements ConnectionTable {
  private readonly runner: CommandRunner;
  private readonly maxRounds: number;
  private readonly eventBufferBytes: number;
  private readonly watchReadyTimeoutMs: number;
  /** What talks ctnetlink (see ConntrackConnectionTableOptions.ctnlHelper). */
  readonly ctnlHelper: CtnlHelper;
  /** Starts a helper in a mode (null when the runner cannot spawn: watch and apply then say so). */
  private readonly startHelper: ((mode: 'events' | 'write', bytes: number) => ChildProcessWithoutNullStreams) | null;
  /** Why the default went to the helper where it would have written in-process (the addon did not load); else null. */
  readonly inProcessUnavailable: string | null;
  /** Every change (null when the runner cannot spawn and the writes are not in-process). */
  private readonly writer: BatchWriter | null;
  /** Running events helpers, ended by dispose() if their watch was not closed. */
  private readonly children = new Set<ChildProcessWithoutNullStreams>();
  /** Applies are serialised: each reconciles against what the previous one left. */
  private readonly turns = new OneAtATime();

  constructor(opts: ConntrackConnectionTableOptions = {}) {
    this.runner = opts.runner ?? localRunner();
    this.maxRounds = opts.maxRounds ?? 5;
    this.eventBufferBytes = opts.eventBufferBytes ?? 16 * 1024 * 1024;
    this.watchReadyTimeoutMs = opts.watchReadyTimeoutMs ?? 3000;
    this.ctnlHelper = opts.ctnlHelper ?? defaultCtnlHelper();
    const spawn = this.runner.spawn?.bind(this.runner);
    const keepYoung = opts.keepYoung ?? true;
    const start = (mode: 'events' | 'write', bytes: number): ChildProcessWithoutNullStreams => (this.ctnlHelper === 'native'
      // keep-young: handshakes stay in lbd-ctnl until takeYoung asks (docs/kernel-io.md).
      ? spawn!(NATIVE_CTNL_HELPER, mode === 'events' && keepYoung ? [mode, String(bytes), 'keep-young'] : [mode, String(bytes)])
      : spawn!('perl', ['-e', CTNL_SCRIPT, mode, String(bytes)]));
    this.startHelper = spawn ? start : null;
    // In-process when asked, or by default beside the compiled helper where the runner says its namespace (a
    // test's fake runner does not: its writes go through the helper it fakes).
    const netns = this.runner.netns;
    const wanted = opts.writer === 'in-process' || (opts.writer === undefined && this.ctnlHelper === 'native' && netns !== undefined);
    const { addon, error } = wanted ? ctnlWriterAddon() : { addon: null, error: null };
    if (opts.writer === 'in-process') {
      if (!addon) throw new DataPlaneError('CommandMissing', 'apply', { detail: `writer in-process: ${error ?? 'the addon did not load'} (run pnpm run build, or reinstall the lbd package)` });
      if (netns === undefined) throw new DataPlaneError('Unknown', 'apply', { detail: 'writer in-process: the command runner does not say which network namespace it runs in' });
    }
    this.inProcessUnavailable = wanted && !addon ? error : null;
    this.writer = addon && netns !== undefined ? new InProcessCtnlWriter(addon, netns)
      : spawn ? new CtnlWriter(() => start('write', 8 * 1024 * 1024), {
        idleMs: opts.helperIdleMs ?? 10_000,
        // The helper waits at most 5 s for each 64 KiB of requests to be acked; this only catches a stuck pipe.
        timeoutMs: (n) => 30_000 + n,
      }) : null;
  }

  /** Where writes go (see ConntrackConnectionTableOptions.writer). */
  get writerKind(): CtnlWriterKind {
    return this.writer instanceof InProcessCtnlWriter ? 'in-process' : 'helper';
  }

  /**
   * Per network namespace, all three:
   * - nf_conntrack_tcp_loose=1: a director that takes over sees established connections it has no entry for
   *   (not synced yet, or lost); loose lets conntrack pick them up mid-stream instead of dropping them as
   *   invalid, so consistent hashing can still send them to the same real server. (Linux's default is 1;
   *   set because distributions and hardening guides turn it off.)
   * - nf_conntrack_tcp_be_liberal=1: an injected entry carries no TCP window data. Measured on 6.x with
   *   be_liberal=0, a connection injected into the standby kept working after the takeover (no INVALID counted):
   *   the kernel starts window tracking from the first packet it sees in each direction. Set anyway: that
   *   first packet is a guess of the window, and packets in flight at the takeover judged out of it would be
   *   INVALID, i.e. not translated, and reach the client or server with the wrong addresses (an RST).
   * - nf_conntrack_events=1: with the default (2) the kernel attaches event data only to entries created
   *   while some program listens, so a watch (re)started after a connection began would never see that connection's
   *   updates or its end. 1: every entry reports events.
   */
  async prepare(): Promise<void> {
    const settings = ['net.netfilter.nf_conntrack_tcp_loose=1', 'net.netfilter.nf_conntrack_tcp_be_liberal=1', 'net.netfilter.nf_conntrack_events=1'];
    const res = await this.runner.run('sysctl', ['-w', ...settings]);
    if (res.code !== 0) {
      throw kernelError('prepare', res, 'sysctl', 'the nf_conntrack module must be loaded (modprobe nf_conntrack) and lbd-agent needs CAP_NET_ADMIN');
    }
  }

  async dump(): Promise<SyncedConnection[]> {
    // What sync copies: a SYN-proxied connection with its numbers (apply's replanning does without: a copy
    // whose numbers it cannot see is refreshed with them).
    return [...(await this.kernelTable('dump', true)).values()].filter((f) => f.mark !== 0);
  }

  async watch(handlers: ConnectionWatchHandlers): Promise<ConnectionWatch> {
    if (!this.startHelper) throw new DataPlaneError('Unknown', 'watch', { detail: 'the command runner cannot start long-running processes' });
    const child = this.startHelper('events', this.eventBufferBytes);
    this.children.add(child);
    let closing = false;
    let lost = false;
    let stderr = '';
    // Probes: mark-0 entries this watch inserts once subscribed; seeing one's NEW event proves events connection.
    const probes = new Set<string>();
    let subscribed: (() => void) | null = null;
    let probed: (() => void) | null = null;
    // Losses read together are one loss.
    let lossQueued = false;
    const loss = (reason: string, ended = false): void => {
      if (closing || (lossQueued && !ended)) return;
      lossQueued = true;
      setImmediate(() => { lossQueued = false; if (!closing) handlers.onLoss(reason, ended); });
    };
    let partial = '';
    // When the helper read the events now arriving (its A lines; the perl helper has none: when they arrive).
    let readAtMs: number | null = null;
    // takeYoung's question in flight: the kept handshakes read so far, and what settles it. Answers to questions
    // given up on (too slow) still come, in order: that many are skipped.
    let young: { readonly events: ConnectionEvent[]; readonly done: (events: readonly ConnectionEvent[]) => void } | null = null;
    let lateAnswers = 0;
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      const arrivedAtMs = performance.now();
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      const events: ConnectionEvent[] = [];
      for (const line of lines) {
        const p = parseEventLine(line, readAtMs ?? arrivedAtMs);
        if (!p) continue;
        if (p.type === 'age') readAtMs = arrivedAtMs - p.ageMs;
        else if (p.type === 'ready') subscribed?.();
        else if (p.type === 'loss') {
          loss(p.reason === 'TRUNCATED'
            ? 'ctnetlink events: an event was larger than lbd-ctnl reads one (8 KiB) and was cut short'
            : `ctnetlink events: the kernel dropped events (${p.reason}: the event socket buffer of ${this.eventBufferBytes} bytes overflowed)`);
        }
        else if (p.type === 'kept') { if (lateAnswers > 0) lateAnswers--; else young?.done(young.events); }
        else if (p.type === 'young') { if (lateAnswers === 0) young?.events.push(p.event); }
        else if (p.event.connection.mark !== 0) events.push(p.event);
        else if (probed && probes.has(connectionKey(p.event.connection))) probed();
      }
      // One callback per read: a burst arrives as one batch, as the helper read it.
      if (events.length > 0 && !closing) handlers.onEvents(events);
    });
    const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr = `${stderr}${d}`.slice(-2000); });
    child.stdin.on('error', () => { /* the helper died: reported by 'close' */ });
    child.on('error', (err) => { stderr += `${String(err)}\n`; });
    child.once('close', (code, signal) => {
      this.children.delete(child);
      if (closing) return;
      lost = true;
      loss(`ctnetlink events helper exited (${signal ?? `code ${String(code)}`})${stderr.trim() ? `: ${stderr.trim()}` : ''}`, true);
    });
    const stop = async (): Promise<void> => {
      closing = true;
      // EOF on stdin ends the helper; a kill makes sure (it may be blocked writing to us).
      child.stdin.end();
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    };

    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new DataPlaneError('Unknown', 'watch', {
          detail: subscribed
            ? `the ctnetlink events helper did not subscribe within ${this.watchReadyTimeoutMs} ms${stderr ? `: ${stderr.trim()}` : ''}`
            : `no conntrack event within ${this.watchReadyTimeoutMs} ms of a test entry; are events on (net.netfilter.nf_conntrack_events=1, see prepare())?${stderr ? ` The helper said: ${stderr.trim()}` : ''}`,
        })), this.watchReadyTimeoutMs);
        void exited.then(() => {
          clearTimeout(timer);
          reject(helperError('watch', stderr, 'the ctnetlink events helper exited'));
        });
        probed = () => { clearTimeout(timer); probed = null; resolve(); };
        // Resend the probe until one is seen (an entry the kernel made before events were on reports nothing).
        const send = async (attempt: number): Promise<void> => {
          const port = 1024 + Math.floor(Math.random() * 60000);
          const f: ConnectionIdentity = { protocol: 'udp', client: { address: '127.0.0.1', port }, vip: { address: '127.0.0.1', port: 9 } };
          probes.add(connectionKey(f));
          await this.runner.run('conntrack', ['-I', ...tupleArgs(f), '--timeout', '1', '--mark', '0']);
          await new Promise((r) => setTimeout(r, Math.min(50 * 2 ** attempt, 500)));
          if (probed && !lost && !closing) await send(attempt + 1);
        };
        subscribed = () => { subscribed = null; void send(0); };
      });
    } catch (err) {
      await stop();
      throw err;
    }
    const youngTurns = new OneAtATime();
    const takeYoung = (): Promise<readonly ConnectionEvent[]> => youngTurns.run(() => new Promise<readonly ConnectionEvent[]>((resolve) => {
      // The perl helper reports handshakes as they come: nothing kept.
      if (this.ctnlHelper !== 'native' || closing || lost) { resolve([]); return; }
      const timer = setTimeout(() => { young = null; lateAnswers++; resolve([]); }, YOUNG_ANSWER_MS);
      young = { events: [], done: (events) => { clearTimeout(timer); young = null; resolve(events); } };
      void exited.then(() => young?.done([]));
      child.stdin.write('Y\n');
    }));
    return { close: stop, takeYoung };
  }

  apply(changes: readonly ConnectionChange[], opts: ConnectionApplyOptions = {}): Promise<ConnectionApplyResult> {
    return this.turns.run(() => this.applyNow(changes, opts));
  }

  /**
   * Each round is one batch to the write helper, every change in it answered on its own: removes (delete),
   * refreshes (update), inserts (create, exclusive) and replaces (delete, then create). Round 0 assumes the
   * usual case: upserts are new, removes are there. An insert the kernel answers "exists" (a resync of what
   * the standby has) and a refresh whose entry vanished are planned against one dump and sent in the next
   * round, up to maxRounds; a failure is final, with the kernel's reason. An insert refused although no
   * entry has its original tuple meets an entry holding its reply tuple: with `evictReplyHolder`'s leave,
   * that entry is deleted before the insert is sent again.
   *
   * Changes to the same connection are coalesced first: only the last one for a connection is made.
   */
  private async applyNow(changes: readonly ConnectionChange[], opts: ConnectionApplyOptions): Promise<ConnectionApplyResult> {
    if (!this.writer) throw new DataPlaneError('Unknown', 'apply', { detail: 'the command runner cannot start long-running processes (the ctnetlink helper)' });
    const errors: string[] = [];
    const byKey = new Map<string, Op>();
    for (const change of changes) {
      const key = connectionKey(change.connection);
      // A remove names the connection by its original tuple alone: what else it carries (a dumped entry's
      // timeoutSec 0, about to expire anyway) is not sent and is no reason to keep the entry.
      const c = change.connection;
      const bad = invalidConnection(change.op === 'upsert' ? c
        : change.op === 'remove' ? { protocol: c.protocol, client: c.client, vip: c.vip }
          : { protocol: c.protocol, client: c.client, vip: c.vip, realServer: change.connection.realServer, localAddress: change.connection.localAddress });
      const op: Op = { change, key, intent: change.op === 'upsert' ? 'insert' : change.op, outcome: null, conflicts: 0, kernel: null, holder: null };
      if (bad) { op.outcome = 'failed'; pushError(errors, `${key}: ${bad}`); }
      byKey.delete(key);
      byKey.set(key, op);
    }
    const ops = [...byKey.values()];
    let pending = ops.filter((o) => o.outcome === null);

    for (let round = 0; pending.length > 0; round++) {
      if (round >= this.maxRounds) {
        for (const o of pending) o.outcome = 'failed';
        pushError(errors, `${pending.length} change(s) not made after ${this.maxRounds} rounds`);
        break;
      }
      // The requests, as what each is of which change: rendered only as the writer sends them (CtnlWriter.feed).
      const partOps: Op[] = [];
      const parts: Part[] = [];
      for (const o of pending) {
        if (o.intent === 'remove' || o.intent === 'replace') { partOps.push(o); parts.push('delete'); }
        if (o.intent === 'remove-binding') { partOps.push(o); parts.push('delete-binding'); }
        if (o.intent === 'evict') { partOps.push(o); parts.push('delete-holder'); }
        if (o.intent === 'refresh') { partOps.push(o); parts.push('update'); }
        if (o.intent === 'insert' || o.intent === 'replace' || o.intent === 'evict') { partOps.push(o); parts.push('insert'); }
      }
      const res = await this.writer.run(parts.length, (i) => renderPart(partOps[i]!, parts[i]!));
      const again: Op[] = [];
      partOps.forEach((o, i) => {
        const code = res.codes[i] ?? '!';
        const part = parts[i] === 'update' || parts[i] === 'insert' ? parts[i] : 'delete';
        if (o.outcome !== null) return; // a replace whose delete failed
        if (part === 'delete') {
          if (o.intent === 'remove' || o.intent === 'remove-binding') o.outcome = code === '+' ? 'removed' : code === '-' ? 'skipped' : 'failed';
          else if (code === '!') o.outcome = 'failed'; // its insert would meet the old entry
        } else if (part === 'update') {
          if (code === '+') o.outcome = 'refreshed';
          else if (code === '-') again.push(o); // gone meanwhile: an insert
          else o.outcome = 'failed';
        } else if (code === '+') o.outcome = o.intent === 'replace' || o.intent === 'evict' ? 'replaced' : 'inserted';
        else if (code === '=') again.push(o);
        else o.outcome = 'failed';
      });
      if (res.failed > 0) pushError(errors, `ctnetlink: ${res.failed} of ${parts.length} request(s) failed, the first with ${res.firstError ?? 'no answer'}`);
      if (again.length === 0) break;
      const kernel = await this.kernelTable('apply');
      let byReply: Map<string, SyncedConnection> | null = null;
      for (const o of again) {
        const was = o.intent;
        o.intent = plan(o, kernel);
        // EEXIST, yet no entry has its original tuple: another entry holds its reply tuple (the binding).
        if (o.intent === 'insert' && was !== 'refresh') {
          if (opts.evictReplyHolder) {
            byReply ??= new Map([...kernel.values()].map((k) => [replyKey(k), k]));
            const holder = byReply.get(replyKey(o.change.connection as SyncedConnection));
            if (holder !== undefined && holder.mark !== 0 && connectionKey(holder) !== o.key && opts.evictReplyHolder(holder)) {
              o.intent = 'evict';
              o.holder = holder;
            }
          }
          if (++o.conflicts >= MAX_CONFLICTS) {
            o.outcome = 'failed';
            pushError(errors, `${o.key}: the kernel has another entry with this connection's reply tuple (EEXIST)${o.intent === 'evict' ? ', and it was still there after its delete' : ''}`);
          }
        }
        // Nothing to do: a remove of an absent connection, an upsert the kernel already has closely enough.
        if (o.intent === 'skip') o.outcome = o.change.op === 'upsert' ? 'refreshed' : 'skipped';
      }
      pending = again.filter((o) => o.outcome === null);
    }

    const count = (k: Outcome): number => ops.filter((o) => o.outcome === k).length;
    return {
      inserted: count('inserted'), replaced: count('replaced'), refreshed: count('refreshed'), removed: count('removed'),
      failed: count('failed'), errors,
    };
  }

  /** Every tcp and udp entry (any mark: a mark-0 entry with a connection's tuple still blocks its insert). */
  private async kernelTable(op: string, proxyNumbers = false): Promise<KernelTable> {
    const table: KernelTable = new Map();
    for (const e of await listConntrack(this.runner, this.ctnlHelper, op, { proxyNumbers })) {
      const f = connectionFromEntry(e);
      table.set(connectionKey(f), f);
    }
    return table;
  }

  /** Ends the helper processes (the write helper, and events helpers of watches not closed). The table can still be used. */
  async dispose(): Promise<void> {
    await this.writer?.close();
    for (const child of this.children) child.kill('SIGTERM');
  }
}

/** A connection's reply tuple as text (what conntrack keeps unique besides the original): the real server, then where it answers. */
function replyKey(f: SyncedConnection): string {
  const to = f.localAddress ?? f.client;
  return `${f.protocol} ${f.realServer.address} ${f.realServer.port} ${to.address} ${to.port}`;
}

/** What a change needs, given the kernel's entry for its connection. */
function plan(o: Op, kernel: KernelTable): Intent {
  const k = kernel.get(o.key);
  o.kernel = k ?? null;
  if (o.change.op !== 'upsert') return k ? o.change.op : 'skip';
  const f = o.change.connection;
  if (!k) return 'insert';
  if (!sameBinding(k, f)) return 'replace';
  return needsRefresh(k, f) ? 'refresh' : 'skip';
}

function pushError(errors: string[], msg: string): void {
  if (errors.length < MAX_ERRORS) errors.push(msg);
}

function kernelError(op: string, res: CommandResult, command: string, hint?: string): DataPlaneError {
  const detail = res.stderr.trim() || `${command} exited ${res.code}`;
  if (res.code === 127) {
    const fix = command === 'lbd-ctnl' ? `${NATIVE_CTNL_HELPER} is gone: reinstall the lbd package (or run pnpm run build)`
      : `install the ${command === 'sysctl' ? 'procps' : command === 'perl' ? 'perl-base' : 'conntrack'} package`;
    return new DataPlaneError('CommandMissing', op, { detail: `${command} not found: ${fix}` });
  }
  if (/not permitted|must be root|permission denied/i.test(detail)) return new DataPlaneError('PermissionDenied', op, { detail: `${detail} (lbd-agent needs CAP_NET_ADMIN)` });
  return new DataPlaneError('Unknown', op, { detail: hint ? `${detail} (${hint})` : detail });
}
