import { status } from '@grpc/grpc-js';
import { ConfigError, EXIT, configSha256, hostPort, parseConfig, serviceKey, type Config } from '@lbd/config';
import { applyProblemsOf, isServiceError, type AdminApi, type ApplyResponse__Output, type GetConfigResponse__Output } from '@lbd/proto';
import { CONNECTION_FLAGS, type Invocation } from './args.js';
import { EditError, diffLines, editConfig, type EditOp } from './edit.js';
import { appliedBy, formatWritten, type OperatorEtcd } from './etcd.js';
import { columns, formatApply, formatProblems, json } from './format.js';

/**
 * `lbadm server ...` and `lbadm service ...`: read the running config (GetConfig), edit it (edit.ts),
 * validate the result here for an early, complete answer, then apply it swapped on the revision read
 * (Apply with check_revision). Someone else's apply in between makes the swap fail; the edit is then
 * made again on the new config, at most MAX_ATTEMPTS times, so a change is never lost and never undone.
 */

const MAX_ATTEMPTS = 3;
const TIMEOUT_MS = 30_000;

export interface ManageIo {
  stdout(text: string): void;
  stderr(text: string): void;
}

/**
 * The words of the command line that say what it changes (not where, how it prints, or whether it only
 * asks): the Apply's source, which the config history and the event log keep.
 */
export function sourceOf(argv: readonly string[]): string {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (CONNECTION_FLAGS.includes(a)) { i++; continue; }
    if (CONNECTION_FLAGS.some((f) => a.startsWith(`${f}=`)) || a === '--json' || a === '--dry-run') continue;
    out.push(a);
  }
  // The Apply's source is at most 256 characters.
  return `lbadm ${out.join(' ')}`.slice(0, 256);
}

function editOp(inv: Invocation): EditOp {
  const [sub, first = '', second = ''] = inv.args;
  const kind = `${inv.command} ${sub}`;
  switch (kind) {
    case 'server add':
    case 'server edit':
      return { kind, service: first, server: second, fields: inv.serverFields };
    case 'server drain':
    case 'server enable':
    case 'server remove':
      return { kind, service: first, server: second };
    case 'service add':
    case 'service edit':
      return { kind, name: first, fields: inv.serviceFields };
    case 'service remove':
      return { kind, name: first };
    default:
      throw new Error(`not a management command: ${kind}`);
  }
}

/** The running config, validated, or an exit code after saying why it cannot be edited. */
function typed(cur: Running, io: ManageIo): Pick<Config, 'services'> | number {
  // A cluster without a config yet: the first edit writes one.
  if (cur.configText.trim() === '') return { services: [] };
  try {
    return parseConfig(cur.configText, `the running config (revision ${cur.revision})`, { cluster: cur.clustered });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    io.stderr(`lbadm: ${err.message}\nit cannot be edited by lbadm; fix it with lbadm apply -f FILE\n`);
    return EXIT.config;
  }
}

/**
 * Where the edit goes: through the agent (`etcd` null: GetConfig, then Apply), or, with --etcd, straight to
 * etcd with the operator's certificate (read and written there; the agent, when lbadm reaches one, says
 * when it applied the write).
 */
export interface ManageTarget {
  readonly api: AdminApi | null;
  readonly etcd: OperatorEtcd | null;
}

/** The running config as an edit starts from it. */
type Running = Pick<GetConfigResponse__Output, 'configText' | 'revision' | 'clustered'>;

async function readRunning(t: ManageTarget): Promise<Running> {
  if (t.etcd === null) return t.api!.getConfig({ timeoutMs: TIMEOUT_MS });
  const cur = await t.etcd.current();
  return { configText: cur?.text ?? '', revision: cur?.revision ?? 0, clustered: true };
}

export async function manage(target: ManageTarget, inv: Invocation, argv: readonly string[], author: string, io: ManageIo): Promise<number> {
  const op = editOp(inv);
  const source = sourceOf(argv);
  for (let attempt = 1; ; attempt++) {
    const cur = await readRunning(target);
    const config = typed(cur, io);
    if (typeof config === 'number') return config;
    let edit;
    try {
      edit = editConfig(cur.configText, config, op);
    } catch (err) {
      if (!(err instanceof EditError)) throw err;
      if (inv.json) io.stdout(json({ configChanged: false, applied: false, problems: [err.problem] }));
      else io.stderr(`lbadm: ${err.message}\nnothing was applied\n`);
      return EXIT.config;
    }
    if (!edit.changed) {
      io.stdout(inv.json ? json({ configChanged: false, applied: false, summary: edit.summary, revision: cur.revision }) : `${edit.summary}\n`);
      return EXIT.ok;
    }
    try {
      parseConfig(edit.text, source, { cluster: cur.clustered });
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      if (inv.json) io.stdout(json({ configChanged: false, applied: false, problems: err.problems }));
      else io.stderr(`lbadm: ${ConfigError.render(`the config after "${source}"`, err.problems)}\nnothing was applied\n`);
      return EXIT.config;
    }
    const diff = diffLines(cur.configText, edit.text, `running config (revision ${cur.revision})`, `after: ${source}`);
    const conflict = (detail: string): number | null => {
      if (attempt < MAX_ATTEMPTS) {
        io.stderr(`lbadm: the config changed after revision ${cur.revision} was read (someone else applied); editing the new one (attempt ${attempt + 1} of ${MAX_ATTEMPTS})\n`);
        return null;
      }
      io.stderr(`lbadm: the config changed between reading and applying ${MAX_ATTEMPTS} times in a row (last: ${detail}); nothing was applied by this command: look at lbadm config history (or lbadm status), then try again\n`);
      return EXIT.failure;
    };
    if (target.etcd !== null) {
      const written = await target.etcd.write(edit.text, source, author, cur.revision);
      if (!written.ok) {
        const exit = conflict(`the config is at revision ${written.current}`);
        if (exit === null) continue;
        return exit;
      }
      const applied = target.api === null ? undefined : await appliedBy(target.api, written.revision, configSha256(edit.text));
      if (inv.json) {
        io.stdout(json({ configChanged: true, written: true, summary: edit.summary, fromRevision: cur.revision, diff, clusterRevision: written.revision, ...(applied === undefined ? {} : { appliedBy: applied }) }));
      } else {
        io.stdout(`${edit.summary}\n${formatWritten(written.revision, '', target.etcd.commonName, applied, target.api?.where ?? '')}`);
      }
      return EXIT.ok;
    }
    let res: ApplyResponse__Output;
    try {
      res = await target.api!.apply({
        configText: edit.text, source, dryRun: inv.dryRun, author, checkRevision: true, expectRevision: cur.revision,
      }, { timeoutMs: TIMEOUT_MS });
    } catch (err) {
      if (isServiceError(err) && err.code === status.ABORTED) {
        const exit = conflict(err.details);
        if (exit === null) continue;
        return exit;
      }
      const problems = applyProblemsOf(err);
      if (problems === null) throw err;
      if (inv.json) io.stdout(json({ configChanged: false, applied: false, problems }));
      else io.stderr(`lbadm: ${formatProblems(source, problems)}nothing was applied\n`);
      return EXIT.config;
    }
    if (inv.json) {
      io.stdout(json({ configChanged: true, applied: !res.dryRun, summary: edit.summary, fromRevision: cur.revision, diff, ...res }));
    } else {
      io.stdout(`${inv.dryRun ? `dry run: would have ${edit.summary.replace(/^(\w)/, (c) => c.toLowerCase())}` : edit.summary}\n${inv.dryRun ? diff : ''}${formatApply(res)}`);
    }
    return EXIT.ok;
  }
}

/** `lbadm service list [--names]`: the running config's services (names: one a line, for completion). */
export async function listServices(api: AdminApi, inv: Invocation, io: ManageIo): Promise<number> {
  const cur = await api.getConfig({ timeoutMs: TIMEOUT_MS });
  const config = typed(cur, io);
  if (typeof config === 'number') return config;
  const rows = config.services.map((s) => ({
    name: s.name, key: serviceKey(s), mode: s.mode, scheduler: s.scheduler, vipGroup: s.vipGroup,
    realServers: s.realServers.map((rs) => ({ server: hostPort(rs.address, rs.port), weight: rs.weight, drained: rs.drained === true })),
  }));
  if (inv.names) {
    io.stdout(rows.map((r) => `${r.name}\n`).join(''));
  } else if (inv.json) {
    io.stdout(json({ revision: cur.revision, services: rows }));
  } else {
    const table = [['NAME', 'SERVICE', 'MODE', 'SCHEDULER', 'VIP GROUP', 'REAL SERVERS']];
    for (const r of rows) {
      const drained = r.realServers.filter((rs) => rs.drained).length;
      table.push([r.name, r.key, r.mode, r.scheduler, r.vipGroup, `${r.realServers.length}${drained > 0 ? ` (${drained} drained)` : ''}`]);
    }
    io.stdout(`${columns(table).join('\n')}\n(config revision ${cur.revision})\n`);
  }
  return EXIT.ok;
}
