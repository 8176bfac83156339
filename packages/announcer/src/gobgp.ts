import type * as grpc from '@grpc/grpc-js';
import { familyOf } from '@lbd/config';
import { AnnouncerError, planRoutes, routeKey, routeProblems, type Announcer, type BgpSession, type Route, type SessionState } from './announcer.js';
import { gobgpClient, packAny } from './gobgp-api.js';
import type { GobgpApiClient } from './gen/apipb/GobgpApi.js';
import type { Path } from './gen/apipb/Path.js';
import type { Peer, Peer__Output } from './gen/apipb/Peer.js';

export interface BgpPeer {
  /** The router's address. */
  readonly address: string;
  readonly asn: number;
  /** Seconds (BGP's own unit); the router's BFD is what detects a dead director fast. Default 9 / 3. */
  readonly holdTimeSec?: number;
  readonly keepaliveSec?: number;
}

/**
 * Path attributes, identical on every director: a router merges paths into one ECMP group only when they
 * match (an IGP origin beside an incomplete one silently broke multipath in the lab).
 */
export interface PathAttributes {
  readonly origin?: 'igp' | 'egp' | 'incomplete';
  readonly med?: number;
  /** `ASN:VALUE` pairs. */
  readonly communities?: readonly string[];
}

export interface GoBgpAnnouncerOptions {
  /** gobgpd's gRPC API, `host:port` (gobgpd `--api-hosts`). */
  readonly api: string;
  readonly asn: number;
  readonly routerId: string;
  readonly peers: readonly BgpPeer[];
  readonly attributes?: PathAttributes;
  /** Deadline of each API call (default 2 000 ms). */
  readonly callTimeoutMs?: number;
}

const ORIGIN = { igp: 0, egp: 1, incomplete: 2 } as const;
/** GoBGP's answer to a DeletePath whose path it does not hold (pkg/server: "can't find a specified path"). */
const PATH_GONE = /can't find a specified path/;
/** Most paths a session sends per prefix (add-path send-max): the ECMP tier's slots are at most this many. */
export const MAX_PATHS_PER_PREFIX = 64;

/**
 * The Announcer over GoBGP's gRPC API. `connect` starts BGP in a gobgpd that is not started yet, or adopts
 * one that is (same AS and router id, else SpeakerMismatch), adds the peers with add-path, and withdraws
 * every path an earlier run left (so what is announced is only what this announcer says). gobgpd passes no
 * route into the kernel (no zebra): the agent puts nothing in the routing table for BGP's sake. A new
 * session comes up 5-10 s after its peer is added (GoBGP 3.10's connect loop); what that and the rest of
 * GoBGP's behaviour mean here: docs/measurements/gobgp-frr.md.
 */
export class GoBgpAnnouncer implements Announcer {
  /** Announced paths by routeKey, with the uuid GoBGP gave each (DeletePath by uuid). */
  private current = new Map<string, { route: Route; uuid: Buffer }>();
  private turn: Promise<unknown> = Promise.resolve();

  private constructor(private readonly client: GobgpApiClient, private readonly opts: GoBgpAnnouncerOptions) {}

  static async connect(opts: GoBgpAnnouncerOptions): Promise<GoBgpAnnouncer> {
    const a = new GoBgpAnnouncer(gobgpClient(opts.api), opts);
    try {
      await a.start();
    } catch (e) {
      a.client.close();
      throw e;
    }
    return a;
  }

  announce(routes: readonly Route[]): Promise<void> {
    const problems = routeProblems(routes);
    if (problems.length > 0) return Promise.reject(new AnnouncerError('InvalidRoute', `cannot announce: ${problems.join('; ')}`));
    // One change at a time: a second call plans from what the first one left.
    const run = this.turn.then(() => this.apply(routes));
    this.turn = run.catch(() => { /* the caller gets this failure; the next change plans from what did land */ });
    return run;
  }

  withdrawAll(): Promise<void> {
    return this.announce([]);
  }

  announced(): readonly Route[] {
    return [...this.current.values()].map((c) => c.route);
  }

  async sessions(): Promise<BgpSession[]> {
    const peers = await this.stream<{ peer?: Peer__Output | null }>((c, d) => c.listPeer({ address: '', enableAdvertised: true }, { deadline: d }), 'ListPeer');
    return peers.flatMap(({ peer }) => (peer ? [session(peer)] : []));
  }

  async close(): Promise<void> {
    await this.turn;
    this.client.close();
  }

  private async start(): Promise<void> {
    const o = this.opts;
    const bgp = await this.call<{ global?: { asn?: number; routerId?: string } | null }>((c, d, cb) => c.getBgp({}, { deadline: d }, cb), 'GetBgp');
    const g = bgp.global;
    if (g && (g.asn ?? 0) !== 0) {
      if (g.asn !== o.asn || g.routerId !== o.routerId) {
        throw new AnnouncerError('SpeakerMismatch', `gobgpd at ${o.api} already runs as AS ${g.asn ?? 0}, router id ${g.routerId ?? ''}; this director is configured as AS ${o.asn}, router id ${o.routerId}: stop that gobgpd, or configure the same`);
      }
    } else {
      // listenPort -1: directors dial the routers (which accept a range), nobody dials a director.
      await this.call((c, d, cb) => c.startBgp({ global: { asn: o.asn, routerId: o.routerId, listenPort: -1 } }, { deadline: d }, cb), 'StartBgp');
    }
    const existing = new Set((await this.sessions()).map((s) => s.address));
    for (const p of o.peers) {
      if (existing.has(p.address)) continue;
      await this.call((c, d, cb) => c.addPeer({ peer: peerConfig(p) }, { deadline: d }, cb), `AddPeer ${p.address}`);
    }
    // Paths an earlier run of the agent left in an adopted gobgpd: no uuid here to withdraw them by.
    await this.call((c, d, cb) => c.deletePath({ tableType: 'GLOBAL' }, { deadline: d }, cb), 'DeletePath (all)');
  }

  private async apply(routes: readonly Route[]): Promise<void> {
    // A gobgpd that restarted (GobgpdProcess starts it again) kept nothing: set it up again and announce
    // everything anew. One cheap call per change.
    const bgp = await this.call<{ global?: { asn?: number } | null }>((c, d, cb) => c.getBgp({}, { deadline: d }, cb), 'GetBgp');
    if ((bgp.global?.asn ?? 0) === 0) {
      this.current.clear();
      await this.start();
    }
    const plan = planRoutes(this.announced(), routes);
    // A path re-added under its prefix and id with another next hop replaces the old one in GoBGP (its key is
    // prefix and id): adding first and withdrawing the old uuid after would find nothing to withdraw.
    const readded = new Set(plan.add.map((r) => `${r.prefix} id ${r.pathId}`));
    for (const r of plan.add) {
      const res = await this.call<{ uuid?: Buffer }>((c, d, cb) => c.addPath({ tableType: 'GLOBAL', path: this.path(r) }, { deadline: d }, cb), `AddPath ${routeKey(r)}`);
      for (const [k, c] of this.current) if (c.route.prefix === r.prefix && c.route.pathId === r.pathId) this.current.delete(k);
      this.current.set(routeKey(r), { route: r, uuid: res.uuid ?? Buffer.alloc(0) });
    }
    for (const r of plan.withdraw) {
      if (readded.has(`${r.prefix} id ${r.pathId}`)) continue;
      const held = this.current.get(routeKey(r));
      if (!held) continue;
      try {
        await this.call((c, d, cb) => c.deletePath({ tableType: 'GLOBAL', uuid: held.uuid }, { deadline: d }, cb), `DeletePath ${routeKey(r)}`);
      } catch (err) {
        // Gone already: a DeletePath whose answer never came (a busy gobgpd past the call's deadline) may have been
        // done all the same, and its retry finds nothing. Failing on it kept the director's other paths announced
        // for good, a director withdrawing because it could blackhole among them (an ECMP drill under load).
        if (!(err instanceof AnnouncerError && err.kind === 'SpeakerRefused' && PATH_GONE.test(err.message))) throw err;
      }
      this.current.delete(routeKey(r));
    }
  }

  private path(r: Route): Path {
    const a = this.opts.attributes ?? {};
    const v6 = familyOf(r.prefix) === 6;
    const family = { afi: v6 ? 'AFI_IP6' : 'AFI_IP', safi: 'SAFI_UNICAST' } as const;
    const nlri = packAny('IPAddressPrefix', { prefixLen: v6 ? 128 : 32, prefix: r.prefix });
    const pattrs = [packAny('OriginAttribute', { origin: ORIGIN[a.origin ?? 'igp'] })];
    // IPv6 next hops travel in MP_REACH_NLRI; IPv4 ones in NEXT_HOP.
    pattrs.push(v6 ? packAny('MpReachNLRIAttribute', { family, nextHops: [r.nextHop], nlris: [nlri] }) : packAny('NextHopAttribute', { nextHop: r.nextHop }));
    if (a.med !== undefined) pattrs.push(packAny('MultiExitDiscAttribute', { med: a.med }));
    if (a.communities && a.communities.length > 0) pattrs.push(packAny('CommunitiesAttribute', { communities: a.communities.map(community) }));
    return { nlri, pattrs, family, identifier: r.pathId };
  }

  private call<T = unknown>(fn: (c: GobgpApiClient, deadline: Date, cb: (err: grpc.ServiceError | null, res?: T) => void) => unknown, what: string): Promise<T> {
    return new Promise((resolve, reject) => {
      fn(this.client, this.deadline(), (err, res) => {
        if (err) reject(speakerError(this.opts.api, what, err));
        else resolve(res as T);
      });
    });
  }

  private stream<T>(fn: (c: GobgpApiClient, deadline: Date) => grpc.ClientReadableStream<T>, what: string): Promise<T[]> {
    return new Promise((resolve, reject) => {
      const out: T[] = [];
      const s = fn(this.client, this.deadline());
      s.on('data', (m: T) => out.push(m));
      s.on('error', (err: grpc.ServiceError) => reject(speakerError(this.opts.api, what, err)));
      s.on('end', () => resolve(out));
    });
  }

  private deadline(): Date {
    return new Date(Date.now() + (this.opts.callTimeoutMs ?? 2000));
  }
}

function peerConfig(p: BgpPeer): Peer {
  const family = familyOf(p.address) === 6 ? 'AFI_IP6' : 'AFI_IP';
  const afiSafi = (afi: 'AFI_IP' | 'AFI_IP6') => ({
    config: { family: { afi, safi: 'SAFI_UNICAST' as const }, enabled: true },
    addPaths: { config: { receive: false, sendMax: MAX_PATHS_PER_PREFIX } },
  });
  return {
    conf: { neighborAddress: p.address, peerAsn: p.asn },
    timers: { config: { holdTime: p.holdTimeSec ?? 9, keepaliveInterval: p.keepaliveSec ?? 3, connectRetry: 1 } },
    // Both families on one session: a vip of either family reaches the router whatever the session runs over.
    afiSafis: family === 'AFI_IP' ? [afiSafi('AFI_IP'), afiSafi('AFI_IP6')] : [afiSafi('AFI_IP6'), afiSafi('AFI_IP')],
  };
}

function session(p: Peer__Output): BgpSession {
  const st = p.state;
  const state = (st?.sessionState ?? 'UNKNOWN').toLowerCase() as SessionState;
  let advertised: number | null = null;
  for (const a of p.afiSafis) {
    const n = a.state?.advertised;
    if (typeof n === 'number') advertised = (advertised ?? 0) + n;
  }
  return { address: p.conf?.neighborAddress ?? st?.neighborAddress ?? '', asn: p.conf?.peerAsn ?? st?.peerAsn ?? 0, state, advertised };
}

function community(c: string): number {
  const m = /^(\d{1,5}):(\d{1,5})$/.exec(c);
  if (!m || Number(m[1]) > 0xffff || Number(m[2]) > 0xffff) throw new AnnouncerError('InvalidRoute', `community ${JSON.stringify(c)}: must be ASN:VALUE, each 0-65535`);
  return Number(m[1]) * 0x10000 + Number(m[2]);
}

function speakerError(api: string, what: string, err: grpc.ServiceError): AnnouncerError {
  // 14 UNAVAILABLE, 4 DEADLINE_EXCEEDED: gobgpd is not there (or not answering); anything else it refused.
  const kind = err.code === 14 || err.code === 4 ? 'SpeakerUnavailable' : 'SpeakerRefused';
  return new AnnouncerError(kind, `gobgpd at ${api}: ${what}: ${err.details || err.message}`, { cause: err });
}
