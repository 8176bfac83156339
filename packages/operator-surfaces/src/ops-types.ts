import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AdminRole } from '@lbd/config';

/**
 * The seams of the operator surfaces (issue 6), shared by the admin API's TCP listener, the HTTPS
 * listener (metrics, dashboard), the event log and lbadm: types, and the check of an event read back.
 */

/** What a caller may do: agent.admin.clients' roles (`write` changes the cluster, `read` only looks). */
export type Role = AdminRole;

/** Who called: the unix socket (root only, always `write`) or a TLS client certificate's name. */
export interface Caller {
  readonly role: Role;
  /** The certificate's name (subjectAltName DNS, else its CN), or `unix-socket`. */
  readonly name: string;
}

/** One HTTPS endpoint of the agent's ops listener. */
export interface OpsRoute {
  readonly method: 'GET' | 'POST';
  /** Exact path, or a prefix when `prefix` is set (e.g. `/static/`). */
  readonly path: string;
  readonly prefix?: boolean;
  /** The least role that may call it. */
  readonly role: Role;
  handle(req: IncomingMessage, res: ServerResponse, caller: Caller): void | Promise<void>;
}

/** What the HTTPS ops listener serves besides /healthz, and what to stop with the agent. */
export interface OpsSurfaces {
  readonly routes: readonly OpsRoute[];
  close?(): void;
}

/** Kinds of transition the event log records. */
export type EventKind = 'role' | 'vip' | 'health' | 'config' | 'sync' | 'drill' | 'admin';
export const EVENT_KINDS: readonly EventKind[] = ['role', 'vip', 'health', 'config', 'sync', 'drill', 'admin'];

/**
 * One transition with its reason: the answer to "why am I backup?" and "why did rs2 leave?".
 *
 * subject / from / to per kind:
 * - role:   vip group name;                  the group's role on this director (leader, standby, ...)
 * - vip:    floating address;                `released` / `held`
 * - health: `<serviceKey> <rs host:port>`;   `up` / `down` (fields: service, server, check)
 * - config: `config`;                        `applied` / `unchanged` / `rejected` / `failed` (fields: revision, sha256, source, author, durationMs)
 * - sync:   `<peer> <send|receive>`;         connection-sync stream state
 * - drill:  drill scenario (switchover, box-death, ...); `pass` / `fail` (fields: broken, total, tookMs)
 * - admin:  the operation (failover, rollback, server drain, service add, ...); `done` / `refused` (fields: caller)
 */
export interface LbdEvent {
  /** Unique and sortable by time: `<13-digit unix ms>-<director>-<6-digit sequence>`. */
  readonly id: string;
  readonly timeUnixMs: number;
  /** The director that recorded it (its cluster id, or the host name when alone). */
  readonly director: string;
  readonly kind: EventKind;
  readonly subject: string;
  /** The state before ('' when there was none). */
  readonly from: string;
  readonly to: string;
  /** Why, in words an operator reads at 3 a.m. */
  readonly reason: string;
  readonly fields: Readonly<Record<string, string>>;
}

/** Where transitions are read from: the agent's event log (@lbd/director-agent EventLog) implements it; metrics and the dashboard use it. */
export interface EventSource {
  /** Kept events at or after `sinceUnixMs`, oldest first. */
  recent(sinceUnixMs: number): LbdEvent[];
  /** Calls `fn` for every new event; returns the unsubscribe. */
  subscribe(fn: (e: LbdEvent) => void): () => void;
}

/** Whether `v` is an event as the log records it (for events read back from etcd, written by any lbd). */
export function isLbdEvent(v: unknown): v is LbdEvent {
  const e = v as Partial<LbdEvent>;
  return typeof v === 'object' && v !== null && typeof e.id === 'string' && typeof e.timeUnixMs === 'number'
    && typeof e.director === 'string' && typeof e.kind === 'string' && (EVENT_KINDS as readonly string[]).includes(e.kind)
    && typeof e.subject === 'string' && typeof e.from === 'string' && typeof e.to === 'string' && typeof e.reason === 'string'
    && typeof e.fields === 'object' && e.fields !== null && Object.values(e.fields).every((x) => typeof x === 'string');
}
