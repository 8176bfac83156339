import { setTimeout as delay } from 'node:timers/promises';
import { EXIT } from '@lbd/config';
import { EtcdConfigClient, type ConfigWrite } from '@lbd/coordinator';
import type { AdminApi, ApplyRecord__Output } from '@lbd/proto';
import type { EtcdTarget } from './args.js';
import type { Failure } from './errors.js';
import { readClientTls } from './tls-files.js';

/**
 * lbadm writing the cluster config to etcd itself, with an operator's certificate (--etcd ...). Where etcd's
 * roles keep the config to operators (lbadm etcd roles), an agent cannot write it for lbadm: a director's
 * certificate is root on one box, and the config's exec health checks run as root on all of them. The
 * write is the agents' own (ConfigStore: compare-and-swap on the revision, a history entry), validated here
 * first; the directors apply it from their watch, as any config.
 */

/** How long a call to etcd may take; a write is one transaction. */
const ETCD_CALL_MS = 10_000;
/** How long lbadm waits for the agent it can reach to run the written revision. */
const APPLIED_WAIT_MS = 10_000;
const APPLIED_POLL_MS = 200;

export class OperatorEtcd {
  private constructor(private readonly client: EtcdConfigClient, readonly target: EtcdTarget, readonly commonName: string) {}

  /**
   * Reads the certificate files, connects, and checks that directors are registered under the prefix: a
   * config written under a mistyped prefix would sit where no director looks.
   */
  static async open(t: EtcdTarget): Promise<OperatorEtcd | Failure> {
    const tls = await readClientTls(t, { ca: '--etcd-ca', cert: '--etcd-cert', key: '--etcd-key' }, {
      ca: 'the CA that signed etcd\'s certificate', cert: 'the operator\'s etcd client certificate', key: 'the operator\'s etcd private key',
    });
    if ('exit' in tls) return tls;
    const commonName = /(?:^|\n)CN=([^\n]*)/.exec(tls.x509.subject)?.[1] ?? '';
    const client = new EtcdConfigClient({ endpoints: t.endpoints, etcdTls: tls, prefix: t.prefix, callTimeoutMs: ETCD_CALL_MS });
    const op = new OperatorEtcd(client, t, commonName);
    let directors: string[];
    try {
      directors = await client.directors();
    } catch (err) {
      client.close();
      // An operator's role reads its cluster's prefix only: a denied read there is most likely a mistyped prefix.
      if (/permission denied/i.test(err instanceof Error ? err.message : String(err))) {
        return {
          exit: EXIT.noPermission,
          message: `lbadm: etcd refused ${op.commonName} a read of ${t.prefix}/: is --etcd-prefix ${t.prefix} the cluster's prefix (the directors' agent.cluster.prefix)? An operator's role covers its cluster's prefix only (lbadm etcd roles). Nothing was written`,
        };
      }
      return op.describe(err, `list the directors under ${t.prefix}/directors/`);
    }
    if (directors.length === 0) {
      client.close();
      return {
        exit: EXIT.failure,
        message: `lbadm: no director is registered under ${t.prefix}/directors/ in etcd (${t.endpoints.join(', ')}): is --etcd-prefix ${t.prefix} the cluster's prefix (the directors' agent.cluster.prefix), and are they running? Nothing was written`,
      };
    }
    return op;
  }

  current(): Promise<{ text: string; revision: number } | null> {
    return this.client.currentConfig();
  }

  at(revision: number): Promise<{ text: string } | null> {
    return this.client.configAt(revision);
  }

  /** Writes `text` as the next revision if the config is still at `expect` (default: the current one). */
  async write(text: string, source: string, author: string, expect?: number): Promise<ConfigWrite> {
    const base = expect ?? (await this.client.currentConfig())?.revision ?? 0;
    return this.client.writeConfig({ text, author, at: Date.now(), comment: source }, base);
  }

  /** A failure of etcd, or of this certificate in it, in words, with the exit code. */
  describe(err: unknown, what: string): Failure {
    const message = err instanceof Error ? err.message : String(err);
    const who = `the certificate ${this.target.cert} (CN=${this.commonName})`;
    if (/permission denied/i.test(message)) {
      return {
        exit: EXIT.noPermission,
        message: `lbadm: etcd refused to ${what} for ${who}: its etcd roles do not allow it. The cluster config is written with an operator's certificate, whose user has the cluster's operator role (lbadm etcd roles prints the roles); nothing was written`,
      };
    }
    if (/user name not found|authentication failed|invalid auth/i.test(message)) {
      return { exit: EXIT.noPermission, message: `lbadm: etcd knows no user ${this.commonName} for ${who} (${message}): add it with the operator role (lbadm etcd roles --operators ${this.commonName} ...); nothing was written` };
    }
    return {
      exit: EXIT.unavailable,
      message: `lbadm: cannot ${what} in etcd at ${this.target.endpoints.join(', ')} (${message}): check --etcd, that this machine reaches etcd's client port, and that --etcd-ca signed etcd's certificate; nothing was written`,
    };
  }

  close(): void {
    this.client.close();
  }
}

/**
 * What the agent lbadm can reach did with a revision written to etcd: its apply record once it runs
 * that revision (or a later one), null if it did not within APPLIED_WAIT_MS. The agent applies from its
 * watch; lbadm only reads its status.
 */
export async function appliedBy(api: AdminApi, revision: number, sha256: string): Promise<{ director: string; record: ApplyRecord__Output | null; revision: number } | null> {
  for (const until = Date.now() + APPLIED_WAIT_MS; Date.now() < until; await delay(APPLIED_POLL_MS)) {
    const c = await api.getClusterStatus({ timeoutMs: 3000 }).catch(() => null);
    if (c === null || Number(c.configRevision) < revision) continue;
    const s = await api.getStatus({ timeoutMs: 3000 }).catch(() => null);
    const last = s?.agent?.lastApply ?? null;
    return { director: c.self, record: last !== null && last.configSha256 === sha256 ? last : null, revision: Number(c.configRevision) };
  }
  return null;
}

/** What lbadm prints after a write to etcd: the revision and whose certificate, then what the reachable director did. */
export function formatWritten(revision: number, what: string, commonName: string, applied: Awaited<ReturnType<typeof appliedBy>> | undefined, where: string): string {
  const line = `written to etcd as cluster config revision ${revision}${what} with the certificate of ${commonName}; every director applies it\n`;
  return applied === undefined ? line : `${line}${formatApplied(applied, where)}\n`;
}

/** One line on what the reachable director did with the written revision. */
function formatApplied(a: Awaited<ReturnType<typeof appliedBy>>, where: string): string {
  if (a === null) return `${where} has not run it within ${APPLIED_WAIT_MS / 1000} s (lbadm status shows its last apply; lbadm events --kind config every director's)`;
  const r = a.record;
  if (r === null) return `${a.director} runs revision ${a.revision}`;
  switch (r.result) {
    case 'applied': return `${a.director} applied it: ${r.operations} rule operation${r.operations === 1 ? '' : 's'}${r.fullRebuild ? ' (full rebuild)' : ''} in ${Math.round(r.durationMs)} ms`;
    case 'unchanged': return `${a.director} applied it: its kernel already matched`;
    default: return `${a.director} could not apply it (${r.result}${r.error ? `: ${r.error}` : ''}); lbadm status says more`;
  }
}

