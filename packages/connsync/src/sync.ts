import * as grpc from '@grpc/grpc-js';
import type { EcmpTier, Endpoint, PeerEndpoint, Service } from '@lbd/config';
import { serviceKey } from '@lbd/config';
import type { ConnectionTable, SyncedConnection } from '@lbd/dataplane';
import {
  createConnSyncClient, peerIdsOfCall, type ConnSyncClient, type ConnSyncHandlers, type GroupConnectionsReply, type GroupConnectionsReply__Output, type GroupConnectionsRequest__Output,
  type PeerSecurity, type SyncMessage__Output, type SyncReply, type SyncReply__Output,
} from '@lbd/proto';
import type { Logger } from '@lbd/log';
import { heldConnections, holdingFromReplies, holdingReplies, type GroupHolding, type GroupState } from './holding.js';
import { SyncReceiver, type ReceiverStatus } from './receiver.js';
import { SyncSender, type Dial, type SenderOptions, type SenderStatus } from './sender.js';
import { SlotMap } from './slots.js';
import { ConnectionSource, serviceKeyOfConnection, type ConnectionSourceStats, type ScopeEntry, type SyncScope } from './source.js';

/**
 * Connection sync for one director: while it leads vip groups or ECMP slots, a sender per configured peer streams
 * their connections to that peer; from peers that lead, it receives their connections into its own kernel. A
 * connection goes with its service's vip group, or, for an ECMP service, with the slot whose local-address pool
 * holds its local address (SlotMap). The agent tells it what it leads (`setLeading`: vip groups and slot
 * groups alike), the config (`setConfig`) and its kernel's marks
 * (`setMarks`); the coordinator asks it whether a returning director has caught up (`caughtUp`) before
 * that director may take a group back (preempt: after-sync).
 */

export interface ConnectionSyncOptions {
  readonly self: string;
  readonly peers: readonly PeerEndpoint[];
  readonly security: PeerSecurity;
  readonly table: ConnectionTable;
  readonly log: Logger;
  /** Default: gRPC to each peer's address with `security`. */
  readonly dial?: Dial;
  /** Sender tuning and fault injection (tests). */
  readonly sender?: Partial<Omit<SenderOptions, 'self' | 'peer' | 'source' | 'dial' | 'log'>>;
  /** The agent's state of a group, for GroupConnections (default: role unknown, no claim or release). */
  groupState?(group: string): Promise<GroupState>;
}

export interface SyncStatus {
  readonly source: ConnectionSourceStats;
  readonly leading: readonly string[];
  readonly senders: readonly SenderStatus[];
  readonly receivers: readonly ReceiverStatus[];
}

/** `198.18.0.10:80/tcp 198.19.1.11:8080`: a real server within a service, as setMarks keys it. */
export function realServerName(service: string, realServer: Endpoint): string {
  const host = realServer.address.includes(':') ? `[${realServer.address}]` : realServer.address;
  return `${service} ${host}:${realServer.port}`;
}

export class ConnectionSync {
  private readonly source: ConnectionSource;
  private readonly senders = new Map<string, SyncSender>();
  /** The newest stream from each peer; an ended one stays (for its counts in status) until the peer streams again. */
  private readonly receivers = new Map<string, SyncReceiver>();
  private readonly clients = new Map<string, ConnSyncClient>();
  private services = new Map<string, Service>();
  private slots = SlotMap.NONE;
  /** No stream is heard before the first config: every connection would be refused as of an unknown service. */
  private configured = false;
  private marks: ReadonlyMap<string, number> = new Map();
  private leading = new Set<string>();
  private scopeUpdate: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly o: ConnectionSyncOptions) {
    this.source = new ConnectionSource(o.table, o.log);
  }

  async start(): Promise<void> {
    await this.o.table.prepare();
    await this.source.start();
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const s of this.senders.values()) s.close();
    this.senders.clear();
    for (const r of this.receivers.values()) r.end('closing');
    for (const c of this.clients.values()) c.close();
    await this.source.close();
  }

  /** The services, and the ECMP tier (config.ecmp) whose slots the connections of ECMP services go with. */
  setConfig(services: readonly Service[], ecmp: EcmpTier | null = null): Promise<void> {
    this.services = new Map(services.map((s) => [serviceKey(s), s]));
    try {
      this.slots = new SlotMap(ecmp);
    } catch (err) {
      // Validation refuses such a tier; should one get here, no ECMP connection is attributed to a wrong slot.
      this.o.log.error('connection sync: the ECMP tier\'s slots cannot be told apart; connections of ECMP services are not synced', { error: err });
      this.slots = SlotMap.NONE;
    }
    this.configured = true;
    return this.updateScope();
  }

  setMarks(marks: ReadonlyMap<string, number>): void {
    this.marks = marks;
  }

  /** The groups this director leads now: their connections are sent to every peer. */
  async setLeading(groups: ReadonlySet<string>): Promise<void> {
    this.leading = new Set(groups);
    await this.updateScope();
    if (this.closed) return;
    if (this.leading.size === 0) {
      for (const s of this.senders.values()) s.close();
      this.senders.clear();
      return;
    }
    for (const p of this.o.peers) {
      if (this.senders.has(p.id)) continue;
      const sender = new SyncSender({ ...this.o.sender, self: this.o.self, peer: p.id, source: this.source, dial: this.o.dial ?? this.grpcDial(), log: this.o.log });
      this.senders.set(p.id, sender);
      sender.start();
    }
  }

  /**
   * Whether this director holds a complete, live copy of `group`'s connections from the group's leader (a
   * snapshot applied and the stream still running): the condition for taking the group back under
   * preempt: after-sync. Null when caught up, else why not.
   */
  notCaughtUp(group: string): string | null {
    for (const r of this.receivers.values()) if (r.caughtUp(group)) return null;
    const live = [...this.receivers.values()].filter((r) => r.status().state !== 'ended');
    if (live.length === 0) return 'no connection-sync stream from the leader';
    return `connection sync of ${group} not caught up (${live.map((r) => `${r.peerId || '?'}: ${r.status().state}`).join(', ')})`;
  }

  /**
   * Waits until `peer` has acknowledged everything sent to it (before a planned switchover to it, so the
   * connections opened in the last moments are there too), at most `timeoutMs`. True when it has.
   */
  async drain(peer: string, timeoutMs: number): Promise<boolean> {
    const sender = this.senders.get(peer);
    if (sender === undefined) return false;
    const end = performance.now() + timeoutMs;
    while (!sender.drained()) {
      if (performance.now() >= end) return false;
      await new Promise((r) => setTimeout(r, 2));
    }
    return true;
  }

  status(): SyncStatus {
    return {
      source: this.source.stats(), leading: [...this.leading].sort(),
      senders: [...this.senders.values()].map((s) => s.status()),
      // An ended stream matters to a standby waiting for one, not to a director that leads now.
      receivers: [...this.receivers.values()].map((r) => r.status()).filter((r) => r.state !== 'ended' || this.leading.size === 0),
    };
  }

  /** The ConnSync service, for the peer listener (which must use TLS: the peer is named by its certificate). */
  handlers(): ConnSyncHandlers {
    const configured = new Set(this.o.peers.map((p) => p.id));
    /** The configured peers the call's client certificate names; none: the call is refused (and null returned). */
    const authorized = (call: grpc.ServerWritableStream<unknown, unknown> | grpc.ServerDuplexStream<unknown, unknown>, what: string): Set<string> | null => {
      const named = peerIdsOfCall(call as unknown as Parameters<typeof peerIdsOfCall>[0]);
      const allowed = new Set((named ?? []).filter((n) => configured.has(n)));
      if (allowed.size > 0) return allowed;
      const details = named === null
        ? `connection sync needs mutual TLS: this ${what} came without a client certificate`
        : `the client certificate names ${named.join(', ') || 'no director'}, not one of this director's peers (${[...configured].join(', ')})`;
      this.o.log.warn(`connection sync: refused a ${what}`, { details });
      call.emit('error', { code: grpc.status.PERMISSION_DENIED, details });
      return null;
    };
    return {
      GroupConnections: (call: grpc.ServerWritableStream<GroupConnectionsRequest__Output, GroupConnectionsReply>) => {
        if (authorized(call, 'GroupConnections call') === null) return;
        void (async () => {
          try {
            const { head, connections } = await this.groupConnections(call.request.group, call.request.countersOnly);
            for (const reply of holdingReplies(head, connections)) {
              if (call.cancelled) return;
              if (!call.write(reply)) await new Promise((resolve) => call.once('drain', resolve));
            }
            call.end();
          } catch (err) {
            call.emit('error', { code: grpc.status.UNAVAILABLE, details: `reading the connections of ${call.request.group}: ${err instanceof Error ? err.message : String(err)}` });
          }
        })();
      },
      Stream: (call: grpc.ServerDuplexStream<SyncMessage__Output, SyncReply>) => {
        const allowed = authorized(call, 'stream');
        if (allowed === null) return;
        if (!this.configured) {
          // A director that has just started: the leader's sender retries in a moment.
          call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'this director has no cluster config yet; try again shortly' });
          return;
        }
        const receiver = new SyncReceiver({
          table: this.o.table, log: this.o.log,
          markOf: (service, rs) => this.marks.get(realServerName(service, rs)) ?? null,
          groupOf: (service, localAddress) => {
            const s = this.services.get(service);
            if (s === undefined) return null;
            if (!s.ecmp) return s.vipGroup;
            return localAddress === null ? null : this.slots.groupOf(localAddress);
          },
          slotted: (service) => this.services.get(service)?.ecmp === true,
          leads: (group) => this.leading.has(group),
        }, {
          write: (reply) => { call.write(reply); },
          fail: (code, details) => {
            const status = code === 'invalid' ? grpc.status.INVALID_ARGUMENT : code === 'denied' ? grpc.status.PERMISSION_DENIED : grpc.status.RESOURCE_EXHAUSTED;
            call.emit('error', { code: status, details });
          },
        }, allowed);
        call.on('data', (m: SyncMessage__Output) => {
          receiver.onMessage(m);
          // The first message names the peer: one live stream per peer, the newest wins.
          const id = receiver.peerId;
          if (id !== '' && this.receivers.get(id) !== receiver) {
            this.receivers.get(id)?.end('replaced by a new stream from the same peer');
            this.receivers.set(id, receiver);
          }
        });
        call.on('end', () => { receiver.end('stream ended by the peer'); call.end(); });
        call.on('error', (err: Error) => receiver.end(err.message));
        call.on('cancelled', () => receiver.end('stream cancelled'));
      },
    };
  }

  /** Before a planned handover of `group`: sends its young connections too (ConnectionSource.handOverYoung); returns how many. */
  handOverYoung(group: string): Promise<number> {
    return this.source.handOverYoung(group);
  }

  /**
   * What this director holds of `group`'s connections now (its kernel's table: a vip group's services, or
   * the connections of ECMP services whose local address is in the slot's pool), with the agent's state of it.
   */
  async holding(group: string, countersOnly = false): Promise<GroupHolding> {
    const { head, connections } = await this.groupConnections(group, countersOnly);
    return { ...head, connections: heldConnections(connections) };
  }

  /** The same, asked of `peer` over its ConnSync.GroupConnections; rejects with the call's error. */
  peerHolding(peer: string, group: string, timeoutMs: number, countersOnly = false): Promise<GroupHolding> {
    const client = this.clientOf(peer);
    return new Promise((resolve, reject) => {
      const replies: GroupConnectionsReply__Output[] = [];
      const call = client.GroupConnections({ from: this.o.self, group, countersOnly }, { deadline: Date.now() + timeoutMs });
      call.on('data', (r: GroupConnectionsReply__Output) => replies.push(r));
      call.on('error', (err: grpc.ServiceError) => reject(new Error(`${peer}: ${grpc.status[err.code] ?? err.code}: ${err.details || err.message}`)));
      call.on('end', () => {
        try {
          resolve(holdingFromReplies(replies, peer));
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
        }
      });
    });
  }

  private async groupConnections(group: string, countersOnly: boolean): Promise<{ head: Omit<GroupHolding, 'connections'>; connections: SyncedConnection[] }> {
    const readAtUnixMs = Date.now();
    const [table, state] = await Promise.all([
      countersOnly ? [] : this.o.table.dump(),
      this.o.groupState?.(group) ?? { role: '', claimedAtUnixMs: 0, releasedAtUnixMs: 0, leaseDroppedPackets: -1 },
    ]);
    return { head: { director: this.o.self, ...state, readAtUnixMs }, connections: table.filter((f) => this.groupOfConnection(f) === group) };
  }

  /** The vip group (or slot group) a connection in the kernel goes with under the running config, or null. */
  private groupOfConnection(f: SyncedConnection): string | null {
    const s = this.services.get(serviceKeyOfConnection(f));
    if (s === undefined) return null;
    if (!s.ecmp) return s.vipGroup;
    return f.localAddress === null ? null : this.slots.groupOf(f.localAddress.address);
  }

  private clientOf(peerId: string): ConnSyncClient {
    const peer = this.o.peers.find((p) => p.id === peerId);
    if (!peer) throw new Error(`${peerId} is not one of this director's peers (${this.o.peers.map((p) => p.id).join(', ')})`);
    let client = this.clients.get(peerId);
    if (!client) {
      client = createConnSyncClient(peer.address, peer.port, this.o.security, peerId);
      this.clients.set(peerId, client);
    }
    return client;
  }

  private updateScope(): Promise<void> {
    this.scopeUpdate = this.scopeUpdate.then(async () => {
      const scope = new Map<string, ScopeEntry>();
      // One for every ECMP service: the slots led are the same for all of them.
      const slots = this.slots.leading(this.leading);
      for (const [key, s] of this.services) {
        if (!s.sync.enabled) continue;
        if (s.ecmp) {
          if (slots !== null) scope.set(key, { slots, minAgeMs: s.sync.minAgeMs });
        } else if (this.leading.has(s.vipGroup)) {
          scope.set(key, { group: s.vipGroup, minAgeMs: s.sync.minAgeMs });
        }
      }
      await this.source.setScope(scope satisfies SyncScope);
    });
    return this.scopeUpdate;
  }

  private grpcDial(): Dial {
    return (peerId, h) => {
      const call = this.clientOf(peerId).Stream();
      let done = false;
      const closed = (reason: string | null): void => {
        if (done) return;
        done = true;
        h.closed(reason);
      };
      call.on('data', (r: SyncReply__Output) => h.reply(r));
      call.on('drain', () => h.drain());
      call.on('error', (err: grpc.ServiceError) => closed(`${grpc.status[err.code] ?? err.code}: ${err.details || err.message}`));
      call.on('end', () => closed(null));
      return {
        write: (msg) => call.write(msg),
        close: () => { done = true; call.cancel(); },
      };
    };
  }
}
