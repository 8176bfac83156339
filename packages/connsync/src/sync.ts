import * as grpc from '@grpc/grpc-js';
import type { EcmpTier, Endpoint, PeerEndpoint, Service } from '@lbd/config';
import { serviceKey } from '@lbd/config';
import type { ConnectionTable } from '@lbd/dataplane';
import {
  createConnSyncClient, peerIdsOfCall, type ConnSyncClient, type ConnSyncHandlers, type PeerSecurity, type SyncMessage__Output,
  type SyncReply, type SyncReply__Output,
} from '@lbd/proto';
import type { Logger } from '@lbd/log';
import { SyncReceiver, type ReceiverStatus } from './receiver.js';
import { SyncSender, type Dial, type SenderOptions, type SenderStatus } from './sender.js';
import { SlotMap } from './slots.js';
import { ConnectionSource, type ConnectionSourceStats, type ScopeEntry, type SyncScope } from './source.js';

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
    return {
      Stream: (call: grpc.ServerDuplexStream<SyncMessage__Output, SyncReply>) => {
        const named = peerIdsOfCall(call as unknown as Parameters<typeof peerIdsOfCall>[0]);
        const allowed = new Set((named ?? []).filter((n) => configured.has(n)));
        if (allowed.size === 0) {
          const details = named === null
            ? 'connection sync needs mutual TLS: this stream came without a client certificate'
            : `the client certificate names ${named.join(', ') || 'no director'}, not one of this director's peers (${[...configured].join(', ')})`;
          this.o.log.warn('connection sync: refused a stream', { details });
          call.emit('error', { code: grpc.status.PERMISSION_DENIED, details });
          return;
        }
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
      const peer = this.o.peers.find((p) => p.id === peerId);
      if (!peer) throw new Error(`unknown peer ${peerId}`);
      let client = this.clients.get(peerId);
      if (!client) {
        client = createConnSyncClient(peer.address, peer.port, this.o.security, peerId);
        this.clients.set(peerId, client);
      }
      const call = client.Stream();
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
