import type { Protocol } from '@lbd/config';
import type { Endpoint } from './types.js';

/**
 * The kernel's connection table as connection sync sees it: a source of lbd's connections (events and a dump)
 * on the leader, and a sink that injects them on a standby, so that the standby's first packet of a connection
 * after a takeover follows the same translation. The real implementation is conntrack
 * (`ConntrackConnectionTable` in @lbd/dataplane-nft); `FakeConnectionTable` in ./testing keeps connections in memory.
 */

/**
 * One connection: the client's original tuple (client → vip) and the NAT binding this director gave it.
 * Injecting these (not the reply tuple as conntrack prints it) is what makes the peer's kernel translate
 * the connection's next packet the same way.
 */
export interface SyncedConnection {
  readonly protocol: Protocol;
  readonly client: Endpoint;
  readonly vip: Endpoint;
  /** The DNAT binding. */
  readonly realServer: Endpoint;
  /** The fullnat SNAT binding (the source the real server sees); null in nat mode. */
  readonly localAddress: Endpoint | null;
  /** `ct mark` in this director's kernel (service id << 16 | real server id); 0 = not one of lbd's. */
  readonly mark: number;
  /** TCP: conntrack's state (ESTABLISHED, FIN_WAIT, ...). UDP: ASSURED, REPLIED or UNREPLIED. */
  readonly state: string;
  /** Seconds until the kernel expires the entry if it sees no packet. */
  readonly timeoutSec: number;
  /** A connection the kernel's SYN proxy opened (synProxy services): its cookie numbers; absent otherwise. */
  readonly synProxy?: SynProxyState;
  /** Its sequence-number adjustment, once the real server has answered the proxy; absent otherwise. */
  readonly seqAdjust?: SeqAdjust;
}

/**
 * A SYN-proxied connection has two sets of sequence numbers: the client's side got the proxy's syncookie ISN,
 * the real server's side the server's own ISN. conntrack moves every packet's numbers by the difference
 * (its seqadj extension, one per direction), and the proxy keeps its cookie ISN and timestamp offset (its
 * synproxy extension) to finish the handshake. A copy on another director without them breaks on its first
 * packet there: every number is off by the difference. Both are u32 as the kernel keeps them.
 */
export interface SynProxyState {
  /** The syncookie's ISN: the sequence number the client's side starts from. */
  readonly isn: number;
  /** The timestamp the proxy offered the client, and the offset it adds to the server's (0 without timestamps). */
  readonly its: number;
  readonly tsoff: number;
}

/** conntrack's seqadj: per direction, numbers after correctionPos move by offsetAfter, others by offsetBefore. */
export interface SeqAdjust {
  readonly original: SeqAdjustDirection;
  readonly reply: SeqAdjustDirection;
}

export interface SeqAdjustDirection {
  readonly correctionPos: number;
  readonly offsetBefore: number;
  readonly offsetAfter: number;
}

/** Whether two connections carry the same SYN-proxy state (both none counts as the same). */
export function sameProxyState(a: Pick<SyncedConnection, 'synProxy' | 'seqAdjust'>, b: Pick<SyncedConnection, 'synProxy' | 'seqAdjust'>): boolean {
  // The usual case, on the source's path for every update event: neither was proxied; nothing to compare.
  if (!a.synProxy && !a.seqAdjust && !b.synProxy && !b.seqAdjust) return true;
  const sp = (x: SynProxyState | undefined): string => (x ? `${x.isn},${x.its},${x.tsoff}` : '-');
  const dir = (d: SeqAdjustDirection): string => `${d.correctionPos},${d.offsetBefore},${d.offsetAfter}`;
  const sa = (x: SeqAdjust | undefined): string => (x ? `${dir(x.original)},${dir(x.reply)}` : '-');
  return sp(a.synProxy) === sp(b.synProxy) && sa(a.seqAdjust) === sa(b.seqAdjust);
}

/**
 * `connection` given `proxy`'s SYN-proxy fields, each only where present (a connection without them has no such
 * keys), in place. Per-connection paths build connections this way rather than with object spreads: a spread
 * into a literal with fields of its own takes V8's slow path, and on a standby's receive path that made every
 * change outlive the young generation's collections (docs/kernel-io.md, "Object spreads").
 */
export function withProxyState<T extends Pick<SyncedConnection, 'synProxy' | 'seqAdjust'>>(connection: T, proxy: Pick<SyncedConnection, 'synProxy' | 'seqAdjust'>): T {
  const c = connection as { synProxy?: SynProxyState; seqAdjust?: SeqAdjust };
  if (proxy.synProxy) c.synProxy = proxy.synProxy;
  if (proxy.seqAdjust) c.seqAdjust = proxy.seqAdjust;
  return connection;
}

/** What identifies a connection in conntrack: protocol and original tuple. */
export type ConnectionIdentity = Pick<SyncedConnection, 'protocol' | 'client' | 'vip'>;

/** `tcp 198.18.0.1:40000 198.18.0.10:80`: one string per connection, for maps and logs. */
export function connectionKey(f: ConnectionIdentity): string {
  return `${f.protocol} ${endpointText(f.client)} ${endpointText(f.vip)}`;
}

/** A connection as far as its NAT binding: what names one conntrack entry by its reply tuple. */
export type ConnectionBinding = ConnectionIdentity & Pick<SyncedConnection, 'realServer' | 'localAddress'>;

/** Whether two connections have the same NAT binding (real server and local address). */
export function sameBinding(a: ConnectionBinding, b: ConnectionBinding): boolean {
  return a.realServer.address === b.realServer.address && a.realServer.port === b.realServer.port
    && (a.localAddress?.address ?? '') === (b.localAddress?.address ?? '') && (a.localAddress?.port ?? 0) === (b.localAddress?.port ?? 0);
}

function endpointText(e: Endpoint): string {
  return e.address.includes(':') ? `[${e.address}]:${e.port}` : `${e.address}:${e.port}`;
}

export type ConnectionEventKind = 'new' | 'update' | 'destroy';

export interface ConnectionEvent {
  readonly kind: ConnectionEventKind;
  readonly connection: SyncedConnection;
  /** Created by a program (an injection from sync) rather than by a packet. */
  readonly injected: boolean;
  /** When this director read the event (performance.now()). */
  readonly seenAtMs: number;
}

export interface ConnectionWatchHandlers {
  /** Events in kernel order, in batches as they were read. */
  onEvents(events: readonly ConnectionEvent[]): void;
  /**
   * The kernel dropped events (its socket buffer overflowed) or the watch broke (`ended`: no more events
   * come; watch again): what was missed is unknown, so the table must be sent whole again.
   */
  onLoss(reason: string, ended: boolean): void;
}

export interface ConnectionWatch {
  close(): Promise<void>;
  /**
   * The TCP handshakes under way that the watch kept back instead of reporting (lbd-ctnl's keep-young), as
   * updates, each once: taken, they are the caller's to follow (their later events are reported). A watch
   * that reports handshakes as they come, or that cannot answer within its deadline, gives none.
   */
  takeYoung?(): Promise<readonly ConnectionEvent[]>;
}

export type ConnectionChange =
  | { readonly op: 'upsert'; readonly connection: SyncedConnection }
  | { readonly op: 'remove'; readonly connection: ConnectionIdentity }
  /**
   * Removes the connection's entry only while it still has this binding (real server, local address): named by
   * its reply tuple, which only that binding has. A stale copy read some time ago goes, and a copy of the same
   * client connection with another binding, injected since from another peer (a client port reused, a live
   * connection over a leftover), stays.
   */
  | { readonly op: 'remove-binding'; readonly connection: ConnectionBinding };

export interface ConnectionApplyResult {
  /** Entries created (upserts of connections the kernel did not have). */
  readonly inserted: number;
  /**
   * Upserts of connections the kernel had with another binding (deleted and created again), or whose reply
   * tuple another entry held that `evictReplyHolder` let go.
   */
  readonly replaced: number;
  /** Upserts the kernel already had with the same binding: timeout and state refreshed. */
  readonly refreshed: number;
  readonly removed: number;
  /** Changes that could not be made, with the first few reasons. */
  readonly failed: number;
  readonly errors: readonly string[];
}

export interface ConnectionApplyOptions {
  /**
   * The kernel keeps reply tuples unique: an upsert whose reply tuple another entry holds (with another
   * original tuple) is refused. Whether that entry (`holder`) may go to make room for the upsert. Connection
   * sync's receiver answers yes for an entry of a group this director does not lead: a leftover of an
   * earlier life (a director that served a slot, stopped, and saw none of its connections close), which the
   * leader's newer connection replaced (the leader's kernel cannot hold both). Absent: never, and the upsert
   * fails as before. Entries with mark 0 (not lbd's) are never offered.
   */
  readonly evictReplyHolder?: (holder: SyncedConnection) => boolean;
}

export interface ConnectionTable {
  /** Sets the kernel options a takeover in mid-stream needs (see the implementation for which and why). */
  prepare(): Promise<void>;
  /** Follows the kernel's events for lbd's connections (mark ≠ 0) until closed. */
  watch(handlers: ConnectionWatchHandlers): Promise<ConnectionWatch>;
  /** Every lbd connection the kernel has now. */
  dump(): Promise<SyncedConnection[]>;
  /**
   * Makes the changes, in order, as one batch. One bad or racing entry (gone already, there already with
   * another binding) never stops the rest: it is counted and the others are made.
   */
  apply(changes: readonly ConnectionChange[], opts?: ConnectionApplyOptions): Promise<ConnectionApplyResult>;
}
