import { performance } from 'node:perf_hooks';

/**
 * A yes/no question with a time bound (does etcd answer? does a peer?), asked once more when its "no" came
 * from a stalled event loop rather than from the far end. After a stall (a saturated core, a paused process)
 * node runs the timers that came due before it reads its sockets, so a call's deadline fires with the answer
 * unread: a "no" that took over 1.5 × the bound was decided that way, and the second ask runs on a loop that
 * is moving again. Each ask ends at its bound: nothing is left running (a call left running holds others,
 * see @lbd/coordinator's EtcdKv.reachable).
 */
export async function askAgainIfStalled(ask: () => Promise<boolean>, boundMs: number, now: () => number = () => performance.now()): Promise<boolean> {
  const started = now();
  if (await ask()) return true;
  if (now() - started <= STALLED * boundMs) return false;
  return ask();
}

/** A "no" later than this many bounds was the event loop's, not the far end's. */
const STALLED = 1.5;
