import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import {
  DataPlaneError, flowKey, sameBinding, type Endpoint, type FlowApplyResult, type FlowChange, type FlowEvent, type FlowIdentity,
  type FlowTable, type FlowWatch, type FlowWatchHandlers, type SyncedFlow,
} from '@lbd/dataplane';
import { parseConntrack, parseConntrackLine, type ConntrackEntry } from './conntrack.js';
import { localRunner, type CommandResult, type CommandRunner } from './runner.js';

/*
 * What conntrack-tools 1.4.7 (Debian 12) does, measured, and what this file does about it:
 * - `-I` with `--dst-nat`/`--src-nat` creates an entry the kernel forwards with exactly that binding;
 *   original and reply tuples as `-L` prints them do not. `-I` is a direct request: 20 000 in 0.3 s via `-R`.
 * - `-u STATUS` after `--mark` overwrites the mark with the status bits (mark=6): -u always comes first.
 * - `-R FILE` parses the whole file first (one bad line: nothing applied, exit 2), then runs the lines and
 *   stops at the first failing one ("Such conntrack exists"), without saying which. Hence `apply`
 *   reconciles against a dump after a failed batch.
 * - `-U` and `-D` are not direct: each walks the whole table (a filtered dump), ~70 ms per line with 20 000
 *   entries. They are only rendered where needed. An absent `-D` is not an error.
 * - In `-R`, every `-U` line uses the `--mark` of the file's last line (a global in conntrack), and after
 *   about a dozen `-U` lines on a large table the batch fails with "Protocol error": refreshes run one
 *   `conntrack -U` each.
 * - `-E -b N` sets the buffer of conntrack's request socket, not of the one events arrive on (that keeps
 *   net.core.rmem_default, 208 KiB). Measured: 5 000 new entries/s in bursts of 100 lose nothing; in bursts
 *   of 500, 60% are lost (ENOBUFS). `-b` is passed anyway (harmless; it helps where conntrack sets it on
 *   the right socket); only a larger net.core.rmem_default (host-wide, not per namespace) helps on 1.4.7.
 * - Without `-f`, `-L` and `-E` cover IPv4 and IPv6, and `-I/-U/-D` take the family from the addresses
 *   (`-f` is even refused with `-I`); IPv6 NAT bindings are written `[addr]:port`.
 */

export interface ConntrackFlowTableOptions {
  readonly runner?: CommandRunner;
  /** Where `-R` batch files are written (shared with `ip netns exec`). Default: the OS temp dir. */
  readonly tmpDir?: string;
  /** Batches run again after a failure, each against a fresh dump. Default 5. */
  readonly maxRounds?: number;
  /** `conntrack -E -b` (see above: no effect on conntrack 1.4.7). Default 8 MiB. */
  readonly eventBufferBytes?: number;
  /** How long `watch` waits for its probe event before it gives up. Default 3000. */
  readonly watchReadyTimeoutMs?: number;
}

/** TCP states `conntrack --state` accepts. */
const TCP_STATES = new Set(['NONE', 'SYN_SENT', 'SYN_RECV', 'ESTABLISHED', 'FIN_WAIT', 'CLOSE_WAIT', 'LAST_ACK', 'TIME_WAIT', 'CLOSE', 'LISTEN']);
const UDP_RANK: Record<string, number> = { UNREPLIED: 0, REPLIED: 1, ASSURED: 2 };
const MAX_ERRORS = 5;
/** From this many changes on, apply dumps the kernel's table before its first batch. */
const PLAN_FIRST_MIN = 256;

/** The flow conntrack's entry stands for: original = client → vip, reply = realServer → (local address | client). */
export function flowFromEntry(e: ConntrackEntry): SyncedFlow {
  const client = e.original.src;
  const back = e.reply.dst;
  // In nat mode the real server answers the client itself; in fullnat, the local address the director chose.
  const nat = back.address === client.address && back.port === client.port;
  return {
    protocol: e.protocol,
    client,
    vip: e.original.dst,
    realServer: e.reply.src,
    localAddress: nat ? null : back,
    mark: e.mark,
    state: e.state,
    timeoutSec: e.expiresInSec,
  };
}

/** One `conntrack -E` line as a FlowEvent; null for lines that are not lbd's flows (mark 0, icmp, warnings). */
export function parseFlowEvent(line: string, seenAtMs: number): FlowEvent | null {
  const parsed = parseConntrackLine(line);
  if (!parsed || parsed.event === null || parsed.entry.mark === 0) return null;
  const kind = parsed.event === 'NEW' ? 'new' : parsed.event === 'UPDATE' ? 'update' : 'destroy';
  return { kind, flow: flowFromEntry(parsed.entry), injected: parsed.userspace, seenAtMs };
}

/** Why conntrack would refuse the flow (a bad line aborts a whole `-R` batch), or null. */
export function invalidFlow(f: FlowIdentity & Partial<SyncedFlow>): string | null {
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
const tupleArgs = (f: FlowIdentity): string[] =>
  ['-p', f.protocol, '-s', f.client.address, '-d', f.vip.address, '--sport', String(f.client.port), '--dport', String(f.vip.port)];

/** The status bits the state implies; an unreplied flow gets none (conntrack shows it [UNREPLIED]). */
function statusArgs(f: SyncedFlow): string[] {
  const replied = f.protocol === 'tcp' ? f.state !== 'SYN_SENT' && f.state !== 'NONE' : f.state !== 'UNREPLIED';
  const assured = f.protocol === 'tcp' ? replied && f.state !== 'SYN_RECV' : f.state === 'ASSURED';
  if (!replied) return [];
  // Before --mark, always: conntrack 1.4.7 writes the status bits over a mark that precedes them.
  return ['-u', assured ? 'ASSURED,SEEN_REPLY' : 'SEEN_REPLY'];
}

/** `-I`: the entry with its NAT binding, so the kernel translates the flow's next packet the same way. */
export function renderInsert(f: SyncedFlow): string[] {
  return [
    '-I', ...tupleArgs(f), ...statusArgs(f),
    '--dst-nat', natTarget(f.realServer),
    ...(f.localAddress ? ['--src-nat', natTarget(f.localAddress)] : []),
    ...(f.protocol === 'tcp' ? ['--state', f.state] : []),
    '--timeout', String(Math.ceil(f.timeoutSec)), '--mark', String(f.mark),
  ];
}

/** `-U`: timeout, state and mark of an entry that already has the flow's binding (NAT cannot be changed). */
export function renderRefresh(f: SyncedFlow): string[] {
  return [
    '-U', ...tupleArgs(f), ...statusArgs(f),
    ...(f.protocol === 'tcp' ? ['--state', f.state] : []),
    '--timeout', String(Math.ceil(f.timeoutSec)), '--mark', String(f.mark),
  ];
}

export function renderRemove(f: FlowIdentity): string[] {
  return ['-D', ...tupleArgs(f)];
}

/**
 * Whether an entry with the right binding still needs a `-U` (a table walk, see above): its state is behind,
 * its mark differs, or it would expire clearly earlier than the source's. A slightly older timeout is left:
 * refreshing every entry of a resync would cost one table walk each.
 */
export function needsRefresh(kernel: SyncedFlow, desired: SyncedFlow): boolean {
  if (kernel.mark !== desired.mark) return true;
  if (desired.protocol === 'tcp' ? kernel.state !== desired.state : (UDP_RANK[desired.state] ?? 0) > (UDP_RANK[kernel.state] ?? 0)) return true;
  return kernel.timeoutSec < desired.timeoutSec - Math.max(10, desired.timeoutSec / 10);
}

type Outcome = 'inserted' | 'replaced' | 'refreshed' | 'removed' | 'skipped' | 'failed';
type Intent = 'insert' | 'replace' | 'refresh' | 'remove' | 'skip';

interface Op {
  readonly change: FlowChange;
  readonly key: string;
  intent: Intent;
  outcome: Outcome | null;
  /** Rounds in which this op was the first one a failed batch did not make. */
  blamed: number;
}

/** A kernel entry as apply sees it: the flow and when it was read. */
type KernelTable = Map<string, SyncedFlow>;

/**
 * FlowTable over conntrack-tools: `conntrack -E` for events, `-L` for dumps, `-R` batches for applies.
 * Each conntrack command runs through the injected runner, so the same code works in another namespace.
 */
export class ConntrackFlowTable implements FlowTable {
  private readonly runner: CommandRunner;
  private readonly tmpDir: string;
  private readonly maxRounds: number;
  private readonly eventBufferBytes: number;
  private readonly watchReadyTimeoutMs: number;
  private batchDir: string | null = null;
  private batches = 0;
  /** Applies are serialised: each reconciles against what the previous one left. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(opts: ConntrackFlowTableOptions = {}) {
    this.runner = opts.runner ?? localRunner();
    this.tmpDir = opts.tmpDir ?? tmpdir();
    this.maxRounds = opts.maxRounds ?? 5;
    this.eventBufferBytes = opts.eventBufferBytes ?? 8 * 1024 * 1024;
    this.watchReadyTimeoutMs = opts.watchReadyTimeoutMs ?? 3000;
  }

  /**
   * Per network namespace, all three:
   * - nf_conntrack_tcp_loose=1: a director that takes over sees established flows it has no entry for
   *   (not synced yet, or lost); loose lets conntrack pick them up mid-stream instead of dropping them as
   *   invalid, so consistent hashing can still send them to the same real server. (Linux's default is 1;
   *   set because distributions and hardening guides turn it off.)
   * - nf_conntrack_tcp_be_liberal=1: an injected entry carries no TCP window data. Measured on 6.x with
   *   be_liberal=0, a flow injected into the standby kept working after the takeover (no INVALID counted):
   *   the kernel starts window tracking from the first packet it sees in each direction. Set anyway: that
   *   first packet is a guess of the window, and packets in flight at the takeover judged out of it would be
   *   INVALID, i.e. not translated, and reach the client or server with the wrong addresses (an RST).
   * - nf_conntrack_events=1: with the default (2) the kernel attaches event data only to entries created
   *   while some program listens, so a watch (re)started after a flow began would never see that flow's
   *   updates or its end. 1: every entry reports events.
   */
  async prepare(): Promise<void> {
    const settings = ['net.netfilter.nf_conntrack_tcp_loose=1', 'net.netfilter.nf_conntrack_tcp_be_liberal=1', 'net.netfilter.nf_conntrack_events=1'];
    const res = await this.runner.run('sysctl', ['-w', ...settings]);
    if (res.code !== 0) {
      throw kernelError('prepare', res, 'sysctl', 'the nf_conntrack module must be loaded (modprobe nf_conntrack) and lbd-agent needs CAP_NET_ADMIN');
    }
  }

  async dump(): Promise<SyncedFlow[]> {
    return [...(await this.kernelTable('dump')).values()].filter((f) => f.mark !== 0);
  }

  async watch(handlers: FlowWatchHandlers): Promise<FlowWatch> {
    const spawn = this.runner.spawn?.bind(this.runner);
    if (!spawn) throw new DataPlaneError('Unknown', 'watch', { detail: 'the command runner cannot start long-running processes' });
    const child = spawn('conntrack', ['-E', '-o', 'extended,id', '-b', String(this.eventBufferBytes)]);
    let closing = false;
    let lost = false;
    let stderr = '';
    // Probes: mark-0 entries this watch inserts; seeing one's NEW event proves the subscription is live.
    const probes = new Set<string>();
    let probed: (() => void) | null = null;
    let partial = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      const seenAtMs = performance.now();
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      const events: FlowEvent[] = [];
      for (const line of lines) {
        if (probed) {
          const p = parseConntrackLine(line);
          if (p && probes.has(flowKey({ protocol: p.entry.protocol, client: p.entry.original.src, vip: p.entry.original.dst }))) probed();
        }
        const ev = parseFlowEvent(line, seenAtMs);
        if (ev) events.push(ev);
      }
      // One callback per read: a burst arrives as one batch, as the kernel delivered it.
      if (events.length > 0 && !closing) handlers.onEvents(events);
    });
    const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
    // conntrack prints one ENOBUFS warning per failed read: those read together are one loss.
    let lossQueued = false;
    const loss = (reason: string): void => {
      if (closing || lossQueued) return;
      lossQueued = true;
      setImmediate(() => { lossQueued = false; if (!closing) handlers.onLoss(reason); });
    };
    createInterface({ input: child.stderr }).on('line', (line) => {
      if (/ENOBUFS/.test(line)) loss('conntrack -E: the kernel dropped events (ENOBUFS: the event socket buffer overflowed)');
      else if (line.trim()) stderr = `${stderr}${line}\n`.slice(-2000);
    });
    child.on('error', (err) => { stderr += `${String(err)}\n`; });
    child.once('close', (code, signal) => {
      if (closing) return;
      lost = true;
      loss(`conntrack -E exited (${signal ?? `code ${String(code)}`})${stderr.trim() ? `: ${stderr.trim()}` : ''}`);
    });
    const stop = async (): Promise<void> => {
      closing = true;
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    };

    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new DataPlaneError('Unknown', 'watch', {
          detail: `no conntrack event within ${this.watchReadyTimeoutMs} ms of a test entry; are events on (net.netfilter.nf_conntrack_events=1, see prepare())?${stderr ? ` conntrack said: ${stderr.trim()}` : ''}`,
        })), this.watchReadyTimeoutMs);
        void exited.then(() => {
          clearTimeout(timer);
          reject(/command not found|ENOENT|exec of "conntrack" failed/.test(stderr)
            ? new DataPlaneError('CommandMissing', 'watch', { detail: 'conntrack not found: install the conntrack package' })
            : new DataPlaneError(/not permitted|must be root/i.test(stderr) ? 'PermissionDenied' : 'Unknown', 'watch', { detail: stderr.trim() || 'conntrack -E exited' }));
        });
        probed = () => { clearTimeout(timer); probed = null; resolve(); };
        // Resend the probe until one is seen: conntrack may not have subscribed when the first one is made.
        const send = async (attempt: number): Promise<void> => {
          const port = 1024 + Math.floor(Math.random() * 60000);
          const f: FlowIdentity = { protocol: 'udp', client: { address: '127.0.0.1', port }, vip: { address: '127.0.0.1', port: 9 } };
          probes.add(flowKey(f));
          await this.runner.run('conntrack', ['-I', ...tupleArgs(f), '--timeout', '1', '--mark', '0']);
          await new Promise((r) => setTimeout(r, Math.min(50 * 2 ** attempt, 500)));
          if (probed && !lost && !closing) await send(attempt + 1);
        };
        void send(0);
      });
    } catch (err) {
      await stop();
      throw err;
    }
    return { close: stop };
  }

  apply(changes: readonly FlowChange[]): Promise<FlowApplyResult> {
    const run = this.queue.then(() => this.applyNow(changes));
    this.queue = run.catch(() => {});
    return run;
  }

  /**
   * Round 0 assumes the usual case (upserts are new, removes are there; large batches look first) and runs one `-R` batch. When conntrack
   * stops at a line, the lines before it were made: a dump tells which, and everything from there is planned
   * again against what the kernel really has, and run again, up to maxRounds. A change that is the first one
   * not made in two failed rounds is given up (counted as failed) so that it cannot hold back the rest.
   *
   * Changes to the same flow are coalesced first: only the last one for a flow is made.
   */
  private async applyNow(changes: readonly FlowChange[]): Promise<FlowApplyResult> {
    const errors: string[] = [];
    const byKey = new Map<string, Op>();
    for (const change of changes) {
      const key = flowKey(change.flow);
      const bad = invalidFlow(change.flow);
      const op: Op = { change, key, intent: change.op === 'upsert' ? 'insert' : 'remove', outcome: null, blamed: 0 };
      if (bad) { op.outcome = 'failed'; pushError(errors, `${key}: ${bad}`); }
      byKey.delete(key);
      byKey.set(key, op);
    }
    const ops = [...byKey.values()];
    let pending = ops.filter((o) => o.outcome === null);
    // A large batch (a resync) is planned against a dump from the start: one dump costs less than a
    // batch that stops early, and the counts are exact (see evidentlyMade for the small-batch guess).
    if (pending.length >= PLAN_FIRST_MIN) {
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
      // Refreshes are single `-U` commands (see the top of the file); the rest is one `-R` batch.
      const refreshes = pending.filter((o) => o.intent === 'refresh');
      const batch = pending.filter((o) => o.intent !== 'refresh');
      const redo: Op[] = [];
      for (const o of refreshes) {
        const res = await this.runner.run('conntrack', renderRefresh(o.change.flow as SyncedFlow));
        if (res.code === 0) o.outcome = 'refreshed';
        else { this.assertRunnable('apply', res); redo.push(o); }
      }
      const started = performance.now();
      const res = batch.length > 0 ? await this.load(batch.flatMap((o) => linesFor(o))) : { code: 0, stdout: '', stderr: '' };
      const deleted = new Set(parseConntrack(res.stdout).map((e) => flowKey(flowFromEntry(e))));
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
        const stop = batch.findIndex((o) => !evidentlyMade(o, kernel, deleted, elapsedSec));
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
        o.intent = plan(o, kernel);
        // Nothing to do: a remove of an absent flow, an upsert the kernel already has closely enough.
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

  /** Every tcp and udp entry (any mark: a mark-0 entry with a flow's tuple still blocks its `-I`). */
  private async kernelTable(op: string): Promise<KernelTable> {
    const res = await this.runner.run('conntrack', ['-L', '-o', 'extended']);
    if (res.code !== 0) throw kernelError(op, res, 'conntrack');
    const table: KernelTable = new Map();
    for (const e of parseConntrack(res.stdout)) {
      const f = flowFromEntry(e);
      table.set(flowKey(f), f);
    }
    return table;
  }

  /** Runs lines through `conntrack -R` (a file: the runner may be `ip netns exec`, which shares the filesystem). */
  private async load(lines: readonly string[][]): Promise<CommandResult> {
    this.batchDir ??= await mkdtemp(join(this.tmpDir, 'lbd-flows-'));
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

  /** Removes the directory batch files are written to. The table can still be used (it is made again). */
  async dispose(): Promise<void> {
    if (this.batchDir) await rm(this.batchDir, { recursive: true, force: true });
    this.batchDir = null;
  }
}

function linesFor(o: Op): string[][] {
  switch (o.intent) {
    case 'insert': return [renderInsert(o.change.flow as SyncedFlow)];
    case 'replace': return [renderRemove(o.change.flow), renderInsert(o.change.flow as SyncedFlow)];
    case 'remove': return [renderRemove(o.change.flow)];
    default: return [];
  }
}

function outcomeOf(o: Op, deleted: ReadonlySet<string>): Outcome {
  switch (o.intent) {
    case 'insert': return 'inserted';
    case 'replace': return 'replaced';
    case 'refresh': return 'refreshed';
    // `-D` prints what it deleted; an absent flow is not an error and prints nothing.
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
  const f = o.change.flow;
  const t = Math.ceil(f.timeoutSec);
  return !!k && sameBinding(k, f) && k.mark === f.mark && k.timeoutSec <= t && k.timeoutSec >= t - elapsedSec - 2;
}

/** What a change needs, given the kernel's entry for its flow. */
function plan(o: Op, kernel: KernelTable): Intent {
  const k = kernel.get(o.key);
  if (o.change.op === 'remove') return k ? 'remove' : 'skip';
  const f = o.change.flow;
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
