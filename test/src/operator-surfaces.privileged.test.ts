import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EXIT } from '@lbd/config';
import { AdminApi } from '@lbd/proto';
import {
  issueCert, labConfigText, makeCa, removeOrphans, requireRoot, runPrefix, spawnTestClient, startHaLab, waitFor,
  type BackgroundProcess, type CertFiles, type DirectorName, type ExecResult, type HaLab, type ReadyReport,
} from '@lbd/testkit';
import { lbadmServer, lbadmSocket, opsCurl, scrape, scrapeUntil, value, type Sample } from './ops-lab.js';

/**
 * The operator surfaces of a real cluster, through each agent's own mutual-TLS listeners (agent.admin in
 * deploy/lab/dirK.yaml, on the director's management address): two directors running lbd-agent, three
 * etcd members, three real servers, the real kernel, all in namespaces (startHaLab). Every request comes
 * from the ops host on the management network, as curl, Prometheus or lbadm --server would, with the lab
 * CA's operator certificates: `prometheus` scrapes, `viewer` only reads, `ops` writes.
 *
 * - /metrics against a known state: roles, health, each real server's streams from the client through the
 *   vip (from conntrack) and traffic (from nft); a real server broken for real (its HTTP answers fail)
 *   shows health 0 and its streams gone, the others keep theirs.
 * - Refusals: no certificate, another CA's, a read-only one trying to write.
 * - lbadm server drain / enable over the network: both directors' kernels follow, the config revision
 *   moves in the metrics, and the event log says who did it, from where.
 */

const STREAM = { name: 'stream', vip: '198.18.0.10', port: 9000 };
const WEB = { name: 'web', vip: '198.18.0.10', port: 80 };
const RS = [1, 2, 3].map((k) => ({ host: `rs${k}`, address: `198.19.1.${10 + k}` }));
const RS2 = RS[1]!;
const STREAMS = 9;

/**
 * The lab's cluster config with the stream service checked the way a fault file breaks (HTTP on the
 * servers' port 8080, not a bare TCP connect to 9000), taking a down server out with its connections
 * (onDown: remove) and scheduling round robin, so the client's streams spread evenly.
 */
function streamConfig(lab: string): string {
  const check = 'healthCheck: { kind: tcp, intervalMs: 1000, rise: 2, fall: 2 }';
  const sched = /(name: stream\n(?:.*\n)*?\s*scheduler: )mh/;
  assert.ok(lab.includes(check) && sched.test(lab), 'deploy/lab/lab.yaml: the stream service\'s health check or scheduler line moved');
  return lab.replace(sched, '$1rr').replace(check, 'healthCheck: { kind: http, port: 8080, path: /, intervalMs: 1000, rise: 2, fall: 2 }\n    onDown: remove');
}

describe('operator surfaces through the agents\' mutual-TLS listeners, in a two-director lab @privileged', function () {
  this.timeout(120_000);
  let lab: HaLab<AdminApi>;
  let dir: string;
  let rogue: CertFiles;
  let streams: BackgroundProcess | undefined;

  before(async function () {
    this.timeout(150_000);
    await requireRoot(this, { commands: ['nft', 'ip', 'etcd', 'etcdctl', 'arping', 'curl', 'conntrack'] });
    await removeOrphans('lbdt');
    dir = await mkdtemp(join(tmpdir(), 'lbd-ops-lab-'));
    // Another CA's certificate with a name the agents list (ops, role write): its signature is what fails.
    rogue = await issueCert(await makeCa(join(dir, 'rogue'), 'rogue-ca'), join(dir, 'rogue'), 'ops');
    lab = await startHaLab({ prefix: runPrefix('lbdt', 'ops'), admin: (socket) => new AdminApi(socket), faultDir: dir, configText: streamConfig(await labConfigText()) });
  });
  after(async function () {
    this.timeout(60_000);
    await streams?.stop();
    await lab?.destroy();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const rsLabels = (svc: { name: string }, address: string, port: number): Record<string, string> => ({ service: svc.name, server: `${address}:${port}` });
  const fault = (host: string, text: string): Promise<void> => writeFile(join(dir, `${host}.fault`), text);

  it('/metrics shows roles, health, each real server\'s streams and traffic, and a real server broken for real going to health 0 and losing its streams', async () => {
    let s = await scrapeUntil(lab, 'dir1', 'every real server probed up', (x) => RS.every((r) =>
      x.some((y) => y.name === 'lbd_real_server_up' && y.labels.service === STREAM.name && y.labels.server === `${r.address}:${STREAM.port}` && y.value === 1)));
    assert.equal(value(s, 'lbd_vip_group_role', { group: lab.group, role: 'leader' }), 1, 'dir1 leads');
    assert.equal(value(s, 'lbd_vip_group_role', { group: lab.group, role: 'standby' }), 0);
    assert.equal(value(s, 'lbd_etcd_reachable'), 1);
    assert.equal(value(s, 'lbd_peer_reachable', { peer: 'dir2' }), 1);
    const standby = await scrape(lab, 'dir2');
    assert.equal(value(standby, 'lbd_vip_group_role', { group: lab.group, role: 'standby' }), 1, 'dir2 stands by');
    assert.equal(value(standby, 'lbd_vip_group_role', { group: lab.group, role: 'leader' }), 0);

    streams = spawnTestClient(lab.cluster.topology, 'client', ['stream', '--target', `${STREAM.vip}:${STREAM.port}`, '--connections', String(STREAMS), '--duration-ms', '100000']);
    const ready = await streams.waitForJson<ReadyReport>((v) => 'ready' in v, 15_000);
    assert.equal(ready.ready, true, JSON.stringify(ready));
    const per = (host: string): number => (ready.servers as Record<string, number>)[host] ?? 0;
    assert.equal(RS.reduce((n, r) => n + per(r.host), 0), STREAMS);
    assert.ok(per(RS2.host) > 0, `round robin gave rs2 streams: ${JSON.stringify(ready.servers)}`);
    const active = (x: Sample[], address: string): number => value(x, 'lbd_real_server_connections', { ...rsLabels(STREAM, address, STREAM.port), state: 'active' });

    s = await scrapeUntil(lab, 'dir1', 'active connections matching the client\'s streams', (x) => RS.every((r) => active(x, r.address) === per(r.host)));
    for (const r of RS) {
      assert.ok(value(s, 'lbd_real_server_packets_total', rsLabels(STREAM, r.address, STREAM.port)) > 0, `${r.host} forwarded packets`);
      assert.ok(value(s, 'lbd_real_server_bytes_total', rsLabels(STREAM, r.address, STREAM.port)) > 0, `${r.host} forwarded bytes`);
    }

    await fault(RS2.host, '500\n');
    try {
      s = await scrapeUntil(lab, 'dir1', 'rs2 down', (x) => value(x, 'lbd_real_server_up', rsLabels(STREAM, RS2.address, STREAM.port)) === 0, 10_000);
      s = await scrapeUntil(lab, 'dir1', 'rs2\'s streams expired with its removal', (x) => active(x, RS2.address) === 0, 5_000);
      const rs2 = rsLabels(STREAM, RS2.address, STREAM.port);
      assert.equal(value(s, 'lbd_real_server_effective_weight', rs2), 0);
      assert.equal(value(s, 'lbd_real_server_quiescent', rs2), 1);
      assert.equal(value(s, 'lbd_real_server_state_changes_total', { ...rs2, to: 'down' }), 1);
      assert.ok(value(s, 'lbd_probe_duration_seconds_count', { ...rs2, kind: 'http', result: 'status' }) >= 2, 'fall = 2 failed probes');
      for (const r of [RS[0]!, RS[2]!]) {
        assert.equal(value(s, 'lbd_real_server_up', rsLabels(STREAM, r.address, STREAM.port)), 1);
        assert.equal(active(s, r.address), per(r.host), `${r.host} keeps its streams`);
      }
    } finally {
      await fault(RS2.host, '');
    }
    s = await scrapeUntil(lab, 'dir1', 'rs2 back up', (x) => value(x, 'lbd_real_server_up', rsLabels(STREAM, RS2.address, STREAM.port)) === 1, 10_000);
    assert.equal(value(s, 'lbd_real_server_state_changes_total', { ...rsLabels(STREAM, RS2.address, STREAM.port), to: 'up' }), 1);
    await streams.stop();
    streams = undefined;
  });

  it('refuses a client without a certificate, with another CA\'s, and a read-only one trying to write; the revision stays', async () => {
    const before = value(await scrape(lab, 'dir1'), 'lbd_config_revision');
    const drain = ['server', 'drain', WEB.name, `${RS2.address}:8080`];

    // No certificate: lbadm will not even try, and TLS clients that do are refused at the handshake.
    const none = await lbadmServer(lab, 'dir1', undefined, drain);
    assert.equal(none.code, EXIT.usage, `lbadm without --cert: ${none.stderr}`);
    assert.match(none.stderr, /needs mutual TLS files: missing --cert/);
    for (const port of [9443, 7412]) {
      const r = await opsCurl(lab, 'dir1', '/metrics', undefined, { port });
      assert.notEqual(r.code, 0, `curl without a certificate to dir1:${port} got an answer: ${r.stdout.slice(0, 200)}`);
      assert.equal(r.stdout, '', `dir1:${port} answered a client without a certificate`);
    }

    const untrusted = await lbadmServer(lab, 'dir1', rogue, drain);
    assert.equal(untrusted.code, EXIT.unavailable, `another CA's certificate: exit ${untrusted.code}: ${untrusted.stderr}`);
    const untrustedHttp = await opsCurl(lab, 'dir1', '/metrics', rogue);
    assert.notEqual(untrustedHttp.code, 0, 'another CA\'s certificate read /metrics');
    assert.doesNotMatch(untrustedHttp.stdout, /lbd_/);

    const viewer = await lbadmServer(lab, 'dir1', lab.clientCert('viewer'), drain);
    assert.equal(viewer.code, EXIT.noPermission, `viewer drain: exit ${viewer.code}: ${viewer.stderr}`);
    assert.match(viewer.stderr, /viewer has role read/);
    // It may read, though.
    const status = await lbadmServer(lab, 'dir1', lab.clientCert('viewer'), ['status']);
    assert.equal(status.code, EXIT.ok, status.stderr);
    assert.match(status.stdout, /198\.19\.1\.12:8080/);

    assert.equal(value(await scrape(lab, 'dir1'), 'lbd_config_revision'), before, 'a refused write changed the config revision');
    const refused = await lbadmServer(lab, 'dir1', lab.clientCert('viewer'), ['events', '--kind', 'admin', '--json']);
    assert.equal(refused.code, EXIT.ok, refused.stderr);
    // Only the lab's own apply (root on the unix socket) was done.
    const admin = (JSON.parse(refused.stdout) as { events: LbEvent[] }).events;
    assert.equal(admin.filter((e) => e.to === 'done' && e.fields.caller !== 'unix-socket').length, 0, `an admin write over the network was done: ${refused.stdout}`);
  });

  it('lbadm server drain over the network reprograms both directors\' kernels and leaves a trail in lbadm events; enable restores it', async () => {
    const rs2 = `${RS2.address}:8080`;
    const revisions = async (): Promise<number[]> => Promise.all((['dir1', 'dir2'] as const).map(async (d) => value(await scrape(lab, d), 'lbd_config_revision')));
    const before = await revisions();
    assert.equal(before[0], before[1], 'both directors run the same revision');

    const drained = await lbadmServer(lab, 'dir1', lab.clientCert('ops'), ['server', 'drain', WEB.name, rs2]);
    let enabled: ExecResult | undefined;
    assert.equal(drained.code, EXIT.ok, `ops drain: ${drained.stderr}`);
    try {
      for (const d of ['dir1', 'dir2'] as const) {
        await scrapeUntil(lab, d, `lbd_config_revision ${before[0]! + 1}`, (x) => value(x, 'lbd_config_revision') === before[0]! + 1, 15_000);
        await waitFor(`${d} programs ${rs2} of web at weight 0`, 15_000, async () => (await webServer(lab, d, rs2)).quiescent);
        const rs = await webServer(lab, d, rs2);
        assert.equal(rs.weight, 0, `${d}: ${JSON.stringify(rs)}`);
        assert.ok(rs.flags.includes('drained'), `${d}: ${JSON.stringify(rs)}`);
      }
      // The leader's kernel: new connections through the vip go to rs1 and rs3 only.
      const counts = await clientCounts(lab, 30);
      assert.equal(counts.rs2 ?? 0, 0, `rs2 got new connections while drained: ${JSON.stringify(counts)}`);

      // The trail: the agent that took the request records who (the certificate) asked for what.
      const admin = await lbadmServer(lab, 'dir1', lab.clientCert('viewer'), ['events', '--kind', 'admin', '--json']);
      assert.equal(admin.code, EXIT.ok, admin.stderr);
      const done = (JSON.parse(admin.stdout) as { events: LbEvent[] }).events.filter((e) => e.to === 'done' && e.fields.caller !== 'unix-socket');
      assert.equal(done.length, 1, admin.stdout);
      assert.equal(done[0]!.director, 'dir1');
      assert.equal(done[0]!.fields.caller, 'ops', JSON.stringify(done[0]));
      assert.match(done[0]!.fields.author ?? '', /certificate ops|^ops$/);
      assert.match(done[0]!.fields.source ?? '', /server drain web 198\.19\.1\.12:8080/);
      // And the other director, applying the revision from etcd, says whose change it runs, where it got it
      // and what the writer said of it (lbadm's command).
      const other = await lbadmSocket(lab, 'dir2', ['events', '--kind', 'config', '--director', 'dir2', '--json']);
      assert.equal(other.code, EXIT.ok, other.stderr);
      const applied = (JSON.parse(other.stdout) as { events: LbEvent[] }).events.find((e) => e.fields.revision === String(before[0]! + 1));
      assert.ok(applied, `dir2 has no config event of revision ${before[0]! + 1}: ${other.stdout.slice(-2000)}`);
      assert.equal(applied.to, 'applied');
      assert.match(applied.fields.author ?? '', /certificate ops|^ops$/, JSON.stringify(applied));
      assert.equal(applied.fields.source, `etcd revision ${before[0]! + 1}`, JSON.stringify(applied));
      assert.match(applied.fields.comment ?? '', /server drain web 198\.19\.1\.12:8080$/, JSON.stringify(applied));
    } finally {
      // Enabled again whatever failed above, so the lab's later state is the known one.
      enabled = await lbadmServer(lab, 'dir1', lab.clientCert('ops'), ['server', 'enable', WEB.name, rs2]);
    }
    assert.equal(enabled?.code, EXIT.ok, `ops enable: ${enabled?.stderr}`);
    for (const d of ['dir1', 'dir2'] as const) {
      await scrapeUntil(lab, d, `lbd_config_revision ${before[0]! + 2}`, (x) => value(x, 'lbd_config_revision') === before[0]! + 2, 15_000);
      await waitFor(`${d} programs ${rs2} of web at weight 2 again`, 15_000, async () => {
        const rs = await webServer(lab, d, rs2);
        return !rs.quiescent && rs.weight === 2 && !rs.flags.includes('drained');
      });
    }
    const counts = await clientCounts(lab, 30);
    assert.ok((counts.rs2 ?? 0) > 0, `rs2 got no new connections once enabled: ${JSON.stringify(counts)}`);
  });
});

interface LbEvent { director: string; kind: string; subject: string; from: string; to: string; reason: string; fields: Record<string, string> }

/** Real server `server` of the web service as director `d` programs it (lbadm status over the admin socket). */
async function webServer(lab: HaLab<AdminApi>, d: DirectorName, server: string): Promise<{ weight: number; quiescent: boolean; flags: string[] }> {
  const st = await lab.api(d).getStatus({ timeoutMs: 2000 });
  const svc = st.services.find((s) => s.name === WEB.name);
  const rs = svc?.realServers.find((r) => `${r.address}:${r.port}` === server);
  if (!rs) throw new Error(`${d}: no real server ${server} in web`);
  return { weight: rs.weight, quiescent: rs.quiescent, flags: rs.flags };
}

/** `count` new connections from the client through the web vip, counted per real server that answered. */
async function clientCounts(lab: HaLab, count: number): Promise<Record<string, number>> {
  const p = spawnTestClient(lab.cluster.topology, 'client', ['http', '--url', `http://${WEB.vip}/`, '--count', String(count), '--new-connection']);
  const r = await p.waitForJson<{ ok: number; failed: number; servers: Record<string, number> }>((v) => 'servers' in v, 15_000);
  await p.stop();
  assert.equal(r.failed, 0, JSON.stringify(r));
  // Every answer named its server: a count of 0 for one server then means none went there, not that none were counted.
  assert.equal(Object.values(r.servers).reduce((a, n) => a + n, 0), count, JSON.stringify(r));
  return r.servers;
}
