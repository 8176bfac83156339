import assert from 'node:assert/strict';
import { CLUSTER, LBADM_BIN, adminListeners, runCommand, waitFor, type CertFiles, type DirectorName, type ExecResult, type HaAdmin, type HaLab } from '@lbd/testkit';

/**
 * What an operator on the HA lab's management network does, for the tests of the agents' admin listeners:
 * curl and lbadm --server run in the ops host's namespace (CLUSTER.ops), the one that reaches each
 * director's agent.admin listeners on its management address, with the lab CA and an operator's
 * certificate (HaLab.clientCert).
 */

/** Bound on one curl or lbadm run. */
const CALL_MS = 10_000;

export interface Sample { readonly name: string; readonly labels: Readonly<Record<string, string>>; readonly value: number }

/** Samples of the Prometheus text format (the conventions are checked by the unit tests; here only values matter). */
function samples(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-z_:][a-z0-9_:]*)(?:\{(.*)\})? (\S+)$/i.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** The one sample of `name` with `labels` (a subset of its labels); fails when there is none or several. */
export function value(all: readonly Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = all.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  assert.equal(found.length, 1, `${name}${JSON.stringify(labels)}: ${found.length} samples`);
  return found[0]!.value;
}

/** Runs `cmd` in the ops host's namespace; never rejects on a non-zero exit. */
function inOps(lab: HaLab, cmd: string, args: readonly string[]): Promise<ExecResult> {
  return lab.cluster.topology.exec(CLUSTER.ops.host, cmd, args, { timeoutMs: CALL_MS, allowFailure: true });
}

/**
 * curl https://dirK:PORT/path from the ops host, checking the agent's certificate (DNS:dirK) against
 * `ca` (default the lab CA), with `cert` as the client certificate (none: undefined).
 */
export function opsCurl(lab: HaLab, d: DirectorName, path: string, cert: CertFiles | undefined, opts: { ca?: string; port?: number } = {}): Promise<ExecResult> {
  const l = adminListeners(d);
  const port = opts.port ?? l.httpPort;
  return inOps(lab, 'curl', [
    '-sS', '--fail-with-body', '--max-time', '5', '--cacert', opts.ca ?? lab.caPath, '--resolve', `${d}:${port}:${l.address}`,
    ...(cert ? ['--cert', cert.certPath, '--key', cert.keyPath] : []), `https://${d}:${port}${path}`,
  ]);
}

/** GET /metrics of director `d` through its agent's HTTPS listener, as the lab's Prometheus (certificate `prometheus`). */
export async function scrape(lab: HaLab, d: DirectorName): Promise<Sample[]> {
  const r = await opsCurl(lab, d, '/metrics', lab.clientCert('prometheus'));
  if (r.code !== 0) throw new Error(`curl https://${d}/metrics from the ops host: exit ${r.code}: ${(r.stderr || r.stdout).trim().slice(0, 500)}`);
  return samples(r.stdout);
}

/** Scrapes `d` until `pred` holds (bounded); fails naming `what`. */
export function scrapeUntil(lab: HaLab, d: DirectorName, what: string, pred: (s: Sample[]) => boolean, ms = 15_000): Promise<Sample[]> {
  return waitFor(`${d}'s /metrics: ${what}`, ms, async () => {
    const s = await scrape(lab, d);
    return pred(s) ? s : undefined;
  }, 200);
}

/**
 * lbadm --server dirK:7412 from the ops host, with `cert` (and the lab CA unless `ca` says otherwise);
 * without `cert`, no --cert/--key at all.
 */
export function lbadmServer(lab: HaLab, d: DirectorName, cert: CertFiles | undefined, args: readonly string[], opts: { ca?: string } = {}): Promise<ExecResult> {
  const l = adminListeners(d);
  return inOps(lab, process.execPath, [
    LBADM_BIN, '--server', `${l.address}:${l.grpcPort}`, '--server-name', d, '--ca', opts.ca ?? lab.caPath,
    ...(cert ? ['--cert', cert.certPath, '--key', cert.keyPath] : []), ...args,
  ]);
}

/** lbadm on director `d`'s root-only admin socket (as root on the director). */
export function lbadmSocket<A extends HaAdmin>(lab: HaLab<A>, d: DirectorName, args: readonly string[]): Promise<ExecResult> {
  return runCommand(process.execPath, [LBADM_BIN, '--socket', lab.socket(d), ...args], { timeoutMs: CALL_MS, allowFailure: true });
}
