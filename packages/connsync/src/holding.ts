import { connectionKey, type Endpoint, type SyncedConnection } from '@lbd/dataplane';
import type { GroupConnectionsReply, GroupConnectionsReply__Output } from '@lbd/proto';
import { connectionIdIn, connectionIdOut, endpointIn, MalformedMessage, STATES } from './wire.js';

/**
 * What one director holds of one vip group's (or ECMP slot's) connections at one moment, and when it last
 * claimed and released the group's addresses: the two sides of a planned move, compared by a drill
 * (director-agent's drill.ts). Read from the kernel's table on the director itself, or from a peer over
 * ConnSync.GroupConnections.
 */
export interface GroupHolding {
  readonly director: string;
  /** The director's role in the group when it was read (leader, standby, ...). */
  readonly role: string;
  /** Wall-clock ms of its last claim and release of the group's addresses; 0: none since its agent started. */
  readonly claimedAtUnixMs: number;
  readonly releasedAtUnixMs: number;
  readonly readAtUnixMs: number;
  /** The kernel's lease drops (GroupState.leaseDroppedPackets) when it was read; -1: unknown. */
  readonly leaseDroppedPackets: number;
  /** connectionKey → what the director holds of it (empty when only its counters were asked). */
  readonly connections: ReadonlyMap<string, HeldConnection>;
}

export interface HeldConnection {
  /** conntrack's state (SYN_RECV, ESTABLISHED, ..., ASSURED). */
  readonly state: string;
  /** Its NAT binding as one word, `real server>local address` (`-` without one): equal on two directors, the same connection. */
  readonly binding: string;
}

/** A connection's NAT binding as HeldConnection.binding spells it. */
export function bindingOf(realServer: Endpoint, localAddress: Endpoint | null): string {
  const text = (e: Endpoint | null): string => (e === null ? '-' : e.address.includes(':') ? `[${e.address}]:${e.port}` : `${e.address}:${e.port}`);
  return `${text(realServer)}>${text(localAddress)}`;
}

/** What the agent says of a group besides its connections (ConnectionSyncOptions.groupState). */
export interface GroupState {
  readonly role: string;
  readonly claimedAtUnixMs: number;
  readonly releasedAtUnixMs: number;
  /**
   * Packets the kernel dropped, over all groups, because they were for (or from) a floating address this
   * director held no kernel lease for: what reached the wrong director during a move. -1: unknown.
   */
  readonly leaseDroppedPackets: number;
}

/** Connections per GroupConnections message: well under the peer channel's message limit with IPv6 addresses. */
const HOLDING_BATCH = 5000;
/** The most connections a peer's answer may carry: beyond it the answer is refused, not held in memory. */
const MAX_HOLDING_CONNECTIONS = 2_000_000;

/** The messages of one GroupConnections answer: the group's state in the first, connections in batches. */
export function holdingReplies(h: Omit<GroupHolding, 'connections'>, connections: readonly SyncedConnection[]): GroupConnectionsReply[] {
  const head = {
    director: h.director, role: h.role, claimedAtUnixMs: h.claimedAtUnixMs, releasedAtUnixMs: h.releasedAtUnixMs, readAtUnixMs: h.readAtUnixMs,
    leaseDroppedPackets: h.leaseDroppedPackets,
  };
  const all = connections.map((f) => ({ id: connectionIdOut(f), state: f.state, realServer: f.realServer, localAddress: f.localAddress }));
  const out: GroupConnectionsReply[] = [];
  for (let i = 0; i === 0 || i < all.length; i += HOLDING_BATCH) out.push({ ...head, connections: all.slice(i, i + HOLDING_BATCH) });
  return out;
}

/** A director's own connections of a group, as GroupHolding keeps them. */
export function heldConnections(connections: readonly SyncedConnection[]): Map<string, HeldConnection> {
  return new Map(connections.map((f) => [connectionKey(f), { state: f.state, binding: bindingOf(f.realServer, f.localAddress) }]));
}

/**
 * A peer's GroupConnections answer, checked field by field (the peer is trusted to be a director, not to be
 * right): the state comes from the first message, connections from all of them.
 */
export function holdingFromReplies(replies: readonly GroupConnectionsReply__Output[], peer: string): GroupHolding {
  const first = replies[0];
  if (first === undefined) throw new MalformedMessage('GroupConnections', null, `came back from ${peer} with no message`);
  if (first.director !== peer) throw new MalformedMessage('GroupConnections.director', first.director, `is not ${peer}, who was asked`);
  const connections = new Map<string, HeldConnection>();
  replies.forEach((r, i) => {
    r.connections.forEach((c, j) => {
      const path = `GroupConnections[${i}].connections[${j}]`;
      if (c.id === null) throw new MalformedMessage(`${path}.id`, null, 'is missing');
      if (!STATES.has(c.state)) throw new MalformedMessage(`${path}.state`, c.state, 'is not a conntrack state');
      if (c.realServer === null) throw new MalformedMessage(`${path}.realServer`, null, 'is missing');
      const realServer = endpointIn(c.realServer, `${path}.realServer`);
      const localAddress = c.localAddress === null ? null : endpointIn(c.localAddress, `${path}.localAddress`);
      connections.set(connectionKey(connectionIdIn(c.id, `${path}.id`)), { state: c.state, binding: bindingOf(realServer, localAddress) });
    });
    if (connections.size > MAX_HOLDING_CONNECTIONS) throw new MalformedMessage('GroupConnections', connections.size, `holds more than ${MAX_HOLDING_CONNECTIONS} connections`);
  });
  for (const k of ['claimedAtUnixMs', 'releasedAtUnixMs', 'readAtUnixMs'] as const) {
    if (!Number.isSafeInteger(first[k]) || first[k] < 0) throw new MalformedMessage(`GroupConnections.${k}`, first[k], 'is not a time in Unix ms');
  }
  // A director that predates the counter sends 0 (proto3's default): indistinguishable from none dropped,
  // which is what a director without lease tables would say too.
  const dropped = first.leaseDroppedPackets;
  if (!Number.isSafeInteger(dropped) || dropped < -1) throw new MalformedMessage('GroupConnections.leaseDroppedPackets', dropped, 'is not a packet count (or -1)');
  return {
    director: first.director, role: first.role, claimedAtUnixMs: first.claimedAtUnixMs, releasedAtUnixMs: first.releasedAtUnixMs,
    readAtUnixMs: first.readAtUnixMs, leaseDroppedPackets: dropped, connections,
  };
}
