import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { endianness, tmpdir } from 'node:os';
import { join } from 'node:path';
import { canonicalAddress, familyOf, hostPort, serviceKey, type Protocol, type Service } from '@lbd/config';
import {
  DataPlaneError, realServerIdsOf, type ApplyOptions, type ArpProbe, type ApplyResult, type Connection, type ConnectionFilter, type DataPlane,
  type DesiredState, type Endpoint, type KernelFacts, type ObservedRealServer, type ObservedService, type ObservedState, type RealServerId, type SynProxyStats,
} from '@lbd/dataplane';
import { parseDeletedCount } from './conntrack.js';
import { defaultCtnlHelper, listConntrack, type CtnlHelper } from './connection-table.js';
import { NEIGHBOUR_SOLICIT_SCRIPT, vipEchoScript } from './dr-probes.js';
import {
  diffTables, MAP_NAMES, objectKind, renderFullScript, serviceMark, SLOT_SNAT_MAP, tableElements, TABLE_NAME, type NftFamily, type TableModel,
} from './model.js';
import { ElementEncodingError, encodeElementBatch, frameParts, NFBATCH_HELPER, type ElementBatch, type ElementPart } from './nft-netlink.js';
import { parseLimitStats, parseListings, parseSynProxyStats, parseTable, persistEntriesFor, tableSchema, type ParsedTable } from './parse.js';
import { planTables, type Leaving } from './plan.js';
import { NftSession } from './nft-session.js';
import { localRunner, type CommandResult, type CommandRunner } from './runner.js';
import { OneAtATime } from './one-at-a-time.js';
import { prepareSlotInterfaces } from './slot-interfaces.js';

/** Changes up to this size go through the `nft -i` session, as one line; larger ones as a script file. */
const SESSION_MAX_BYTES = 3500;

const FAMILIES: readonly NftFamily[] = ['ip', 'ip6'];
/** A set or map of lbd's table, as `nft list` names it. */
type TableObject = readonly ['set' | 'map', string];
/** The counters: packets and bytes per real server, per service, and connection limits' drops per service. */
const COUNTER_SETS: readonly TableObject[] = [['set', 'backend_stats'], ['set', 'service_stats'], ['set', 'limit_stats']];
/** What the observe() of a data plane that applied lists (not the slots: see observe). */
const OBSERVED_OBJECTS: readonly TableObject[] = [
  ['set', 'schema'], ...(['dispatch', 'dr_dispatch', 'service_tuple', 'service_snat', 'backend_dnat'] as const).map((m) => ['map', m] as const),
  ['set', 'eligible'], ['set', 'synproxy_services'], ...COUNTER_SETS,
];
/**
 * Everything of a table that says what lbd wrote and what it counted, as `nft list` names it: the schema, the
 * per-service maps and sets, the ECMP tier's map, the counters. Never the sets and maps the packet path fills
 * (the dr flow memory, persistence, connection limits' counts): they can hold a million entries, and nft
 * 1.0.6 fetches every element of every set to list a table (even for `list tables`): 5.9 s and 22 MB of JSON
 * for a table with 200 000 remembered dr flows, where one map of it lists in 24 ms.
 */
const WRITTEN_OBJECTS: readonly TableObject[] = [
  ['set', 'schema'], ...MAP_NAMES.map((m) => [objectKind(m), m] as const), ['map', SLOT_SNAT_MAP], ...COUNTER_SETS,
];
/** The maps that send packets to scheduling chains: written last, once what they lead to is in place. */
const DISPATCH_MAPS: ReadonlySet<string> = new Set(['dispatch', 'dr_dispatch']);

/**
 * Elements per transaction when a new table's elements go as netlink messages: large enough that a
 * transaction's fixed cost is nothing, small enough that encoding and the kernel's work overlap.
 */
const FRAME_ELEMENTS = 16_384;

export { NFBATCH_HELPER };

export interface NftDataPlaneOptions {
  readonly runner?: CommandRunner;
  /**
   * Whether a table built afresh gets its map elements as netlink messages through lbd-nfbatch (the
   * default when it is built and the runner can spawn) or inside nft's script. Tests compare the two.
   */
  readonly elementBatches?: boolean;
  /** Called on transitions worth a log line (re-adoption, rebuilds, expiries). */
  readonly onEvent?: (msg: string, fields: Record<string, unknown>) => void;
  /** What lists conntrack's table for connections(): `native` lbd-ctnl's dump (the default where it was built), or conntrack -L. */
  readonly ctnlHelper?: CtnlHelper;
}

/** What lbd last wrote to (or read from) the kernel; null per family when there is no usable table. */
interface KernelState {
  models: Record<NftFamily, TableModel | null>;
  /** Families whose table exists with another schema (it is replaced in one transaction, never emptied first). */
  otherSchema?: ReadonlySet<NftFamily>;
}

/**
 * Linux nftables implementation of DataPlane. Renders and applies; it does not decide what to program
 * (that is the agent's reconcile loop) and never touches tables it does not own (`ip lbd`, `ip6 lbd`).
 * On first use it reads what the kernel has and patches from there, so a restarted agent re-adopts its
 * table without writing anything when nothing changed, and never starts from empty.
 */
export class NftDataPlane implements DataPlane {
  private readonly runner: CommandRunner;
  private readonly onEvent: (msg: string, fields: Record<string, unknown>) => void;
  private readonly ctnlHelper: CtnlHelper;
  private state: KernelState | null = null;
  /** Whether `state` is what this data plane wrote (or found and kept) in its last apply: what the kernel has. */
  private applied = false;
  /** The services `state` was planned from (planTables' plannedFrom); null when it was read from the kernel. */
  private plannedFrom: readonly Service[] | null = null;
  private readonly session: NftSession | null;
  private readonly elementBatches: boolean;
  /** Applies are serialised: each diff is computed against the state the previous one left. */
  private readonly turns = new OneAtATime();

  constructor(opts: NftDataPlaneOptions = {}) {
    this.runner = opts.runner ?? localRunner();
    this.onEvent = opts.onEvent ?? (() => { /* nobody listens */ });
    this.ctnlHelper = opts.ctnlHelper ?? defaultCtnlHelper();
    const spawnFn = this.runner.spawn?.bind(this.runner);
    this.session = spawnFn ? new NftSession(() => spawnFn('nft', ['-i'])) : null;
    this.elementBatches = spawnFn !== undefined && (opts.elementBatches ?? existsSync(NFBATCH_HELPER));
  }

  apply(desired: DesiredState, opts: ApplyOptions = {}): Promise<ApplyResult> {
    return this.turns.run(() => this.applyNow(desired, opts));
  }

  private async applyNow(desired: DesiredState, opts: ApplyOptions): Promise<ApplyResult> {
    const started = performance.now();
    const state = this.state ?? (await this.readKernel());
    this.state = state;
    const { models: target, leaving, changed } = planTables(desired.services, state.models, desired.slots, this.plannedFrom ?? undefined);
    const ops: string[] = [];
    let fullRebuild = false;
    // A table built where there was none gets its elements as netlink messages after nft made the table
    // (nft's parser costs ~7 us an element: 1.3 s at 10 000 services). Nothing is served from the table
    // in between, as nothing was before. A table of another schema is still replaced by one nft script:
    // its services keep being served until the new table takes over in the same transaction.
    const batched: ElementPart[] = [];
    for (const f of FAMILIES) {
      const current = state.models[f];
      if (current === null) {
        fullRebuild = true;
        const batch = this.elementBatches && !opts.dryRun && !state.otherSchema?.has(f);
        ops.push(...renderFullScript(target[f], true, { elements: !batch }));
        if (batch) {
          for (const [map, groups] of tableElements(target[f])) {
            batched.push({ family: f, table: TABLE_NAME, map, groups });
            ops.push(`# ${groups.reduce((n, g) => n + g.size, 0)} elements of ${f} ${TABLE_NAME} ${map} as netlink messages`);
          }
        }
      } else {
        ops.push(...diffTables(current, target[f], changed[f]));
      }
    }
    ops.push(...(await this.cleanupOps(state, leaving)));
    const result = (changed: boolean, expiredConnections = 0): ApplyResult => ({
      changed, operations: ops, fullRebuild, expiredConnections, durationMs: performance.now() - started,
    });
    if (opts.dryRun) return result(ops.length > 0);
    if (ops.length > 0) {
      try {
        await this.transaction(ops.filter((l) => !l.startsWith('#')), fullRebuild);
        if (batched.length > 0) await this.writeElements(batched);
      } catch (err) {
        // A failed transaction changed nothing, but whatever made it fail (someone else's change, a
        // session that died half-way) may mean the kernel is not what we think: read it again next time.
        this.state = null;
        this.plannedFrom = null;
        this.applied = false;
        throw err;
      }
      if (fullRebuild) this.onEvent('nft table created', { families: FAMILIES.filter((f) => state.models[f] === null) });
    }
    this.state = { models: target };
    // A copy: a caller that changes its array in place must not make the next apply see no change.
    this.plannedFrom = [...desired.services];
    this.applied = true;
    const expired = await this.expireConnections(leaving.expire);
    return result(ops.length > 0, expired);
  }

  /**
   * Forgets what leaving real servers left in kernel-managed sets: their counters (a mark may be reused
   * later) and persistence entries pointing at them. Each element is added, then deleted, in the same
   * transaction: the add makes the delete valid even if the element never existed or just timed out.
   */
  private async cleanupOps(state: KernelState, leaving: Leaving): Promise<string[]> {
    const ops: string[] = [];
    for (const f of FAMILIES) {
      if (state.models[f] === null) continue; // a rebuilt table starts empty
      const t = `${f} ${TABLE_NAME}`;
      const addDelete = (set: string, elems: string[]): void => {
        if (elems.length === 0) return;
        ops.push(`add element ${t} ${set} { ${elems.join(', ')} }`, `delete element ${t} ${set} { ${elems.map((e) => e.split(' : ')[0]).join(', ')} }`);
      };
      addDelete('backend_stats', [...leaving.removed[f]].map(String));
      addDelete('service_stats', [...leaving.removedServices[f]].map(String));
      if (leaving.affinity[f].size > 0) {
        const res = await this.runner.run('nft', ['-j', 'list', 'map', f, TABLE_NAME, 'persist']);
        if (res.code !== 0) throw nftError('list persistence', res);
        addDelete('persist', persistEntriesFor(res.stdout, leaving.affinity[f]).map(([k, v]) => `${k} : ${v}`));
      }
    }
    return ops;
  }

  /**
   * Applies ops as one transaction: small patches through the long-lived `nft -i` session (no process
   * start per change), everything else as an `nft -f` script.
   */
  private async transaction(ops: readonly string[], fullRebuild: boolean): Promise<void> {
    const size = ops.reduce((n, l) => n + l.length + 2, 0);
    if (this.session && !fullRebuild && size <= SESSION_MAX_BYTES) {
      let err: string;
      try {
        err = await this.session.run(ops);
      } catch (e) {
        // The session died: say so once and fall back to a script for this change.
        this.onEvent('nft -i session ended; using nft -f', { error: String(e) });
        this.session.close();
        return this.nftScript(ops, 'apply');
      }
      if (err !== '') throw nftError('apply', { code: 1, stdout: '', stderr: err });
      return;
    }
    return this.nftScript(ops, 'apply');
  }

  /** Runs a script as one `nft -f` transaction (nft cannot read a script from a pipe under Node's spawn). */
  private async nftScript(lines: readonly string[], op: string): Promise<void> {
    const dir = await mkdtemp(join(tmpdir(), 'lbd-nft-'));
    const file = join(dir, 'ruleset.nft');
    try {
      await writeFile(file, lines.join('\n') + '\n', { mode: 0o600 });
      const res = await this.runner.run('nft', ['-f', file]);
      if (res.code !== 0) throw nftError(op, res);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  /**
   * Writes the elements of tables nft just made, through lbd-nfbatch, in transactions of FRAME_ELEMENTS:
   * each is encoded while the kernel takes the one before (the kernel's share is about as large as the
   * encoding's). Every @dispatch element comes last, so no service is reachable before everything it uses
   * is in the kernel. If the kernel refuses any of it, the tables are deleted again: the apply fails having
   * changed nothing that served (nothing was served from them).
   */
  private async writeElements(elements: readonly ElementPart[]): Promise<void> {
    const frames = frameParts([...elements.filter((p) => !DISPATCH_MAPS.has(p.map)), ...elements.filter((p) => DISPATCH_MAPS.has(p.map))], FRAME_ELEMENTS);
    const helper = this.runner.spawn!(NFBATCH_HELPER, []);
    const answers: string[] = [];
    let pending = '';
    helper.stdout.setEncoding('utf8').on('data', (d: string) => {
      const lines = (pending + d).split('\n');
      pending = lines.pop()!;
      answers.push(...lines);
    });
    let stderr = '';
    helper.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    const exited = new Promise<number>((resolve) => {
      helper.on('error', (err) => { stderr += String(err); resolve(127); });
      helper.on('close', (code) => resolve(code ?? 1));
    });
    let gone = false;
    void exited.then(() => { gone = true; });
    helper.stdin.on('error', () => { /* the helper exited: its status and stderr say why */ });
    const batches: ElementBatch[] = [];
    let seq = 1;
    let unencodable: ElementEncodingError | null = null;
    for (const frame of frames) {
      // Stop early once the kernel refused something: the tables go anyway.
      if (gone || answers.some((a) => a !== 'ok')) break;
      let batch: ElementBatch;
      try {
        batch = encodeElementBatch(frame, seq);
      } catch (err) {
        if (!(err instanceof ElementEncodingError)) throw err;
        unencodable = err;
        break;
      }
      seq += batch.messages.length + 2;
      batches.push(batch);
      const length = Buffer.allocUnsafe(4);
      if (endianness() === 'LE') length.writeUInt32LE(batch.bytes.length); else length.writeUInt32BE(batch.bytes.length);
      helper.stdin.write(length);
      // Wait until the helper has the frame (it reads while the kernel takes the last one), then encode on.
      if (!helper.stdin.write(batch.bytes)) await Promise.race([once(helper.stdin, 'drain'), exited]);
    }
    helper.stdin.end();
    const code = await exited;
    if (unencodable === null && code === 0 && answers.length === batches.length && answers.every((a) => a === 'ok')) return;

    const messages = batches.flatMap((b) => b.messages);
    const refused = answers.filter((a) => a.startsWith('failed ')).flatMap((a) => a.slice(7).split(' ')).map((word) => {
      const [seqText, errno, text] = word.split(':');
      const msg = messages.find((m) => m.seq === Number(seqText));
      const what = msg ? `${msg.count} elements of map ${msg.map} from ${JSON.stringify(msg.first)}` : 'a transaction as a whole';
      return `${what}: ${(text ?? '').replace(/_/g, ' ')} (errno ${errno})`;
    });
    // `add` before `delete`: the undo holds even for a table that is already gone.
    const undo = [...new Set(elements.map((p) => p.family))].flatMap((f) => [`add table ${f} ${TABLE_NAME}`, `delete table ${f} ${TABLE_NAME}`]);
    await this.nftScript(undo, 'apply').catch(() => { /* the next apply reads the kernel again */ });
    // Text the renderer made but the encoder cannot read is lbd's bug, not the operator's: said as it is.
    if (unencodable !== null) throw new DataPlaneError('InvalidRuleset', 'apply', { detail: unencodable.message, cause: unencodable });
    const detail = refused.length > 0
      ? `nf_tables refused the new table's elements: ${refused.slice(0, 4).join('; ')}${refused.length > 4 ? ` (and ${refused.length - 4} more)` : ''}`
      : `writing the new table's elements through ${NFBATCH_HELPER} failed: ${stderr.trim() || `exit ${code}`}`;
    if (/errno 1\)|Operation not permitted/.test(detail)) throw new DataPlaneError('PermissionDenied', 'apply', { detail: `${detail} (lbd-agent needs CAP_NET_ADMIN)` });
    throw new DataPlaneError('InvalidRuleset', 'apply', { detail });
  }

  /** nft's JSON listings of those of `objects` of the family's table that exist, object by object (all at once). */
  private async listObjects(family: NftFamily, objects: readonly TableObject[]): Promise<string[]> {
    const listed = await Promise.all(objects.map(async ([kind, name]) => {
      const res = await this.runner.run('nft', ['-j', 'list', kind, family, TABLE_NAME, name]);
      if (res.code === 0) return res.stdout;
      if (NOT_THERE.test(res.stderr)) return null;
      throw nftError('observe', res);
    }));
    return listed.filter((json): json is string => json !== null);
  }

  /**
   * The listings of WRITTEN_OBJECTS that exist; null when none does (no table of lbd's). `present`: whether
   * the table exists, where that was asked first (tablesPresent); then a missing one is not listed at all.
   */
  private async listWritten(family: NftFamily, present: boolean): Promise<string[] | null> {
    if (!present) return null;
    const listed = await this.listObjects(family, WRITTEN_OBJECTS);
    return listed.length === 0 ? null : listed;
  }

  /**
   * Whether each family's table exists, asked in one run of lbd-nfbatch (a netlink request a family); every
   * family counts as present where lbd-nfbatch was not built (its objects are then listed to find out). An
   * agent's first start finds none, and its object-by-object listing was 18 nft starts a family for nothing
   * (at 10 000 services, 0.7 s of the first apply's 1.2 s). Not `nft list tables`: nft fetches every set's
   * elements for that too. One run for both families: a process start costs the main thread 10-25 ms here.
   */
  private async tablesPresent(): Promise<Record<NftFamily, boolean>> {
    if (!this.elementBatches) return { ip: true, ip6: true };
    const args = ['table', ...FAMILIES.flatMap((f) => [f, TABLE_NAME])];
    const res = await this.runner.run(NFBATCH_HELPER, args);
    const lines = res.stdout.split('\n').filter((l) => l !== '');
    const present = { ip: false, ip6: false };
    for (const [i, f] of FAMILIES.entries()) {
      const line = lines[i];
      if (line === 'table') present[f] = true;
      else if (line === undefined || !/No such file or directory/.test(line)) {
        const said = `${line ?? ''}${res.stderr}`.trim();
        const kind = /Operation not permitted/.test(said) ? 'PermissionDenied' : 'Unknown';
        throw new DataPlaneError(kind, 'read', { detail: `${NFBATCH_HELPER} ${args.join(' ')}: ${f}: ${said || `exit ${res.code}`}${kind === 'PermissionDenied' ? ' (lbd-agent needs CAP_NET_ADMIN)' : ''}` });
      }
    }
    return present;
  }

  /**
   * The family's whole table, parsed; null without one (or with another schema). For an observer that never
   * applied (a test, a tool, an agent before its first apply): one listing, where WRITTEN_OBJECTS one by one
   * are 18 process starts a family, too many for an observer that polls. It lists the maps the packet path
   * fills too, so with a large dr flow memory it takes seconds; the agent itself reads its table so only once,
   * on a restart (readKernel).
   */
  private async listParsed(family: NftFamily): Promise<ParsedTable | null> {
    const res = await this.runner.run('nft', ['-j', 'list', 'table', family, TABLE_NAME]);
    if (res.code === 0) return parseTable(family, res.stdout);
    if (NOT_THERE.test(res.stderr)) return null;
    throw nftError('observe', res);
  }

  /** Every map and set of the family's table that observe() reads (not the slots: see there); null without a table. */
  private async listServing(family: NftFamily): Promise<ParsedTable | null> {
    // Without the schema set there is no table of ours (parseListings says so); a missing map is empty.
    return parseListings(family, await this.listObjects(family, OBSERVED_OBJECTS));
  }

  /** What the kernel has: each family's table, or null if absent or of another schema. */
  private async readKernel(): Promise<KernelState> {
    const models: Record<NftFamily, TableModel | null> = { ip: null, ip6: null };
    const otherSchema = new Set<NftFamily>();
    // Both families at once: each listing is a process start (under `ip netns exec`, two) and mostly waiting.
    const present = await this.tablesPresent();
    const listed = await Promise.all(FAMILIES.map((f) => this.listWritten(f, present[f])));
    for (const [i, f] of FAMILIES.entries()) {
      const jsons = listed[i]!;
      if (jsons === null) continue;
      let parsed: ParsedTable | null;
      try {
        parsed = parseListings(f, jsons);
      } catch (err) {
        // Something lbd never writes is in its table (a hand-made element, another tool): lbd does not guess
        // what it meant. The apply fails, the rules in the kernel stay, and the director is unfit until someone
        // removes it (or deletes the table, which lbd then builds afresh).
        throw new DataPlaneError('InvalidRuleset', 'read', {
          detail: `the nft table ${f} ${TABLE_NAME} holds what lbd did not write (${err instanceof Error ? err.message : String(err)}); `
            + `remove it, or delete the table (nft delete table ${f} ${TABLE_NAME}) to have lbd build it afresh`,
          cause: err,
        });
      }
      if (parsed === null) {
        this.onEvent('nft table has another schema; it will be rebuilt', { family: f, schema: jsons.map(tableSchema).find((v) => v !== null) ?? null });
        otherSchema.add(f);
        continue;
      }
      models[f] = parsed.model;
      this.onEvent('re-adopted existing nft table', { family: f, services: parsed.model.services.size });
    }
    return { models, otherSchema };
  }

  private async expireConnections(ids: readonly number[]): Promise<number> {
    let total = 0;
    for (const id of ids) {
      for (const fam of ['ipv4', 'ipv6']) {
        const res = await this.runner.run('conntrack', ['-D', '-f', fam, '--mark', String(id)]);
        total += parseDeletedCount(res.stderr);
      }
    }
    if (ids.length > 0) this.onEvent('expired removed real servers\' connections', { realServers: ids, connections: total });
    return total;
  }

  async realServerIds(): Promise<readonly RealServerId[]> {
    if (!this.applied || this.state === null) {
      return realServerIdsOf(await this.observe());
    }
    const out: RealServerId[] = [];
    for (const f of FAMILIES) {
      for (const frag of this.state.models[f]?.services.values() ?? []) {
        for (const [mark, rs] of frag.elements.backend_dnat) {
          const [address, port] = rs.split(' . ');
          out.push({ service: frag.key, address: address!, port: Number(port), realServerId: Number(mark) });
        }
      }
    }
    return out;
  }

  /**
   * What the kernel serves: its services and real servers, with their counters.
   *
   * Read map by map, never the whole table, and never the slots map: nft starts a listing over whenever
   * the ruleset's generation changes under it, and a leader renews its kernel lease (lease.ts) with a
   * transaction after every confirmed beat, every 25 ms with the `fast` timing. Listing the whole table
   * takes about 250 ms in the lab (a maglev service's slots are thousands of elements), so on such a
   * leader it never finished (seen: 20 s and counting), and neither did anything that waited for it.
   * Each of the small maps lists in a few ms. Whether a real server is quiescent (owns no slots) comes
   * from the slots this data plane wrote, when it is the one that applies (the agent); an observer that
   * never applied (a test, a tool) lists the whole table each time, as it has no other way to know them.
   */
  async observe(): Promise<ObservedState> {
    const written = this.applied ? this.state : null;
    const services: ObservedService[] = [];
    let synProxied = false;
    for (const f of FAMILIES) {
      const parsed = written === null ? await this.listParsed(f) : await this.listServing(f);
      if (!parsed) continue;
      for (const frag of parsed.model.services.values()) {
        const [vip, protocol, port] = [...frag.elements.dispatch.keys(), ...frag.elements.dr_dispatch.keys()][0]!.split(' . ') as [string, Protocol, string];
        const inSlots = new Set((written === null ? frag : written.models[f]?.services.get(frag.key))?.elements.slots.values());
        const realServers: ObservedRealServer[] = [...frag.elements.backend_dnat].map(([mark, rs]) => {
          const [address, rsPort] = rs.split(' . ');
          return {
            address: address!, port: Number(rsPort), realServerId: Number(mark), quiescent: !inSlots.has(mark),
            counters: parsed.realServerStats.get(Number(mark)) ?? { packets: 0, bytes: 0 },
          };
        }).sort((a, b) => a.realServerId - b.realServerId);
        const tuple = `${vip} . ${protocol} . ${port}`;
        synProxied ||= frag.elements.synproxy_services.size > 0;
        services.push({
          key: frag.key, vip, port: Number(port), protocol, realServers,
          counters: parsed.serviceStats.get(serviceMark(frag.serviceId)) ?? { packets: 0, bytes: 0 },
          limitDrops: parsed.limitStats.get(tuple) ?? { packets: 0, bytes: 0 },
        });
      }
    }
    const synProxy = synProxied ? await this.synProxyStats() : null;
    return synProxy === null ? { services } : { services, synProxy };
  }

  /** The SYN proxy's counters, summed over the CPUs (/proc/net/stat/synproxy: one hex row each); null if unreadable. */
  private async synProxyStats(): Promise<SynProxyStats | null> {
    const res = await this.runner.run('cat', ['/proc/net/stat/synproxy']);
    return res.code === 0 ? parseSynProxyStats(res.stdout) : null;
  }

  async limitDrops(): Promise<ReadonlyMap<string, number>> {
    const out = new Map<string, number>();
    for (const f of FAMILIES) {
      const res = await this.runner.run('nft', ['-j', 'list', 'set', f, TABLE_NAME, 'limit_stats']);
      if (res.code !== 0) {
        if (NOT_THERE.test(res.stderr)) continue;
        throw nftError('observe', res);
      }
      for (const [tuple, c] of parseLimitStats(res.stdout)) {
        const [vip, protocol, port] = tuple.split(' . ') as [string, Protocol, string];
        out.set(serviceKey({ vip, port: Number(port), protocol }), c.packets);
      }
    }
    return out;
  }

  async connections(filter: ConnectionFilter = {}): Promise<Connection[]> {
    const state = this.state ?? (await this.readKernel());
    this.state ??= state;
    const owner = new Map<number, string>();
    for (const model of [state.models.ip, state.models.ip6]) {
      for (const frag of model?.services.values() ?? []) for (const mark of frag.realServerMarks.values()) owner.set(mark, frag.key);
    }
    const out: Connection[] = [];
    for (const e of await listConntrack(this.runner, this.ctnlHelper, 'connections')) {
      const service = owner.get(e.mark);
      // Service ids are reused once free, while a removed service's connections live on until they
      // end: a connection is this service's only if it was also sent to this service's vip and port.
      if (service === undefined || service !== serviceKey({ vip: e.original.dst.address, port: e.original.dst.port, protocol: e.protocol })) continue;
      if (filter.service !== undefined && filter.service !== service) continue;
      const fullnat = e.reply.dst.address !== e.original.src.address;
      out.push({
        protocol: e.protocol, state: e.state, client: e.original.src, vip: e.original.dst,
        localAddress: fullnat ? e.reply.dst : null, realServer: e.reply.src, expiresInSec: e.expiresInSec,
        unreplied: e.unreplied, realServerId: e.mark, service,
      });
    }
    return out;
  }

  /** The ECMP tier's slot interfaces (slot-interfaces.ts); what changed is reported as an event. */
  async prepareSlots(parent: string, count: number): Promise<void> {
    const changes = await prepareSlotInterfaces(this.runner, parent, count);
    if (changes.created.length + changes.replaced.length + changes.removed.length + changes.sysctls.length > 0) {
      this.onEvent('slot interfaces prepared', { parent, count, ...changes });
    }
  }

  async kernelFacts(probeRealServers: readonly Endpoint[], arpProbes: readonly ArpProbe[] = []): Promise<KernelFacts> {
    const sysctl = async (...keys: string[]): Promise<string[]> => {
      const res = await this.runner.run('sysctl', ['-n', ...keys]);
      return res.stdout.trim().split('\n');
    };
    const [fwd4 = '0', fwd6 = '0', ctMax = '0', portRange = '32768 60999'] = await sysctl(
      'net.ipv4.ip_forward', 'net.ipv6.conf.all.forwarding', 'net.netfilter.nf_conntrack_max', 'net.ipv4.ip_local_port_range');
    const countRes = await this.runner.run('cat', ['/proc/sys/net/netfilter/nf_conntrack_count']);
    const rp = await this.runner.run('sysctl', ['-a', '-r', '\\.rp_filter$']);
    const perIf = new Map<string, number>();
    for (const line of rp.stdout.split('\n')) {
      const m = /^net\.ipv4\.conf\.(.+)\.rp_filter = (\d+)/.exec(line.trim());
      if (m) perIf.set(m[1]!, Number(m[2]));
    }
    const all = perIf.get('all') ?? 0;
    const rpFilter: Record<string, number> = {};
    for (const [iface, v] of perIf) if (iface !== 'all' && iface !== 'default') rpFilter[iface] = Math.max(all, v);
    const netstat = await this.runner.run('cat', ['/proc/net/netstat']);
    const reachable: Record<string, boolean> = {};
    const towards: Record<string, string> = {};
    await Promise.all(probeRealServers.map(async (rs) => {
      // A TCP connect from the director's own namespace: bash's /dev/tcp needs no extra tool.
      const res = await this.runner.run('timeout', ['1', 'bash', '-c', `exec 3<>/dev/tcp/${rs.address}/${rs.port}`]);
      reachable[hostPort(rs.address, rs.port)] = res.code === 0;
      const route = await this.runner.run('ip', ['route', 'get', rs.address]);
      const src = / src (\S+)/.exec(route.stdout)?.[1];
      if (src) towards[rs.address] = src;
    }));
    const [lo = 32768, hi = 60999] = portRange.split(/\s+/).map(Number);
    const links = await this.runner.run('ip', ['-j', 'addr', 'show']);
    const permanent: Array<{ address: string; ifname: string }> = [];
    if (links.code === 0) {
      type Link = { ifname?: string; addr_info?: Array<{ local?: string; valid_life_time?: number }> };
      for (const l of JSON.parse(links.stdout || '[]') as Link[]) {
        for (const a of l.addr_info ?? []) {
          // 4294967295: "forever", which the agent never gives a floating address.
          if (a.local && l.ifname && a.valid_life_time === 4294967295) permanent.push({ address: canonicalAddress(a.local), ifname: l.ifname });
        }
      }
    }
    // Each dr real server's route, looked up once for both probes.
    const routes = new Map<string, string>();
    await Promise.all([...new Set(arpProbes.flatMap((p) => p.realServers))].map(async (rs) => {
      routes.set(rs, (await this.runner.run('ip', ['route', 'get', rs])).stdout);
    }));
    const vipArpAnswers = (await Promise.all(arpProbes.map((p) => this.arpAnswers(p, routes)))).flat();
    const vipOnRealServer = (await Promise.all(arpProbes.map((p) => this.vipEchoes(p, routes)))).flat();
    return {
      ipv4Forwarding: fwd4.trim() === '1',
      ipv6Forwarding: fwd6.trim() === '1',
      rpFilter,
      rpFilterDrops: netstatValue(netstat.stdout, 'TcpExt', 'IPReversePathFilter'),
      conntrackCount: Number(countRes.stdout.trim()) || 0,
      conntrackMax: Number(ctMax) || 0,
      localPortRange: [lo, hi],
      realServerReachable: reachable,
      directorAddressTowards: towards,
      permanentAddresses: permanent,
      vipArpAnswers,
      vipOnRealServer,
    };
  }

  /**
   * The MACs of these addresses on `dev` (address → lower-case MAC), from the neighbour table; one the director
   * has not talked to yet (a UDP real server, a doctor run before any traffic) is asked: IPv4 with arping, IPv6
   * with one ping (the kernel's neighbour solicitation fills the table).
   */
  private async neighbours(dev: string, addresses: readonly string[]): Promise<Map<string, string>> {
    const read = async (): Promise<Map<string, string>> => {
      const neigh = await this.runner.run('ip', ['-j', 'neigh', 'show', 'dev', dev]);
      const m = new Map<string, string>();
      for (const n of JSON.parse(neigh.stdout || '[]') as Array<{ dst?: string; lladdr?: string; state?: string[] }>) {
        if (n.dst && n.lladdr && !(n.state ?? []).includes('FAILED')) m.set(canonicalAddress(n.dst), n.lladdr.toLowerCase());
      }
      return m;
    };
    const known = await read();
    const unknown = addresses.filter((a) => !known.has(a));
    // arping reads the answer itself (the kernel learns no entry from a reply to a packet socket's request).
    await Promise.all(unknown.filter((a) => familyOf(a) === 4).map(async (a) => {
      const res = await this.runner.run('arping', ['-c', '1', '-w', '1', '-I', dev, a]);
      const mac = /reply from \S+ \[([0-9A-Fa-f:]{17})\]/.exec(res.stdout)?.[1];
      if (mac !== undefined) known.set(a, mac.toLowerCase());
    }));
    const v6 = unknown.filter((a) => familyOf(a) === 6);
    if (v6.length > 0) {
      await Promise.all(v6.map((a) => this.runner.run('ping', ['-c', '1', '-W', '1', '-I', dev, a])));
      for (const [a, mac] of await read()) if (v6.includes(a)) known.set(a, mac);
    }
    return known;
  }

  /**
   * Whether each real server of a dr vip holds the vip: an ICMP echo to the vip, from the director's address
   * on the way to it, sent in a frame to the real server's MAC (as a dr packet reaches it). Its reply comes
   * from the vip, an address of the director's own, so the director's stack drops it; the probe reads it from
   * a packet socket (dr-probes.ts's vipEchoScript).
   */
  private async vipEchoes(p: ArpProbe, routes: ReadonlyMap<string, string>): Promise<KernelFacts['vipOnRealServer'][number][]> {
    const out: KernelFacts['vipOnRealServer'][number][] = [];
    const byDev = new Map<string, Array<{ rs: string; src: string }>>();
    for (const rs of p.realServers) {
      const route = routes.get(rs) ?? '';
      const dev = / dev (\S+)/.exec(route)?.[1];
      const src = / src (\S+)/.exec(route)?.[1];
      if (dev === undefined || src === undefined || / via /.test(route)) {
        out.push({ vip: p.vip, realServer: rs, answered: null, why: `no direct route to it (${route.trim() || 'ip route get failed'})` });
        continue;
      }
      byDev.set(dev, [...(byDev.get(dev) ?? []), { rs, src }]);
    }
    for (const [dev, targets] of byDev) {
      const macs = await this.neighbours(dev, targets.map((t) => t.rs));
      const asked = targets.filter((t) => macs.has(t.rs));
      for (const t of targets) if (!macs.has(t.rs)) out.push({ vip: p.vip, realServer: t.rs, answered: null, why: `no MAC for it on ${dev}` });
      if (asked.length === 0) continue;
      const res = await this.runner.run('perl', ['-e', vipEchoScript(familyOf(p.vip) === 6 ? 6 : 4), dev, asked[0]!.src, p.vip, ...asked.map((t) => `${t.rs}=${macs.get(t.rs)!}`)]);
      const answered = new Set(res.stdout.split('\n').filter((l) => l.startsWith('answered ')).map((l) => l.slice('answered '.length).trim()));
      for (const t of asked) {
        out.push(res.code === 0 ? { vip: p.vip, realServer: t.rs, answered: answered.has(t.rs) } : { vip: p.vip, realServer: t.rs, answered: null, why: `the probe failed: ${res.stderr.trim().slice(0, 200)}` });
      }
    }
    return out;
  }

  /**
   * Who answers ARP (IPv4) or a neighbour solicitation (IPv6) for a dr vip where its real servers are: asked
   * from the interface the director reaches them through, with the director's own address there as sender (its
   * own kernel does not answer itself on the wire).
   */
  private async arpAnswers(p: ArpProbe, routes: ReadonlyMap<string, string>): Promise<KernelFacts['vipArpAnswers'][number][]> {
    const devs = new Map<string, string>();
    for (const rs of p.realServers) {
      const route = routes.get(rs) ?? '';
      const dev = / dev (\S+)/.exec(route)?.[1];
      if (dev !== undefined) devs.set(dev, / src (\S+)/.exec(route)?.[1] ?? '');
    }
    const out: KernelFacts['vipArpAnswers'][number][] = [];
    for (const [dev, src] of devs) {
      let macs: Set<string>;
      if (familyOf(p.vip) === 4) {
        const res = await this.runner.run('arping', ['-c', '2', '-w', '2', '-I', dev, p.vip]);
        macs = new Set([...res.stdout.matchAll(/reply from \S+ \[([0-9A-Fa-f:]{17})\]/g)].map((m) => m[1]!.toLowerCase()));
      } else {
        if (src === '') continue;
        const res = await this.runner.run('perl', ['-e', NEIGHBOUR_SOLICIT_SCRIPT, dev, src, p.vip]);
        macs = new Set(res.stdout.split('\n').filter((l) => l.startsWith('answer ')).map((l) => l.slice('answer '.length).trim()));
      }
      if (macs.size === 0) continue;
      // The neighbour table has both families (and link-local addresses): a MAC goes by the vip's family,
      // by a real server's address where one has it.
      const byMac = new Map<string, string>();
      for (const [address, mac] of await this.neighbours(dev, p.realServers)) {
        if (familyOf(address) !== familyOf(p.vip) || (byMac.has(mac) && !p.realServers.includes(address))) continue;
        byMac.set(mac, address);
      }
      for (const mac of macs) out.push({ vip: p.vip, ifname: dev, mac, address: byMac.get(mac) ?? null });
    }
    return out;
  }
}

/** What nft says when a listed table, set or map does not exist. */
const NOT_THERE = /No such file or directory|does not exist/i;

function nftError(op: string, res: CommandResult): DataPlaneError {
  const detail = res.stderr.trim().split('\n').slice(0, 12).join('\n');
  if (res.code === 127) return new DataPlaneError('CommandMissing', op, { detail: 'nft not found: install the nftables package' });
  if (/Operation not permitted|Permission denied/i.test(res.stderr)) {
    return new DataPlaneError('PermissionDenied', op, { detail: `${detail} (lbd-agent needs CAP_NET_ADMIN)` });
  }
  return new DataPlaneError('InvalidRuleset', op, { detail });
}

function netstatValue(text: string, section: string, field: string): number {
  const lines = text.split('\n').filter((l) => l.startsWith(`${section}:`));
  if (lines.length < 2) return 0;
  const names = lines[0]!.split(/\s+/);
  const values = lines[1]!.split(/\s+/);
  const i = names.indexOf(field);
  return i < 0 ? 0 : Number(values[i]) || 0;
}

