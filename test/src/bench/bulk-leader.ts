/**
 * The leader's side of `pnpm bench connsync`'s bulk, in a worker thread of its own: its own event loop and heap,
 * as the leader's agent has on its own director, so that what the standby's side costs is not added to it on one
 * thread. A ConnectionSync over a FakeConnectionTable holding the connections it is given, sending them to the
 * standby at `peerPort` once told to lead.
 *
 * Messages: in, `{ lead: true }` then `{ close: true }`; out, `{ ready: true }`, `{ leading: true }`, then
 * `{ closed: true, warnings, warnCount }`, or `{ error }` at any point.
 */
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { parseConfig } from '@lbd/config';
import { ConnectionSync } from '@lbd/connsync';
import { connectionKey, type SyncedConnection } from '@lbd/dataplane';
import { FakeConnectionTable } from '@lbd/dataplane/testing';
import type { Logger } from '@lbd/director-agent';
import type { PeerSecurity } from '@lbd/proto';

/** What a bench's leader thread needs to lead `group` and reach the standby at `peerPort`. */
export interface LeaderThreadData {
  readonly peerPort: number;
  /** The leader's TLS material (structured clone turns Buffers into Uint8Arrays). */
  readonly ca: Uint8Array;
  readonly cert: Uint8Array;
  readonly key: Uint8Array;
  readonly configText: string;
  readonly group: string;
}

export interface BulkLeaderData extends LeaderThreadData {
  readonly connections: readonly SyncedConnection[];
}

export type BulkLeaderMessage =
  | { readonly ready: true }
  | { readonly leading: true }
  | { readonly closed: true; readonly warnings: readonly string[]; readonly warnCount: number }
  | { readonly error: string };

/** The bulk's leader, ready to lead: a ConnectionSync over a FakeConnectionTable holding `connections` (on either thread). */
export async function startBulkLeader(connections: readonly SyncedConnection[], peerPort: number, security: PeerSecurity, configText: string, log: Logger): Promise<ConnectionSync> {
  const table = new FakeConnectionTable();
  for (const f of connections) table.connections.set(connectionKey(f), f);
  const leader = new ConnectionSync({ self: 'dir1', peers: [{ id: 'dir2', address: '127.0.0.1', port: peerPort }], security, table, log });
  await leader.start();
  await leader.setConfig(parseConfig(configText, 'bench connsync', { cluster: true }).services);
  return leader;
}

async function main(): Promise<void> {
  const port = parentPort!;
  const d = workerData as BulkLeaderData;
  const warnings: string[] = [];
  let warnCount = 0;
  const keep = (msg: string, f?: Readonly<Record<string, unknown>>): void => {
    warnCount++;
    if (warnings.length < 5) warnings.push(`${msg} ${JSON.stringify(f ?? {})}`);
  };
  const log: Logger = { debug: () => undefined, info: () => undefined, warn: keep, error: keep };
  const security = { kind: 'tls', ca: Buffer.from(d.ca), cert: Buffer.from(d.cert), key: Buffer.from(d.key) } as const;
  const leader = await startBulkLeader(d.connections, d.peerPort, security, d.configText, log);
  port.on('message', (m: { lead?: true; close?: true }) => {
    if (m.lead) {
      leader.setLeading(new Set([d.group])).then(() => port.postMessage({ leading: true } satisfies BulkLeaderMessage),
        (err: unknown) => port.postMessage({ error: String(err) } satisfies BulkLeaderMessage));
    }
    if (m.close) {
      void leader.close().catch(() => undefined).then(() => {
        port.postMessage({ closed: true, warnings, warnCount } satisfies BulkLeaderMessage);
        port.close();
      });
    }
  });
  port.postMessage({ ready: true } satisfies BulkLeaderMessage);
}

// Imported on the main thread for startBulkLeader (the one-thread run), it runs nothing.
if (!isMainThread) main().catch((err: unknown) => parentPort?.postMessage({ error: err instanceof Error ? err.stack ?? err.message : String(err) } satisfies BulkLeaderMessage));
