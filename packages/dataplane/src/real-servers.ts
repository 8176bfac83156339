import type { ObservedState, RealServerId } from './types.js';

/** Every real server's id in what a data plane observed: how realServerIds answers from the kernel. */
export function realServerIdsOf(observed: ObservedState): RealServerId[] {
  return observed.services.flatMap((s) => s.realServers.map((rs) => ({ service: s.key, address: rs.address, port: rs.port, realServerId: rs.realServerId })));
}
