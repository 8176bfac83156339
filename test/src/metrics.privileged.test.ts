import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, Metrics, silentLogger } from '@lbd/director-agent';
import { NftDataPlane, netnsRunner } from '@lbd/dataplane-nft';
import {
  CLIENT, DIRECTOR, LOCAL_ADDRESSES, SERVER_PORTS, VIPS, directorTopology, removeOrphans, requireRoot, runPrefix, spawnTestClient,
  startTestServers, type BackgroundProcess, type DirectorTopology, type ReadyReport,
} from '@lbd/testkit';

/**
 * Metrics against the real kernel: an agent (in this process) programs nftables in the director's
 * namespace, a client holds streams through the vip to three real servers, and the scrape must show
 * what conntrack and the nft counters say. Breaking a real server's health endpoint must show its health
 * 0 and, as the service expires a removed server's connections, its connection count drop to 0 while
 * the others keep theirs.
 *
 * The agent runs here, outside the namespaces, so its health check enters the director's namespace
 * itself (an exec check running curl under `ip netns exec`): the probe goes where a director's would.
 * What is scraped is what GET /metrics serves (Metrics.scrape); the HTTPS listener has its own tests.
 */

const RS = [1, 2, 3].map((k) => ({ host: `rs${k}`, address: `198.19.1.${10 + k}` }));
const SERVICE = 'stream';
const STREAMS = 9;

interface Sample { readonly name: string; readonly labels: Readonly<Record<string, string>>; readonly value: number }

/** Samples of the text format (the conventions are checked by the unit tests; here only values matter). */
function samples(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-z_:][a-z0-9_:]*)(?:\{(.*)\})? (\S+)$/i.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

function value(all: readonly Sample[], name: string, labels: Record<string, string>): number {
  const found = all.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  assert.equal(found.length, 1, `${name}${JSON.stringify(labels)}: ${found.length} samples`);
  return found[0]!.value;
}

describe('metrics show the kernel\'s connections and counters, and a downed real server @privileged', function () {
  this.timeout(120_000);
  let lab: DirectorTopology | undefined;
  let dir: string | undefined;
  let agent: Agent | undefined;
  let metrics: Metrics | undefined;
  let servers: BackgroundProcess[] = [];
  let streams: BackgroundProcess | undefined;

  before(async function () {
    await requireRoot(this, { commands: ['nft', 'conntrack', 'curl', 'ip'] });
    await removeOrphans('lbdt');
    dir = await mkdtemp(join(tmpdir(), 'lbd-metrics-test-'));
    lab = await directorTopology({ prefix: runPrefix('lbdt', 'mx') });
    servers = await startTestServers(lab.topology, RS.map((r) => r.host), SERVER_PORTS, 10_000, dir);
    const ns = lab.topology.ns(DIRECTOR.host);
    const configPath = join(dir, 'lbd.yaml');
    await writeFile(configPath, `services:
  - name: ${SERVICE}
    vip: ${VIPS.ipv4}
    port: ${SERVER_PORTS.stream}
    mode: fullnat
    scheduler: rr
    onDown: remove
    localAddresses: [${LOCAL_ADDRESSES.ipv4Range}]
    healthCheck:
      kind: exec
      command: [/bin/sh, -c, "exec ip netns exec ${ns} curl -sf -m 0.7 -o /dev/null http://$LBD_RS_ADDRESS:${SERVER_PORTS.http}/"]
      intervalMs: 1000
      timeoutMs: 900
      rise: 2
      fall: 2
      jitterMs: 0
      flapDamping: { maxTransitions: 0 }
    realServers:
${RS.map((r) => `      - { address: ${r.address}, port: ${SERVER_PORTS.stream} }`).join('\n')}
`);
    agent = await Agent.start({
      configPath, dataPlane: new NftDataPlane({ runner: netnsRunner(ns) }), serve: false, watch: false, log: silentLogger,
    });
    metrics = new Metrics(agent, { processMetrics: false });
  });
  after(async () => {
    await streams?.stop();
    metrics?.close();
    await agent?.stop();
    for (const s of servers) await s.stop();
    await lab?.topology.destroy();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const labels = (address: string): Record<string, string> => ({ service: SERVICE, server: `${address}:${SERVER_PORTS.stream}` });

  async function scrapeUntil(pred: (s: Sample[]) => boolean, what: string, ms = 15_000): Promise<Sample[]> {
    const end = Date.now() + ms;
    for (;;) {
      const s = samples(await metrics!.scrape());
      if (pred(s)) return s;
      if (Date.now() > end) assert.fail(`timed out after ${ms} ms waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  it('counts each real server\'s streams from conntrack and its traffic from nft; a downed one shows health 0 and no connections', async () => {
    await scrapeUntil((s) => RS.every((r) => s.some((x) => x.name === 'lbd_real_server_up' && x.labels.server === labels(r.address).server && x.value === 1)
      && s.some((x) => x.name === 'lbd_probe_duration_seconds_count' && x.labels.server === labels(r.address).server && x.labels.result === 'ok' && x.value >= 1)),
    'every real server probed up');

    streams = spawnTestClient(lab!.topology, CLIENT.host, ['stream', '--target', `${VIPS.ipv4}:${SERVER_PORTS.stream}`, '--connections', String(STREAMS), '--duration-ms', '90000']);
    const ready = await streams.waitForJson<ReadyReport>((v) => 'ready' in v, 15_000);
    assert.equal(ready.ready, true, JSON.stringify(ready));
    const per = (host: string): number => (ready.servers as Record<string, number>)[host] ?? 0;
    assert.equal(RS.reduce((n, r) => n + per(r.host), 0), STREAMS);

    let s = await scrapeUntil((x) => RS.every((r) => value(x, 'lbd_real_server_connections', { ...labels(r.address), state: 'active' }) === per(r.host)),
      'the active connections to match the client\'s streams');
    for (const r of RS) {
      assert.equal(value(s, 'lbd_real_server_up', labels(r.address)), 1);
      if (per(r.host) > 0) {
        assert.ok(value(s, 'lbd_real_server_packets_total', labels(r.address)) > 0, `${r.host} forwarded packets`);
        assert.ok(value(s, 'lbd_real_server_bytes_total', labels(r.address)) > 0, `${r.host} forwarded bytes`);
      }
    }
    const rs2 = RS[1]!;
    assert.ok(per(rs2.host) > 0, 'rr gave rs2 streams');

    await writeFile(join(dir!, `${rs2.host}.fault`), '500');
    s = await scrapeUntil((x) => value(x, 'lbd_real_server_up', labels(rs2.address)) === 0, 'rs2 down', 10_000);
    s = await scrapeUntil((x) => value(x, 'lbd_real_server_connections', { ...labels(rs2.address), state: 'active' }) === 0,
      'rs2\'s connections to expire with its removal', 5_000);
    assert.equal(value(s, 'lbd_real_server_effective_weight', labels(rs2.address)), 0);
    assert.equal(value(s, 'lbd_real_server_eligible', labels(rs2.address)), 0);
    assert.equal(value(s, 'lbd_real_server_state_changes_total', { ...labels(rs2.address), to: 'down' }), 1);
    assert.ok(value(s, 'lbd_probe_duration_seconds_count', { ...labels(rs2.address), kind: 'exec', result: 'exit-code' }) >= 2, 'fall = 2 failed probes');
    for (const r of [RS[0]!, RS[2]!]) {
      assert.equal(value(s, 'lbd_real_server_up', labels(r.address)), 1);
      assert.equal(value(s, 'lbd_real_server_connections', { ...labels(r.address), state: 'active' }), per(r.host), `${r.host} keeps its streams`);
    }

    await writeFile(join(dir!, `${rs2.host}.fault`), '');
    s = await scrapeUntil((x) => value(x, 'lbd_real_server_up', labels(rs2.address)) === 1, 'rs2 back', 10_000);
    assert.equal(value(s, 'lbd_real_server_state_changes_total', { ...labels(rs2.address), to: 'up' }), 1);
  });
});
