import { rm } from 'node:fs/promises';
import { removeStale, type Topology } from '@lbd/testkit';

/**
 * What one benchmark run creates (a topology, a temp dir, clients), removed exactly once on every way
 * out: a normal end, an error, or SIGINT/SIGTERM (which then exit 130/143).
 */
export class BenchScope {
  topology: Topology | undefined;
  tmp: string | undefined;
  private readonly before: Array<() => void> = [];
  private cleaned: Promise<void> | undefined;
  private readonly onSignal = (sig: NodeJS.Signals): void => {
    this.log(`${sig}: removing namespaces and processes`);
    void this.cleanup().finally(() => process.exit(sig === 'SIGINT' ? 130 : 143));
  };

  constructor(private readonly prefix: string, private readonly log: (msg: string) => void) {
    process.once('SIGINT', this.onSignal);
    process.once('SIGTERM', this.onSignal);
  }

  /**
   * Runs first at cleanup, before the namespaces go (close clients, abort watches). Returns what takes `fn` back,
   * for a section that cleaned up itself: until then `fn` keeps alive everything its closure's scope holds (a
   * whole-path run's leader and its 100 000 connections, 92 MB, stayed in the heap through every later section).
   */
  onCleanup(fn: () => void): () => void {
    this.before.push(fn);
    return () => {
      const i = this.before.indexOf(fn);
      if (i >= 0) this.before.splice(i, 1);
    };
  }

  /** Ends the run: stops listening for signals and removes everything. */
  async close(): Promise<void> {
    process.off('SIGINT', this.onSignal);
    process.off('SIGTERM', this.onSignal);
    this.log('removing namespaces and processes');
    await this.cleanup();
  }

  private cleanup(): Promise<void> {
    this.cleaned ??= (async () => {
      for (const fn of this.before) fn();
      await this.topology?.destroy().catch((e: unknown) => this.log(`destroy: ${String(e)}`));
      // Also whatever a half-built topology left (a signal during the build); twice, because a step of
      // the build that was already running may add a namespace after the first sweep.
      for (const pause of [0, 500]) {
        await new Promise((r) => setTimeout(r, pause));
        await removeStale(this.prefix).catch((e: unknown) => this.log(`remove namespaces: ${String(e)}`));
      }
      if (this.tmp !== undefined) await rm(this.tmp, { recursive: true, force: true });
    })();
    return this.cleaned;
  }
}
