import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AdminRole, LbdEvent } from '@lbd/config';

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

/** Where transitions are read from: the agent's event log (@lbd/director-agent EventLog) implements it; metrics and the dashboard use it. */
export interface EventSource {
  /** Kept events at or after `sinceUnixMs`, oldest first. */
  recent(sinceUnixMs: number): LbdEvent[];
  /** Calls `fn` for every new event; returns the unsubscribe. */
  subscribe(fn: (e: LbdEvent) => void): () => void;
}
