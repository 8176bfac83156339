import type { Protocol } from '@lbd/config';
import type { Endpoint, SeqAdjust, SynProxyState } from '@lbd/dataplane';

/** One conntrack entry as `conntrack -L` prints it, before lbd attributes it to a service. */
export interface ConntrackEntry {
  readonly protocol: Protocol;
  readonly state: string;
  readonly expiresInSec: number;
  readonly original: { readonly src: Endpoint; readonly dst: Endpoint };
  readonly reply: { readonly src: Endpoint; readonly dst: Endpoint };
  readonly unreplied: boolean;
  readonly assured: boolean;
  readonly mark: number;
  /** A SYN-proxied connection's state (lbd-ctnl's dump has it; conntrack -L's text does not show it). */
  readonly synProxy?: SynProxyState;
  readonly seqAdjust?: SeqAdjust;
}

/** One line of `conntrack -L` or `conntrack -E` output. */
export interface ConntrackLine {
  readonly entry: ConntrackEntry;
  /** `conntrack -E` only: which event the line reports. */
  readonly event: 'NEW' | 'UPDATE' | 'DESTROY' | null;
  /** `[USERSPACE]`: the entry was created or changed by a program (`conntrack -I/-U/-D`), not by a packet. */
  readonly userspace: boolean;
}

/**
 * Parses `conntrack -L` text (conntrack prints no JSON). Lines of other protocols than tcp and udp, and
 * summary lines, are skipped.
 */
export function parseConntrack(output: string): ConntrackEntry[] {
  const out: ConntrackEntry[] = [];
  for (const line of output.split('\n')) {
    const parsed = parseConntrackLine(line);
    if (parsed) out.push(parsed.entry);
  }
  return out;
}

const EVENTS = new Set(['[NEW]', '[UPDATE]', '[DESTROY]']);

/**
 * Parses one line of `conntrack -L` or `conntrack -E` (either with `-o extended`, `-o id`): null for other
 * protocols than tcp and udp, summaries and warnings.
 */
export function parseConntrackLine(line: string): ConntrackLine | null {
  const tokens = line.trim().split(/\s+/);
  // `conntrack -E` starts each line with the event: `[NEW] ipv4 2 tcp 6 300 ...`.
  let event: ConntrackLine['event'] = null;
  if (EVENTS.has(tokens[0] ?? '')) event = tokens.shift()!.slice(1, -1) as ConntrackLine['event'];
  // With `-o extended` each line starts with the layer-3 name and number.
  if (tokens[0] === 'ipv4' || tokens[0] === 'ipv6') tokens.splice(0, 2);
  const protocol = tokens[0];
  if (protocol !== 'tcp' && protocol !== 'udp') return null;
  let i = 2;
  // A DESTROY event of an entry that expired has no timeout column.
  const expiresInSec = /^\d+$/.test(tokens[i] ?? '') ? Number(tokens[i++]) : 0;
  let state = '';
  if (tokens[i] !== undefined && !tokens[i]!.includes('=') && !tokens[i]!.startsWith('[')) state = tokens[i++]!;
  const tuples: Array<Record<string, string>> = [{}, {}];
  let t = 0;
  let unreplied = false;
  let assured = false;
  let userspace = false;
  let mark = 0;
  for (; i < tokens.length; i++) {
    const tok = tokens[i]!;
    if (tok === '[UNREPLIED]') { unreplied = true; continue; }
    if (tok === '[ASSURED]') { assured = true; continue; }
    if (tok === '[USERSPACE]') { userspace = true; continue; }
    const eq = tok.indexOf('=');
    if (eq < 0) continue;
    const k = tok.slice(0, eq);
    const v = tok.slice(eq + 1);
    if (k === 'mark') { mark = Number(v); continue; }
    if (k === 'src' || k === 'dst' || k === 'sport' || k === 'dport') {
      if (tuples[t]![k] !== undefined) t = 1;
      if (t < 2) tuples[t]![k] = v;
    }
  }
  const [o, r] = tuples as [Record<string, string>, Record<string, string>];
  if (!o.src || !o.dst || !r.src || !r.dst) return null;
  const ep = (tuple: Record<string, string>, a: 'src' | 'dst'): Endpoint => ({
    address: tuple[a]!, port: Number(tuple[a === 'src' ? 'sport' : 'dport'] ?? 0),
  });
  if (protocol === 'udp') state = unreplied ? 'UNREPLIED' : assured ? 'ASSURED' : 'REPLIED';
  return {
    event,
    userspace,
    entry: {
      protocol, state, expiresInSec, unreplied, assured, mark,
      original: { src: ep(o, 'src'), dst: ep(o, 'dst') },
      reply: { src: ep(r, 'src'), dst: ep(r, 'dst') },
    },
  };
}

/** `conntrack -D` prints "N flow entries have been deleted." on stderr. */
export function parseDeletedCount(stderr: string): number {
  const m = /(\d+) flow entr(?:y|ies) ha(?:ve|s) been deleted/.exec(stderr);
  return m ? Number(m[1]) : 0;
}
