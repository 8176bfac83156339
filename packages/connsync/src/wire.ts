import { isIP } from 'node:net';
import { canonicalAddress } from '@lbd/config';
import { withProxyState, type Endpoint, type ConnectionIdentity, type SeqAdjust, type SyncedConnection, type SynProxyState } from '@lbd/dataplane';
import type { Change, Change__Output, SyncedConnection__Output, ConnectionId__Output, Endpoint__Output, SeqAdjustDirection__Output } from '@lbd/proto';

/**
 * Connections on the wire, both ways. What comes from a peer is checked field by field before anything is
 * injected: a malformed message is refused whole, with the first bad field named.
 */

export type WireChange =
  | { readonly op: 'upsert'; readonly connection: SyncedConnection }
  /** `binding`: the entry the sender removed had it (see Change.removed_real_server); absent from older senders. */
  | { readonly op: 'remove'; readonly connection: ConnectionIdentity; readonly binding?: RemovedBinding };

interface RemovedBinding {
  readonly realServer: Endpoint;
  readonly localAddress: Endpoint | null;
}

export class MalformedMessage extends Error {
  constructor(readonly field: string, readonly value: unknown, readonly rule: string) {
    super(`${field}: ${JSON.stringify(value)} ${rule}`);
    this.name = 'MalformedMessage';
  }
}

/** TCP states conntrack names (and ASSURED/REPLIED/UNREPLIED for UDP): anything else is not a state. */
export const STATES: ReadonlySet<string> = new Set([
  'SYN_SENT', 'SYN_RECV', 'ESTABLISHED', 'FIN_WAIT', 'CLOSE_WAIT', 'LAST_ACK', 'TIME_WAIT', 'CLOSE', 'SYN_SENT2',
  'ASSURED', 'REPLIED', 'UNREPLIED',
]);
/** Longer than conntrack's longest default timeout (5 days, established TCP). */
const MAX_TIMEOUT_SEC = 10 * 24 * 3600;

export function toWireChange(c: WireChange): Change {
  if (c.op === 'remove') {
    const b = c.binding;
    // (Fields set one by one, here and below: spreads into a literal take V8's slow path, per change.)
    const remove: Change = { remove: connectionIdOut(c.connection) };
    if (b) {
      remove.removedRealServer = endpointOut(b.realServer);
      remove.removedLocalAddress = b.localAddress ? endpointOut(b.localAddress) : null;
    }
    return remove;
  }
  const f = c.connection;
  const upsert: Change['upsert'] & object = {
    id: connectionIdOut(f), realServer: endpointOut(f.realServer), localAddress: f.localAddress ? endpointOut(f.localAddress) : null,
    state: f.state, timeoutSec: wireTimeoutSec(f.timeoutSec),
  };
  if (f.synProxy) upsert.synProxy = { isn: f.synProxy.isn, its: f.synProxy.its, tsoff: f.synProxy.tsoff };
  if (f.seqAdjust) upsert.seqAdjust = { original: { ...f.seqAdjust.original }, reply: { ...f.seqAdjust.reply } };
  return { upsert };
}

/**
 * conntrack reports the whole seconds left, rounded down: a connection in its last second reads 0, and a
 * peer refuses a 0 (it would inject nothing that lives). The connection is alive, so it goes as 1 s; a
 * packet that refreshes it sends an update with its new timeout. (Seen in the HA drills: a dump holding a
 * connection in its last second had the standby refuse the stream, and each retry's snapshot again.)
 */
function wireTimeoutSec(sec: number): number {
  return Math.min(MAX_TIMEOUT_SEC, Math.max(1, Math.ceil(sec)));
}

export function connectionIdOut(f: ConnectionIdentity): { protocol: string; client: Endpoint; vip: Endpoint } {
  return { protocol: f.protocol, client: endpointOut(f.client), vip: endpointOut(f.vip) };
}

function endpointOut(e: Endpoint): Endpoint {
  return { address: e.address, port: e.port };
}

/** Checks and converts one received change; the mark is the receiver's to fill in (0 here). */
export function fromWireChange(c: Change__Output, path: string): WireChange {
  if (c.op === 'remove' && c.remove) {
    const connection = connectionIdIn(c.remove, `${path}.remove`);
    if (!c.removedRealServer) return { op: 'remove', connection };
    const v6 = isV6(connection.vip.address);
    const realServer = endpointIn(c.removedRealServer, `${path}.removedRealServer`);
    const localAddress = c.removedLocalAddress ? endpointIn(c.removedLocalAddress, `${path}.removedLocalAddress`) : null;
    if (isV6(realServer.address) !== v6) throw new MalformedMessage(`${path}.removedRealServer.address`, realServer.address, 'is not of the vip\'s address family');
    if (localAddress !== null && isV6(localAddress.address) !== v6) {
      throw new MalformedMessage(`${path}.removedLocalAddress.address`, localAddress.address, 'is not of the vip\'s address family');
    }
    return { op: 'remove', connection, binding: { realServer, localAddress } };
  }
  if (c.op === 'upsert' && c.upsert) return upsertIn(c.upsert, `${path}.upsert`);
  throw new MalformedMessage(path, c.op ?? null, 'is neither an upsert nor a remove');
}

function upsertIn(f: SyncedConnection__Output, path: string): WireChange {
  if (!f.id) throw new MalformedMessage(`${path}.id`, null, 'is missing');
  const id = connectionIdIn(f.id, `${path}.id`);
  if (!f.realServer) throw new MalformedMessage(`${path}.realServer`, null, 'is missing');
  const realServer = endpointIn(f.realServer, `${path}.realServer`);
  const localAddress = f.localAddress ? endpointIn(f.localAddress, `${path}.localAddress`) : null;
  if (!STATES.has(f.state)) throw new MalformedMessage(`${path}.state`, f.state, 'is not a conntrack state');
  if (!Number.isInteger(f.timeoutSec) || f.timeoutSec < 1 || f.timeoutSec > MAX_TIMEOUT_SEC) {
    throw new MalformedMessage(`${path}.timeoutSec`, f.timeoutSec, `is not a timeout from 1 to ${MAX_TIMEOUT_SEC} seconds`);
  }
  const v6 = isV6(id.vip.address);
  if (isV6(realServer.address) !== v6) throw new MalformedMessage(`${path}.realServer.address`, realServer.address, 'is not of the vip\'s address family');
  if (localAddress !== null && isV6(localAddress.address) !== v6) {
    throw new MalformedMessage(`${path}.localAddress.address`, localAddress.address, 'is not of the vip\'s address family');
  }
  const proxy = proxyStateIn(f, path, id.protocol);
  return {
    op: 'upsert',
    connection: withProxyState<SyncedConnection>({ protocol: id.protocol, client: id.client, vip: id.vip, realServer, localAddress, state: f.state, timeoutSec: f.timeoutSec, mark: 0 }, proxy),
  };
}

/** A SYN-proxied connection's state: TCP only, both directions of an adjustment, u32 numbers (protobuf's uint32 holds no other). */
function proxyStateIn(f: SyncedConnection__Output, path: string, protocol: string): Pick<SyncedConnection, 'synProxy' | 'seqAdjust'> {
  const out: { synProxy?: SynProxyState; seqAdjust?: SeqAdjust } = {};
  if ((f.synProxy || f.seqAdjust) && protocol !== 'tcp') {
    throw new MalformedMessage(`${path}.${f.synProxy ? 'synProxy' : 'seqAdjust'}`, f.synProxy ?? f.seqAdjust, 'is SYN-proxy state on a udp connection, which no proxy opens');
  }
  if (f.synProxy) out.synProxy = { isn: f.synProxy.isn, its: f.synProxy.its, tsoff: f.synProxy.tsoff };
  if (f.seqAdjust) {
    const { original, reply } = f.seqAdjust;
    if (!original) throw new MalformedMessage(`${path}.seqAdjust.original`, null, 'is missing (an adjustment has both directions)');
    if (!reply) throw new MalformedMessage(`${path}.seqAdjust.reply`, null, 'is missing (an adjustment has both directions)');
    const dir = (d: SeqAdjustDirection__Output) => ({ correctionPos: d.correctionPos, offsetBefore: d.offsetBefore, offsetAfter: d.offsetAfter });
    out.seqAdjust = { original: dir(original), reply: dir(reply) };
  }
  return out;
}

export function connectionIdIn(f: ConnectionId__Output, path: string): ConnectionIdentity {
  if (f.protocol !== 'tcp' && f.protocol !== 'udp') throw new MalformedMessage(`${path}.protocol`, f.protocol, 'is not tcp or udp');
  if (!f.client) throw new MalformedMessage(`${path}.client`, null, 'is missing');
  if (!f.vip) throw new MalformedMessage(`${path}.vip`, null, 'is missing');
  const client = endpointIn(f.client, `${path}.client`);
  const vip = endpointIn(f.vip, `${path}.vip`);
  if (isV6(client.address) !== isV6(vip.address)) throw new MalformedMessage(`${path}.client.address`, client.address, 'is not of the vip\'s address family');
  return { protocol: f.protocol, client, vip };
}

export function endpointIn(h: Endpoint__Output, path: string): Endpoint {
  // Only plain addresses: a scope id or a name would reach conntrack's command line.
  const family = typeof h.address === 'string' ? isIP(h.address) : 0;
  if (family === 0 || h.address.includes('%')) {
    throw new MalformedMessage(`${path}.address`, h.address, 'is not an IP address');
  }
  if (!Number.isInteger(h.port) || h.port < 1 || h.port > 65535) throw new MalformedMessage(`${path}.port`, h.port, 'is not a port from 1 to 65535');
  // isIP accepts only the one dotted-quad spelling of an IPv4 address; IPv6 has many (compressed or not).
  return { address: family === 4 ? h.address : canonicalAddress(h.address), port: h.port };
}

/**
 * Whether an address endpointIn let through is IPv6 (it holds a colon; an IPv4 address never does). isIP is a
 * regular expression or two, and a change has four addresses to compare: at 100 000 changes that was 5% of a
 * standby's bulk.
 */
function isV6(address: string): boolean {
  return address.includes(':');
}
