import { setFlagsFromString } from 'node:v8';

/**
 * V8 flags the agent sets for its whole process as it starts, before its election and sync threads exist (a
 * worker thread's heap takes the process's flags when it is made; `new Worker`'s execArgv takes no V8 flags).
 *
 * `--no-allocation-site-pretenuring`: V8 watches where objects are allocated, and a site whose objects mostly
 * survive a young collection gets its objects put straight into the old generation from then on. Connection
 * sync fools it: while a snapshot of 100 000 connections streams in, the objects a message's changes become
 * live for a few milliseconds, long enough to survive, so the decode, check and inject sites go old; after the
 * snapshot the same sites make 10 000 changes a second that die at once, in the old generation, which only a
 * full (marking) collection frees. Measured in `pnpm bench connsync`'s code (docs/kernel-io.md, "V8's
 * pretenuring off"): with the flag the bulk of 100 000 took 1.5-1.6 s instead of 1.8-2.1 s, with 20% less CPU,
 * and a standby's side right after such a bulk 0.15-0.17 cores at 5 000 connections/s instead of 0.18-0.20.
 */
export const AGENT_V8_FLAGS: readonly string[] = ['--no-allocation-site-pretenuring'];

/** Sets AGENT_V8_FLAGS. Early, before any worker thread starts; setting them again changes nothing. */
export function applyAgentV8Flags(): void {
  for (const flag of AGENT_V8_FLAGS) setFlagsFromString(flag);
}
