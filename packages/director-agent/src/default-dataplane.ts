import type { DataPlane, ConnectionTable } from '@lbd/dataplane';
import type { Logger } from '@lbd/log';

/**
 * The production data plane, in one small file so it is the only place the agent names the nftables
 * implementation (tests inject FakeDataPlane instead). The import is dynamic so that lbd-agent has
 * validated its config, and exited 78 on a bad one, before the adapter is even loaded.
 */
export async function createDefaultDataPlane(log: Logger): Promise<DataPlane> {
  const { NftDataPlane } = await import('@lbd/dataplane-nft');
  // The adapter reports its own transitions (re-adoption on restart, full rebuilds, expiries).
  return new NftDataPlane({ onEvent: (msg, fields) => log.info(msg, { component: 'dataplane', ...fields }) });
}

/** The kernel lease's drop counter (a drill's figure of what reached the wrong director during a move). */
export async function createDefaultLeaseDrops(): Promise<() => Promise<number | null>> {
  const { readLeaseDrops } = await import('@lbd/dataplane-nft');
  return () => readLeaseDrops();
}

/** The production connection table for connection sync: conntrack events, dumps and injection. */
export async function createDefaultConnectionTable(log: Logger): Promise<ConnectionTable> {
  const { ConntrackConnectionTable } = await import('@lbd/dataplane-nft');
  void log;
  return new ConntrackConnectionTable({});
}
