import { canonicalAddress, familyOf } from '@lbd/config';

/**
 * One BGP path a director announces: a vip (a host route) with a next hop. In the ECMP tier every director
 * announces each vip once per slot it owns or backs up, with the slot's floating address as next hop, so
 * one prefix has several paths from one speaker: BGP add-path tells them apart by `pathId` (the slot's).
 */
export interface Route {
  /** The vip, IPv4 or IPv6 (announced as /32 or /128). */
  readonly prefix: string;
  readonly nextHop: string;
  /** The add-path identifier, 1 .. 2^32-1: one per path of a prefix. */
  readonly pathId: number;
}

export type SessionState = 'idle' | 'connect' | 'active' | 'opensent' | 'openconfirm' | 'established' | 'unknown';

/** A BGP session to a router, as the speaker reports it. */
export interface BgpSession {
  readonly address: string;
  readonly asn: number;
  readonly state: SessionState;
  /** Paths the speaker sends on this session (after add-path), when it reports them. */
  readonly advertised: number | null;
}

/**
 * Announces vips to the routers. Declarative: `announce` makes the announced set exactly what it is given
 * (new paths added, gone ones withdrawn), so a caller never tracks what it sent. The agent knows nothing of
 * the speaker behind it (GoBGP here; a fake in tests).
 */
export interface Announcer {
  /** Announces exactly `routes`. Rejects with an AnnouncerError; what it could not do is retried by the next call. */
  announce(routes: readonly Route[]): Promise<void>;
  /** Withdraws every path: the data plane cannot serve (announce([]), under a name that says why). */
  withdrawAll(): Promise<void>;
  /** What is announced now, as last confirmed by the speaker. */
  announced(): readonly Route[];
  sessions(): Promise<BgpSession[]>;
  close(): Promise<void>;
}

export type AnnouncerErrorKind = 'InvalidRoute' | 'SpeakerUnavailable' | 'SpeakerRefused' | 'SpeakerMismatch';

export class AnnouncerError extends Error {
  constructor(readonly kind: AnnouncerErrorKind, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'AnnouncerError';
  }
}

export function routeKey(r: Route): string {
  return `${r.prefix} via ${r.nextHop} id ${r.pathId}`;
}

/**
 * Every problem with `routes`, as messages naming the route, the field, the rule and the fix; empty when
 * they can be announced. Addresses must be canonical (the config layer canonicalises them at the edge), so
 * one path has one key.
 */
export function routeProblems(routes: readonly Route[]): string[] {
  const out: string[] = [];
  const ids = new Map<string, string>();
  for (const [i, r] of routes.entries()) {
    const at = `route ${i} (${r.prefix} via ${r.nextHop})`;
    const pf = addressFamily(r.prefix);
    const nf = addressFamily(r.nextHop);
    if (pf === null) out.push(`${at}: prefix ${JSON.stringify(r.prefix)} is not a canonical IPv4 or IPv6 address: give the vip as written in the config`);
    if (nf === null) out.push(`${at}: nextHop ${JSON.stringify(r.nextHop)} is not a canonical IPv4 or IPv6 address`);
    if (pf !== null && nf !== null && pf !== nf) out.push(`${at}: an IPv${pf} vip needs an IPv${pf} next hop (extended next hops are not supported): give the slot an IPv${pf} address`);
    if (!(Number.isInteger(r.pathId) && r.pathId >= 1 && r.pathId <= 0xffffffff)) out.push(`${at}: pathId ${r.pathId} must be an integer from 1 to 4294967295`);
    const other = ids.get(`${r.prefix} id ${r.pathId}`);
    if (other !== undefined && other !== r.nextHop) out.push(`${at}: pathId ${r.pathId} is already the path via ${other}: each path of a prefix needs its own id`);
    ids.set(`${r.prefix} id ${r.pathId}`, r.nextHop);
  }
  return out;
}

/** What moves the announced set to `desired`: paths to add and paths to withdraw (pure; duplicates count once). */
export function planRoutes(announced: Iterable<Route>, desired: readonly Route[]): { add: Route[]; withdraw: Route[] } {
  const want = new Map(desired.map((r) => [routeKey(r), r]));
  const have = new Map([...announced].map((r) => [routeKey(r), r]));
  return {
    add: [...want].filter(([k]) => !have.has(k)).map(([, r]) => r),
    withdraw: [...have].filter(([k]) => !want.has(k)).map(([, r]) => r),
  };
}

function addressFamily(a: string): 4 | 6 | null {
  try {
    return canonicalAddress(a) === a ? familyOf(a) : null;
  } catch {
    return null;
  }
}
