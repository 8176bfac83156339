import assert from 'node:assert/strict';
import { AdminApi } from '@lbd/proto';
import {
  CLUSTER, removeOrphans, requireRoot, runPrefix, spawnTestClient, startHaLab, waitFor, waitSteady, type BackgroundProcess, type DirectorName, type HaLab, type StreamResult,
} from '@lbd/testkit';

/**
 * Direct routing fails over for free: two directors running lbd-agent in cluster mode (startHaLab) serve a
 * dr vip with connection sync off. The director keeps nothing per connection, and every director hashes a
 * packet to the same real server (mh, fixed seeds), so a long-lived TCP stream lives on through a planned
 * switchover and through the leader's box dying, with nothing copied. The cluster topology's real servers are
 * set up as dr needs (the dr vip on their loopback, no ARP for it), and their replies go to the client through
 * the router's leg on the server segment, past the directors.
 */

const GROUP = 'default';
const DR_VIP = CLUSTER.drVip.ipv4;
const STREAM_PORT = 9000;
const STREAMS = 100;

const CONFIG = `vipGroups:
  - name: ${GROUP}
    preempt: never
    gateways: [198.19.1.250]
services:
  # The lab's vip (VIPS.ipv4), the one the lab's steadiness and holder checks look at, floats with the dr vip.
  - name: web
    vip: 198.18.0.10
    port: 80
    mode: fullnat
    localAddresses: [198.19.1.100]
    sync: { enabled: false }
    realServers: [{ address: 198.19.1.11, port: 8080 }]
  - name: stream-dr
    vip: ${DR_VIP}
    port: ${STREAM_PORT}
    mode: dr
    sync: { enabled: false }
    realServers:
${[11, 12, 13].map((h) => `      - { address: 198.19.1.${h} }\n`).join('')}`;

describe('direct routing: streams survive a failover without sync @privileged', function () {
  this.timeout(180_000);
  let lab: HaLab<AdminApi>;

  before(async function () {
    this.timeout(150_000);
    await requireRoot(this, { commands: ['nft', 'ip', 'etcd', 'etcdctl', 'arping', 'conntrack'] });
    await removeOrphans('lbdt');
    lab = await startHaLab({ prefix: runPrefix('lbdt', 'drha'), admin: (socket) => new AdminApi(socket), configText: CONFIG });
  });
  after(async function () {
    this.timeout(60_000);
    await lab?.destroy();
  });

  async function leaderIs(d: DirectorName, withinMs: number): Promise<void> {
    await waitFor(`${d} to lead and hold the vips`, withinMs, async () => ((await lab.leader()) === d && (await lab.holders()).join() === d ? true : undefined))
      .catch((e: Error) => { throw new Error(`${e.message}\n${lab.logs(30)}`); });
  }

  it(`${STREAMS} TCP streams through a dr vip live on through a switchover and the leader's box dying, with nothing synced; the directors keep no entry for them`, async function () {
    // preempt: never: whichever director won the first election leads.
    const first = await waitSteady(lab);
    const second: DirectorName = first === 'dir1' ? 'dir2' : 'dir1';
    const streams: BackgroundProcess = spawnTestClient(lab.cluster.topology, 'client', ['stream', '--target', `${DR_VIP}:${STREAM_PORT}`, '--connections', String(STREAMS), '--duration-ms', '60000', '--stall-ms', '2000']);
    try {
      const ready = await streams.waitForJson<{ ready: boolean }>((v) => 'ready' in v, 20_000);
      assert.ok(ready.ready, `not every stream started: ${JSON.stringify(ready)}\n${lab.logs(20)}`);
      const entries = (await lab.cluster.topology.exec(first, 'conntrack', ['-L', '-d', DR_VIP])).stdout.trim();
      assert.equal(entries, '', 'the leader tracked dr connections');
      await lab.api(first).failover(GROUP, second, { timeoutMs: 5000 });
      await leaderIs(second, 5000);
      // Lines flow through the new leader for a while before its box dies: the streams must have moved, not stalled.
      await new Promise((r) => setTimeout(r, 3000));
      await lab.cluster.killBox(second);
      await leaderIs(first, 10_000);
      await new Promise((r) => setTimeout(r, 3000));
      await streams.stop(5000);
      const r = streams.lastJson<StreamResult>();
      assert.ok(r && 'perConnection' in r, `no report: ${streams.stdout.slice(-500)}${streams.stderr.slice(-500)}`);
      const errors = r.perConnection.map((c) => c.error).filter((e): e is string => e !== null).slice(0, 5);
      assert.equal(r.broken, 0, `${r.broken} of ${r.connections} broke: ${errors.join(' | ')}\n${lab.logs(30)}`);
      assert.equal(Object.keys(r.servers).length, 3, `mh spread them over the three servers: ${JSON.stringify(r.servers)}`);
      console.log(`      dr, no sync: ${r.connections - r.broken}/${r.connections} streams intact through a switchover and a box death (${Object.entries(r.servers).map(([s, n]) => `${s}:${n}`).join(' ')})`);
    } finally {
      await streams.stop(2000).catch(() => undefined);
    }
  });
});
