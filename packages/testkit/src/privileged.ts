import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { runCommand } from './exec.js';
import { runPrefix } from './netns.js';

/**
 * The gate for privileged tests (`*.privileged.test.ts`, describe titles containing `@privileged`).
 * As root with working namespaces they run; otherwise they skip with a reason printed loudly, because a
 * silent skip reads as a pass. With LBD_REQUIRE_PRIVILEGED=1 (CI) a missing privilege fails instead.
 */

export interface PrivilegeOptions {
  /** Commands the suite needs besides `ip`, e.g. ['nft', 'conntrack']. */
  readonly commands?: readonly string[];
}

/** The Debian package of each command a test or benchmark may need (where its name differs or is not obvious). */
const DEBIAN_PACKAGE_OF: Readonly<Record<string, string>> = {
  ip: 'iproute2', nft: 'nftables', etcd: 'etcd-server', etcdctl: 'etcd-client', vtysh: 'frr', ping: 'iputils-ping',
  arping: 'iputils-arping', promtool: 'prometheus', cc: 'gcc',
};

let namespaceCheck: Promise<string | null> | undefined;

/** Why privileged tests cannot run here, or null when they can. Creates and deletes one probe namespace. */
export async function privilegeProblem(opts: PrivilegeOptions = {}): Promise<string | null> {
  if (process.platform !== 'linux') return `needs Linux network namespaces (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return `not running as root (uid ${process.getuid?.()})`;
  const missing = ['ip', ...(opts.commands ?? [])].filter((c) => !onPath(c));
  if (missing.length > 0) return `missing command(s): ${missing.join(', ')} (apt-get install ${[...new Set(missing.map((c) => DEBIAN_PACKAGE_OF[c] ?? c))].join(' ')})`;
  namespaceCheck ??= probeNamespaces();
  return namespaceCheck;
}

/**
 * Call first in a `before` hook: `before(async function () { await requireRoot(this); ... })`.
 * Skips the whole suite, after printing why, when privileged tests cannot run.
 */
export async function requireRoot(ctx: Mocha.Context, opts: PrivilegeOptions = {}): Promise<void> {
  const problem = await privilegeProblem(opts);
  if (problem === null) return;
  const title = ctx.test?.parent?.fullTitle() || ctx.test?.title || 'privileged suite';
  if (process.env.LBD_REQUIRE_PRIVILEGED === '1') {
    throw new Error(`${title}: cannot run privileged tests: ${problem} (LBD_REQUIRE_PRIVILEGED=1 forbids skipping)`);
  }
  process.stderr.write(
    `\n!!! SKIPPING "${title}": ${problem}.\n` +
    '!!! These tests drive the real kernel in network namespaces; run them as root (CI does).\n\n',
  );
  ctx.skip();
}

async function probeNamespaces(): Promise<string | null> {
  const probe = `${runPrefix('lbdt', 'probe')}x`;
  try {
    await runCommand('ip', ['netns', 'add', probe], { timeoutMs: 10_000 });
  } catch (e) {
    return `cannot create a network namespace: ${(e as Error).message}`;
  }
  await runCommand('ip', ['netns', 'del', probe], { allowFailure: true });
  return null;
}

function onPath(cmd: string): boolean {
  return (process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin').split(delimiter).some((dir) => {
    try {
      accessSync(join(dir, cmd), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}
