import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { Topology, requireRoot, runPrefix, waitFor } from '@lbd/testkit';
import type { ProbeTarget } from '../types.js';
import { LBD_PROBE_HELPER } from './native-connect.js';
import { TcpProber } from './tcp.js';

/**
 * @privileged the compiled connect prober's failures against real routes, in namespaces this test builds
 * (and removes), as icmp.privileged.test.ts:
 *   prober (eth0 198.18.1.2/24) ── router (eth0 198.18.1.1/24, forwarding)
 * - 198.19.1.9: the router's `blackhole` route drops the SYN silently → timeout;
 * - 198.19.0.9: the router's `unreachable` route answers ICMP host unreachable → unreachable at once;
 * - 198.19.200.1: no route at all → unreachable at once.
 * lbd-probe runs inside the prober namespace (`ip netns exec`), so no packet reaches the host's network.
 */

const run = promisify(execFile);

describe('TcpProber through lbd-probe in namespaces @privileged', () => {
  let topo: Topology | undefined;
  let prober: TcpProber;

  before(async function () {
    await requireRoot(this);
    topo = new Topology(runPrefix('lbdt', 'hcprobe'));
    await topo.addHost('prober');
    await topo.addHost('router', { forwarding: true });
    await topo.link({ host: 'prober', ifname: 'eth0' }, { host: 'router', ifname: 'eth0' });
    await topo.addAddress('prober', 'eth0', '198.18.1.2/24');
    await topo.addAddress('router', 'eth0', '198.18.1.1/24');
    await topo.setRoute('prober', '198.19.0.0/23', '198.18.1.1');
    await topo.ip('router', 'route', 'add', 'unreachable', '198.19.0.0/24');
    await topo.ip('router', 'route', 'add', 'blackhole', '198.19.1.0/24');
    const ns = topo.ns('prober');
    prober = new TcpProber({ connector: 'native', startHelper: () => spawn('ip', ['netns', 'exec', ns, LBD_PROBE_HELPER], { stdio: 'pipe' }) });
  });

  after(async () => {
    prober?.close();
    await topo?.destroy();
  });

  const tcp = (address: string, port = 80): ProbeTarget => ({ kind: 'tcp', address, port });

  it('the SYN is dropped on the way → timeout after the timeout, and the socket is gone', async () => {
    const r = await prober.probe(tcp('198.19.1.9'), { timeoutMs: 300 });
    assert.deepEqual([r.ok, r.reason, r.message], [false, 'timeout', 'tcp connect to 198.19.1.9:80: timeout after 300 ms (connecting)']);
    assert.ok(r.durationMs >= 250 && r.durationMs < 2000, `${r.durationMs} ms`);
    await noSocketsLeft();
  });

  it('an aborted probe\'s socket is closed at once, not left to the kernel\'s SYN retries', async () => {
    const abort = new AbortController();
    const p = prober.probe(tcp('198.19.1.9', 81), { timeoutMs: 60_000, signal: abort.signal });
    await waitFor('the probe\'s SYN_SENT socket', 10_000, async () => (await synSent()) === 1, 20);
    abort.abort();
    assert.equal((await p).reason, 'error');
    await noSocketsLeft();
  });

  it('a router answers host unreachable, or there is no route → unreachable at once', async () => {
    const a = await prober.probe(tcp('198.19.0.9'), { timeoutMs: 5000 });
    assert.deepEqual([a.reason, a.message], ['unreachable', 'tcp connect to 198.19.0.9:80: host unreachable']);
    const b = await prober.probe(tcp('198.19.200.1'), { timeoutMs: 5000 });
    assert.deepEqual([b.reason, b.message], ['unreachable', 'tcp connect to 198.19.200.1:80: network unreachable']);
    assert.ok(a.durationMs < 4000 && b.durationMs < 4000, `${a.durationMs} / ${b.durationMs} ms`);
  });

  async function synSent(): Promise<number> {
    const { stdout } = await run('ip', ['netns', 'exec', topo!.ns('prober'), 'ss', '-Htn', 'state', 'syn-sent']);
    return stdout.split('\n').filter((l) => l.trim() !== '').length;
  }

  async function noSocketsLeft(): Promise<void> {
    await waitFor('no SYN_SENT socket left in the prober namespace', 10_000, async () => (await synSent()) === 0, 20);
  }
});
