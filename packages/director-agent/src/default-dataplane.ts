import type { DataPlane, ConnectionTable } from '@lbd/dataplane';
import type { CtnlHelper, CtnlWriterKind } from '@lbd/dataplane-nft';
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

/** An environment variable lbd-agent reads holds a value it cannot use (exit 78, as a bad config). */
export class EnvError extends Error {}

/**
 * LBD_CTNETLINK, checked at start: `native` or `perl` picks the program connection sync talks ctnetlink
 * through, for conntrack's events and for its writes (to compare them, as `pnpm bench connsync` does, or to
 * fall back to perl's); unset, the table's default (the compiled lbd-ctnl where it was built). Throws a
 * message naming the variable, its value and the choices.
 */
export function ctnlHelperFromEnv(env: NodeJS.ProcessEnv): CtnlHelper | undefined {
  const asked = env.LBD_CTNETLINK;
  if (asked === undefined || asked === 'native' || asked === 'perl') return asked;
  throw new EnvError(`LBD_CTNETLINK is ${JSON.stringify(asked)}: it names the ctnetlink helper (conntrack events and writes), native or perl; unset it for the default`);
}

/**
 * LBD_CTNETLINK_WRITER, checked at start: where connection sync's writes to conntrack go, `in-process` (the sync
 * thread's own netlink socket, through ctnl-writer.node) or `helper` (the lbd-ctnl write process, or perl's);
 * unset, the table's default (in-process where the addon was built, with the compiled helper). Throws a
 * message naming the variable, its value and the choices; for `in-process`, also when the addon does not load
 * here (the sync thread would fail at every start).
 */
export async function ctnlWriterFromEnv(env: NodeJS.ProcessEnv, addonError: () => Promise<string | null> = loadAddonError): Promise<CtnlWriterKind | undefined> {
  const asked = env.LBD_CTNETLINK_WRITER;
  if (asked === 'in-process') {
    const error = await addonError();
    if (error !== null) throw new EnvError(`LBD_CTNETLINK_WRITER is "in-process", but ${error}: run pnpm run build (or reinstall the lbd package), or unset it for the default`);
  }
  if (asked === undefined || asked === 'in-process' || asked === 'helper') return asked;
  throw new EnvError(`LBD_CTNETLINK_WRITER is ${JSON.stringify(asked)}: it names where connection sync's writes to conntrack go, in-process or helper; unset it for the default`);
}

/** Why the in-process writer does not load here (null: it does). */
async function loadAddonError(): Promise<string | null> {
  const { ctnlWriterAddon } = await import('@lbd/dataplane-nft');
  return ctnlWriterAddon().error;
}

/**
 * LBD_TCP_PROBER, checked at start: `native` has plain tcp connect checks made by lbd-probe (the compiled
 * connect prober), `node` by Node's sockets (to compare them, or to fall back); unset, the default (lbd-probe
 * where it was built). Throws a message naming the variable, its value and the choices.
 */
export function tcpConnectorFromEnv(env: NodeJS.ProcessEnv): 'native' | 'node' | undefined {
  const asked = env.LBD_TCP_PROBER;
  if (asked === undefined || asked === 'native' || asked === 'node') return asked;
  throw new EnvError(`LBD_TCP_PROBER is ${JSON.stringify(asked)}: it names how tcp connect checks connect, native (lbd-probe) or node; unset it for the default`);
}

/** The production connection table for connection sync: conntrack events, dumps and injection. */
export async function createDefaultConnectionTable(log: Logger, ctnlHelper?: CtnlHelper, writer?: CtnlWriterKind): Promise<ConnectionTable & { dispose(): Promise<void> }> {
  const { ConntrackConnectionTable } = await import('@lbd/dataplane-nft');
  const table = new ConntrackConnectionTable({ ...(ctnlHelper === undefined ? {} : { ctnlHelper }), ...(writer === undefined ? {} : { writer }) });
  log.info('connection sync talks ctnetlink', {
    helper: table.ctnlHelper === 'native' ? 'lbd-ctnl (compiled)' : 'perl',
    writes: table.writerKind === 'in-process' ? 'in the sync thread (ctnl-writer.node)' : 'through the helper',
  });
  // The default would have written in-process: a build or an install without the addon costs a standby CPU.
  if (writer === undefined && table.inProcessUnavailable !== null) log.warn('connection sync writes through the helper: the in-process writer did not load', { why: table.inProcessUnavailable });
  return table;
}
