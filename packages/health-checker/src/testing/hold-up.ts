import { performance } from 'node:perf_hooks';

/**
 * Keeps the event loop busy for `ms`, as a saturated core or a long garbage collection would: nothing else of
 * the process runs meanwhile, while the kernel goes on (a connect completes, an answer arrives unread).
 */
export function holdUpEventLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy
  }
}
