import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { listenPlain } from '../dashboard/loopback.js';
import type { Caller, OpsRoute } from '../ops-types.js';

/**
 * OpsRoutes on plain HTTP at 127.0.0.1, for tests of the routes themselves (the dashboard's, the
 * metrics'). It dispatches as the agent's ops listener does (method, exact path or prefix, role), with one
 * fixed caller and no TLS: what the listener adds (mutual TLS, roles per certificate) is tested with it.
 */
export interface PlainOpsServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  readonly server: Server;
  /** Closes the listener and every open connection (streams included). */
  close(): Promise<void>;
}

/** `port` 0: any free one. */
export async function serveOpsRoutes(routes: readonly OpsRoute[], caller: Caller = { role: 'read', name: 'test' }, port = 0): Promise<PlainOpsServer> {
  const server = await listenPlain(routes, caller, '127.0.0.1', port);
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    server,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
