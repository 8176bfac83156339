import * as grpc from '@grpc/grpc-js';
import type { EcmpTier, PeerEndpoint, Service } from '@lbd/config';
import { ConnectionSync, type GroupHolding, type GroupState, type SyncStatus } from '@lbd/connsync';
import type { ConnectionTable } from '@lbd/dataplane';
import type { Logger } from '@lbd/log';
import { bindServer, connSyncServiceDefinition, peerServerCredentials, stopServer, type PeerSecurity } from '@lbd/proto';

/**
 * Where connection sync runs, as the rest of the agent (ClusterMember) sees it. In production: a thread of its
 * own (`syncThread`), with its own event loop and heap, its own ctnetlink helpers and its own listener, so that
 * what sync does for every connection (parsing the kernel's events, encoding, TLS, a peer's injects) and the
 * garbage it makes never wait behind the admin API, health checks, metrics or the dashboard, nor they behind it.
 * The main thread tells it what to sync (config, marks, the groups led) and asks it how far it got. Tests with
 * fake kernels run the same SyncService in-process (`inProcessSync`), with their fake table.
 */
export interface SyncHost {
  /** Starts following the kernel's table and serves ConnSync on `listen`. */
  start(): Promise<void>;
  /** The services, and the ECMP tier whose slots the connections of ECMP services go with. */
  setConfig(services: readonly Service[], ecmp: EcmpTier | null): Promise<void>;
  /** This director's ct mark per real server (keys from connsync's realServerName). */
  setMarks(marks: ReadonlyMap<string, number>): void;
  /** The groups this director leads now: their connections are sent to every peer. */
  setLeading(groups: ReadonlySet<string>): Promise<void>;
  /** The streams' status and, for each of `groups`, null when caught up with its leader, else why not: read at one moment. */
  report(groups: readonly string[]): Promise<SyncReport>;
  handOverYoung(group: string): Promise<number>;
  drain(peer: string, timeoutMs: number): Promise<boolean>;
  holding(group: string, countersOnly: boolean): Promise<GroupHolding>;
  peerHolding(peer: string, group: string, timeoutMs: number, countersOnly: boolean): Promise<GroupHolding>;
  /** Stops sending, receiving and serving. */
  close(): Promise<void>;
}

export interface SyncReport {
  readonly status: SyncStatus;
  readonly notCaughtUp: Readonly<Record<string, string | null>>;
}

export interface SyncHostOptions {
  readonly self: string;
  /** The peers' connection-sync endpoints (their peerListen port + 1). */
  readonly peers: readonly PeerEndpoint[];
  readonly security: PeerSecurity;
  /** Where this director serves ConnSync. */
  readonly listen: { readonly address: string; readonly port: number };
}

/** What a SyncHost asks of the agent around it. */
export interface SyncHostCallbacks {
  readonly log: Logger;
  /** The agent's state of a group, for GroupConnections. */
  groupState(group: string): Promise<GroupState>;
}

export type SyncHostFactory = (o: SyncHostOptions, c: SyncHostCallbacks) => SyncHost;

/** ConnectionSync with its listener: what runs on whichever thread hosts sync. */
export class SyncService implements SyncHost {
  private readonly sync: ConnectionSync;
  private server: grpc.Server | undefined;

  constructor(private readonly o: SyncHostOptions, table: ConnectionTable, c: SyncHostCallbacks) {
    this.sync = new ConnectionSync({ self: o.self, peers: o.peers, security: o.security, table, log: c.log, groupState: (g) => c.groupState(g) });
  }

  async start(): Promise<void> {
    await this.sync.start();
    const server = new grpc.Server();
    server.addService(connSyncServiceDefinition(), this.sync.handlers());
    await bindServer(server, this.o.listen.address, this.o.listen.port, peerServerCredentials(this.o.security));
    this.server = server;
  }

  setConfig(services: readonly Service[], ecmp: EcmpTier | null): Promise<void> { return this.sync.setConfig(services, ecmp); }
  setMarks(marks: ReadonlyMap<string, number>): void { this.sync.setMarks(marks); }
  setLeading(groups: ReadonlySet<string>): Promise<void> { return this.sync.setLeading(groups); }

  async report(groups: readonly string[]): Promise<SyncReport> {
    const notCaughtUp: Record<string, string | null> = {};
    for (const g of groups) notCaughtUp[g] = this.sync.notCaughtUp(g);
    return { status: this.sync.status(), notCaughtUp };
  }

  handOverYoung(group: string): Promise<number> { return this.sync.handOverYoung(group); }
  drain(peer: string, timeoutMs: number): Promise<boolean> { return this.sync.drain(peer, timeoutMs); }
  holding(group: string, countersOnly: boolean): Promise<GroupHolding> { return this.sync.holding(group, countersOnly); }
  peerHolding(peer: string, group: string, timeoutMs: number, countersOnly: boolean): Promise<GroupHolding> {
    return this.sync.peerHolding(peer, group, timeoutMs, countersOnly);
  }

  async close(): Promise<void> {
    await this.sync.close();
    await stopServer(this.server, 1000);
    this.server = undefined;
  }
}

/** Sync on the caller's own thread over `table` (tests: a fake kernel table). */
export function inProcessSync(table: ConnectionTable): SyncHostFactory {
  return (o, c) => new SyncService(o, table, c);
}
