/**
 * The event record: one transition with its reason, the answer to "why am I backup?" and "why did rs2
 * leave?". The agent records it (its event log), the coordinator stores it in etcd, the admin API and the
 * dashboard serve it and lbadm filters it, so its shape and its kinds are defined here, once.
 */

/** Kinds of transition the event log records. */
export const EVENT_KINDS = ['role', 'vip', 'health', 'config', 'sync', 'drill', 'admin', 'bgp', 'limit'] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

/**
 * subject / from / to per kind:
 * - role:   vip group name;                  the group's role on this director (GROUP_ROLES)
 * - vip:    floating address;                `released` / `held`
 * - health: `<serviceKey> <rs host:port>`;   `up` / `down` (fields: service, server, check)
 * - config: `config`;                        ApplyResultWord (fields: revision, sha256, source, author, durationMs)
 * - sync:   `<peer> <send|receive>`;         connection-sync stream state
 * - drill:  drill scenario (DRILL_SCENARIOS); DRILL_RESULTS (fields: broken, total, tookMs)
 * - admin:  the operation (failover, rollback, server drain, service add, ...); `done` / `refused` (fields: caller)
 * - bgp:    `director <id>` (the ECMP tier's paths: `announced` / `withdrawn`, fields: paths) or `session <router>`
 *           (a BGP session's state, as the speaker reports it)
 * - limit:  `<serviceKey>`;                  `under` / `reached`: its connectionLimit dropping new connections
 *           (fields: service, name, limit, dropped)
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

/** What became of one config apply: the `to` of its config event, and the result status and metrics report. */
export type ApplyResultWord = 'applied' | 'unchanged' | 'rejected' | 'failed';

/** An event as any lbd may have stored it in etcd: its kind is left to the reader (a newer director may know more). */
export type StoredEvent = Omit<LbdEvent, 'kind'> & { readonly kind: string };

/** Whether `v` has the shape of a stored event (kind and field values unchecked). */
export function isStoredEvent(v: unknown): v is StoredEvent {
  const e = v as Partial<StoredEvent>;
  return typeof v === 'object' && v !== null && typeof e.id === 'string' && typeof e.timeUnixMs === 'number' && typeof e.director === 'string'
    && typeof e.kind === 'string' && typeof e.subject === 'string' && typeof e.from === 'string' && typeof e.to === 'string'
    && typeof e.reason === 'string' && typeof e.fields === 'object' && e.fields !== null;
}

/** Whether `v` is an event as the log records it (for events read back from etcd, written by any lbd). */
export function isLbdEvent(v: unknown): v is LbdEvent {
  return isStoredEvent(v) && (EVENT_KINDS as readonly string[]).includes(v.kind) && Object.values(v.fields).every((x) => typeof x === 'string');
}
