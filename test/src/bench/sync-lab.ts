import { rmSync } from 'node:fs';
import { AdminApi } from '@lbd/proto';
import type { CtnlWriterKind } from '@lbd/dataplane-nft';
import { startHaLab, waitFor, waitSteady, type DirectorName, type HaLab } from '@lbd/testkit';
import type { BenchScope } from './scope.js';
import { startNginx, writeDocroot } from './servers.js';

/**
 * The HA lab the benchmarks that load it through a vip share (connsync, stability): startHaLab with a
 * config of three fullnat round-robin services on one vip (tcp 80 to nginx on every real server, tcp 9000
 * to lbd-testserver's streams, udp 53 to its echo), health checks on every service, and connection sync
 * switched per service. It is not a lab for anything else: the addresses and the config are the
 * benchmarks', and only the sync switch varies.
 */

export const GROUP = 'default';
export const VIP = '198.18.0.10';
export const RS_HOSTS = [11, 12, 13].map((h) => `198.19.1.${h}`);
export const LOCAL_ADDRESSES = [100, 101, 102, 103].map((h) => `198.19.1.${h}`);
/**
 * A cluster config of one fullnat tcp service on the vip (port 80, round robin over the real servers at 8080, the
 * local addresses above), for connection sync without the lab: the bulk's and the whole path's (connsync 1b, 1e).
 */
export const ONE_SERVICE_CONFIG = `vipGroups:
  - name: ${GROUP}
    gateways: [198.19.1.250]
services:
  - name: web
    vip: ${VIP}
    port: 80
    mode: fullnat
    scheduler: rr
    localAddresses: [${LOCAL_ADDRESSES[0]}-${LOCAL_ADDRESSES.at(-1)}]
    realServers:
${RS_HOSTS.map((a) => `      - { address: ${a}, port: 8080 }`).join('\n')}
`;
/** nginx on every real server for the load (lbd-testserver's HTTP is a Node process: too slow for 5 000/s). */
const NGINX_PORT = 8081;
/** The services of labConfig, each with every real server. */
const SERVICES = 3;

/** Who uses the lab: named in the config's comment and in the source of every apply. */
export interface SyncLabUser {
  /** The benchmark's name, as in `pnpm bench <name>`. */
  readonly bench: string;
  readonly log: (msg: string) => void;
}

function labConfig(bench: string, sync: boolean): string {
  const rs = (port: number): string => RS_HOSTS.map((a) => `      - { address: ${a}, port: ${port} }\n`).join('');
  const common = `    mode: fullnat
    scheduler: rr
    localAddresses: [${LOCAL_ADDRESSES[0]}-${LOCAL_ADDRESSES.at(-1)}]
    sync: { enabled: ${sync} }
`;
  return `# bench ${bench}: round robin everywhere, so a director without a connection's entry sends it elsewhere.
vipGroups:
  - name: ${GROUP}
    # One change of leader per drill: no failback inside a measurement.
    preempt: never
    gateways: [198.19.1.250]
services:
  - name: load
    vip: ${VIP}
    port: 80
${common}    healthCheck: { kind: tcp, intervalMs: 1000, rise: 2, fall: 2 }
    realServers:
${rs(NGINX_PORT)}  - name: stream
    vip: ${VIP}
    port: 9000
${common}    healthCheck: { kind: tcp, intervalMs: 1000, rise: 2, fall: 2 }
    realServers:
${rs(9000)}  - name: udp
    vip: ${VIP}
    port: 53
    protocol: udp
${common}    healthCheck: { kind: udp, send: health, expect: '"server"', intervalMs: 1000, rise: 2, fall: 2 }
    realServers:
${rs(5353)}`;
}

/**
 * Starts the lab with sync on, nginx on every real server (serving writeDocroot's objects on NGINX_PORT),
 * and waits until every real server is up on both directors. Its namespaces share `prefix`, so the
 * scope's sweep removes them on a signal too.
 */
export async function startLab(user: SyncLabUser, scope: BenchScope, prefix: string): Promise<HaLab<AdminApi>> {
  user.log('starting the HA lab (2 directors, 3 etcd members, 3 real servers)');
  const lab = await startHaLab({ prefix, admin: (socket) => new AdminApi(socket), configText: labConfig(user.bench, true) });
  scope.onCleanup(() => rmSync(lab.dir, { recursive: true, force: true }));
  scope.topology = lab.cluster.topology;
  const root = await writeDocroot(scope.tmp!);
  for (const r of lab.cluster.realServers) await startNginx(lab.cluster.topology, r.host, scope.tmp!, root, { workers: 1, port: NGINX_PORT });
  await waitHealthy(lab);
  return lab;
}

/** Every real server of every service up on both directors (nginx just started: the checks need 2 rises). */
async function waitHealthy(lab: HaLab<AdminApi>): Promise<void> {
  for (const d of ['dir1', 'dir2'] as const) {
    await waitFor(`${d}: every real server up`, 30_000, async () => {
      const h = await lab.api(d).getHealth('', { timeoutMs: 2000 });
      return h.realServers.length === SERVICES * RS_HOSTS.length && h.realServers.every((r) => r.state === 'up');
    }, 200);
  }
}

/** Applies labConfig with sync on or off through the leader, and waits until both directors run it. */
export async function applyConfig(user: SyncLabUser, lab: HaLab<AdminApi>, sync: boolean): Promise<void> {
  const leader = await waitSteady(lab);
  const res = await lab.api(leader).apply({ configText: labConfig(user.bench, sync), source: `bench ${user.bench}: sync ${sync ? 'on' : 'off'}`, author: 'bench' }, { timeoutMs: 15_000 });
  const revision = Number(res.clusterRevision ?? 0);
  await waitFor(`both directors running config revision ${revision}`, 15_000, async () => {
    const all = await Promise.all((['dir1', 'dir2'] as const).map((d) => lab.api(d).getClusterStatus({ timeoutMs: 2000 })));
    return all.every((st) => st.configRevision >= revision);
  }, 100);
}

export const other = (d: DirectorName): DirectorName => (d === 'dir1' ? 'dir2' : 'dir1');

/** How a report names where a standby's table wrote (ConntrackConnectionTable.writerKind). */
export function writesOf(kind: CtnlWriterKind): string {
  return kind === 'in-process' ? 'writes on its own thread, ctnl-writer.node' : 'writes through the ctnetlink helper, lbd-ctnl';
}
