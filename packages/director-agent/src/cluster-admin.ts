import type { FailoverResult } from '@lbd/coordinator';
import type { Logger } from '@lbd/log';
import { AgentError, type Caller } from '@lbd/operator-surfaces';
import type { ClusterStatus, DrillResult, FailoverResponse } from '@lbd/proto';
import type { ClusterMember } from './cluster.js';
import { notClustered } from './config-source.js';
import type { EventLog } from './events.js';

/**
 * The admin API's cluster calls (cluster status, planned failover): a clustered director answers them
 * through its membership (MemberAdmin); a single director has no cluster to show or move (SingleDirectorAdmin).
 */
export interface ClusterAdmin {
  status(configRevision: number): Promise<ClusterStatus>;
  failover(group: string, to: string, author: string, caller?: Caller): Promise<FailoverResponse>;
  /** `lbadm drill switchover`: `group` to `to` (or the best other director) and back, measured from both. */
  drill(group: string, to: string, author: string, caller?: Caller): Promise<DrillResult>;
}

/** A director alone: status says so; a failover is refused as needing a cluster. */
export class SingleDirectorAdmin implements ClusterAdmin {
  constructor(private readonly configPath: string) {}

  async status(configRevision: number): Promise<ClusterStatus> {
    return {
      clustered: false, self: '', etcdReachable: false, etcdEndpoints: [], worstCaseTakeoverMs: 0, timingProfile: '', beatIntervalMs: 0,
      safetyWindowMs: 0, takeoverAfterMs: 0, directors: [], groups: [], configRevision,
    };
  }

  async failover(): Promise<FailoverResponse> {
    throw notClustered('failover', this.configPath);
  }

  async drill(): Promise<DrillResult> {
    throw notClustered('drill switchover', this.configPath);
  }
}

/** A clustered director: the member's status, and failovers through the coordinator with an admin event either way. */
export class MemberAdmin implements ClusterAdmin {
  constructor(private readonly member: ClusterMember, private readonly events: EventLog, private readonly log: Logger) {}

  status(configRevision: number): Promise<ClusterStatus> {
    return this.member.status(configRevision);
  }

  failover(group: string, to: string, author: string, caller?: Caller): Promise<FailoverResponse> {
    return this.move(group, to, author, caller);
  }

  private async move(group: string, to: string, author: string, caller?: Caller): Promise<FailoverResult> {
    const who = { group, author, caller: caller?.name ?? '' };
    const asked = `${author === '' ? 'an operator' : author}${caller ? ` (${caller.name})` : ''}`;
    try {
      const r = await this.member.failover(group, to === '' ? undefined : to);
      this.log.info('planned failover', { group, from: r.from, to: r.to, tookMs: r.tookMs, caller: caller?.name });
      this.events.record('admin', 'failover', '', 'done', `${asked} moved vip group ${group} from ${r.from} to ${r.to} in ${Math.round(r.tookMs)} ms`,
        { ...who, from: r.from, to: r.to, tookMs: Math.round(r.tookMs) });
      return { from: r.from, to: r.to, tookMs: r.tookMs };
    } catch (err) {
      const e = new AgentError('Refused', `failover of ${group}: ${(err as Error).message}`, { cause: err });
      this.events.record('admin', 'failover', '', 'refused', `${asked} asked to move vip group ${group}${to === '' ? '' : ` to ${to}`}: ${(err as Error).message}`, { ...who, to });
      throw e;
    }
  }

  /** Both moves leave their admin events like any failover; the drill's own result is the caller's to record (RecordDrill). */
  async drill(group: string, to: string, author: string, caller?: Caller): Promise<DrillResult> {
    const asked = `${author === '' ? 'an operator' : author}${caller ? ` (${caller.name})` : ''}`;
    this.log.info('drill started', { scenario: 'switchover', group, to, caller: caller?.name });
    try {
      const r = await this.member.drill(group, to, (g, target) => this.move(g, target, author, caller));
      this.log.info('drill done', { scenario: 'switchover', group, result: r.result, summary: r.summary });
      return r;
    } catch (err) {
      this.events.record('admin', 'drill', '', 'refused', `${asked} asked for a switchover drill of ${group}: ${(err as Error).message}`, { group, author, to });
      throw new AgentError('Refused', `switchover drill of ${group}: ${(err as Error).message}`, { cause: err });
    }
  }
}
