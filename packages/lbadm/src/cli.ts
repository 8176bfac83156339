import { constants } from 'node:fs';
import { hostname, userInfo } from 'node:os';
import { access, readFile, stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { ConfigError, EXIT, LBD_VERSION, configSha256, loadConfig, parseConfig } from '@lbd/config';
import { etcdRolePlan, etcdRoleScript } from '@lbd/coordinator';
import { AdminApi, MAX_CONFIG_TEXT_BYTES, applyProblemsOf, isServiceError, type AdminEndpoint, type Event__Output, type HealthEvent__Output } from '@lbd/proto';
import { HELP, USAGE, UsageError, parseArgs, type Invocation } from './args.js';
import { describeFailure, type AdminTarget, type Failure } from './errors.js';
import {
  computeRates, formatApply, formatClusterStatus, formatConfigHistory, formatConns, formatStatelessNote, formatDoctor, formatEvent, formatEvents, formatHealth, formatHealthEvent,
  formatProblems, formatRates, formatStats, formatStatus, json,
} from './format.js';
import { completionScript } from './completion.js';
import { drill } from './drill.js';
import { OperatorEtcd, appliedBy, formatWritten } from './etcd.js';
import { listServices, manage } from './manage.js';
import { readClientTls } from './tls-files.js';

/**
 * lbadm's commands. `main` takes argv and an Io and returns the exit code, so tests run the real CLI
 * in-process with captured output; only bin/lbadm.ts touches the process.
 */

export interface Io {
  stdout(text: string): void;
  stderr(text: string): void;
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Waits between the two samples of `stats --rate`. */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Aborts on an interrupt (SIGINT): ends `health --watch` and `events --follow` cleanly. */
  readonly interrupt?: AbortSignal;
  /** For `health --watch`: the time from which kept transitions are shown (default: now, so only live ones); `events --since 10m`: now. */
  readonly now?: () => number;
}

/** How long lbadm waits for the agent; doctor probes every real server, so it gets longer. */
const TIMEOUT_MS = 30_000;
const DOCTOR_TIMEOUT_MS = 90_000;

export async function main(argv: readonly string[], io: Io): Promise<number> {
  let inv: Invocation;
  try {
    inv = parseArgs(argv, io.env ?? {});
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.stderr(`lbadm: ${err.message}\n${USAGE}\nRun lbadm --help for the commands and their flags.\n`);
    return EXIT.usage;
  }
  if (inv.command === 'help') {
    io.stdout(`${HELP}\n`);
    return EXIT.ok;
  }
  if (inv.command === 'version') {
    io.stdout(`lbadm ${LBD_VERSION}\n`);
    return EXIT.ok;
  }
  if (inv.command === 'validate') return validate(inv, io);
  if (inv.command === 'completion') {
    io.stdout(completionScript(inv.args[0] === 'zsh' ? 'zsh' : 'bash'));
    return EXIT.ok;
  }

  let configText: string | undefined;
  if (inv.command === 'apply') {
    const read = await readConfigFile(inv.file!, io);
    if (typeof read === 'number') return read;
    configText = read;
  }
  if (inv.command === 'etcd') {
    const r = inv.roles!;
    io.stdout(inv.json ? json(etcdRolePlan(r.prefix, r.directors, r.operators)) : etcdRoleScript(etcdRolePlan(r.prefix, r.directors, r.operators)));
    return EXIT.ok;
  }
  const endpoint = await resolveEndpoint(inv);
  // Writing to etcd directly, lbadm needs no agent; one it can reach says when it applied the write.
  const direct = inv.etcd !== undefined && !inv.dryRun;
  if ('exit' in endpoint && !direct) {
    io.stderr(`${endpoint.message}\n`);
    return endpoint.exit;
  }
  if (direct) return writeDirect(inv, 'exit' in endpoint ? null : new AdminApi(endpoint), configText, argv, io);
  const api = new AdminApi(endpoint as AdminEndpoint);
  const where = whereOf(inv, api);
  try {
    switch (inv.command) {
      case 'status': {
        const s = await api.getStatus({ timeoutMs: TIMEOUT_MS });
        io.stdout(inv.json ? json(s) : formatStatus(s));
        return EXIT.ok;
      }
      case 'stats': {
        const first = await api.getStats({ timeoutMs: TIMEOUT_MS });
        if (!inv.rate) {
          io.stdout(inv.json ? json(first) : formatStats(first));
          return EXIT.ok;
        }
        await (io.sleep ?? ((ms: number) => delay(ms)))(inv.intervalMs);
        const second = await api.getStats({ timeoutMs: TIMEOUT_MS });
        const rates = computeRates(first, second);
        io.stdout(inv.json ? json(rates) : formatRates(rates));
        return EXIT.ok;
      }
      case 'conns': {
        const conns = await api.listConnections(inv.service ?? '', { timeoutMs: TIMEOUT_MS });
        if (inv.json) {
          io.stdout(json({ connections: conns }));
          return EXIT.ok;
        }
        // A dr service has none to list: say so rather than print an empty table that looks like no traffic.
        const { services } = await api.getStatus({ timeoutMs: TIMEOUT_MS });
        io.stdout(formatConns(conns) + formatStatelessNote(services, inv.service));
        return EXIT.ok;
      }
      case 'health': {
        // Also checks the service filter, so that --watch refuses an unknown service at once.
        const h = await api.getHealth(inv.service ?? '', { timeoutMs: TIMEOUT_MS });
        if (inv.watch) return await watchHealth(api, inv, h.realServers[0]?.service, io);
        io.stdout(inv.json ? json(h) : formatHealth(h));
        return EXIT.ok;
      }
      case 'apply':
        return await apply(api, inv, configText!, io);
      case 'cluster': {
        const c = await api.getClusterStatus({ timeoutMs: TIMEOUT_MS });
        io.stdout(inv.json ? json(c) : formatClusterStatus(c, (io.now ?? Date.now)()));
        return EXIT.ok;
      }
      case 'failover': {
        const r = await api.failover(inv.vipGroup!, inv.to ?? '', { timeoutMs: TIMEOUT_MS, author: author() });
        io.stdout(inv.json ? json(r) : `vip group ${inv.vipGroup} moved from ${r.from} to ${r.to} in ${Math.round(r.tookMs)} ms\n`);
        return EXIT.ok;
      }
      case 'slot': {
        const r = await api.failover(inv.vipGroup!, inv.to ?? '', { timeoutMs: TIMEOUT_MS, author: author() });
        io.stdout(inv.json ? json(r) : `slot ${inv.args[1]} moved from ${r.from} to ${r.to} in ${Math.round(r.tookMs)} ms\n`);
        return EXIT.ok;
      }
      case 'drill':
        return await drill(api, inv, author(), io);
      case 'config': {
        if (inv.args[0] === 'show') {
          const c = await api.getConfig({ timeoutMs: TIMEOUT_MS });
          if (inv.json) io.stdout(json(c));
          else if (c.revision === 0 && c.configText === '') io.stderr('lbadm: the cluster has no config yet; apply one with lbadm apply -f FILE\n');
          else io.stdout(c.configText.endsWith('\n') || c.configText === '' ? c.configText : `${c.configText}\n`);
          return EXIT.ok;
        }
        if (inv.args[0] === 'history') {
          const h = await api.configHistory({ timeoutMs: TIMEOUT_MS });
          io.stdout(inv.json ? json(h) : formatConfigHistory(h, (io.now ?? Date.now)()));
          return EXIT.ok;
        }
        const r = await api.rollback(Number(inv.args[1]), author(), { timeoutMs: TIMEOUT_MS });
        io.stdout(inv.json ? json(r) : `rolled back to revision ${inv.args[1]}: the cluster now runs it as revision ${r.revision}\n`);
        return EXIT.ok;
      }
      case 'events':
        return await events(api, inv, io);
      case 'server':
        return await manage({ api, etcd: null }, inv, argv, author(), io);
      case 'service':
        if (inv.args[0] === 'list') return await listServices(api, inv, io);
        return await manage({ api, etcd: null }, inv, argv, author(), io);
      case 'doctor': {
        const { findings } = await api.doctor({ timeoutMs: DOCTOR_TIMEOUT_MS });
        const errors = findings.filter((f) => f.severity === 'error').length;
        const warnings = findings.filter((f) => f.severity === 'warning').length;
        io.stdout(inv.json ? json({ errors, warnings, findings }) : formatDoctor(findings));
        // Documented: doctor fails when anything needs attention, so scripts and monitors can use it.
        return errors + warnings > 0 ? EXIT.failure : EXIT.ok;
      }
    }
  } catch (err) {
    const failure = describeFailure(err, where);
    io.stderr(`${failure.message}\n`);
    return failure.exit;
  } finally {
    api.close();
  }
}

/**
 * `health --watch`: one line (or JSON object) per transition until interrupted, which is a clean exit (0).
 * `serviceKey` is the filter's service when --service named one that has checked servers.
 */
async function watchHealth(api: AdminApi, inv: Invocation, serviceKey: string | undefined, io: Io): Promise<number> {
  const filter = inv.service;
  const wanted = (e: HealthEvent__Output): boolean => filter === undefined || e.service === filter || e.serviceName === filter || e.service === serviceKey;
  if (!inv.json) io.stderr(`lbadm: watching health transitions${filter === undefined ? '' : ` of ${filter}`}; Ctrl-C ends\n`);
  const since = (io.now ?? Date.now)();
  return follow(api, api.watchHealth(since, io.interrupt ? { signal: io.interrupt } : {}), 'watch', inv, io, formatHealthEvent, wanted);
}

/**
 * Prints each message of a stream the agent keeps open (`health --watch`, `events --follow`), a line or
 * a JSON object (those `keep` takes), until interrupted, a clean exit (0), or until the agent ends it.
 */
async function follow<T>(
  api: AdminApi, stream: AsyncIterable<T>, what: string, inv: Invocation, io: Io, format: (e: T) => string, keep: (e: T) => boolean = () => true,
): Promise<number> {
  for await (const e of stream) {
    if (keep(e)) io.stdout(inv.json ? `${JSON.stringify(e)}\n` : format(e));
  }
  if (io.interrupt?.aborted) return EXIT.ok;
  io.stderr(`lbadm: lbd-agent at ${api.where} ended the ${what} (it is shutting down?)\n`);
  return EXIT.unavailable;
}

/**
 * `events`: the kept events the flags select, oldest first (a table, or with --json one document); with
 * --follow the history as lines, then each new event until interrupted (a clean exit, 0).
 */
async function events(api: AdminApi, inv: Invocation, io: Io): Promise<number> {
  const now = (io.now ?? Date.now)();
  const since = inv.since === undefined ? 0 : 'agoMs' in inv.since ? Math.max(0, now - inv.since.agoMs) : inv.since.unixMs;
  const req = {
    sinceUnixMs: since, follow: inv.follow, scope: inv.local ? 'local' : 'cluster', limit: inv.limit ?? 0, kind: inv.kind ?? '', director: inv.director ?? '',
  };
  if (!inv.follow) {
    const list: Event__Output[] = [];
    for await (const e of api.listEvents(req, { timeoutMs: TIMEOUT_MS })) list.push(e);
    if (inv.json) io.stdout(json({ events: list }));
    else if (list.length === 0) io.stderr(`lbadm: no events${inv.since === undefined ? '' : ` since ${new Date(since).toISOString()}`}${inv.kind || inv.director ? ' match the filters' : ''}\n`);
    else io.stdout(formatEvents(list));
    return EXIT.ok;
  }
  if (!inv.json) io.stderr('lbadm: following events; Ctrl-C ends\n');
  return follow(api, api.listEvents(req, io.interrupt ? { signal: io.interrupt } : {}), 'stream', inv, io, formatEvent);
}

async function validate(inv: Invocation, io: Io): Promise<number> {
  const file = inv.file!;
  try {
    const config = await loadConfig(file);
    const n = config.services.length;
    io.stdout(inv.json ? json({ file, valid: true, services: n, problems: [] })
      : `${file} is valid: ${n} service${n === 1 ? '' : 's'}\n`);
    return EXIT.ok;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    if (inv.json) io.stdout(json({ file, valid: false, kind: err.kind, problems: err.problems }));
    else io.stderr(`lbadm: ${err.message}\n`);
    return EXIT.config;
  }
}

/** The config text, or an exit code after saying why the file cannot be sent. */
async function readConfigFile(file: string, io: Io): Promise<string | number> {
  try {
    const text = await readFile(file, 'utf8');
    const bytes = Buffer.byteLength(text, 'utf8');
    if (bytes > MAX_CONFIG_TEXT_BYTES) {
      io.stderr(`lbadm: ${file} is ${bytes} bytes; the agent accepts at most ${MAX_CONFIG_TEXT_BYTES} (4 MiB)\n`);
      return EXIT.config;
    }
    return text;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    io.stderr(`lbadm: cannot read ${file} (${code}); check the path and the file's permissions\n`);
    return EXIT.config;
  }
}

async function apply(api: AdminApi, inv: Invocation, text: string, io: Io): Promise<number> {
  // The absolute path: the agent records it as the running config's source, where a relative one means nothing.
  const source = resolve(inv.file!);
  try {
    const res = await api.apply({
      configText: text, source, dryRun: inv.dryRun, author: author(),
      checkRevision: inv.expectRevision !== undefined, expectRevision: inv.expectRevision ?? 0,
    }, { timeoutMs: TIMEOUT_MS });
    io.stdout(inv.json ? json({ valid: true, applied: !res.dryRun, ...res }) : formatApply(res));
    return EXIT.ok;
  } catch (err) {
    const problems = applyProblemsOf(err);
    if (problems === null) throw err;
    if (inv.json) io.stdout(json({ valid: false, applied: false, dryRun: inv.dryRun, problems }));
    else io.stderr(`lbadm: ${formatProblems(inv.file!, problems)}nothing was applied\n`);
    return EXIT.config;
  }
}

/**
 * apply, config rollback, server and service with --etcd: the config written to etcd with the operator's
 * certificate (etcd.ts); `api`, the agent lbadm can reach if any, says when it applied the write.
 */
async function writeDirect(inv: Invocation, api: AdminApi | null, configText: string | undefined, argv: readonly string[], io: Io): Promise<number> {
  const etcd = await OperatorEtcd.open(inv.etcd!);
  if ('exit' in etcd) {
    io.stderr(`${etcd.message}\n`);
    api?.close();
    return etcd.exit;
  }
  const where = api === null ? null : whereOf(inv, api);
  try {
    if (inv.command === 'server' || inv.command === 'service') return await manage({ api, etcd }, inv, argv, author(), io);
    let text: string;
    let source: string;
    if (inv.command === 'apply') {
      text = configText!;
      source = resolve(inv.file!);
    } else {
      const revision = Number(inv.args[1]);
      const old = await etcd.at(revision);
      if (old === null) {
        io.stderr(`lbadm: revision ${revision} is not in the cluster config history under ${inv.etcd!.prefix}; see lbadm config history\n`);
        return EXIT.failure;
      }
      text = old.text;
      source = `rollback to revision ${revision}`;
    }
    const problems = configProblems(text, source);
    if (problems !== null) {
      if (inv.json) io.stdout(json({ valid: false, applied: false, dryRun: false, problems: problems.problems }));
      else io.stderr(`lbadm: ${problems.message}\nnothing was written\n`);
      return EXIT.config;
    }
    const written = await etcd.write(text, source, author(), inv.command === 'apply' ? inv.expectRevision : undefined);
    if (!written.ok) {
      io.stderr(`lbadm: the cluster config is at revision ${written.current}, not the one this ${inv.command === 'apply' ? 'apply' : 'rollback'} expected: someone applied in between; look at lbadm config history, then try again. Nothing was written\n`);
      return EXIT.failure;
    }
    const applied = api === null ? undefined : await appliedBy(api, written.revision, configSha256(text));
    if (inv.json) {
      io.stdout(json({ valid: true, written: true, clusterRevision: written.revision, etcdUser: etcd.commonName, ...(applied === undefined ? {} : { appliedBy: applied }) }));
    } else {
      io.stdout(formatWritten(written.revision, inv.command === 'apply' ? '' : ` (${source})`, etcd.commonName, applied, api?.where ?? ''));
    }
    return EXIT.ok;
  } catch (err) {
    const failure = isServiceError(err) && where !== null ? describeFailure(err, where) : etcd.describe(err, 'write the cluster config');
    io.stderr(`${failure.message}\n`);
    return failure.exit;
  } finally {
    etcd.close();
    api?.close();
  }
}

/** A cluster config's problems (what the agents would refuse), or null when it is valid. */
function configProblems(text: string, source: string): ConfigError | null {
  try {
    parseConfig(text, source, { cluster: true });
    return null;
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
}

/** Who applies, for the cluster config history: user@host. */
function author(): string {
  let user = 'unknown';
  try { user = userInfo().username; } catch { /* no passwd entry */ }
  return `${user}@${hostname()}`;
}

/** What describeFailure says lbadm talked to. */
function whereOf(inv: Invocation, api: AdminApi): AdminTarget {
  return inv.server === undefined ? api.where : { server: api.where, cert: inv.server.cert };
}

/**
 * The unix socket (checked before dialing), or the TCP server with its TLS files read: a file that
 * cannot be read is named with its flag before anything is sent.
 */
async function resolveEndpoint(inv: Invocation): Promise<AdminEndpoint | Failure> {
  const server = inv.server;
  if (server === undefined) return (await checkSocket(inv.socket)) ?? { kind: 'unix', path: inv.socket };
  const tls = await readClientTls(server, { ca: '--ca', cert: '--cert', key: '--key' }, {
    ca: 'the CA that signed the agent\'s certificate', cert: 'this client\'s certificate', key: 'this client\'s private key',
  });
  if ('exit' in tls) return tls;
  return {
    kind: 'tls', address: server.address, port: server.port, ca: tls.ca, cert: tls.cert, key: tls.key,
    ...(server.serverName === undefined ? {} : { serverName: server.serverName }),
  };
}

/**
 * Checks the socket before dialing: grpc-js retries a missing socket until the deadline and then
 * reports it vaguely, while the file system says at once whether it is absent or root-only.
 */
async function checkSocket(socket: string): Promise<{ exit: number; message: string } | null> {
  try {
    await access(socket, constants.R_OK | constants.W_OK);
    if (!(await stat(socket)).isSocket()) return describeFailure(Object.assign(new Error('not a socket'), { code: 'ENOTSOCK' }), socket);
    return null;
  } catch (err) {
    return describeFailure(err, socket);
  }
}
