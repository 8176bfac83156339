import assert from 'node:assert/strict';
import { OwnershipWatch, parseMonitorLine, type OwnershipTimeline } from './drill.js';
import { removeOrphans, runPrefix, Topology } from './netns.js';
import { requireRoot } from './privileged.js';
import { ArpProbe, VipCapture, dualFigures, sentFigures, type VipPacket } from './vip-capture.js';

/**
 * The drills' dual-ownership measurement (OwnershipWatch) on a namespace pair of its own: two hosts on a
 * switch, an address added on both with a known overlap. The method must see an overlap that is there
 * (not only report zero), see none in a plain handover, and count a host whose switch port is down as not
 * holding (a carrier loss the kernel may never report from the host's side).
 */
describe('drill ownership watch @privileged', function () {
  this.timeout(60_000);
  const VIP = '198.18.9.10';
  const OVERLAP_MS = 50;
  let t: Topology | undefined;

  before(async function () {
    await requireRoot(this);
    await removeOrphans('lbdt');
    t = new Topology(runPrefix('lbdt', 'own'));
    await t.addSwitch('sw');
    await t.addHost('a');
    await t.addHost('b');
    await t.attach('a', 'sw', 'eth0');
    await t.attach('b', 'sw', 'eth0');
  });
  after(async () => {
    await t?.destroy();
  });

  const subjects = ['a', 'b'].map((h) => ({ name: h, host: h, ifname: 'eth0', port: `p-${h}` }));
  const add = (h: string): Promise<unknown> => t!.ip(h, 'addr', 'add', `${VIP}/32`, 'dev', 'eth0');
  const del = (h: string): Promise<unknown> => t!.ip(h, 'addr', 'del', `${VIP}/32`, 'dev', 'eth0');
  const port = (h: string, up: boolean): Promise<unknown> => t!.ip('sw', 'link', 'set', `p-${h}`, up ? 'up' : 'down');
  const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
  const show = (tl: OwnershipTimeline): string => JSON.stringify(tl);

  async function watched(steps: () => Promise<void>): Promise<OwnershipTimeline> {
    const w = await OwnershipWatch.start(t!, 'sw', VIP, subjects);
    try {
      await steps();
      await delay(50);
    } catch (e) {
      await w.abort();
      throw e;
    }
    return w.stop();
  }

  it('parses monitor lines of another namespace and of its own', () => {
    assert.deepEqual(parseMonitorLine('[2026-12-01T05:13:06.927669] [nsid 2]Deleted 3: p-router    inet 198.18.0.10/32 scope global eth0\\       valid_lft forever'),
      { atUs: Date.UTC(2026, 11, 1, 5, 13, 6) * 1000 + 927669, nsid: 2, ifindex: 3, deleted: true, address: '198.18.0.10' });
    assert.deepEqual(parseMonitorLine('[2026-12-01T05:13:06.000001] [nsid current]5: p-dir1@if3: <BROADCAST,MULTICAST> mtu 1500 state DOWN')?.flags, ['BROADCAST', 'MULTICAST']);
  });

  it(`measures a ${OVERLAP_MS} ms overlap of the same address on both hosts`, async () => {
    const tl = await watched(async () => {
      await add('a');
      await delay(100);
      await add('b');
      await delay(OVERLAP_MS);
      await del('a');
      await delay(100);
      await del('b');
    });
    process.stderr.write(`      (overlap of ${OVERLAP_MS} ms measured as ${tl.dualMs.toFixed(3)} ms)\n`);
    assert.equal(tl.dual.length, 1, show(tl));
    // The overlap is at least OVERLAP_MS (the del starts after the timer) plus one `ip` run; allow for load.
    assert.ok(tl.dualMs >= OVERLAP_MS - 2 && tl.dualMs < OVERLAP_MS + 150, show(tl));
    assert.equal(tl.holds.a!.length, 1, show(tl));
    assert.equal(tl.holds.b!.length, 1, show(tl));
  });

  it('sees no overlap in a handover with a gap, and measures the gap', async () => {
    const tl = await watched(async () => {
      await add('a');
      await delay(50);
      await del('a');
      await delay(40);
      await add('b');
      await delay(50);
      await del('b');
    });
    const gapMs = (tl.holds.b![0]!.startUs - tl.holds.a![0]!.endUs) / 1000;
    process.stderr.write(`      (release->claim gap of 40 ms measured as ${gapMs.toFixed(3)} ms)\n`);
    assert.deepEqual([tl.dual.length, tl.dualMs], [0, 0], show(tl));
    assert.ok(gapMs >= 38 && gapMs < 200, show(tl));
  });

  it('counts a host whose link is down at either end as not holding', async () => {
    const tl = await watched(async () => {
      await add('a');
      await delay(20);
      await port('a', false); // a keeps the address but loses carrier: the switch side went down
      await add('b');
      await delay(40);
      await port('a', true); // both hold from here
      await delay(OVERLAP_MS);
      await t!.ip('b', 'link', 'set', 'eth0', 'down'); // b's own side down: b stops holding
      await delay(30);
      await del('a');
      await del('b');
      await t!.ip('b', 'link', 'set', 'eth0', 'up');
    });
    assert.equal(tl.dual.length, 1, show(tl));
    assert.ok(tl.dualMs >= OVERLAP_MS - 2 && tl.dualMs < OVERLAP_MS + 150, show(tl));
    assert.equal(tl.holds.a!.length, 2, show(tl));
  });
});

/**
 * The drills' forwarding and answering measure (VipCapture on a router's interface, ArpProbe asking for
 * the vip) on a namespace set of its own: two hosts and a router on a switch. Both hosts sending from the
 * vip and answering ARP for it at once must show as dual (not only report zero); a handover where the
 * first stops before the second starts must show none.
 */
describe('drill vip capture @privileged', function () {
  this.timeout(60_000);
  const VIP = '198.18.9.10';
  const ROUTER = '198.18.9.254';
  const HOSTS = [['a', '198.18.9.1'], ['b', '198.18.9.2']] as const;
  /**
   * Each ping: 50 packets from the vip, one every 20 ms, then at most 1 s waiting for replies (the router
   * answers only one of two hosts holding the vip). No -w: with it ping sends until it has 50 replies.
   */
  const PING = ['-q', '-c', '50', '-i', '0.02', '-W', '1', '-I', VIP, ROUTER];
  let t: Topology | undefined;
  let subjects: { name: string; mac: string }[] = [];

  before(async function () {
    await requireRoot(this, { commands: ['tcpdump', 'arping', 'ping'] });
    await removeOrphans('lbdt');
    t = new Topology(runPrefix('lbdt', 'cap'));
    await t.addSwitch('sw');
    await t.addHost('r');
    await t.attach('r', 'sw', 'eth0');
    await t.addAddress('r', 'eth0', `${ROUTER}/24`);
    for (const [h, a] of HOSTS) {
      await t.addHost(h);
      await t.attach(h, 'sw', 'eth0');
      await t.addAddress(h, 'eth0', `${a}/24`);
      // As on the directors (cluster-topology.ts): answer ARP only for the interface's own addresses, and
      // ask with the subnet's address, so the only ARP naming the vip is an answer for it.
      await t.sysctl(h, 'net.ipv4.conf.all.arp_ignore', '1');
      await t.sysctl(h, 'net.ipv4.conf.all.arp_announce', '2');
    }
    subjects = await Promise.all(HOSTS.map(async ([h]) => ({ name: h, mac: await t!.mac(h, 'eth0') })));
  });
  after(async () => {
    await t?.destroy();
  });

  const add = (h: string): Promise<unknown> => t!.ip(h, 'addr', 'add', `${VIP}/32`, 'dev', 'eth0');
  const del = (h: string): Promise<unknown> => t!.ip(h, 'addr', 'del', `${VIP}/32`, 'dev', 'eth0');
  const ping = (h: string): Promise<unknown> => t!.exec(h, 'ping', PING, { allowFailure: true });
  const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

  async function captured(steps: () => Promise<void>): Promise<{ packets: readonly VipPacket[]; fromUs: number }> {
    const c = await VipCapture.start(t!, 'r', 'eth0', VIP, subjects);
    const probe = ArpProbe.start(t!, 'r', 'eth0', ROUTER, VIP, 250, 20_000);
    const fromUs = Date.now() * 1000;
    try {
      await steps();
    } catch (e) {
      await Promise.all([probe.stop(), c.abort()]);
      throw e;
    }
    await probe.stop();
    return { packets: (await c.stop()).packets, fromUs };
  }
  const show = (ps: readonly VipPacket[]): string => ps.map((p) => `${p.atUs} ${p.kind} ${p.from}`).join('\n');

  it('sees both hosts forwarding from the vip and answering ARP for it at once', async () => {
    const { packets, fromUs } = await captured(async () => {
      await add('a');
      const first = ping('a');
      await delay(300);
      await add('b'); // both hold the vip from here, both send from it, both answer the probe
      await Promise.all([first, ping('b'), delay(1000)]);
      await del('a');
      await del('b');
    });
    const fwd = dualFigures(packets, 'forwarded', 'a', 'b', fromUs);
    const arp = dualFigures(packets, 'arp', 'a', 'b', fromUs);
    process.stderr.write(`      (dual forwarding ${fwd.packets} packets over ${fwd.spanMs.toFixed(1)} ms, dual ARP ${arp.packets} over ${arp.spanMs.toFixed(1)} ms)\n`);
    assert.ok(fwd.packets >= 5 && fwd.spanMs > 100, show(packets));
    assert.ok(arp.packets >= 1, show(packets));
    assert.equal(sentFigures(packets, 'forwarded', 'a', fromUs).packets, 50, show(packets));
    assert.equal(sentFigures(packets, 'forwarded', 'b', fromUs).packets, 50, show(packets));
    assert.equal(packets.filter((p) => p.from === null).length, 0, show(packets));
  });

  it('sees none in a handover where the first host stops before the second starts', async () => {
    const { packets, fromUs } = await captured(async () => {
      await add('a');
      await Promise.all([ping('a'), delay(600)]); // at least two probes answered by a
      await del('a');
      await add('b');
      await Promise.all([ping('b'), delay(600)]);
      await del('b');
    });
    const arpB = sentFigures(packets, 'arp', 'b', fromUs);
    assert.ok(sentFigures(packets, 'arp', 'a', fromUs).packets >= 1 && arpB.packets >= 1, `both answered the probe in turn\n${show(packets)}`);
    assert.deepEqual(dualFigures(packets, 'forwarded', 'a', 'b', fromUs), { packets: 0, spanMs: 0 }, show(packets));
    assert.deepEqual(dualFigures(packets, 'arp', 'a', 'b', fromUs), { packets: 0, spanMs: 0 }, show(packets));
  });
});
