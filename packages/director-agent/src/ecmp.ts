import { createHash } from 'node:crypto';
import { AnnouncerError, GoBgpAnnouncer, GobgpdProcess, type Announcer, type BgpSession, type Route } from '@lbd/announcer';
import {
  addressToBigInt, bigIntToAddress, slotGroup, slotInterface, type ClusterSettings, type Config, type DirectorEcmp, type EcmpTier,
} from '@lbd/config';
import type { DesiredSlot, FloatingAddress } from '@lbd/dataplane';
import type { Logger } from '@lbd/log';
import type { GroupPlan } from './election-core.js';
import type { EventLog } from './events.js';

/**
 * The ECMP tier on one director (DESIGN.md "ECMP tier"): what its slots are to the election and the data
 * plane, and what it announces to the routers. Pure functions for the first; EcmpSpeaker for the second.
 *
 * A slot is elected exactly like a vip group (group `slot-<i>`): its leader holds the slot's next-hop
 * address (on the slot's macvlan, so the router's neighbour entry names the slot's own MAC) and its local
 * addresses, under the kernel lease, and sends the slot's connections to its peers.
 */

/** Bound on expanding a local-address range into floating addresses (as for vip groups). */
const MAX_FLOATING_PER_RANGE = 1024;

/** A director's rendezvous (highest-random-weight) score for a slot: the same on every director. */
function slotScore(director: string, slot: number): number {
  return createHash('sha256').update(`${director}\0${slotGroup(slot)}`).digest().readUInt32BE(0);
}

/** Priorities by rank: the owner's 254, then 10 less per rank (1 at the least), so ranks stay apart. */
const RANK_PRIORITY = (rank: number): number => (rank < 0 ? 1 : Math.max(1, 254 - 10 * rank));

/**
 * Every member's rank for every slot (index 0: the owner), computed alike on every director from the tier's
 * members (a director and its configured peers: every director of a tier lists the same set).
 *
 * Owners are balanced: each member owns ⌊S/N⌋ or ⌈S/N⌉ slots. Plain rendezvous hashing gave 3 / 1 / 0 for
 * three directors and 4 slots, and 4 / 2 / 2 with 8; the spread of new connections follows the slots a
 * director owns, so that was a director with twice the load of another. The owners come from the
 * (director, slot) pairs in descending rendezvous score, first up to ⌊S/N⌋ slots each, then one more
 * each for the slots left. The other ranks follow the score. A member joining or leaving moves about
 * S/N slots, sometimes twice that (8 slots, 3 → 4 directors: 5 of 8 move, where plain rendezvous moved the 4
 * the newcomer ranked first for): every move waits for its bulk sync (preempt after-sync), so it costs a
 * handover, not connections. A provisioned director (listed as a peer before it runs) changes no ranks
 * when it starts: it takes back exactly the slots it owns.
 */
export function slotRanks(members: readonly string[], slots: number): string[][] {
  const ms = [...new Set(members)].sort();
  const pairs: Array<{ score: number; director: string; slot: number }> = [];
  for (let slot = 0; slot < slots; slot++) for (const director of ms) pairs.push({ score: slotScore(director, slot), director, slot });
  pairs.sort((a, b) => b.score - a.score || (a.director < b.director ? -1 : a.director > b.director ? 1 : a.slot - b.slot));
  const owner: Array<string | null> = new Array<string | null>(slots).fill(null);
  const owned = new Map(ms.map((d) => [d, 0]));
  const floor = Math.floor(slots / Math.max(1, ms.length));
  for (const cap of [floor, floor + 1]) {
    for (const p of pairs) {
      if (owner[p.slot] === null && owned.get(p.director)! < cap) {
        owner[p.slot] = p.director;
        owned.set(p.director, owned.get(p.director)! + 1);
      }
    }
  }
  return owner.map((o, slot) => {
    const rest = ms.filter((d) => d !== o).sort((a, b) => slotScore(b, slot) - slotScore(a, slot) || (a < b ? -1 : 1));
    return o === null ? rest : [o, ...rest];
  });
}

/** The slots as the data plane programs them (the same on every director). */
export function desiredSlots(tier: EcmpTier | null): DesiredSlot[] {
  if (tier === null) return [];
  return Array.from({ length: tier.slots }, (_, i) => ({
    index: i, ifname: slotInterface(i),
    localAddresses: { ipv4: tier.ipv4?.localAddresses[i] ?? null, ipv6: tier.ipv6?.localAddresses[i] ?? null },
  }));
}

/**
 * What the leader of slot `i` claims: its next hops on the slot's macvlan, its local addresses on the local
 * interface. A next hop solicits the routers of its family, so that each has resolved it before its first
 * packet (a Linux router's hash-threshold group otherwise sends that packet to another slot: see
 * FloatingAddress.solicit).
 */
export function slotAddresses(tier: EcmpTier, i: number, localInterface: string): FloatingAddress[] {
  const out: FloatingAddress[] = [];
  for (const fam of [tier.ipv4, tier.ipv6]) {
    if (fam === null) continue;
    const family = fam.nextHops[i]!.includes(':') ? 6 : 4;
    const routers = tier.routers.map((r) => r.address).filter((a) => a.includes(':') === (family === 6));
    out.push({ address: fam.nextHops[i]!, ifname: slotInterface(i), ...(routers.length > 0 ? { solicit: routers } : {}) });
    const range = fam.localAddresses[i]!;
    const first = addressToBigInt(range.first);
    for (let k = 0; k < Math.min(range.size, MAX_FLOATING_PER_RANGE); k++) out.push({ address: bigIntToAddress(first + BigInt(k), family), ifname: localInterface });
  }
  return out;
}

/** The election's plan for every slot of the tier (none when this director has no agent.cluster.ecmp). */
export function slotPlans(tier: EcmpTier | null, settings: ClusterSettings): GroupPlan[] {
  if (tier === null || settings.ecmp === null) return [];
  const ranks = slotRanks([settings.director, ...settings.peers.map((p) => p.id)], tier.slots);
  return Array.from({ length: tier.slots }, (_, i) => ({
    settings: {
      name: slotGroup(i), priority: settings.priorities[slotGroup(i)] ?? RANK_PRIORITY(ranks[i]!.indexOf(settings.director)),
      preempt: tier.preempt, preemptDelayMs: tier.preemptDelayMs,
    },
    addresses: slotAddresses(tier, i, settings.interfaces.local),
    announce: tier.announce,
  }));
}

/**
 * The paths a fit director announces: every ECMP vip once per slot, with the slot's next hop (path id =
 * slot + 1). Every fit director announces every slot, not only those it owns or backs up: the router
 * merges identical next hops, so the paths of one slot from several directors are one member of its ECMP
 * group, and the group changes only when no fit director is left at all. A director that leaves (dies,
 * loses its BGP session, withdraws) thus changes nothing at the router but a neighbour entry, whichever
 * slots it held, and which director holds a slot is the election's business alone.
 */
export function tierRoutes(config: Config): Route[] {
  const tier = config.ecmp;
  if (tier === null) return [];
  const out: Route[] = [];
  const seen = new Set<string>();
  for (const s of config.services) {
    if (!s.ecmp || seen.has(s.vip)) continue;
    seen.add(s.vip);
    const fam = s.family === 4 ? tier.ipv4 : tier.ipv6;
    if (fam === null) continue;
    for (let i = 0; i < tier.slots; i++) out.push({ prefix: s.vip, nextHop: fam.nextHops[i]!, pathId: i + 1 });
  }
  return out;
}

/** What connects an Announcer for a tier's BGP settings (GoBGP in lbd-agent, a fake in tests). */
export type AnnouncerFactory = (tier: EcmpTier, director: DirectorEcmp) => Promise<Announcer>;

export interface EcmpSpeakerStatus {
  readonly announced: readonly Route[];
  /** Why nothing is announced although the tier has vips (unfit, speaker down), or ''. */
  readonly withdrawnBecause: string;
  readonly lastError: string;
}

/** How long after a failed announce the speaker tries again (without a change to prompt it). */
const RETRY_MS = 2000;
/** How often the BGP sessions' states are read from the speaker, to record their changes as events. */
const SESSION_POLL_MS = 2000;

/**
 * Keeps the routers' view of this director right: the tier's paths while this director is fit to serve
 * them, none while it is not (its data plane failed to apply, a track check fails, it is stopping): a
 * director withdraws before it could blackhole. Changes are serialised and the latest wins; a failed one
 * is retried. The BGP settings (AS, routers, attributes) are given to the speaker at connect, so a change
 * of them reconnects.
 */
export class EcmpSpeaker {
  private announcer: Announcer | null = null;
  private connectedFor = '';
  private desired: { config: Config | null; unfit: string | null } = { config: null, unfit: null };
  private running: Promise<void> | null = null;
  private again = false;
  private lastError = '';
  private withdrawnBecause = '';
  private retry: NodeJS.Timeout | null = null;
  private closed = false;
  /** Each router's session state as last read (pollSessions), for the `bgp` events of its changes. */
  private readonly sessionStates = new Map<string, string>();
  private lastSessions: readonly BgpSession[] = [];
  private readonly sessionTimer: NodeJS.Timeout;

  constructor(private readonly o: {
    readonly director: DirectorEcmp; readonly connect: AnnouncerFactory; readonly log: Logger; readonly events: EventLog; readonly self: string;
  }) {
    this.sessionTimer = setInterval(() => { void this.pollSessions(); }, SESSION_POLL_MS);
    this.sessionTimer.unref();
  }

  /**
   * Reads the sessions from the speaker and records a `bgp` event (subject `session <router>`) for each
   * state that changed since the last read. Runs every SESSION_POLL_MS; a session lost for less than that
   * may go unrecorded (the router's log has it).
   */
  async pollSessions(): Promise<void> {
    if (this.announcer === null) return;
    const sessions = await this.announcer.sessions().catch(() => null);
    if (sessions === null) return;
    // A speaker lists every router it was given, whatever the session's state: a router that left the list
    // means the speaker was restarted (gobgpd keeps nothing). Announcing again sets it up anew (the
    // announcer checks for that on every change); without a change nothing would, and the director's paths
    // stayed gone after gobgpd was killed and started again.
    const vanished = this.lastSessions.some((was) => !sessions.some((x) => x.address === was.address));
    this.lastSessions = sessions;
    if (vanished) {
      this.o.log.warn('ecmp: the BGP speaker lost its routers (restarted?): setting it up and announcing again', { routers: sessions.map((x) => x.address) });
      void this.kick();
    }
    for (const x of sessions) {
      const was = this.sessionStates.get(x.address) ?? '';
      if (was === x.state) continue;
      this.sessionStates.set(x.address, x.state);
      const up = x.state === 'established';
      if (was !== '' || !up) this.o.log.info('ecmp: BGP session state changed', { router: x.address, from: was || 'none', to: x.state });
      this.o.events.record('bgp', `session ${x.address}`, was, x.state,
        up ? `BGP session to ${x.address} (AS ${x.asn}) established: the router hears this director's paths`
          : `BGP session to ${x.address} (AS ${x.asn}) is ${x.state}: the router has none of this director's paths (the slots' other announcers keep them)`,
        { router: x.address, asn: x.asn });
    }
  }

  /** The running config and whether this director is unfit (the reason) or fit (null). */
  update(config: Config | null, unfit: string | null): Promise<void> {
    this.desired = { config, unfit };
    return this.kick();
  }

  status(): EcmpSpeakerStatus {
    return { announced: this.announcer?.announced() ?? [], withdrawnBecause: this.withdrawnBecause, lastError: this.lastError };
  }

  /** The sessions as last read (pollSessions): status calls ask gobgpd nothing of their own. */
  sessions(): readonly BgpSession[] {
    return this.announcer === null ? [] : this.lastSessions;
  }

  /** Withdraws every path and lets the speaker go. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sessionTimer);
    if (this.retry !== null) clearTimeout(this.retry);
    await this.running;
    const a = this.announcer;
    this.announcer = null;
    if (a === null) return;
    await a.withdrawAll().catch((err: unknown) => this.o.log.warn('ecmp: withdrawing the paths at stop failed', { error: err }));
    await a.close();
  }

  private kick(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.running !== null) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        await this.step();
      } while (this.again && !this.closed);
    })().finally(() => { this.running = null; });
    return this.running;
  }

  private async step(): Promise<void> {
    const { config, unfit } = this.desired;
    const tier = config?.ecmp ?? null;
    try {
      if (tier === null) {
        if (this.announcer !== null) await this.disconnect('the cluster config has no ECMP tier');
        return;
      }
      const key = JSON.stringify({ asn: tier.asn, routers: tier.routers, attributes: tier.attributes });
      if (this.announcer !== null && key !== this.connectedFor) await this.disconnect('the tier\'s BGP settings changed');
      if (this.announcer === null) {
        this.announcer = await this.o.connect(tier, this.o.director);
        this.connectedFor = key;
        void this.pollSessions();
        this.o.log.info('ecmp: speaker connected', { asn: tier.asn, routers: tier.routers.map((r) => r.address) });
      }
      const routes = unfit === null ? tierRoutes(config!) : [];
      const before = this.announcer.announced().length;
      await this.announcer.announce(routes);
      const why = unfit ?? '';
      if (why !== this.withdrawnBecause || (before === 0) !== (routes.length === 0)) {
        const what = routes.length === 0 ? 'withdrawn' : 'announced';
        this.o.log.info(`ecmp: paths ${what}`, { paths: routes.length, reason: why || 'fit to serve' });
        this.o.events.record('bgp', `director ${this.o.self}`, before === 0 ? 'withdrawn' : 'announced', what,
          routes.length === 0 ? `every path withdrawn: ${why || 'no ECMP vip'}` : `${routes.length} paths announced: this director is fit to serve the tier`, { paths: routes.length });
      }
      this.withdrawnBecause = why;
      if (this.lastError !== '') this.o.log.info('ecmp: speaker working again', { was: this.lastError });
      this.lastError = '';
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (message !== this.lastError) this.o.log.error('ecmp: announcing failed; trying again', { error: message, kind: err instanceof AnnouncerError ? err.kind : undefined, retryInMs: RETRY_MS });
      this.lastError = message;
      if (this.retry === null && !this.closed) {
        this.retry = setTimeout(() => { this.retry = null; void this.kick(); }, RETRY_MS);
        this.retry.unref();
      }
    }
  }

  private async disconnect(why: string): Promise<void> {
    const a = this.announcer!;
    this.announcer = null;
    this.o.log.info('ecmp: speaker disconnected', { reason: why });
    await a.withdrawAll().catch(() => { /* the speaker may be gone: its session's end withdraws them at the router */ });
    await a.close();
  }
}

/** The socket path of a `unix:///path` API address, or null for `host:port`. */
export function unixSocketOf(api: string): string | null {
  return api.startsWith('unix://') ? api.slice('unix://'.length) : null;
}

/**
 * lbd-agent's AnnouncerFactory: GoBGP over its API, with gobgpd started and supervised here when
 * agent.cluster.ecmp.runGobgpd (gobgpd keeps nothing across restarts; GoBgpAnnouncer sets a restarted one up
 * again). `stop` ends the gobgpd this started (its sessions end, so the routers drop its paths at once).
 */
export function goBgpAnnouncers(log: Logger): { readonly connect: AnnouncerFactory; stop(): Promise<void> } {
  let gobgpd: GobgpdProcess | null = null;
  return {
    connect: async (tier, d) => {
      if (d.runGobgpd && gobgpd === null) {
        const socket = unixSocketOf(d.gobgpApi);
        if (socket === null) throw new AnnouncerError('SpeakerUnavailable', `agent.cluster.ecmp.runGobgpd needs a unix:// gobgpApi, not ${d.gobgpApi}`);
        // setpriv --pdeathsig: a gobgpd outliving a killed agent would keep its session (and collide with
        // the next agent's gobgpd, same router id); the kernel ends it with the agent instead.
        const p = new GobgpdProcess({
          socket, command: ['setpriv', '--pdeathsig', 'KILL', '--', 'gobgpd'], onEvent: (msg, fields) => log.warn(`ecmp: ${msg}`, fields),
        });
        await p.start();
        gobgpd = p;
      }
      const { origin, med, communities } = tier.attributes;
      return GoBgpAnnouncer.connect({
        api: d.gobgpApi, asn: tier.asn, routerId: d.routerId, peers: tier.routers,
        attributes: { origin, communities, ...(med === null ? {} : { med }) },
      });
    },
    stop: async () => { await gobgpd?.stop(); },
  };
}
