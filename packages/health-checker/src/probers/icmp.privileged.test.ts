import assert from 'node:assert/strict';
import { Topology, requireRoot, runPrefix } from '@lbd/testkit';
import type { ProbeTarget } from '../types.js';
import { IcmpProber } from './icmp.js';

/**
 * @privileged icmp failures against real addresses, inside namespaces this test builds (and removes):
 *   prober (eth0 198.18.1.2/24, fd00:18::2/64) ── router (eth0 198.18.1.1/24, forwarding)
 * - 198.19.1.9 is routed via the router, which has a `blackhole` route for it: the echo is dropped
 *   silently (a server whose packets are dropped) → timeout;
 * - 198.19.0.9 is routed via the router, which has an `unreachable` route for it and answers with ICMP
 *   host unreachable → unreachable, at once;
 * - 198.19.200.1 and fd00:99::1 have no route at all → unreachable, at once.
 * ping runs inside the prober namespace (`ip netns exec`), so no packet reaches the host's network.
 */

describe('IcmpProber in namespaces @privileged', () => {
  let topo: Topology | undefined;
  let prober: IcmpProber;

  before(async function () {
    await requireRoot(this, { commands: ['ping'] });
    topo = new Topology(runPrefix('lbdt', 'hcicmp'));
    await topo.addHost('prober');
    await topo.addHost('router', { forwarding: true });
    await topo.link({ host: 'prober', ifname: 'eth0' }, { host: 'router', ifname: 'eth0' });
    await topo.addAddress('prober', 'eth0', '198.18.1.2/24');
    await topo.addAddress('prober', 'eth0', 'fd00:18::2/64');
    await topo.addAddress('router', 'eth0', '198.18.1.1/24');
    await topo.setRoute('prober', '198.19.0.0/23', '198.18.1.1');
    await topo.ip('router', 'route', 'add', 'unreachable', '198.19.0.0/24');
    await topo.ip('router', 'route', 'add', 'blackhole', '198.19.1.0/24');
    prober = new IcmpProber({ command: ['ip', 'netns', 'exec', topo.ns('prober'), 'ping'] });
  });

  after(async () => {
    await topo?.destroy();
  });

  const icmp = (address: string): ProbeTarget => ({ kind: 'icmp', address, port: 0 });

  it('the router answers → ok (the probe really runs in the namespace)', async () => {
    const r = await prober.probe(icmp('198.18.1.1'), { timeoutMs: 2000 });
    assert.equal(r.reason, 'ok', r.message);
  });

  it('no answer (the echo is dropped on the way) → timeout after the timeout', async () => {
    const r = await prober.probe(icmp('198.19.1.9'), { timeoutMs: 300 });
    assert.deepEqual([r.ok, r.reason, r.message], [false, 'timeout', 'icmp echo to 198.19.1.9: timeout after 300 ms (no echo reply)']);
    assert.ok(r.durationMs >= 250 && r.durationMs < 2000, `${r.durationMs} ms`);
  });

  it('no route (IPv4 and IPv6) → unreachable at once', async () => {
    for (const address of ['198.19.200.1', 'fd00:99::1']) {
      const r = await prober.probe(icmp(address), { timeoutMs: 2000 });
      assert.deepEqual([r.reason, r.message], ['unreachable', `icmp echo to ${address}: network is unreachable`]);
      assert.ok(r.durationMs < 1500, `${r.durationMs} ms`);
    }
  });

  it('a router answers host unreachable → unreachable at once', async () => {
    const r = await prober.probe(icmp('198.19.0.9'), { timeoutMs: 2000 });
    assert.deepEqual([r.reason, r.message], ['unreachable', 'icmp echo to 198.19.0.9: destination host unreachable']);
    assert.ok(r.durationMs < 1500, `${r.durationMs} ms`);
  });
});
