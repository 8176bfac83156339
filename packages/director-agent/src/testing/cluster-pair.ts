import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FakeAddressOwner, FakeDataPlane, FakeFlowTable } from '@lbd/dataplane/testing';
import { silentLogger } from '@lbd/log';
import { Agent } from '../agent.js';

/** One of the two agents `startClusterPair` starts. */
export interface PairMember {
  readonly id: string;
  readonly agent: Agent;
  readonly owner: FakeAddressOwner;
  readonly dp: FakeDataPlane;
  /** Given to the agent only with `flowTable: true`. */
  readonly table: FakeFlowTable;
  /** Its peerListen port. */
  readonly port: number;
}

export interface ClusterPairOptions {
  /** Where the config files go, named `<id>-<run>.yaml`. */
  readonly dir: string;
  readonly run: number;
  readonly etcdEndpoint: string;
  readonly prefix: string;
  /** Free loopback ports for dir1's and dir2's peerListen. */
  readonly ports: readonly [number, number];
  /** More lines of agent.cluster for director `id` (each indented by four spaces, ending in a newline). */
  readonly extra?: (id: string) => string;
  /** Hand each agent its FakeFlowTable (connection sync). */
  readonly flowTable?: boolean;
}

/**
 * dir1 and dir2, clustered in this process against etcd on loopback, with fake data planes and address
 * owners: each the other's peer, interfaces eth0/eth1, priority 150 (dir1) and 100 (dir2) for group front.
 * The members are pushed onto `into` as they start, so a caller's clean-up stops those that did.
 */
export async function startClusterPair(o: ClusterPairOptions, into: PairMember[]): Promise<void> {
  const ids = ['dir1', 'dir2'] as const;
  for (const [i, id] of ids.entries()) {
    const other = 1 - i;
    const configPath = join(o.dir, `${id}-${o.run}.yaml`);
    await writeFile(configPath, `agent:
  cluster:
    director: ${id}
    etcd: [${o.etcdEndpoint}]
    prefix: ${o.prefix}
    peerListen: 127.0.0.1:${o.ports[i]}
    peers: [{ id: ${ids[other]}, address: "127.0.0.1:${o.ports[other]}" }]
    interfaces: { vip: eth0, local: eth1 }
    priorities: { front: ${i === 0 ? 150 : 100} }
${o.extra?.(id) ?? ''}`);
    const owner = new FakeAddressOwner();
    const dp = new FakeDataPlane();
    const table = new FakeFlowTable();
    const agent = await Agent.start({
      configPath, dataPlane: dp, serve: false, watch: false, addressOwner: owner, log: silentLogger, ...(o.flowTable ? { flowTable: table } : {}),
    });
    into.push({ id, agent, owner, dp, table, port: o.ports[i]! });
  }
}
