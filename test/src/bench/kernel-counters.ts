import type { Topology } from '@lbd/testkit';

/** `conntrack -S` in `host`'s namespace: every `name=value` field, summed over the CPUs. */
export async function conntrackStatistics(topology: Topology, host: string): Promise<Record<string, number>> {
  const { stdout } = await topology.exec(host, 'conntrack', ['-S'], { timeoutMs: 10_000 });
  const sums: Record<string, number> = {};
  for (const m of stdout.matchAll(/\b([a-z_]+)=(\d+)/g)) {
    if (m[1] !== 'cpu') sums[m[1]!] = (sums[m[1]!] ?? 0) + Number(m[2]);
  }
  return sums;
}
