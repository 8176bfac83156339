import { hostPort, type Config, type Endpoint } from '@lbd/config';
import type { Logger } from '@lbd/log';
import {
  AdminServer, AgentError, OpsHttpServer, healthzRoute, type AdminBackend, type Liveness, type OpsLimits, type OpsSurfaces,
} from '@lbd/operator-surfaces';
import { readTlsFiles } from './tls-files.js';

export interface OperatorListenerOptions {
  /** The admin API's unix socket (agent.adminSocket, or the command line's). */
  readonly socket: string;
  /** The config file's agent settings: listeners are read once, at start (a reload warns instead). */
  readonly settings: Config['agent'];
  readonly admin: AdminBackend;
  /** GET /healthz's answer. */
  readonly liveness: () => Liveness;
  /** Metrics and dashboard routes for the HTTPS listener, built only when it listens. */
  readonly surfaces?: () => OpsSurfaces;
  readonly limits?: Partial<OpsLimits>;
  readonly log: Logger;
}

/** The TCP listeners that listen, by their settings' values (null: not configured, or no TLS). */
export interface Serving {
  readonly grpcListen: Endpoint | null;
  readonly httpListen: Endpoint | null;
}

/**
 * What an agent serves to operators: the admin API on its unix socket, and with agent.admin.tls the admin
 * API over TCP and the HTTPS listener (/healthz, metrics, dashboard), both with mutual TLS. The servers are
 * @lbd/operator-surfaces'; this only starts and stops them around the agent's core, which knows none of it.
 */
export class OperatorListeners {
  private constructor(
    readonly serving: Serving,
    private readonly unix: AdminServer,
    private readonly tcp: AdminServer | null,
    private readonly https: OpsHttpServer | null,
    private readonly surfaces: OpsSurfaces | null,
  ) {}

  /** Throws AgentError SocketInUse when a live agent serves `path`: checked before a first apply touches the kernel. */
  static checkSocketFree(path: string): Promise<void> {
    return AdminServer.checkSocketFree(path);
  }

  /**
   * Listens on everything configured. The TLS files are read here, so a missing one stops the start with
   * the setting and the file named; on any failure what was opened is closed again before it throws.
   */
  static async start(o: OperatorListenerOptions): Promise<OperatorListeners> {
    let unix: AdminServer | null = null;
    let tcp: AdminServer | null = null;
    let surfaces: OpsSurfaces | null = null;
    try {
      unix = await AdminServer.listen(o.socket, o.admin, o.log);
      const admin = o.settings.admin;
      if (admin.tls === null || (admin.grpcListen === null && admin.httpListen === null)) {
        return new OperatorListeners({ grpcListen: null, httpListen: null }, unix, null, null, null);
      }
      const setting = admin.tls === o.settings.cluster?.tls ? 'agent.cluster.tls' : 'agent.admin.tls';
      const tls = await readTlsFiles(admin.tls, setting);
      const { grpcListen, httpListen } = admin;
      if (grpcListen !== null) {
        tcp = await listening('agent.admin.grpcListen', grpcListen, () => AdminServer.listenTcp({ ...grpcListen, tls, clients: admin.clients }, o.admin, o.log));
      }
      let https: OpsHttpServer | null = null;
      if (httpListen !== null) {
        surfaces = o.surfaces?.() ?? null;
        const routes = [healthzRoute(o.liveness), ...(surfaces?.routes ?? [])];
        const limits = o.limits ? { limits: o.limits } : {};
        https = await listening('agent.admin.httpListen', httpListen, () => OpsHttpServer.listen({ ...httpListen, tls, clients: admin.clients, log: o.log, ...limits }, routes));
      }
      return new OperatorListeners({ grpcListen: tcp === null ? null : grpcListen, httpListen: https === null ? null : httpListen }, unix, tcp, https, surfaces);
    } catch (err) {
      // The dashboard's and the metrics' timers too: a failed start must not keep the process alive.
      surfaces?.close?.();
      await Promise.all([unix?.close(), tcp?.close()]);
      throw err;
    }
  }

  /** Ends the dashboard's streams and polling first, so the HTTPS listener's close is not held up by them. */
  async close(): Promise<void> {
    this.surfaces?.close?.();
    await Promise.all([this.unix.close(), this.tcp?.close(), this.https?.close()]);
  }
}

/** Starts a listener; a failure to bind names the setting and the address (in use, not on this host, ...). */
async function listening<T>(setting: string, at: Endpoint, start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (cause) {
    const why = (cause as NodeJS.ErrnoException).code ?? (cause as Error).message;
    throw new AgentError('SocketInUse', `${setting}: cannot listen on ${hostPort(at.address, at.port)} (${why}); stop what uses that port, or choose another address or port (the address must be one of this host's)`, { cause });
  }
}
