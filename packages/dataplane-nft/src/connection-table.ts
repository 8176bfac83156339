import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  DataPlaneError, connectionKey, sameBinding, type Endpoint, type ConnectionApplyResult, type ConnectionChange, type ConnectionEvent, type ConnectionIdentity,
  type ConnectionTable, type ConnectionWatch, type ConnectionWatchHandlers, type SyncedConnection,
} from '@lbd/dataplane';
import { parseConntrack, type ConntrackEntry } from './conntrack.js';
import {
  CTNL_SCRIPT, CtnlWriter, TCP_STATE_NAMES, connectionOf, helperError, impliedStatus, parseEventLine, renderDeleteRequest, renderUpdateRequest,
} from './ctnetlink.js';
import { localRunner, type CommandResult, type CommandRunner } from './runner.js';
import { OneAtATime } from './one-at-a-time.js';

/*
 * conntrack-tools 1.4.7 shapes how this file reaches the kernel: inserts go in `conntrack -R` batches (each
 * `-I` is a direct request), deletes, refreshes and events go to the ctnetlink helper (`-D`/`-U` walk the
 * whole table, `-E -b` sizes the wrong socket), `-u STATUS` always precedes `--mark` (after it, it
 * overwrites the mark), and a failed batch is reconciled against a dump (`-R` stops at the first failing
 * line without naming it). The measurements behind each: docs/measurements/conntrack-tools.md.
 */

export interface ConntrackConnectionTableOptions {
  readonly runner?: CommandRunner;
  /** Where `-R` batch files are written (shared with `ip netns exec`). Default: the OS temp dir. */
  readonly tmpDir?: string;
  /** Batches run again after a failure, each against a fresh dump. Default 5. */
  readonly maxRounds?: number;
  /** Receive buffer of the events helper's netlink socket (SO_RCVBUFFORCE; the kernel doubles it). Default 16 MiB. */
  readonly eventBufferBytes?: number;
  /** How long the delete/update helper stays after its last batch. Default 10 000. */
  readonly helperIdleMs?: number;
  /** How long `watch` waits for its probe event before it gives up. Default 3000. */
  readonly watchReadyTimeoutMs?: number;
  /**
   * What reads the kernel's events: `native` (dist/lbd-ctnl, built from native/lbd-ctnl.c) or `perl`
   * (CTNL_SCRIPT); both print the same lines. Default: native when it is built, else perl.
   */
  readonly eventsReader?: EventsReader;
}

export type EventsReader = 'native' | 'perl';

/** Where the build puts lbd-ctnl: beside this module in dist/ (a deployed tree keeps that layout). */
export const NATIVE_EVENTS_READER = fileURLToPath(new URL('./lbd-ctnl', import.meta.url));

/** The reader a table uses when none is asked for: the compiled one where the build made it. */
function defaultEventsReader(): EventsReader {
  return existsSync(NATIVE_EVENTS_READER) ? 'native' : 'perl';
}

/** TCP states `conntrack --state` accepts. */
const TCP_STATES = new Set(TCP_STATE_NAMES);
const UDP_RANK: Record<string, number> = { UNREPLIED: 0, REPLIED: 1, ASSURED: 2 };
const MAX_ERRORS = 5;
/** From this many changes on, apply dumps the kernel's table before its first batch. */
const PLAN_FIRST_MIN = 256;

/** The connection conntrack's entry stands for: original = client → vip, reply = realServer → (local address | client). */
export function connectionFromEntry(e: ConntrackEntry): SyncedConnection {
  return connectionOf(e.protocol, e.original, e.reply, { mark: e.mark, state: e.state, timeoutSec: e.expiresInSec });
}

/** Why conntrack would refuse the connection (a bad line aborts a whole `-R` batch), or null. */
export function invalidConnection(f: ConnectionIdentity & Partial<SyncedConnection>): string | null {
  if (f.protocol !== 'tcp' && f.protocol !== 'udp') return `protocol ${String(f.protocol)} is not tcp or udp`;
  const family = isIP(f.client.address);
  const endpoints: Array<[string, Endpoint | null | undefined]> = [['client', f.client], ['vip', f.vip], ['realServer', f.realServer], ['localAddress', f.localAddress]];
  for (const [name, ep] of endpoints) {
    if (!ep) continue;
    if (isIP(ep.address) === 0) return `${name} ${ep.address} is not an IP address`;
    if (isIP(ep.address) !== family) return `${name} ${ep.address} is not of the client's address family`;
    if (!Number.isInteger(ep.port) || ep.port < 1 || ep.port > 65535) return `${name} port ${ep.port} is not in 1-65535`;
  }
  if (f.mark !== undefined && (!Number.isInteger(f.mark) || f.mark < 0 || f.mark > 0xffffffff)) return `mark ${f.mark} is not a 32-bit unsigned integer`;
  if (f.timeoutSec !== undefined && !(f.timeoutSec >= 1)) return `timeoutSec ${f.timeoutSec} is less than 1`;
  if (f.state !== undefined && f.protocol === 'tcp' && !TCP_STATES.has(f.state)) return `tcp state ${f.state} is not one conntrack can set`;
  if (f.state !== undefined && f.protocol === 'udp' && UDP_RANK[f.state] === undefined) return `udp state ${f.state} is not ASSURED, REPLIED or UNREPLIED`;
  return null;
}

const natTarget = (e: Endpoint): string => (e.address.includes(':') ? `[${e.address}]:${e.port}` : `${e.address}:${e.port}`);
const tupleArgs = (f: ConnectionIdentity): string[] =>
  ['-p', f.protocol, '-s', f.client.address, '-d', f.vip.address, '--sport', String(f.client.port), '--dport', String(f.vip.port)];

/** The status bits the state implies; an unreplied connection gets none (conntrack shows it [UNREPLIED]). */
function statusArgs(f: SyncedConnection): string[] {
  const { replied, assured } = impliedStatus(f);
  if (!replied) return [];
  // Before --mark, always: conntrack 1.4.7 writes the status bits over a mark that precedes them.
  return ['-u', assured ? 'ASSURED,SEEN_REPLY' : 'SEEN_REPLY'];
}

/** `-I`: the entry with its NAT binding, so the kernel translates the connection's next packet the same way. */
export function renderInsert(f: SyncedConnection): string[] {
  return [
    '-I', ...tupleArgs(f), ...statusArgs(f),
    '--dst-nat', natTarget(f.realServer),
    ...(f.localAddress ? ['--src-nat', natTarget(f.localAddress)] : []),
    ...(f.protocol === 'tcp' ? ['--state', f.state] : []),
    '--timeout', String(Math.ceil(f.timeoutSec)), '--mark', String(f.mark),
  ];
}

/** `-U`: timeout, state and mark of an entry that already has the connection's binding (NAT cannot be changed). */
export function renderRefresh(f: SyncedConnection): string[] {
  return [
    '-U', ...tupleArgs(f), ...statusArgs(f),
    ...(f.protocol === 'tcp' ? ['--state', f.state] : []),
    '--timeout', String(Math.ceil(f.timeoutSec)), '--mark', String(f.mark),
  ];
}

export function renderRemove(f: ConnectionIdentity): string[] {
  return ['-D', ...tupleArgs(f)];
}

/**
 * Whether an entry with the right binding still needs a `-U` (a table walk, see above): its state is behind,
 * its mark differs, or it would expire clearly earlier than the source's. A slightly older timeout is left:
 * refreshing every entry of a resync would cost one table walk each.
 */
export function needsRefresh(kernel: SyncedConnection, desired: SyncedConnection): boolean {
  if (kernel.mark !== desired.mark) return true;
  if (desired.protocol === 'tcp' ? kernel.state !== desired.state : (UDP_RANK[desired.state] ?? 0) > (UDP_RANK[kernel.state] ?? 0)) return true;
  return kernel.timeoutSec < desired.timeoutSec - Math.max(10, desired.timeoutSec / 10);
}

type Outcome = 'inserted' | 'replaced' | 'refreshed' | 'removed' | 'skipped' | 'failed';
type Intent = 'insert' | 'replace' | 'refresh' | 'remove' | 'skip';

interface Op {
  readonly change: ConnectionChange;
  readonly key: string;
  intent: Intent;
  outcome: Outcome | null;
  /** Rounds in which this op was the first one a failed batch did not make. */
  blamed: number;
  /** A replace whose old entry the ctnetlink helper has deleted: only its insert is left. */
  oldDeleted: boolean;
  /** The kernel's entry for the connection when the op was last planned (null: absent or not looked at). */
  kernel: SyncedConnection | null;
}

/** A kernel entry as apply sees it: the connection and when it was read. */
type KernelTable = Map<string, SyncedConnection>;

/**
 * ConnectionTable over conntrack-tools and a ctnetlink helper: the helper for events, deletes and refreshes,
 * `conntrack -L` for dumps, `-R` batches for inserts. Every command and helper runs through the injected
 * runner, so the same code works in another namespace.
 */
export class ConntrackConnectionTable implements ConnectionTable {
  private readonly runner: CommandRunner;
  private readonly tmpDir: string;
  private readonly maxRounds: number;
  private readonly eventBufferBytes: number;
  private readonly watchReadyTimeoutMs: number;
  /** What reads the kernel's events (see ConntrackConnectionTableOptions.eventsReader). */
  readonly eventsReader: EventsReader;
  /** Deletes and refreshes (null when the runner cannot spawn: then `conntrack -D/-U` as before). */
  private readonly writer: CtnlWriter | null;
  /** Running events helpers, ended by dispose() if their watch was not closed. */
  private readonly children = new Set<ChildProcessWithoutNullStreams>();
  private batchDir: string | null = null;
  private batches = 0;
  /** Applies are serialised: each reconciles against what the previous one left. */
  private readonly turns = new OneAtATime();

  constructor(opts: ConntrackConnectionTableOptions = {}) {
    this.runner = opts.runner ?? localRunner();
    this.tmpDir = opts.tmpDir ?? tmpdir();
    this.maxRounds = opts.maxRounds ?? 5;
    this.eventBufferBytes = opts.eventBufferBytes ?? 16 * 1024 * 1024;
    this.watchReadyTimeoutMs = opts.watchReadyTimeoutMs ?? 3000;
    this.eventsReader = opts.eventsReader ?? defaultEventsReader();
    const spawn = this.runner.spawn?.bind(this.runner);
    this.writer = spawn ? new CtnlWriter(spawn, {
      bufferBytes: 8 * 1024 * 1024,
      idleMs: opts.helperIdleMs ?? 10_000,
      // The helper waits at most 5 s for each 64 KiB of requests to be acked; this only catches a stuck pipe.
      timeoutMs: (n) => 30_000 + n,
    }) : null;
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
    return [...(await this.kernelTable('dump')).values()].filter((f) => f.mark !== 0);
  }

  async watch(handlers: ConnectionWatchHandlers): Promise<ConnectionWatch> {
    const spawn = this.runner.spawn?.bind(this.runner);
    if (!spawn) throw new DataPlaneError('Unknown', 'watch', { detail: 'the command runner cannot start long-running processes' });
    const child = this.eventsReader === 'native'
      ? spawn(NATIVE_EVENTS_READER, ['events', String(this.eventBufferBytes)])
      : spawn('perl', ['-e', CTNL_SCRIPT, 'events', String(this.eventBufferBytes)]);
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
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      const seenAtMs = performance.now();
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      const events: ConnectionEvent[] = [];
      for (const line of lines) {
        const p = parseEventLine(line, seenAtMs);
        if (!p) continue;
        if (p.type === 'ready') subscribed?.();
        else if (p.type === 'loss') loss(`ctnetlink events: the kernel dropped events (${p.reason}: the event socket buffer of ${this.eventBufferBytes} bytes overflowed)`);
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
    return { close: stop };
  }

  apply(changes: readonly ConnectionChange[]): Promise<ConnectionApplyResult> {
    return this.turns.run(() => this.applyNow(changes));
  }

  /**
   * Each round first sends the deletes (removes, the old entry of replaces) and refreshes to the ctnetlink
   * helper, then the inserts as one `-R` batch.
   * Round 0 assumes the usual case (upserts are new, removes are there; large batches look first). When conntrack
   * stops at a line, the lines before it were made: a dump tells which, and everything from there is planned
   * again against what the kernel really has, and run again, up to maxRounds. A change that is the first one
   * not made in two failed rounds is given up (counted as failed) so that it cannot hold back the rest.
   *
   * Changes to the same connection are coalesced first: only the last one for a connection is made.
   */
  private async applyNow(changes: readonly ConnectionChange[]): Promise<ConnectionApplyResult> {
    const errors: string[] = [];
    const byKey = new Map<string, Op>();
    for (const change of changes) {
      const key = connectionKey(change.connection);
      const bad = invalidConnection(change.connection);
      const op: Op = { change, key, intent: change.op === 'upsert' ? 'insert' : 'remove', outcome: null, blamed: 0, oldDeleted: false, kernel: null };
      if (bad) { op.outcome = 'failed'; pushError(errors, `${key}: ${bad}`); }
      byKey.delete(key);
      byKey.set(key, op);
    }
    const ops = [...byKey.values()];
    let pending = ops.filter((o) => o.outcome === null);
    // A large batch (a resync) is planned against a dump from the start: one dump costs less than a
    // batch that stops early, and the counts are exact (see evidentlyMade for the small-batch guess).
    // With the helper, inserts go first, unplanned: into a table that lacks them (a standby taking a
    // snapshot after a restart, new connections) that is one `-R` run, and a batch that meets entries already
    // there stops at the first, after which one dump plans the rest. Planning first would dump the whole
    // table for every batch of a snapshot: 100 000 connections in 8 192-change batches read 600 000 entries.
    // Without the helper, every conflict costs a `-R` round and `-D`/`-U` scan the table: plan first.
    if (!this.writer && pending.length >= PLAN_FIRST_MIN) {
      const kernel = await this.kernelTable('apply');
      for (const o of pending) {
        o.intent = plan(o, kernel);
        if (o.intent === 'skip') o.outcome = o.change.op === 'remove' ? 'skipped' : 'refreshed';
      }
      pending = pending.filter((o) => o.outcome === null);
    }

    for (let round = 0; pending.length > 0; round++) {
      if (round >= this.maxRounds) {
        for (const o of pending) o.outcome = 'failed';
        pushError(errors, `${pending.length} change(s) not made after ${this.maxRounds} rounds`);
        break;
      }
      const redo: Op[] = [];
      if (this.writer) await this.writeDirect(pending, redo, errors);
      else await this.refreshOneByOne(pending, redo);
      // The rest is one `-R` batch: inserts, and with the helper the insert half of replaces only.
      const batch = pending.filter((o) => o.outcome === null && o.intent !== 'refresh');
      const started = performance.now();
      // With the helper the batch only inserts, and `-R` stops at the first line it cannot make: the
      // table's growth says exactly how many went in. (A standby, which is who injects, has no traffic
      // of its own to skew the count; the dump below checks the culprit anyway.) Small batches, the
      // steady trickle of new connections, skip the two extra runs and judge from the dump.
      const before = this.writer && batch.length >= PLAN_FIRST_MIN ? await this.count() : null;
      const res = batch.length > 0 ? await this.load(batch.flatMap((o) => linesFor(o, !this.writer))) : { code: 0, stdout: '', stderr: '' };
      const deleted = new Set(parseConntrack(res.stdout).map((e) => connectionKey(connectionFromEntry(e))));
      if (res.code === 0) {
        for (const o of batch) o.outcome = outcomeOf(o, deleted);
        pending = redo;
        if (redo.length === 0) break;
      } else {
        this.assertRunnable('apply', res);
        pushError(errors, `conntrack -R: ${firstLine(res.stderr)}`);
      }
      const kernel = await this.kernelTable('apply');
      const elapsedSec = (performance.now() - started) / 1000;
      let again: Op[] = redo;
      if (res.code !== 0) {
        // The first change the batch evidently did not make is where conntrack stopped (or close after it).
        const after = before === null ? null : await this.count();
        // Entries that expired meanwhile make the growth an undercount: the stop comes early and the changes
        // after it are planned again from the dump, which is safe. Below zero (more expired than were made) it
        // still says where to start again: from the first. Guessing from the entries instead would take a
        // connection there already, written by the batch before, for one this batch made.
        const grown = before === null || after === null ? null : Math.max(0, after - before);
        const stop = grown !== null && grown < batch.length ? grown : batch.findIndex((o) => !evidentlyMade(o, kernel, deleted, elapsedSec));
        for (const o of batch.slice(0, stop < 0 ? batch.length : stop)) o.outcome = outcomeOf(o, deleted);
        if (stop >= 0) {
          const culprit = batch[stop]!;
          // Still absent although its -I ran (or was meant to): a rejected entry rather than a conflict.
          if (culprit.change.op === 'upsert' ? !kernel.has(culprit.key) : kernel.has(culprit.key)) culprit.blamed++;
          if (culprit.blamed >= 2) {
            culprit.outcome = 'failed';
            pushError(errors, `${culprit.key}: ${firstLine(res.stderr)}`);
          }
          again = [...again, ...batch.slice(stop).filter((o) => o.outcome === null)];
        }
      }
      for (const o of again) {
        const intent = plan(o, kernel);
        // Absent because this apply deleted its old entry: still a replace, whose insert half is left.
        if (intent === 'insert' && o.oldDeleted) o.intent = 'replace';
        else { o.intent = intent; o.oldDeleted = false; }
        // Nothing to do: a remove of an absent connection, an upsert the kernel already has closely enough.
        if (o.intent === 'skip') o.outcome = o.change.op === 'remove' ? 'skipped' : 'refreshed';
      }
      pending = again.filter((o) => o.outcome === null);
    }

    const count = (k: Outcome): number => ops.filter((o) => o.outcome === k).length;
    return {
      inserted: count('inserted'), replaced: count('replaced'), refreshed: count('refreshed'), removed: count('removed'),
      failed: count('failed'), errors,
    };
  }

  /**
   * Through the ctnetlink helper, one kernel hash lookup each: deletes (removes and the delete half of
   * replaces) and refreshes. Sets the outcome of removes, refreshes and of replaces whose delete failed;
   * a refresh whose entry vanished meanwhile goes to redo (planned again: an insert).
   */
  private async writeDirect(pending: readonly Op[], redo: Op[], errors: string[]): Promise<void> {
    const deletes = pending.filter((o) => (o.intent === 'remove' || o.intent === 'replace') && !o.oldDeleted);
    const refreshes = pending.filter((o) => o.intent === 'refresh');
    const ops = [...deletes, ...refreshes];
    if (ops.length === 0) return;
    const res = await this.writer!.run(ops.map((o) => (o.intent === 'refresh' ? renderUpdateRequest(o.change.connection as SyncedConnection, o.kernel) : renderDeleteRequest(o.change.connection))));
    ops.forEach((o, i) => {
      const code = res.codes[i] ?? '!';
      if (o.intent === 'remove') o.outcome = code === '+' ? 'removed' : code === '-' ? 'skipped' : 'failed';
      else if (o.intent === 'replace') {
        // Deleted, or gone already: the `-R` batch inserts it. A failed delete would make that insert fail.
        if (code === '!') o.outcome = 'failed';
        else o.oldDeleted = true;
      } else if (code === '+') o.outcome = 'refreshed';
      else if (code === '-') redo.push(o);
      else o.outcome = 'failed';
    });
    if (res.failed > 0) pushError(errors, `ctnetlink: ${res.failed} of ${ops.length} delete/update request(s) failed, the first with ${res.firstError ?? 'no answer'}`);
  }

  /** Without a helper (a runner that cannot spawn): one `conntrack -U` each (see the top of the file). */
  private async refreshOneByOne(pending: readonly Op[], redo: Op[]): Promise<void> {
    for (const o of pending.filter((p) => p.intent === 'refresh')) {
      const res = await this.runner.run('conntrack', renderRefresh(o.change.connection as SyncedConnection));
      if (res.code === 0) o.outcome = 'refreshed';
      else { this.assertRunnable('apply', res); redo.push(o); }
    }
  }

  /** Every tcp and udp entry (any mark: a mark-0 entry with a connection's tuple still blocks its `-I`). */
  private async kernelTable(op: string): Promise<KernelTable> {
    const res = await this.runner.run('conntrack', ['-L', '-o', 'extended']);
    if (res.code !== 0) throw kernelError(op, res, 'conntrack');
    const table: KernelTable = new Map();
    for (const e of parseConntrack(res.stdout)) {
      const f = connectionFromEntry(e);
      table.set(connectionKey(f), f);
    }
    return table;
  }

  /** Entries in the table now (`conntrack -C`, no dump); null when it cannot tell. */
  private async count(): Promise<number | null> {
    const res = await this.runner.run('conntrack', ['-C']);
    const n = Number(res.stdout.trim());
    return res.code === 0 && Number.isInteger(n) ? n : null;
  }

  /** Runs lines through `conntrack -R` (a file: the runner may be `ip netns exec`, which shares the filesystem). */
  private async load(lines: readonly string[][]): Promise<CommandResult> {
    this.batchDir ??= await makeBatchDir(this.tmpDir);
    const file = join(this.batchDir, `batch-${++this.batches}.txt`);
    await writeFile(file, lines.map((l) => l.join(' ')).join('\n') + '\n');
    try {
      const res = await this.runner.run('conntrack', ['-R', file]);
      // Exit 2 is a line conntrack could not parse: nothing was applied. Validation should make this
      // impossible; if it happens anyway, each line on its own finds the bad one without losing the rest.
      if (res.code !== 2 || lines.length === 1) return res;
      let stdout = '';
      for (const line of lines) {
        const one = await this.runner.run('conntrack', line);
        stdout += one.stdout;
        if (one.code !== 0 && !(line[0] === '-D' && /0 flow entries/.test(one.stderr))) return { ...one, stdout };
      }
      return { code: 0, stdout, stderr: '' };
    } finally {
      await rm(file, { force: true });
    }
  }

  private assertRunnable(op: string, res: CommandResult): void {
    if (res.code === 127 || /not permitted|must be root|CAP_NET_ADMIN/i.test(res.stderr)) throw kernelError(op, res, 'conntrack');
  }

  /**
   * Ends the helper processes (the write helper, and events helpers of watches not closed) and removes the
   * directory batch files are written to. The table can still be used (all are made again).
   */
  async dispose(): Promise<void> {
    await this.writer?.close();
    for (const child of this.children) child.kill('SIGTERM');
    if (this.batchDir) await rm(this.batchDir, { recursive: true, force: true });
    this.batchDir = null;
  }
}

/** The `-R` lines of an op; deletes only without the ctnetlink helper (which has made them already). */
function linesFor(o: Op, withDeletes: boolean): string[][] {
  switch (o.intent) {
    case 'insert': return [renderInsert(o.change.connection as SyncedConnection)];
    case 'replace': return withDeletes && !o.oldDeleted ? [renderRemove(o.change.connection), renderInsert(o.change.connection as SyncedConnection)] : [renderInsert(o.change.connection as SyncedConnection)];
    case 'remove': return [renderRemove(o.change.connection)];
    default: return [];
  }
}

function outcomeOf(o: Op, deleted: ReadonlySet<string>): Outcome {
  switch (o.intent) {
    case 'insert': return 'inserted';
    case 'replace': return 'replaced';
    case 'refresh': return 'refreshed';
    // `-D` prints what it deleted; an absent connection is not an error and prints nothing.
    case 'remove': return deleted.has(o.key) ? 'removed' : 'skipped';
    default: return 'skipped';
  }
}

/**
 * Whether the kernel shows what this change's lines would have made. An upsert counts only if the entry
 * looks freshly written (binding, mark, a timeout within the seconds the batch took): a pre-existing entry
 * is where conntrack stopped. (An old entry identical down to its timeout would be counted as inserted.)
 */
function evidentlyMade(o: Op, kernel: KernelTable, deleted: ReadonlySet<string>, elapsedSec: number): boolean {
  const k = kernel.get(o.key);
  if (o.change.op === 'remove') return !k || deleted.has(o.key);
  const f = o.change.connection;
  const t = Math.ceil(f.timeoutSec);
  return !!k && sameBinding(k, f) && k.mark === f.mark && k.timeoutSec <= t && k.timeoutSec >= t - elapsedSec - 2;
}

/** What a change needs, given the kernel's entry for its connection. */
function plan(o: Op, kernel: KernelTable): Intent {
  const k = kernel.get(o.key);
  o.kernel = k ?? null;
  if (o.change.op === 'remove') return k ? 'remove' : 'skip';
  const f = o.change.connection;
  if (!k) return 'insert';
  if (!sameBinding(k, f)) return 'replace';
  return needsRefresh(k, f) ? 'refresh' : 'skip';
}

function pushError(errors: string[], msg: string): void {
  if (errors.length < MAX_ERRORS) errors.push(msg);
}

function firstLine(s: string): string {
  return s.split('\n').map((l) => l.replace(/^conntrack v[\d.]+ \(conntrack-tools\): /, '').trim()).find((l) => l) ?? 'failed';
}

function kernelError(op: string, res: CommandResult, command: string, hint?: string): DataPlaneError {
  const detail = res.stderr.trim() || `${command} exited ${res.code}`;
  if (res.code === 127) return new DataPlaneError('CommandMissing', op, { detail: `${command} not found: install the ${command === 'sysctl' ? 'procps' : 'conntrack'} package` });
  if (/not permitted|must be root|permission denied/i.test(detail)) return new DataPlaneError('PermissionDenied', op, { detail: `${detail} (lbd-agent needs CAP_NET_ADMIN)` });
  return new DataPlaneError('Unknown', op, { detail: hint ? `${detail} (${hint})` : detail });
}

/** Batch directories: `lbd-connections-<pid>-<random>`. */
const BATCH_DIR = /^lbd-connections-(\d+)-/;

/**
 * A directory of this process's own for batch files. Named by pid, so that one a killed process left behind
 * (a SIGKILLed agent cannot clean up, and drills kill agents) is removed by the next table that starts:
 * any whose process is gone.
 */
async function makeBatchDir(tmpDir: string): Promise<string> {
  for (const name of await readdir(tmpDir).catch(() => [] as string[])) {
    const pid = Number(BATCH_DIR.exec(name)?.[1]);
    if (Number.isInteger(pid) && pid > 0 && !processAlive(pid)) await rm(join(tmpDir, name), { recursive: true, force: true }).catch(() => { /* another table got there first */ });
  }
  return mkdtemp(join(tmpDir, `lbd-connections-${process.pid}-`));
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: it exists, as another user's.
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
