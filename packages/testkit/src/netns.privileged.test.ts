import assert from 'node:assert/strict';
import { CLIENT, DIRECTOR, SERVER_PORTS, VIPS, directorTopology, type DirectorTopology } from './director-topology.js';
import { listNamespaces, removeOrphans, runPrefix, Topology } from './netns.js';
import { requireRoot } from './privileged.js';
import { runTestClient, spawnTestClient, startTestServers } from './processes.js';
import type { HttpResult, ReadyReport, StreamResult, TcpOnceResult, UdpResult } from './testclient.js';

/**
 * The topology itself, without lbd: plain routing through dir1 must already work (the director forwards),
 * so any later failure in a data-plane test is lbd's, not the harness's.
 */
describe('director topology @privileged', function () {
  this.timeout(60_000);
  const prefix = runPrefix('lbdt', 'topo');
  let lab: DirectorTopology | undefined;

  before(async function () {
    await requireRoot(this);
    await removeOrphans('lbdt');
    lab = await directorTopology({ prefix, realServers: 3, bypassDirector: ['rs3'] });
    await startTestServers(lab.topology, lab.realServers.map((r) => r.host));
  });
  after(async () => {
    await lab?.topology.destroy();
  });

  it('routes the client to a real server through dir1, which sees the client address', async () => {
    const rs1 = lab!.realServers[0]!;
    for (const addr of [rs1.ipv4, `[${rs1.ipv6}]`]) {
      const r = await runTestClient<HttpResult>(lab!.topology, CLIENT.host, ['http', '--url', `http://${addr}:${SERVER_PORTS.http}/`, '--count', '3']);
      assert.deepEqual([r.ok, r.servers, Object.keys(r.peers)], [3, { rs1: 3 }, [addr.startsWith('[') ? CLIENT.ipv6 : CLIENT.ipv4]]);
    }
  });

  it('carries UDP and streams', async () => {
    const rs2 = lab!.realServers[1]!;
    const udp = await runTestClient<UdpResult>(lab!.topology, CLIENT.host, ['udp', '--target', `${rs2.ipv4}:${SERVER_PORTS.udp}`, '--count', '3']);
    assert.deepEqual([udp.ok, udp.servers], [3, { rs2: 3 }]);
    const once = await runTestClient<TcpOnceResult>(lab!.topology, CLIENT.host, ['tcp-once', '--target', `${rs2.ipv4}:${SERVER_PORTS.stream}`, '--count', '3', '--source-port', '21000']);
    assert.deepEqual(once.sequence, ['rs2', 'rs2', 'rs2']);

    const stream = spawnTestClient(lab!.topology, CLIENT.host, ['stream', '--target', `[${rs2.ipv6}]:${SERVER_PORTS.stream}`, '--connections', '4', '--duration-ms', '20000']);
    const ready = await stream.waitForJson<ReadyReport>((v) => 'ready' in v, 5000);
    assert.equal(ready.ready, true);
    await stream.stop();
    const r = stream.lastJson<StreamResult>();
    assert.deepEqual([r?.intact, r?.broken, r?.servers], [4, 0, { rs2: 4 }]);
  });

  it('puts the vips and local addresses on dir1', async () => {
    const { stdout } = await lab!.topology.exec(DIRECTOR.host, 'ip', ['-br', 'addr']);
    for (const a of [VIPS.ipv4, VIPS.ipv4Nat, VIPS.ipv6, '198.19.1.100', '198.19.1.103', 'fd00:0:0:2::100']) assert.ok(stdout.includes(`${a}/`), `${a} missing:\n${stdout}`);
  });

  it('loses the replies of a real server whose default route bypasses dir1', async () => {
    const rs3 = lab!.realServers[2]!;
    const r = await runTestClient<HttpResult>(lab!.topology, CLIENT.host, ['http', '--url', `http://${rs3.ipv4}:${SERVER_PORTS.http}/`, '--count', '1', '--timeout-ms', '500']);
    assert.deepEqual([r.ok, r.errors], [0, { timeout: 1 }]);
  });

  it('destroy() removes every namespace and process, twice without error', async () => {
    const t = new Topology(runPrefix('lbdt', 'gone'));
    await t.addHost('a');
    const p = t.spawn('a', 'sleep', ['30']);
    await t.destroy();
    await t.destroy();
    assert.equal(p.running, false);
    assert.deepEqual((await listNamespaces()).filter((n) => n.startsWith(t.prefix)), []);
  });
});
