import { main } from '@lbd/lbadm';

/** One lbadm run: its exit code and what it printed. */
export interface Run { code: number; out: string; err: string }

/**
 * lbadm's CLI entry point in-process, its output captured: `env` is all it sees of the environment, and
 * its waits (stats --rate) return at once.
 */
export async function runLbadm(argv: readonly string[], env: Readonly<Record<string, string>> = {}): Promise<Run> {
  let out = '';
  let err = '';
  const code = await main(argv, { stdout: (t) => { out += t; }, stderr: (t) => { err += t; }, env, sleep: async () => {} });
  return { code, out, err };
}
