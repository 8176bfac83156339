import { writeFile } from 'node:fs/promises';
import { FakeAnnouncer } from '@lbd/announcer/testing';
import { FakeAddressOwner, FakeDataPlane, FakeConnectionTable } from '@lbd/dataplane/testing';
import { silentLogger } from '@lbd/log';
import { Agent } from '../agent.js';
import { inProcessSync } from '../sync-host.js';

/**
 * A director's files, as @lbd/testkit's LoopbackCluster.writePairConfigs writes them (its PairFiles; not
 * imported: the testkit is for test files, and this module ships in the package's ./testing).
 */
export interface PairMemberFiles {
  readonly id: string;
  readonly configPath: string;
  readonly port: number;
  readonly trackFile: string | undefined;
}

/** One of the two agents `startClusterPair` starts. */
export interface PairMember {
  readonly id: string;
  readonly agent: Agent;
  readonly owner: FakeAddressOwner;
  readonly dp: FakeDataPlane;
  /** Given to the agent only with `connectionTable: true`. */
  readonly table: FakeConnectionTable;
  /** The ECMP tier's paths this member announced (used only when its file has agent.cluster.ecmp). */
  readonly announcer: FakeAnnouncer;
  /** Its peerListen port. */
  readonly port: number;
  /** With `adminSockets: true`: its admin socket (lbadm's --socket). */
  readonly socket: string | undefined;
  /** Fails its track check (files written with `track: true`), so it turns unhealthy and resigns. */
  failTrack(): Promise<void>;
}

export interface ClusterPairOptions {
  /** Hand each agent its FakeConnectionTable (connection sync; needs the files written with a PKI). */
  readonly connectionTable?: boolean;
  /** Serve each agent's admin API on a socket beside its config file (default: no admin server). */
  readonly adminSockets?: boolean;
}

/**
 * Starts the agents of a pair in this process, each on the config file @lbd/testkit's
 * LoopbackCluster.writePairConfigs wrote (dir1 and dir2, each the other's peer, on its etcd), with fake
 * data planes and address owners; frontConfig is the cluster config to apply. The members are pushed onto
 * `into` as they start, so stopClusterPair stops those that did when a start fails.
 */
export async function startClusterPair(files: readonly PairMemberFiles[], o: ClusterPairOptions, into: PairMember[]): Promise<void> {
  for (const f of files) {
    const owner = new FakeAddressOwner();
    const dp = new FakeDataPlane();
    const table = new FakeConnectionTable();
    const announcer = new FakeAnnouncer();
    const socket = o.adminSockets ? f.configPath.replace(/\.yaml$/, '.sock') : undefined;
    const agent = await Agent.start({
      configPath: f.configPath, dataPlane: dp, watch: false, addressOwner: owner, log: silentLogger, announcer: () => Promise.resolve(announcer),
      ...(socket === undefined ? { serve: false } : { adminSocket: socket }), ...(o.connectionTable ? { connectionSync: inProcessSync(table) } : {}),
    });
    const failTrack = async (): Promise<void> => {
      if (f.trackFile === undefined) throw new Error(`failTrack: ${f.id}'s config was written without track: true`);
      await writeFile(f.trackFile, '');
    };
    into.push({ id: f.id, agent, owner, dp, table, announcer, port: f.port, socket, failTrack });
  }
}

/** Stops every member (those of a start that failed too) and empties `members`. */
export async function stopClusterPair(members: PairMember[]): Promise<void> {
  for (const m of members.splice(0)) await m.agent.stop('test over');
}
