import type { ClusterStatus, GetHealthResponse, GetStatusResponse, HealthEvent } from '@lbd/proto';
import type { HealthSink } from '../admin-server.js';
import type { DashboardBackend } from '../dashboard/routes.js';
import type { EventKind, HealthState, LbdEvent } from '@lbd/config';
import type { EventSource } from '../ops-types.js';

/**
 * Fakes for the dashboard's tests: an agent's read calls over answers the test sets and changes, and an
 * event source in memory. The answers are the admin API's messages, as the real agent gives them.
 */

export class FakeDashboardBackend implements DashboardBackend {
  readonly calls = { status: 0, health: 0, cluster: 0 };
  readonly sinks = new Set<HealthSink>();
  /** Calls that throw (as an agent whose etcd is away fails its cluster status). */
  readonly failing = new Set<'status' | 'health' | 'cluster'>();

  constructor(public statusAnswer: GetStatusResponse, public healthAnswer: GetHealthResponse, public clusterAnswer: ClusterStatus = { clustered: false }) {}

  async status(): Promise<GetStatusResponse> {
    this.calls.status++;
    if (this.failing.has('status')) throw new Error('the data plane does not answer');
    return structuredClone(this.statusAnswer);
  }

  async healthStatus(): Promise<GetHealthResponse> {
    this.calls.health++;
    if (this.failing.has('health')) throw new Error('health is not running');
    return { ...structuredClone(this.healthAnswer), sampledAtUnixMs: Date.now() };
  }

  async clusterStatus(): Promise<ClusterStatus> {
    this.calls.cluster++;
    if (this.failing.has('cluster')) throw new Error('etcd is unreachable');
    return structuredClone(this.clusterAnswer);
  }

  watchHealth(_sinceUnixMs: number, sink: HealthSink): () => void {
    this.sinks.add(sink);
    return () => { this.sinks.delete(sink); };
  }

  /**
   * A real server of a service goes `to`, as the agent's health manager reports it: both answers change
   * (down: flag `down`, weight 0), then every watcher hears of it.
   */
  transition(service: string, address: string, port: number, to: HealthState): HealthEvent {
    const from = to === 'up' ? 'down' : 'up';
    for (const h of this.healthAnswer.realServers ?? []) {
      if (h.service !== service || h.address !== address || h.port !== port) continue;
      h.state = to;
      h.flags = to === 'down' ? ['down'] : [];
      h.effectiveWeight = to === 'down' ? 0 : h.weight ?? 0;
      h.sinceUnixMs = Date.now();
    }
    for (const s of this.statusAnswer.services ?? []) {
      if (s.key !== service) continue;
      for (const rs of s.realServers ?? []) {
        if (rs.address !== address || rs.port !== port) continue;
        rs.health = to;
        rs.flags = to === 'down' ? ['down'] : [];
        rs.effectiveWeight = to === 'down' ? 0 : rs.weight ?? 0;
      }
    }
    const e: HealthEvent = { service, address, port, from, to, timeUnixMs: Date.now(), reason: `test: ${from} -> ${to}` };
    for (const sink of this.sinks) sink.event(e);
    return e;
  }
}

/** An EventSource in memory: `add` records an event and tells every subscriber. */
export class MemoryEventSource implements EventSource {
  readonly kept: LbdEvent[] = [];
  readonly subscribers = new Set<(e: LbdEvent) => void>();
  private seq = 0;

  constructor(private readonly director = 'dir1') {}

  recent(sinceUnixMs: number): LbdEvent[] {
    return this.kept.filter((e) => e.timeUnixMs >= sinceUnixMs);
  }

  subscribe(fn: (e: LbdEvent) => void): () => void {
    this.subscribers.add(fn);
    return () => { this.subscribers.delete(fn); };
  }

  add(kind: EventKind, subject: string, from: string, to: string, o: { time?: number; reason?: string; fields?: Record<string, string> } = {}): LbdEvent {
    const time = o.time ?? Date.now();
    const e: LbdEvent = {
      id: `${String(time).padStart(13, '0')}-${this.director}-${String(++this.seq).padStart(6, '0')}`, timeUnixMs: time, director: this.director,
      kind, subject, from, to, reason: o.reason ?? '', fields: o.fields ?? {},
    };
    this.kept.push(e);
    for (const fn of this.subscribers) fn(e);
    return e;
  }
}
