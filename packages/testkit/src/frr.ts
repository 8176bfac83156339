import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCommand, type BackgroundProcess } from './exec.js';
import { waitFor } from './ha-lab.js';
import type { Topology } from './netns.js';

/** Where Debian's frr package puts its daemons. */
const FRR_DAEMONS = '/usr/lib/frr';

/**
 * A real router for BGP tests and the lab: FRR's zebra and bgpd (Debian `frr`) in one host's namespace, in
 * the foreground, with their sockets, pid files and config in a directory of their own (the `-N` pathspace
 * keeps several routers on one machine apart; no watchfrr). zebra installs what bgpd selects into that
 * namespace's kernel routing table, multipath included, which is what the tests read.
 */
export class FrrRouter {
  private constructor(private readonly t: Topology, readonly host: string, private readonly dir: string,
    private readonly daemons: readonly BackgroundProcess[]) {}

  /** Starts zebra, then bgpd with `bgpdConfig` (the `router bgp ...` block and anything else bgpd takes). */
  static async start(t: Topology, host: string, bgpdConfig: string): Promise<FrrRouter> {
    const dir = await mkdtemp(join(tmpdir(), `lbd-frr-${host}-`));
    const name = t.ns(host);
    await writeFile(join(dir, 'zebra.conf'), `hostname ${host}\n`);
    await writeFile(join(dir, 'bgpd.conf'), `hostname ${host}\n${bgpdConfig}\n`);
    // The daemons drop to Debian's frr user (as root they refuse: root is not in the frrvty group), so
    // their directory is frr's.
    await runCommand('chown', ['-R', 'frr:frr', dir]);
    const common = (d: string) => ['-N', name, '-f', join(dir, `${d}.conf`), '-i', join(dir, `${d}.pid`), '-z', join(dir, 'zserv.api'), '--vty_socket', dir, '-u', 'frr', '-g', 'frr'];
    const daemons: BackgroundProcess[] = [];
    const r = new FrrRouter(t, host, dir, daemons);
    try {
      daemons.push(t.spawn(host, join(FRR_DAEMONS, 'zebra'), common('zebra'), { label: `${host}:zebra` }));
      await r.until('zebra to answer vtysh', 10_000, async () => (await r.vtysh('show version')).includes('FRRouting'));
      // -p 179: bgpd listens in its namespace for the directors (`bgp listen range`).
      daemons.push(t.spawn(host, join(FRR_DAEMONS, 'bgpd'), [...common('bgpd'), '-p', '179'], { label: `${host}:bgpd` }));
      await r.until('bgpd to answer vtysh', 10_000, async () => (await r.vtysh('show bgp summary')).length > 0);
    } catch (e) {
      await r.stop();
      throw e;
    }
    return r;
  }

  /** One vtysh command against this router; resolves with its output ('' when a daemon did not answer). */
  async vtysh(command: string): Promise<string> {
    // Without -N: with it vtysh looks for the daemons' sockets under a pathspace of its own, not --vty_socket.
    const res = await runCommand('ip', ['netns', 'exec', this.t.ns(this.host), 'vtysh', '--vty_socket', this.dir, '-c', command], { allowFailure: true });
    return res.code === 0 ? res.stdout : '';
  }

  /**
   * The next hops the router's kernel forwards `prefix` (a host address) over, sorted; [] when it has no
   * route. Read from the kernel (`ip route`), not from bgpd: what forwards is what counts.
   */
  async nextHops(prefix: string): Promise<string[]> {
    const fam = prefix.includes(':') ? '-6' : '-4';
    const res = await runCommand('ip', ['-n', this.t.ns(this.host), '-j', fam, 'route', 'show', 'exact', prefix], { allowFailure: true });
    if (res.code !== 0 || res.stdout.trim() === '') return [];
    const routes = JSON.parse(res.stdout) as Array<{ gateway?: string; nexthops?: Array<{ gateway?: string }> }>;
    const hops = routes.flatMap((r) => (r.nexthops ? r.nexthops.map((n) => n.gateway) : [r.gateway])).filter((g): g is string => typeof g === 'string');
    return [...new Set(hops)].sort();
  }

  /** Waits (bounded) until `prefix`'s next hops are exactly `want` (sorted); rejects naming what it saw last. */
  async waitForNextHops(prefix: string, want: readonly string[], timeoutMs = 20_000): Promise<void> {
    const sorted = [...want].sort();
    let last: string[] = [];
    await this.until(`${prefix} via ${sorted.join(', ') || 'nothing'}`, timeoutMs, async () => {
      last = await this.nextHops(prefix);
      return JSON.stringify(last) === JSON.stringify(sorted);
    }).catch(async (e: unknown) => {
      throw new Error(`${(e as Error).message}; last seen: ${last.join(', ') || 'no route'}; bgp: ${await this.vtysh('show bgp summary')}`);
    });
  }

  async stop(): Promise<void> {
    await Promise.all(this.daemons.map((d) => d.stop(2000)));
    await rm(this.dir, { recursive: true, force: true });
  }

  /** waitFor (the testkit's), giving up at once when a daemon exited. */
  private until(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<boolean> {
    return waitFor(what, timeoutMs, async () => {
      const dead = this.daemons.find((d) => d.child.exitCode !== null || d.child.signalCode !== null);
      if (dead) throw Object.assign(new Error(`${dead.label} exited while waiting for ${what}`), { fatal: true });
      return check();
    }, 50);
  }
}
