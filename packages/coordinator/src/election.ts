/**
 * Leader election for one vip group, as the rest of lbd sees it (STYLE.md section 9). etcd is an
 * implementation detail of EtcdElection; the agent will depend only on this interface.
 */
export interface Election {
  /**
   * Campaigns until `signal` aborts (aborting while leading resigns). `leading` aborts the moment leadership
   * is lost or can no longer be proven (fenced); `onFollowing` names the current leader's id.
   */
  run(opts: { signal: AbortSignal; onLeading(leading: AbortSignal): void; onFollowing(leader: string): void }): Promise<void>;
}
