import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Caller, OpsRoute } from '../ops-types.js';

/**
 * OpsRoutes on plain HTTP at 127.0.0.1, for tests of the routes themselves (the dashboard's, the
 * metrics'). It dispatches as the agent's ops listener does (method, exact path or prefix), with one fixed
 * caller and no TLS: what the listener adds (mutual TLS, roles per certificate) is tested with it.
 */
export interface PlainOpsServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  readonly server: Server;
  /** Closes the listener and every open connection (streams included). */
  close(): Promise<void>;
}

export async function serveOpsRoutes(routes: readonly OpsRoute[], caller: Caller = { role: 'read', name: 'test' }): Promise<PlainOpsServer> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    const route = routes.find((r) => r.method === method && (r.prefix ? path.startsWith(r.path) : path === r.path));
    if (route === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end(`${req.method} ${path}: no such route`);
      return;
    }
    if (route.role === 'write' && caller.role !== 'write') {
      res.writeHead(403, { 'content-type': 'text/plain' }).end(`${caller.name} may only read`);
      return;
    }
    Promise.resolve(route.handle(req, res, caller)).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`route failed: ${(err as Error).message}`);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    server,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
