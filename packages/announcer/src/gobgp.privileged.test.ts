import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FrrRouter, Topology, removeOrphans, requireRoot, runPrefix, waitFor } from '@lbd/testkit';
import { AnnouncerError, type Route } from './announcer.js';
import { gobgpClient, packAny } from './gobgp-api.js';
import { GoBgpAnnouncer } from './gobgp.js';
import { GobgpdProcess } from './gobgpd.js';

/**
 * Two directors' gobgpd (driven by GoBgpAnnouncer) and a real FRR router on one fabric segment:
 *
 *   router 198.18.9.1 / fd00:9::1 ── fab ── dir1 198.18.9.2 / fd00:9::2
 *                                      └── dir2 198.18.9.3 / fd00:9::3
 *
 * The router accepts any director of 198.18.9.0/24 (`bgp listen range`, AS 65001) and installs up to 8
 * paths per prefix. Slot next hops (.11-.13) are addresses on the fabric that no host holds: the router
 * resolves them as connected, which is all a route needs; the ECMP tier floats them between directors.
 */
const ROUTER_BGP = `
router bgp 65000
 bgp router-id 198.18.9.1
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 bgp bestpath as-path multipath-relax
 neighbor dirs peer-group
 neighbor dirs remote-as 65001
 neighbor dirs timers 3 9
 neighbor dirs timers connect 1
 bgp listen range 198.18.9.0/24 peer-group dirs
 address-family ipv4 unicast
  neighbor dirs activate
  maximum-paths 8
 exit-address-family
 address-family ipv6 unicast
  neighbor dirs activate
  maximum-paths 8
 exit-address-family
`;

const VIP4 = '198.18.0.10';
const VIP6 = 'fd00::10';
const slot = (n: number): string => `198.18.9.${10 + n}`;
const slot6 = (n: number): string => `fd00:9::${(0x10 + n).toString(16)}`;
const r = (prefix: string, nextHop: string, pathId: number): Route => ({ prefix, nextHop, pathId });

describe('GoBgpAnnouncer against gobgpd and an FRR router @privileged', function () {
  this.timeout(120_000);
  let t: Topology;
  let router: FrrRouter;
  let sockets: string;
  const gobgpds: GobgpdProcess[] = [];
  const announcers: GoBgpAnnouncer[] = [];
  let d1: { g: GobgpdProcess; a: GoBgpAnnouncer };
  let d2: { g: GobgpdProcess; a: GoBgpAnnouncer };

  before(async function () {
    await requireRoot(this, { commands: ['gobgpd', 'vtysh'] });
    await removeOrphans('lbdt');
    t = new Topology(runPrefix('lbdt', 'bgp'));
    sockets = await mkdtemp(join(tmpdir(), 'lbd-gobgp-'));
    await t.addSwitch('fab');
    for (const [host, n] of [['router', 1], ['dir1', 2], ['dir2', 3]] as const) {
      await t.addHost(host, { forwarding: host === 'router' });
      await t.attach(host, 'fab');
      await t.addAddress(host, 'eth0', `198.18.9.${n}/24`);
      await t.addAddress(host, 'eth0', `fd00:9::${n}/64`);
    }
    router = await FrrRouter.start(t, 'router', ROUTER_BGP);
    d1 = await director('dir1', '198.18.9.2');
    d2 = await director('dir2', '198.18.9.3');
  });

  after(async () => {
    for (const a of announcers) await a.close().catch(() => undefined);
    for (const g of gobgpds) await g.stop().catch(() => undefined);
    await router?.stop().catch(() => undefined);
    await t?.destroy();
    if (sockets) await rm(sockets, { recursive: true, force: true });
  });

  async function director(host: 'dir1' | 'dir2', routerId: string): Promise<{ g: GobgpdProcess; a: GoBgpAnnouncer }> {
    const g = new GobgpdProcess({ socket: join(sockets, `${host}.sock`), command: ['ip', 'netns', 'exec', t.ns(host), 'gobgpd'], restartAfterMs: 100 });
    gobgpds.push(g);
    await g.start();
    const a = await GoBgpAnnouncer.connect({ api: `unix://${join(sockets, `${host}.sock`)}`, asn: 65001, routerId, peers: [{ address: '198.18.9.1', asn: 65000, holdTimeSec: 9, keepaliveSec: 3 }] });
    announcers.push(a);
    return { g, a };
  }

  it('two directors announce one vip over three slots with add-path; the router merges the shared next hop into one group of three', async () => {
    // dir1 owns slot 1 and backs up slot 2; dir2 owns slot 2 and backs up slot 3 (and so on in the tier).
    await d1.a.announce([r(VIP4, slot(1), 1), r(VIP4, slot(2), 2), r(VIP6, slot6(1), 1)]);
    await d2.a.announce([r(VIP4, slot(2), 2), r(VIP4, slot(3), 3), r(VIP6, slot6(3), 3)]);
    await router.waitForNextHops(VIP4, [slot(1), slot(2), slot(3)]);
    await router.waitForNextHops(VIP6, [slot6(1), slot6(3)]);
    const sessions = await d1.a.sessions();
    assert.deepEqual(sessions.map((s) => [s.address, s.asn, s.state]), [['198.18.9.1', 65000, 'established']]);

    // dir1 stops announcing (its data plane cannot serve): slot 2 stays through dir2, slot 1 goes.
    await d1.a.withdrawAll();
    assert.deepEqual(d1.a.announced(), []);
    await router.waitForNextHops(VIP4, [slot(2), slot(3)]);
    await router.waitForNextHops(VIP6, [slot6(3)]);

    // A path moved to another slot under the same id replaces the old one (GoBGP keys paths by prefix and id).
    await d2.a.announce([r(VIP4, slot(2), 2), r(VIP4, slot(4), 3), r(VIP6, slot6(3), 3)]);
    await router.waitForNextHops(VIP4, [slot(2), slot(4)]);
  });

  it('a gobgpd that died is started again and set up anew by the next announce; a bad route is refused whole', async () => {
    await d2.a.announce([r(VIP4, slot(2), 2), r(VIP4, slot(4), 3)]);
    await d1.a.announce([r(VIP4, slot(1), 1)]);
    await router.waitForNextHops(VIP4, [slot(1), slot(2), slot(4)]);
    const before = d1.g.pid;
    process.kill(before!, 'SIGKILL');
    // The session went with the process: the router drops dir1's path at once (TCP reset), not at hold time.
    await router.waitForNextHops(VIP4, [slot(2), slot(4)]);
    // The next announce finds the restarted gobgpd empty (until it is back, the call fails as unavailable).
    await waitFor('an announce through the restarted gobgpd', 20_000, async () => {
      try {
        await d1.a.announce([r(VIP4, slot(1), 1)]);
        return true;
      } catch (e) {
        if (!(e instanceof AnnouncerError && e.kind === 'SpeakerUnavailable')) throw Object.assign(e as Error, { fatal: true });
        throw e;
      }
    });
    assert.notEqual(d1.g.pid, before);
    await router.waitForNextHops(VIP4, [slot(1), slot(2), slot(4)]);

    await assert.rejects(d1.a.announce([r(VIP4, slot(1), 1), r(VIP4, 'fd00:9::11', 2)]),
      (e: unknown) => e instanceof AnnouncerError && e.kind === 'InvalidRoute' && /route 1 .*an IPv4 vip needs an IPv4 next hop/.test(e.message));
    assert.deepEqual(d1.a.announced(), [r(VIP4, slot(1), 1)], 'a refused change applies nothing');
  });

  it('a path gone from gobgpd before its withdraw (a DeletePath done after its deadline) is withdrawn all the same, and the rest of the change goes on', async () => {
    await d1.a.announce([r(VIP4, slot(1), 1), r(VIP4, slot(6), 6), r(VIP4, slot(7), 7)]);
    await router.waitForNextHops(VIP4, [slot(1), slot(2), slot(4), slot(6), slot(7)]);
    // As when a busy gobgpd did a DeletePath whose call had timed out: the path is gone, the announcer still holds it.
    const raw = gobgpClient(`unix://${join(sockets, 'dir1.sock')}`);
    try {
      const family = { afi: 'AFI_IP', safi: 'SAFI_UNICAST' } as const;
      const path = {
        family, identifier: 6, nlri: packAny('IPAddressPrefix', { prefixLen: 32, prefix: VIP4 }),
        pattrs: [packAny('OriginAttribute', { origin: 0 }), packAny('NextHopAttribute', { nextHop: slot(6) })],
      };
      await new Promise<void>((resolve, reject) => raw.deletePath({ tableType: 'GLOBAL', family, path }, { deadline: new Date(Date.now() + 5000) }, (e) => (e ? reject(e) : resolve())));
    } finally {
      raw.close();
    }
    await router.waitForNextHops(VIP4, [slot(1), slot(2), slot(4), slot(7)]);
    await d1.a.announce([r(VIP4, slot(1), 1)]);
    await router.waitForNextHops(VIP4, [slot(1), slot(2), slot(4)]);
    assert.deepEqual(d1.a.announced(), [r(VIP4, slot(1), 1)]);
  });

  it('connecting as another AS than a running gobgpd has is refused with both named', async () => {
    await assert.rejects(GoBgpAnnouncer.connect({ api: `unix://${join(sockets, 'dir1.sock')}`, asn: 65002, routerId: '198.18.9.2', peers: [] }),
      (e: unknown) => e instanceof AnnouncerError && e.kind === 'SpeakerMismatch' && /already runs as AS 65001, router id 198\.18\.9\.2; this director is configured as AS 65002/.test(e.message));
  });
});
