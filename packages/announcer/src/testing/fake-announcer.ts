import { AnnouncerError, planRoutes, routeKey, routeProblems, type Announcer, type BgpSession, type Route } from '../announcer.js';

/**
 * An Announcer that keeps its paths in memory: what the agent announced, in order, and the sessions a test
 * sets. `failNext` makes the next announce reject as a speaker that went away would, announcing nothing.
 */
export class FakeAnnouncer implements Announcer {
  private current = new Map<string, Route>();
  /** Every change that took effect, in order. */
  readonly changes: Array<{ readonly add: readonly Route[]; readonly withdraw: readonly Route[] }> = [];
  sessionList: BgpSession[] = [];
  private failure: string | null = null;
  closed = false;

  async announce(routes: readonly Route[]): Promise<void> {
    const problems = routeProblems(routes);
    if (problems.length > 0) throw new AnnouncerError('InvalidRoute', problems.join('; '));
    if (this.failure !== null) {
      const message = this.failure;
      this.failure = null;
      throw new AnnouncerError('SpeakerUnavailable', message);
    }
    const plan = planRoutes(this.current.values(), routes);
    if (plan.add.length + plan.withdraw.length === 0) return;
    this.current = new Map(routes.map((r) => [routeKey(r), r]));
    this.changes.push(plan);
  }

  withdrawAll(): Promise<void> {
    return this.announce([]);
  }

  announced(): readonly Route[] {
    return [...this.current.values()];
  }

  sessions(): Promise<BgpSession[]> {
    return Promise.resolve([...this.sessionList]);
  }

  /** As a speaker process that was restarted: no paths, no sessions (it keeps nothing). */
  restart(): void {
    this.current = new Map();
    this.sessionList = [];
  }

  failNext(message: string): void {
    this.failure = message;
  }

  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }
}
