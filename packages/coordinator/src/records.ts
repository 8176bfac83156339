import type { GroupRole } from '@lbd/config';

/**
 * What directors write to etcd, under the cluster prefix:
 *
 *   <prefix>/directors/<id>         DirectorRecord, on a lease: who is alive, healthy, and how it sees each group
 *   <prefix>/groups/<g>/leader      LeaderRecord, changed only by compare-and-swap on its revision
 *   <prefix>/groups/<g>/handoff     HandoffRequest: a planned switchover (lbadm failover, preemption)
 *   <prefix>/probes/<id>            written by a standby asked for a promise: does etcd take its writes?
 *   <prefix>/config/desired         the cluster config (YAML text and who wrote it), swapped on its revision
 *   <prefix>/config/history/<n>     every accepted config, by its revision (1, 2, 3, ...)
 *   <prefix>/events/<id>/<event>    each director's event history, trimmed by its writer (event-store.ts)
 *
 * Records are JSON; a record that does not parse is treated as absent and reported, never trusted.
 */

export interface LeaderRecord {
  /** The leading director; null when the group is vacant (its last leader resigned and released). */
  readonly director: string | null;
  /** Increments on every change of director. */
  readonly term: number;
  /** Increments on every beat of a term. */
  readonly beat: number;
  /** The leader's configured peers: the only directors that may take over from it, and whose promises keep it fail-static. */
  readonly peers: readonly string[];
  readonly priority: number;
  /** Wall-clock ms when this term began (for display only: no decision uses another box's wall clock). */
  readonly since: number;
  /** Why this term began, or why the group is vacant. */
  readonly reason: string;
}

export interface HandoffRequest {
  readonly to: string;
  readonly reason: string;
  readonly at: number;
}

export interface GroupView {
  readonly role: GroupRole;
  readonly leader: string | null;
  readonly priority: number;
  readonly lastTransition: { readonly at: number; readonly reason: string } | null;
}

export interface DirectorRecord {
  readonly id: string;
  readonly version: string;
  readonly peerAddress: string;
  readonly priorities: Readonly<Record<string, number>>;
  readonly healthy: boolean;
  readonly problems: readonly string[];
  readonly groups: Readonly<Record<string, GroupView>>;
  /** Wall-clock ms of the last update. */
  readonly updatedAt: number;
}

export interface ConfigRecord {
  /** 1, 2, 3, ...: one more than the config it replaced. */
  readonly revision: number;
  readonly text: string;
  readonly author: string;
  readonly at: number;
  readonly comment: string;
}

export function keys(prefix: string) {
  const p = prefix.replace(/\/+$/, '');
  return {
    director: (id: string) => `${p}/directors/${id}`,
    directors: `${p}/directors/`,
    leader: (g: string) => `${p}/groups/${g}/leader`,
    handoff: (g: string) => `${p}/groups/${g}/handoff`,
    probe: (id: string) => `${p}/probes/${id}`,
    config: `${p}/config/desired`,
    history: (rev: string) => `${p}/config/history/${rev.padStart(20, '0')}`,
    historyPrefix: `${p}/config/history/`,
  };
}

export function parseJson<T>(text: string | undefined, valid: (v: unknown) => boolean): T | null {
  if (text === undefined) return null;
  try {
    const v: unknown = JSON.parse(text);
    return valid(v) ? (v as T) : null;
  } catch {
    return null;
  }
}

export function isLeaderRecord(v: unknown): boolean {
  const r = v as Partial<LeaderRecord>;
  return typeof v === 'object' && v !== null && (r.director === null || typeof r.director === 'string')
    && typeof r.term === 'number' && typeof r.beat === 'number' && Array.isArray(r.peers);
}

function isDirectorRecord(v: unknown): boolean {
  const r = v as Partial<DirectorRecord>;
  return typeof v === 'object' && v !== null && typeof r.id === 'string' && typeof r.healthy === 'boolean' && typeof r.priorities === 'object';
}

export function isHandoff(v: unknown): boolean {
  const r = v as Partial<HandoffRequest>;
  return typeof v === 'object' && v !== null && typeof r.to === 'string';
}

export function isConfigRecord(v: unknown): boolean {
  const r = v as Partial<ConfigRecord>;
  return typeof v === 'object' && v !== null && typeof r.text === 'string' && typeof r.revision === 'number';
}

/** Replaces `into`'s records with those of `entries` (the directors' keys as listed), skipping unparsable ones. */
export function fillDirectorRecords(into: Map<string, DirectorRecord>, entries: readonly { readonly value: string }[]): void {
  into.clear();
  for (const e of entries) {
    const r = parseJson<DirectorRecord>(e.value, isDirectorRecord);
    if (r) into.set(r.id, r);
  }
}
