import assert from 'node:assert/strict';
import { startEtcd, type RunningEtcd } from '@lbd/testkit';
import { EtcdElection } from './etcd-election.js';

interface Candidate {
  readonly id: string;
  readonly election: EtcdElection;
  readonly stop: AbortController;
  leading: AbortSignal | undefined;
  /** The leader this candidate last saw, when following. */
  following: string | undefined;
  run: Promise<void>;
}

/** Resolves when `pred` holds (polled every 10 ms, bounded); rejects after `ms`. */
function waitFor(pred: () => boolean, ms: number, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + ms;
    const tick = (): void => {
      if (pred()) return resolve();
      if (Date.now() > deadline) return reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
      setTimeout(tick, 10);
    };
    tick();
  });
}

describe('EtcdElection (real etcd on loopback)', function () {
  this.timeout(30_000);
  let etcd: RunningEtcd | undefined;
  const candidates: Candidate[] = [];
  let violations = 0;
  const believers = (): Candidate[] => candidates.filter((c) => c.leading !== undefined && !c.leading.aborted);

  function candidate(id: string): Candidate {
    const c: Candidate = {
      id, election: new EtcdElection({ endpoints: etcd!.endpoints, prefix: '/lbd-test', group: 'g1', id }),
      stop: new AbortController(), leading: undefined, following: undefined, run: Promise.resolve(),
    };
    c.run = c.election.run({
      signal: c.stop.signal,
      onLeading: (leading) => {
        if (believers().length > 0) violations++;
        c.leading = leading;
      },
      onFollowing: (leader) => { c.following = leader; },
    });
    candidates.push(c);
    return c;
  }

  before(async () => { etcd = await startEtcd(); });
  after(async () => {
    for (const c of candidates) c.stop.abort();
    await etcd?.resume();
    await Promise.race([Promise.all(candidates.map((c) => c.run)), new Promise((r) => setTimeout(r, 5000))]);
    for (const c of candidates) c.election.close();
    await etcd?.stop();
  });

  it('one leads, the other follows; resign hands over quickly; a frozen etcd fences the leader within its window', async () => {
    const a = candidate('a');
    await waitFor(() => believers().length === 1, 5000, 'a to lead');
    const b = candidate('b');
    await waitFor(() => b.following === 'a', 5000, 'b to follow a');
    assert.deepEqual(believers().map((c) => c.id), ['a']);

    // resign: a stops campaigning, revokes its lease; b leads quickly
    const resignAt = Date.now();
    a.stop.abort();
    await waitFor(() => believers().length === 1 && believers()[0] === b, 2000, 'b to lead after resign');
    const takeover = Date.now() - resignAt;
    await a.run;
    const a2 = candidate('a2');

    // freeze etcd: b must fence within its safety window from its last proof, and nobody else leads
    const leading = b.leading!;
    const window = b.election.timing.safetyWindowMs;
    const pausedAt = Date.now();
    await etcd!.pause();
    const abortedAt = await new Promise<number>((resolve) => leading.addEventListener('abort', () => resolve(Date.now()), { once: true }));
    const lastProof = b.election.fence!.lastSuccessfulKeepalive;
    assert.ok(abortedAt - lastProof <= window + 50, `fenced ${abortedAt - lastProof} ms after last proof (window ${window})`);
    assert.ok(abortedAt - pausedAt <= window + 50, `fenced ${abortedAt - pausedAt} ms after pause`);
    assert.equal(believers().length, 0);

    await etcd!.resume();
    await waitFor(() => believers().length === 1, 10_000, 'one leader after resume');
    // Not waiting for an event: watching for half a second that no second leader appears.
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(believers().length, 1);
    assert.equal(violations, 0, 'two leaders at once');
    assert.ok(takeover < 1000, `takeover after resign ${takeover} ms`);
    void a2;
  });
});
