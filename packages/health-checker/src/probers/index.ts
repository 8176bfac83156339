import { describeTarget } from '../attempt.js';
import type { CheckKind, ProbeOptions, ProbeResult, ProbeTarget, Prober } from '../types.js';
import { ExecProber } from './exec.js';
import { HttpProber } from './http.js';
import { IcmpProber } from './icmp.js';
import { TcpProber } from './tcp.js';
import { UdpProber } from './udp.js';

export { ExecProber } from './exec.js';
export { HttpProber, formatStatus, statusMatches } from './http.js';
export { IcmpProber } from './icmp.js';
export { TcpProber } from './tcp.js';
export { UdpProber } from './udp.js';

/** The real prober for one kind (http and https share one implementation). */
export function createProber(kind: CheckKind): Prober {
  switch (kind) {
    case 'tcp':
      return new TcpProber();
    case 'http':
    case 'https':
      return new HttpProber();
    case 'icmp':
      return new IcmpProber();
    case 'udp':
      return new UdpProber();
    case 'exec':
      return new ExecProber();
  }
}

/**
 * A Prober for every kind: dispatches on `target.kind`. The scheduler takes one Prober; this is the one the
 * agent gives it. Overrides replace a kind's prober (tests, or an exec prober with a trimmed environment).
 * It also holds the "never throws" promise for every prober behind it: a rejection or throw becomes reason
 * 'error', so a bug in one prober cannot stop the scheduler.
 */
export class ProberSet implements Prober {
  private readonly probers: Record<CheckKind, Prober>;

  constructor(overrides: Partial<Record<CheckKind, Prober>> = {}) {
    const http = new HttpProber();
    this.probers = {
      tcp: overrides.tcp ?? new TcpProber(),
      http: overrides.http ?? http,
      https: overrides.https ?? http,
      icmp: overrides.icmp ?? new IcmpProber(),
      udp: overrides.udp ?? new UdpProber(),
      exec: overrides.exec ?? new ExecProber(),
    };
  }

  async probe(target: ProbeTarget, opts: ProbeOptions): Promise<ProbeResult> {
    const prober = this.probers[target.kind] as Prober | undefined;
    if (prober === undefined) {
      return { ok: false, reason: 'error', message: `no prober for check kind ${JSON.stringify(target.kind)}`, durationMs: 0 };
    }
    try {
      return await prober.probe(target, opts);
    } catch (err) {
      return { ok: false, reason: 'error', message: `${describeTarget(target)}: ${err instanceof Error ? err.message : String(err)}`, durationMs: 0 };
    }
  }
}
