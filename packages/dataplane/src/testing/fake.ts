import { serviceKey } from '@lbd/config';
import { DataPlaneError } from '../errors.js';
import { realServerIdsOf } from '../real-servers.js';
import type {
  ApplyOptions, ApplyResult, Connection, ConnectionFilter, DataPlane, DesiredState, Endpoint, KernelFacts, ObservedState, RealServerId,
} from '../types.js';

/**
 * An in-memory DataPlane for scenario tests of the agent and lbadm. Not a simulation of forwarding:
 * it records what was applied and can be told to fail, so callers' error paths can be tested.
 */
export class FakeDataPlane implements DataPlane {
  applied: DesiredState = { services: [] };
  applyCount = 0;
  /** Set to make the next apply fail with this error (then it is cleared). */
  failNextApply: Error | null = null;
  conns: Connection[] = [];
  facts: KernelFacts = {
    ipv4Forwarding: true, ipv6Forwarding: true, rpFilter: {}, rpFilterDrops: 0, conntrackCount: 0,
    conntrackMax: 262144, localPortRange: [32768, 60999], realServerReachable: {}, directorAddressTowards: {}, permanentAddresses: [], vipArpAnswers: [], vipOnRealServer: [],
  };

  async apply(desired: DesiredState, opts: ApplyOptions = {}): Promise<ApplyResult> {
    if (this.failNextApply) {
      const err = this.failNextApply;
      this.failNextApply = null;
      throw err instanceof DataPlaneError ? err : new DataPlaneError('Unknown', 'apply', { cause: err });
    }
    const before = JSON.stringify(this.applied);
    const after = JSON.stringify(desired);
    const changed = before !== after;
    if (!opts.dryRun && changed) {
      this.applied = structuredClone(desired);
      this.applyCount++;
    }
    return { changed, operations: changed ? [`# fake: ${desired.services.length} services`] : [], fullRebuild: false, expiredConnections: 0, durationMs: 0 };
  }

  async observe(): Promise<ObservedState> {
    let id = 0;
    return {
      services: this.applied.services.map((s) => ({
        key: serviceKey(s), vip: s.vip, port: s.port, protocol: s.protocol, counters: { packets: 0, bytes: 0 }, limitDrops: { packets: this.drops.get(serviceKey(s)) ?? 0, bytes: 0 },
        realServers: s.realServers.map((rs) => ({
          address: rs.address, port: rs.port, realServerId: ++id, quiescent: rs.weight === 0, counters: { packets: 0, bytes: 0 },
        })),
      })),
    };
  }

  /** Set by a test: what limitDrops() and observe() report per service key. */
  readonly drops = new Map<string, number>();

  async limitDrops(): Promise<ReadonlyMap<string, number>> {
    return new Map(this.drops);
  }

  async realServerIds(): Promise<readonly RealServerId[]> {
    return realServerIdsOf(await this.observe());
  }

  async connections(filter: ConnectionFilter = {}): Promise<Connection[]> {
    return this.conns.filter((c) => filter.service === undefined || c.service === filter.service);
  }

  async kernelFacts(_probe: readonly Endpoint[]): Promise<KernelFacts> {
    return this.facts;
  }

  /** The slot interfaces asked for last: parent and count (null: never asked). */
  slotInterfaces: { parent: string; count: number } | null = null;

  async prepareSlots(parent: string, count: number): Promise<void> {
    this.slotInterfaces = { parent, count };
  }
}
