import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { hostPort, serviceKey } from '@lbd/config';
import { DataPlaneError, type ApplyOptions, type ApplyResult, type Connection, type Counters, type DesiredState, type ObservedState, type SynProxyStats } from '@lbd/dataplane';
import { FakeAddressOwner, FakeDataPlane, FakeConnectionTable } from '@lbd/dataplane/testing';
import { FakeClock, FakeProber } from '@lbd/health-checker/testing';
import { LoopbackCluster, frontConfig, makeClusterPki, runCommand, type ClusterPki } from '@lbd/testkit';
import { parse as parseYaml } from 'yaml';
import { silentLogger } from '@lbd/log';
import { GROUP_ROLES } from '@lbd/config';
import { Metrics, metricsRoutes } from '@lbd/operator-surfaces';
import { MemoryEventSource, serveOpsRoutes } from '@lbd/operator-surfaces/testing';
import { Agent } from './agent.js';
import { metricsSource } from './operator-surfaces.js';
import { startClusterPair, stopClusterPair, type PairMember } from './testing/index.js';
import { TIMING_PROFILES, worstCaseTakeoverMs } from '@lbd/coordinator';

/**
 * Metrics against a real Agent with a fake kernel, FakeProber and FakeClock: a known state in, exact values
 * out of the Prometheus text (parsed here, not compared as strings). The exposition is checked against the
 * naming conventions, the route is called over plain HTTP through the test-only dispatcher (testing/, the real
 * listener is mutual TLS, tested with it), and the Grafana dashboard and alerting rules may only use
 * metrics the registry has. The cluster part runs two agents against a real etcd on loopback.
 */

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const CHECK = '{ kind: http, path: /, intervalMs: 1000, timeoutMs: 500, rise: 2, fall: 2, jitterMs: 0 }';
const RS1 = '198.19.1.11:8080';
const RS2 = '198.19.1.12:8080';
const SVC = '198.18.0.10:80/tcp';
const FAIL = { ok: false as const, reason: 'status' as const, message: 'http GET /: got 500, want 200-399' };
const WEB = { service: 'web', vip: '198.18.0.10', port: '80', protocol: 'tcp' };

function config(onDown = 'remove'): string {
  return `services:
  - name: web
    vip: 198.18.0.10
    port: 80
    mode: nat
    onDown: ${onDown}
    healthCheck: ${CHECK}
    realServers:
      - { address: 198.19.1.11, port: 8080, weight: 1 }
      - { address: 198.19.1.12, port: 8080, weight: 2 }
`;
}

/**
 * FakeDataPlane plus the two kernel facts metrics read: per-real-server counters (nft's), and the
 * connections of a real server an expireOnRemove service no longer has going away (conntrack's expiry).
 */
class KernelLikeDataPlane extends FakeDataPlane {
  /** `service key|host:port` → counters. */
  readonly counters = new Map<string, Counters>();
  synProxy: SynProxyStats | undefined;

  override async apply(desired: DesiredState, opts: ApplyOptions = {}): Promise<ApplyResult> {
    const r = await super.apply(desired, opts);
    if (opts.dryRun) return r;
    for (const s of desired.services) {
      if (!s.expireOnRemove) continue;
      const keep = new Set(s.realServers.map((rs) => hostPort(rs.address, rs.port)));
      this.conns = this.conns.filter((c) => c.service !== serviceKey(s) || keep.has(hostPort(c.realServer.address, c.realServer.port)));
    }
    return r;
  }

  override async observe(): Promise<ObservedState> {
    const o = await super.observe();
    return {
      services: o.services.map((s) => ({
        ...s,
        realServers: s.realServers.map((rs) => ({ ...rs, counters: this.counters.get(`${s.key}|${hostPort(rs.address, rs.port)}`) ?? rs.counters })),
      })),
      ...(this.synProxy ? { synProxy: this.synProxy } : {}),
    };
  }
}

function conn(server: string, state: string, clientPort: number): Connection {
  const [address, port] = server.split(':') as [string, string];
  return {
    protocol: 'tcp', state, client: { address: '198.18.2.2', port: clientPort }, vip: { address: '198.18.0.10', port: 80 }, localAddress: null,
    realServer: { address, port: Number(port) }, expiresInSec: 100, unreplied: false, realServerId: 1, service: SVC,
  };
}

// --- The Prometheus text format, parsed ---

interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

interface Exposition {
  readonly types: Map<string, string>;
  readonly helps: Map<string, string>;
  readonly samples: Sample[];
}

function parseExposition(text: string): Exposition {
  const types = new Map<string, string>();
  const helps = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    let m = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    if (m) {
      (m[1] === 'HELP' ? helps : types).set(m[2]!, m[3]!);
      continue;
    }
    m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    const body = m[2] ?? '';
    const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?/gy;
    let consumed = 0;
    for (let l = re.exec(body); l !== null; l = re.exec(body)) {
      assert.ok(!(l[1]! in labels), `label ${l[1]} twice in ${line}`);
      labels[l[1]!] = l[2]!.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
      consumed = re.lastIndex;
    }
    assert.equal(consumed, body.length, `bad labels in ${line}`);
    // Go's ParseFloat (Prometheus's parser) takes NaN in any case; prom-client writes `Nan`.
    const v = m[3] === '+Inf' ? Infinity : m[3] === '-Inf' ? -Infinity : /^nan$/i.test(m[3]!) ? NaN : Number(m[3]);
    assert.ok(!Number.isNaN(v) || /^nan$/i.test(m[3]!), `bad value in ${line}`);
    samples.push({ name: m[1]!, labels, value: v });
  }
  return { types, helps, samples };
}

/** The one sample of `name` whose labels include `labels`; fails when there are none or several. */
function value(x: Exposition, name: string, labels: Record<string, string> = {}): number {
  const found = x.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  assert.equal(found.length, 1, `${name}${JSON.stringify(labels)}: ${found.length} samples, want 1`);
  return found[0]!.value;
}

function has(x: Exposition, name: string, labels: Record<string, string> = {}): boolean {
  return x.samples.some((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

// --- Harness ---

interface Harness {
  readonly dir: string;
  readonly configPath: string;
  readonly dp: KernelLikeDataPlane;
  readonly clock: FakeClock;
  readonly prober: FakeProber;
  readonly agent: Agent;
  readonly metrics: Metrics;
  readonly events: MemoryEventSource;
}

const harnesses: Harness[] = [];

async function start(text = config()): Promise<Harness> {
  const dir = await mkdtemp(join(tmpdir(), 'lbd-metrics-'));
  const configPath = join(dir, 'lbd.yaml');
  await writeFile(configPath, text);
  const dp = new KernelLikeDataPlane();
  const clock = new FakeClock();
  const prober = new FakeProber(clock);
  const agent = await Agent.start({ configPath, dataPlane: dp, serve: false, watch: false, log: silentLogger, version: '1.2.3', health: { prober, clock } });
  const events = new MemoryEventSource();
  const metrics = new Metrics(metricsSource(agent), { events });
  const h = { dir, configPath, dp, clock, prober, agent, metrics, events };
  harnesses.push(h);
  return h;
}

async function scrape(h: Pick<Harness, 'metrics'>): Promise<Exposition> {
  return parseExposition(await h.metrics.scrape());
}

async function until(h: Harness, pred: () => boolean, maxMs: number, what: string): Promise<void> {
  for (let t = 0; t <= maxMs; t += 10) {
    if (pred()) return;
    await h.clock.advance(10);
  }
  assert.fail(`${what} did not happen within ${maxMs} ms of simulated time`);
}

const rs = (server: string): Record<string, string> => ({ ...WEB, server });

describe('Metrics of one director', () => {
  afterEach(async () => {
    for (const h of harnesses.splice(0)) {
      h.metrics.close();
      await h.agent.stop();
      await rm(h.dir, { recursive: true, force: true });
    }
  });

  it('shows connections, counters, weights and health; a downed real server shows health 0, loses its connections and counts its transition', async () => {
    const h = await start();
    h.dp.conns = [conn(RS1, 'ESTABLISHED', 40001), conn(RS2, 'ESTABLISHED', 40002), conn(RS2, 'ESTABLISHED', 40003), conn(RS2, 'TIME_WAIT', 40004)];
    h.dp.counters.set(`${SVC}|${RS1}`, { packets: 10, bytes: 861 });
    h.dp.counters.set(`${SVC}|${RS2}`, { packets: 30, bytes: 2583 });
    await until(h, () => h.prober.callsTo(RS2).some((c) => c.settledAt !== null), 2000, 'a first probe of rs2');

    let x = await scrape(h);
    assert.equal(value(x, 'lbd_real_server_up', rs(RS2)), 1);
    assert.equal(value(x, 'lbd_real_server_connections', { ...rs(RS2), state: 'active' }), 2);
    assert.equal(value(x, 'lbd_real_server_connections', { ...rs(RS2), state: 'inactive' }), 1);
    assert.equal(value(x, 'lbd_real_server_connections', { ...rs(RS1), state: 'active' }), 1);
    assert.equal(value(x, 'lbd_real_server_connections', { ...rs(RS1), state: 'inactive' }), 0);
    assert.equal(value(x, 'lbd_real_server_packets_total', rs(RS2)), 30);
    assert.equal(value(x, 'lbd_real_server_bytes_total', rs(RS2)), 2583);
    assert.equal(value(x, 'lbd_real_server_bytes_total', rs(RS1)), 861);
    assert.equal(value(x, 'lbd_real_server_weight', rs(RS2)), 2);
    assert.equal(value(x, 'lbd_real_server_effective_weight', rs(RS2)), 2);
    assert.equal(value(x, 'lbd_real_server_quiescent', rs(RS2)), 0);
    assert.equal(value(x, 'lbd_real_server_held_down', rs(RS2)), 0);
    assert.equal(value(x, 'lbd_real_server_flap_score', rs(RS2)), 0);
    assert.equal(has(x, 'lbd_real_server_state_changes_total'), false, 'no transition yet');
    assert.equal(value(x, 'lbd_config_revision'), 1);
    assert.equal(value(x, 'lbd_config_apply_duration_seconds_count', { trigger: 'start', result: 'applied' }), 1);
    assert.equal(value(x, 'lbd_health_checks'), 2);
    assert.equal(value(x, 'lbd_build_info', { version: '1.2.3', node_version: process.version }), 1);
    assert.equal(has(x, 'lbd_vip_group_role'), false, 'a single director has no vip groups');

    const failFrom = h.prober.calls.length;
    h.prober.set(RS2, FAIL);
    await until(h, () => !h.dp.applied.services[0]!.realServers.some((r) => hostPort(r.address, r.port) === RS2), 3000, 'rs2 removed');
    x = await scrape(h);
    assert.equal(value(x, 'lbd_real_server_up', rs(RS2)), 0, 'health 0');
    assert.equal(value(x, 'lbd_real_server_up', rs(RS1)), 1);
    assert.equal(value(x, 'lbd_real_server_connections', { ...rs(RS2), state: 'active' }), 0, 'its connections expired with it');
    assert.equal(value(x, 'lbd_real_server_connections', { ...rs(RS2), state: 'inactive' }), 0);
    assert.equal(value(x, 'lbd_real_server_connections', { ...rs(RS1), state: 'active' }), 1, 'rs1 keeps its own');
    assert.equal(value(x, 'lbd_real_server_effective_weight', rs(RS2)), 0);
    assert.equal(value(x, 'lbd_real_server_weight', rs(RS2)), 2, 'the configured weight stays');
    assert.equal(value(x, 'lbd_real_server_quiescent', rs(RS2)), 1);
    assert.equal(value(x, 'lbd_real_server_state_changes_total', { ...rs(RS2), to: 'down' }), 1);
    assert.equal(has(x, 'lbd_real_server_state_changes_total', { ...rs(RS2), to: 'up' }), false);
    assert.equal(value(x, 'lbd_real_server_flap_score', rs(RS2)), 1);
    assert.equal(value(x, 'lbd_health_applies_total', { result: 'applied' }), 1);

    // Every settled probe is one observation, under its own result: counted from the prober's own record.
    const settled = (server: string, failing: boolean): number =>
      h.prober.callsTo(server).filter((c, i, all) => c.settledAt !== null && (h.prober.calls.indexOf(all[i]!) >= failFrom) === failing).length;
    assert.ok(settled(RS2, true) >= 2);
    assert.equal(value(x, 'lbd_probe_duration_seconds_count', { ...rs(RS2), kind: 'http', result: 'status' }), settled(RS2, true));
    assert.equal(value(x, 'lbd_probe_duration_seconds_count', { ...rs(RS2), kind: 'http', result: 'ok' }), settled(RS2, false));
    assert.equal(value(x, 'lbd_probe_duration_seconds_bucket', { ...rs(RS2), kind: 'http', result: 'status', le: '0.001' }), settled(RS2, true),
      'the fake answers at once: every probe in the first bucket');

    h.prober.set(RS2, { ok: true });
    await until(h, () => h.dp.applied.services[0]!.realServers.some((r) => hostPort(r.address, r.port) === RS2), 3000, 'rs2 back');
    x = await scrape(h);
    assert.equal(value(x, 'lbd_real_server_up', rs(RS2)), 1);
    assert.equal(value(x, 'lbd_real_server_state_changes_total', { ...rs(RS2), to: 'up' }), 1);
    assert.equal(value(x, 'lbd_real_server_state_changes_total', { ...rs(RS2), to: 'down' }), 1);
    assert.equal(value(x, 'lbd_real_server_flap_score', rs(RS2)), 2);
  });

  it('counts a failed and a rejected apply with their trigger, and says while the data plane lags', async () => {
    const h = await start();
    h.dp.failNextApply = new DataPlaneError('Unknown', 'apply', { detail: 'nft: Device or resource busy' });
    await writeFile(h.configPath, config('quiesce'));
    assert.equal((await h.agent.reload('sighup'))?.result, 'failed');
    let x = await scrape(h);
    assert.equal(value(x, 'lbd_config_apply_failures_total', { trigger: 'sighup', result: 'failed' }), 1);
    assert.equal(value(x, 'lbd_config_apply_duration_seconds_count', { trigger: 'sighup', result: 'failed' }), 1);
    assert.equal(value(x, 'lbd_data_plane_apply_failing'), 1);
    assert.equal(value(x, 'lbd_config_revision'), 1, 'the running config stays');

    await writeFile(h.configPath, 'services: [ { name: web } ]\n');
    assert.equal((await h.agent.reload('sighup'))?.result, 'rejected');
    x = await scrape(h);
    assert.equal(value(x, 'lbd_config_apply_failures_total', { trigger: 'sighup', result: 'rejected' }), 1);
    assert.equal(has(x, 'lbd_config_apply_duration_seconds_count', { result: 'rejected' }), false, 'a rejected config never reached the data plane');

    await writeFile(h.configPath, config('quiesce'));
    assert.equal((await h.agent.reload('sighup'))?.result, 'applied');
    x = await scrape(h);
    assert.equal(value(x, 'lbd_data_plane_apply_failing'), 0);
    assert.equal(value(x, 'lbd_config_revision'), 2);
    assert.equal(value(x, 'lbd_config_apply_duration_seconds_count', { trigger: 'sighup', result: 'applied' }), 1);
    assert.equal(value(x, 'lbd_config_apply_failures_total', { trigger: 'sighup', result: 'failed' }), 1, 'a counter never goes back');

    // A failed health apply lags the kernel too, until its retry lands.
    h.dp.failNextApply = new DataPlaneError('Unknown', 'apply', { detail: 'nft: Device or resource busy' });
    h.prober.set(RS2, FAIL);
    await until(h, () => h.agent.dataPlaneProblem() !== null, 3000, 'a failed health apply');
    x = await scrape(h);
    assert.equal(value(x, 'lbd_data_plane_apply_failing'), 1, 'a health apply failed');
    assert.equal(value(x, 'lbd_health_applies_total', { result: 'failed' }), 1);
    await until(h, () => h.agent.dataPlaneProblem() === null, 10_000, 'the health apply retried');
    x = await scrape(h);
    assert.equal(value(x, 'lbd_data_plane_apply_failing'), 0, 'the retry landed');
  });

  it('shows a service\'s connection limit and its drops, and the SYN proxy\'s counters; none of them without a limit or a proxy (the SYN count stays 0)', async () => {
    const h = await start();
    const quiet = await scrape(h);
    assert.equal(has(quiet, 'lbd_service_connection_limit'), false);
    assert.equal(value(quiet, 'lbd_synproxy_syns_total'), 0);
    assert.equal(has(quiet, 'lbd_synproxy_cookies_total'), false);
    await writeFile(h.configPath, config().replace('    mode: nat\n', '    mode: nat\n    connectionLimit: 5000\n    synProxy: true\n    sync: { enabled: false }\n'));
    assert.equal((await h.agent.reload('sighup'))?.result, 'applied');
    h.dp.drops.set(SVC, 42);
    h.dp.synProxy = { synReceived: 9000, cookieValid: 120, cookieInvalid: 3, cookieRetransmitted: 0 };
    const m = await scrape(h);
    assert.equal(value(m, 'lbd_service_connection_limit', WEB), 5000);
    assert.equal(value(m, 'lbd_service_limit_drops_total', WEB), 42);
    assert.equal(value(m, 'lbd_synproxy_syns_total', {}), 9000);
    assert.equal(value(m, 'lbd_synproxy_cookies_total', { result: 'valid' }), 120);
    assert.equal(value(m, 'lbd_synproxy_cookies_total', { result: 'invalid' }), 3);
  });

  it('drops the series of a real server the config no longer has', async () => {
    const h = await start();
    h.prober.set(RS2, FAIL);
    await until(h, () => h.agent.health.historySince(0).length === 1, 3000, 'rs2 down');
    let x = await scrape(h);
    assert.ok(has(x, 'lbd_probe_duration_seconds_count', rs(RS2)));
    assert.ok(has(x, 'lbd_real_server_state_changes_total', rs(RS2)));
    await writeFile(h.configPath, config().replace('      - { address: 198.19.1.12, port: 8080, weight: 2 }\n', ''));
    assert.equal((await h.agent.reload('sighup'))?.result, 'applied');
    x = await scrape(h);
    for (const name of ['lbd_probe_duration_seconds_count', 'lbd_real_server_state_changes_total', 'lbd_real_server_up', 'lbd_real_server_connections']) {
      assert.equal(has(x, name, rs(RS2)), false, `${name} of the removed server`);
    }
    assert.ok(has(x, 'lbd_probe_duration_seconds_count', rs(RS1)), 'rs1 keeps its series');
  });

  it('counts role transitions from the event log, and nothing once closed', async () => {
    const h = await start();
    h.events.add('role', 'front', '', 'standby');
    h.events.add('role', 'front', 'standby', 'leader');
    h.events.add('role', 'front', 'leader', 'leader'); // a note (a refused handoff), not a transition
    h.events.add('health', `${SVC} ${RS2}`, 'up', 'down');
    let x = await scrape(h);
    assert.equal(value(x, 'lbd_vip_group_transitions_total', { group: 'front', from: 'none', to: 'standby' }), 1);
    assert.equal(value(x, 'lbd_vip_group_transitions_total', { group: 'front', from: 'standby', to: 'leader' }), 1);
    assert.equal(x.samples.filter((s) => s.name === 'lbd_vip_group_transitions_total').length, 2);
    h.metrics.close();
    h.events.add('role', 'front', 'leader', 'standby');
    x = await scrape(h);
    assert.equal(has(x, 'lbd_vip_group_transitions_total', { to: 'standby', from: 'leader' }), false);

    const without = new Metrics(metricsSource(h.agent), { processMetrics: false });
    assert.equal(has(await scrape({ metrics: without }), 'lbd_vip_group_transitions_total'), false);
    assert.equal((await without.registry.getMetricsAsJSON()).some((m) => m.name === 'lbd_vip_group_transitions_total'), false,
      'without an event log the counter does not exist, rather than stay at 0');
    without.close();
  });

  it('follows the Prometheus conventions: lbd_ names in base units, counters end in _total, no duplicate series', async () => {
    const h = await start();
    h.dp.conns = [conn(RS1, 'ESTABLISHED', 40001)];
    h.prober.set(RS2, FAIL);
    await until(h, () => h.agent.health.historySince(0).length === 1, 3000, 'rs2 down');
    const text = await h.metrics.scrape();
    const x = parseExposition(text);
    assert.ok(x.types.size > 30, `${x.types.size} metrics`);
    for (const [name, type] of x.types) {
      assert.match(name, /^lbd_[a-z0-9_]+$/, name);
      assert.ok(x.helps.get(name)?.length, `${name} has a HELP`);
      assert.equal(name.endsWith('_total'), type === 'counter', `${name} (${type}): counters and only counters end in _total`);
      assert.doesNotMatch(name, /_(ms|milliseconds|millis|us|microseconds|kb|mb|kilobytes|megabytes|minutes|hours|percent)(_|$)/, `${name}: base units only`);
    }
    const seen = new Set<string>();
    for (const s of x.samples) {
      const id = `${s.name}${JSON.stringify(Object.entries(s.labels).sort())}`;
      assert.ok(!seen.has(id), `duplicate series ${id}`);
      seen.add(id);
      assert.ok(s.labels.director, `${s.name} has the director label`);
      const family = s.name.replace(/_(bucket|sum|count)$/, '');
      assert.ok(x.types.has(s.name) || x.types.get(family) === 'histogram' || x.types.get(family) === 'summary', `${s.name} has a TYPE`);
    }
    // Histograms: cumulative buckets, +Inf equal to _count.
    for (const [name, type] of x.types) {
      if (type !== 'histogram' || !name.startsWith('lbd_probe') && !name.startsWith('lbd_config')) continue;
      const counts = x.samples.filter((s) => s.name === `${name}_count`);
      assert.ok(counts.length > 0, `${name} has observations`);
      for (const c of counts) {
        const buckets = x.samples.filter((s) => s.name === `${name}_bucket` && Object.entries(c.labels).every(([k, v]) => s.labels[k] === v));
        const values = buckets.map((b) => b.value);
        assert.deepEqual(values, [...values].sort((a, b) => a - b), `${name} buckets are cumulative`);
        assert.equal(buckets.at(-1)?.labels.le, '+Inf');
        assert.equal(buckets.at(-1)?.value, c.value);
      }
    }
  });

  it('serves GET /metrics to a read caller as text/plain; version=0.0.4', async () => {
    const h = await start();
    const routes = metricsRoutes(h.metrics);
    assert.deepEqual(routes.map((r) => [r.method, r.path, r.role, r.prefix ?? false]), [['GET', '/metrics', 'read', false]]);
    const server = await serveOpsRoutes(routes);
    try {
      const res = await httpGet(`${server.url}/metrics`);
      assert.equal(res.status, 200);
      assert.equal(res.contentType, 'text/plain; version=0.0.4; charset=utf-8');
      const x = parseExposition(res.body);
      assert.equal(value(x, 'lbd_real_server_up', rs(RS1)), 1);
      assert.equal((await httpGet(`${server.url}/other`)).status, 404);
    } finally {
      await server.close();
    }
  });

  it('the Grafana dashboard and the alerting rules use only metrics the registry has', async () => {
    const h = await start();
    const known = new Set((await h.metrics.registry.getMetricsAsJSON()).flatMap((m) => {
      const name = m.name;
      return String(m.type) === 'histogram' ? [name, `${name}_bucket`, `${name}_sum`, `${name}_count`] : [name];
    }));
    const used = (expr: string): string[] => [...expr.matchAll(/\blbd_[a-z0-9_]+/g)].map((m) => m[0]);

    const dashboard = JSON.parse(await readFile(join(ROOT, 'deploy/grafana/lbd-dashboard.json'), 'utf8')) as GrafanaDashboard;
    assert.equal(typeof dashboard.title, 'string');
    assert.ok(typeof dashboard.uid === 'string' && dashboard.uid.length > 0 && dashboard.uid.length <= 40, 'a stable uid');
    const panels = (dashboard.panels ?? []).flatMap((p) => [p, ...(p.panels ?? [])]).filter((p) => p.type !== 'row');
    assert.ok(panels.length >= 8, `${panels.length} panels`);
    const ids = panels.map((p) => p.id);
    assert.equal(new Set(ids).size, ids.length, 'panel ids are unique');
    const dashboardExprs: string[] = [];
    for (const p of panels) {
      assert.ok(p.title, `panel ${p.id} has a title`);
      assert.ok(p.gridPos && p.gridPos.w > 0 && p.gridPos.h > 0 && p.gridPos.w <= 24, `panel ${p.title} has a grid position`);
      assert.ok((p.targets ?? []).length > 0, `panel ${p.title} has queries`);
      for (const t of p.targets ?? []) {
        assert.ok(t.expr && balanced(t.expr), `panel ${p.title}: ${t.expr}`);
        dashboardExprs.push(t.expr);
      }
    }
    for (const v of dashboard.templating?.list ?? []) if (typeof v.query === 'string') dashboardExprs.push(v.query);
    else if (v.query && typeof v.query.query === 'string') dashboardExprs.push(v.query.query);

    const rules = parseYaml(await readFile(join(ROOT, 'deploy/prometheus/lbd-rules.yml'), 'utf8')) as RulesFile;
    const alerts = rules.groups.flatMap((g) => g.rules);
    for (const r of alerts) {
      assert.match(r.alert, /^Lbd[A-Za-z]+$/, 'alert names are CamelCase');
      assert.ok(balanced(r.expr), `${r.alert}: ${r.expr}`);
      assert.match(r.for ?? '', /^\d+[smh]$/, `${r.alert} has a for:`);
      assert.ok(['critical', 'warning'].includes(r.labels?.severity ?? ''), `${r.alert} has a severity`);
      assert.ok(r.annotations?.summary && r.annotations.description, `${r.alert} says what and why`);
    }
    for (const want of ['LbdVipGroupNoLeader', 'LbdDirectorFenced', 'LbdRealServerDown', 'LbdSyncLagHigh', 'LbdConfigApplyFailing']) {
      assert.ok(alerts.some((r) => r.alert === want), `alert ${want}`);
    }

    // Merge keys (<<) as Prometheus's YAML reader takes them.
    const scrapeConfig = parseYaml(await readFile(join(ROOT, 'deploy/prometheus/prometheus.yml'), 'utf8'), { merge: true }) as PrometheusConfig;
    const jobs = scrapeConfig.scrape_configs.filter((j) => j.job_name.startsWith('lbd'));
    assert.ok(jobs.length >= 2, 'one job per director');
    for (const job of jobs) {
      assert.equal(job.scheme, 'https');
      assert.equal(job.metrics_path ?? '/metrics', '/metrics');
      assert.ok(job.tls_config?.ca_file && job.tls_config.cert_file && job.tls_config.key_file, `${job.job_name} scrapes with a client certificate`);
      assert.ok(job.tls_config.server_name, `${job.job_name} names the director its certificate is for`);
      assert.ok(job.relabel_configs?.some((r) => r.target_label === 'job' && r.replacement === 'lbd'), `${job.job_name} is job="lbd" for the rules`);
    }
    assert.ok(scrapeConfig.rule_files.some((f) => f.endsWith('lbd-rules.yml')));

    const all = [...dashboardExprs, ...alerts.map((r) => r.expr)].flatMap(used);
    assert.ok(all.length > 20);
    const unknown = [...new Set(all.filter((n) => !known.has(n)))];
    assert.deepEqual(unknown, [], 'metrics the dashboard or the rules use but the registry does not have');
    for (const name of ['lbd_vip_group_role', 'lbd_real_server_up', 'lbd_probe_duration_seconds_bucket', 'lbd_sync_lag_seconds', 'lbd_config_apply_duration_seconds_bucket']) {
      assert.ok(all.includes(name), `the dashboard or rules use ${name}`);
    }
  });

  it('docs/metrics.md lists every lbd_ metric the registry has, and no other', async () => {
    const h = await start();
    const names = (await h.metrics.registry.getMetricsAsJSON()).map((m) => m.name)
      .filter((n) => !/^lbd_(process|nodejs)_/.test(n));
    const doc = await readFile(join(ROOT, 'docs/metrics.md'), 'utf8');
    const listed = new Set([...doc.matchAll(/^\| `(lbd_[a-z0-9_]+)`/gm)].map((m) => m[1]!));
    assert.deepEqual(names.filter((n) => !listed.has(n)), [], 'missing from docs/metrics.md');
    assert.deepEqual([...listed].filter((n) => !names.includes(n)), [], 'in docs/metrics.md but not in the registry');
  });
});

describe('deploy/prometheus and the dashboard\'s queries, checked by promtool', function () {
  this.timeout(60_000);
  let dir: string;
  const promtool = (...args: string[]) => runCommand('promtool', args, { allowFailure: true, timeoutMs: 30_000 });

  before(async function () {
    if ((await promtool('--version')).code === -1) {
      // test/run installs Debian's prometheus package (for promtool); a developer machine may lack it.
      process.stderr.write('\n!!! SKIPPING promtool checks: promtool is not on PATH (apt-get install prometheus).\n\n');
      this.skip();
    }
    dir = await mkdtemp(join(tmpdir(), 'lbd-promtool-'));
  });
  after(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('the scrape config and the rules are valid, and the rules\' unit tests pass', async () => {
    // check config opens the TLS files: point them at empty stand-ins.
    const text = (await readFile(join(ROOT, 'deploy/prometheus/prometheus.yml'), 'utf8')).replaceAll('/etc/prometheus/lbd/', `${dir}/`);
    for (const f of ['ca.pem', 'prometheus.pem', 'prometheus.key']) await writeFile(join(dir, f), '');
    await writeFile(join(dir, 'prometheus.yml'), text);
    await writeFile(join(dir, 'lbd-rules.yml'), await readFile(join(ROOT, 'deploy/prometheus/lbd-rules.yml')));
    const config = await promtool('check', 'config', join(dir, 'prometheus.yml'));
    assert.equal(config.code, 0, config.stdout + config.stderr);
    const tests = await promtool('test', 'rules', join(ROOT, 'deploy/prometheus/lbd-rules.test.yml'));
    assert.equal(tests.code, 0, tests.stdout + tests.stderr);
  });

  it('every query of the Grafana dashboard parses', async () => {
    const dashboard = JSON.parse(await readFile(join(ROOT, 'deploy/grafana/lbd-dashboard.json'), 'utf8')) as GrafanaDashboard;
    const rules: Array<{ record: string; expr: string }> = [];
    for (const p of dashboard.panels ?? []) {
      for (const [i, t] of (p.targets ?? []).entries()) {
        // Grafana's variables, as it substitutes them.
        const expr = t.expr.replaceAll('$__rate_interval', '1m').replace(/\$(cluster|director|service)\b/g, '.*');
        rules.push({ record: `lbd_dashboard:panel_${p.id}_${i}`, expr });
      }
    }
    const file = join(dir, 'dashboard-queries.yml');
    await writeFile(file, JSON.stringify({ groups: [{ name: 'dashboard', rules }] }));
    const r = await promtool('check', 'rules', file);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, new RegExp(`SUCCESS: ${rules.length} rules found`));
  });
});

describe('Metrics of clustered directors (real etcd and gRPC on loopback, fake kernel)', function () {
  this.timeout(30_000);
  let cluster: LoopbackCluster;
  let pki: ClusterPki;
  const members: PairMember[] = [];
  const agents: Agent[] = [];
  const all: Metrics[] = [];
  const ids = ['dir1', 'dir2'] as const;

  before(async () => {
    cluster = await LoopbackCluster.open('lbd-metrics-cluster');
    pki = await makeClusterPki(join(cluster.dir, 'pki'), [...ids]);
  });
  afterEach(async () => {
    for (const m of all.splice(0)) m.close();
    agents.splice(0);
    await stopClusterPair(members);
  });
  after(() => cluster?.close());

  /** Two directors of one vip group; with `sync`, mutual TLS and fake connection tables (connection sync on). */
  async function startPair(opts: { sync?: boolean } = {}): Promise<{ owners: FakeAddressOwner[]; tables: FakeConnectionTable[]; members: readonly PairMember[] }> {
    await startClusterPair(await cluster.writePairConfigs({ track: true, ...(opts.sync ? { pki } : {}) }), { connectionTable: opts.sync === true }, members);
    for (const m of members) {
      agents.push(m.agent);
      all.push(new Metrics(metricsSource(m.agent), { processMetrics: false }));
    }
    const out = await agents[0]!.admin.applyText(frontConfig(), 'cluster.yaml', false, { author: 'test' });
    assert.ok(out.ok);
    const owners = members.map((m) => m.owner);
    await until(() => owners.some((o) => o.held.size > 0), 'a leader to claim');
    return { owners, tables: members.map((m) => m.table), members };
  }

  async function until(pred: () => boolean | Promise<boolean>, what: string, ms = 10_000): Promise<void> {
    const end = Date.now() + ms;
    while (!(await pred())) {
      if (Date.now() > end) assert.fail(`timed out after ${ms} ms waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /**
   * The roles as the metrics show them, once one leads with a few beats landed and the other stands by: on a
   * loaded box the group can move while both start, or a leader etcd answered late fence itself and take
   * the group back. Returns the leader's index and the scrapes that showed it.
   */
  async function steadyRoles(owners: readonly FakeAddressOwner[]): Promise<{ li: number; steady: Exposition[] }> {
    // Not value(): a director that has not seen the group yet has no series, which is "not yet", not a failure.
    const role = (x: Exposition, r: string): number | undefined =>
      x.samples.find((s) => s.name === 'lbd_vip_group_role' && s.labels.group === 'front' && s.labels.role === r)?.value;
    let li = -1;
    let steady: Exposition[] = [];
    await until(async () => {
      steady = await Promise.all(all.map((m) => scrape({ metrics: m })));
      li = steady.findIndex((x) => role(x, 'leader') === 1);
      return li >= 0 && role(steady[1 - li]!, 'standby') === 1 && owners[li]!.held.size > 0
        && has(steady[li]!, 'lbd_vip_group_heartbeats_total') && value(steady[li]!, 'lbd_vip_group_heartbeats_total', { group: 'front', result: 'confirmed' }) >= 3;
    }, 'one leader with a few beats landed, and one standby');
    return { li, steady };
  }

  it('shows each director\'s role per group, beats, lease, announcements and peers; a resigning leader shows unhealthy', async () => {
    const { owners, members: pair } = await startPair();
    const { li, steady } = await steadyRoles(owners);
    const si = 1 - li;
    const [lx, sx] = [steady[li]!, steady[si]!];
    const beats = (x: Exposition): number => x.samples.filter((s) => s.name === 'lbd_vip_group_heartbeats_total').reduce((n, s) => n + s.value, 0);
    // Beats of the standby's, if it led for a moment while both started: they must not grow while it stands by.
    const before = beats(sx);

    for (const role of GROUP_ROLES) {
      assert.equal(value(lx, 'lbd_vip_group_role', { group: 'front', role }), role === 'leader' ? 1 : 0, `leader: ${role}`);
      assert.equal(value(sx, 'lbd_vip_group_role', { group: 'front', role }), role === 'standby' ? 1 : 0, `standby: ${role}`);
    }
    assert.equal(value(lx, 'lbd_vip_group_role', { role: 'leader' }), 1);
    assert.equal(lx.samples.find((s) => s.name === 'lbd_vip_group_role')?.labels.director, ids[li]);
    assert.ok(value(lx, 'lbd_vip_group_heartbeats_total', { group: 'front', result: 'confirmed' }) >= 2, 'beats land');
    // The sign that the standby had time to beat, had it beaten: the leader's next confirmed beat.
    const leaderBeats = value(lx, 'lbd_vip_group_heartbeats_total', { group: 'front', result: 'confirmed' });
    await until(async () => value(await scrape({ metrics: all[li]! }), 'lbd_vip_group_heartbeats_total', { group: 'front', result: 'confirmed' }) > leaderBeats, 'the leader\'s next beat');
    assert.equal(beats(await scrape({ metrics: all[si]! })), before, 'a standby beats nothing');
    // Every beat went in an etcd transaction of the leader's (one group: one beat in each, apart from a moment
    // where a beat is counted before its transaction's own notice arrives).
    const tx = await scrape({ metrics: all[li]! });
    const sent = value(tx, 'lbd_beat_transactions_total', {});
    assert.ok(sent >= 2 && Math.abs(sent - beats(tx)) <= 1, `beat transactions ${sent}, beats ${beats(tx)}`);
    // Quiet, etcd answers and nobody fences; a loaded box may fence a leader etcd answered late (and the group
    // comes back to it). Either way the counter says as often as the leader's events do.
    const fx = await scrape({ metrics: all[li]! });
    const fencedEvents = agents[li]!.events.recent(0).filter((e) => e.kind === 'role' && e.subject === 'front' && e.reason.startsWith('fenced')).length;
    assert.equal(has(fx, 'lbd_vip_group_fences_total') ? value(fx, 'lbd_vip_group_fences_total', { group: 'front' }) : 0, fencedEvents, 'fences counted as the events show them');
    const lease = value(lx, 'lbd_vip_group_lease_remaining_seconds', { group: 'front' });
    const st = await agents[li]!.admin.clusterStatus();
    // 0 when the last confirmed beat is a window old: the leader is about to fence (a loaded box).
    assert.ok(lease >= 0 && lease <= st.safetyWindowMs! / 1000, `lease ${lease} s within the ${st.safetyWindowMs} ms window`);
    assert.equal(has(sx, 'lbd_vip_group_lease_remaining_seconds'), false, 'only the leader has a lease');
    const kernel = value(lx, 'lbd_vip_group_kernel_lease_remaining_seconds', { group: 'front' });
    // At most 280 ms past a confirmed beat, or, written while fail-static (a loaded box), a peer's promise of
    // two safety windows.
    const longest = Math.max(0.28, (2 * st.safetyWindowMs!) / 1000);
    assert.ok(kernel > 0 && kernel <= longest, `the leader's kernel lease ${kernel} s, at most ${longest} s`);
    assert.equal(has(sx, 'lbd_vip_group_kernel_lease_remaining_seconds'), false, 'a standby holds no kernel lease');
    // Read together (a loaded box may claim again after the steady scrape above).
    const announcedNow = await scrape({ metrics: all[li]! });
    const announced = owners[li]!.announcements.reduce((n, a) => n + a.count, 0);
    assert.ok(announced > 0);
    assert.equal(value(announcedNow, 'lbd_announcements_total', { group: 'front', family: 'ipv4' }), announced, 'as many as the claims asked the owner for');
    assert.equal(value(lx, 'lbd_vip_group_term', { group: 'front' }), value(sx, 'lbd_vip_group_term', { group: 'front' }));
    for (const x of [lx, sx]) {
      assert.equal(value(x, 'lbd_etcd_reachable'), 1);
      assert.equal(value(x, 'lbd_director_healthy'), 1);
      assert.equal(value(x, 'lbd_config_revision'), 1);
      assert.equal(value(x, 'lbd_takeover_worst_case_seconds'), worstCaseTakeoverMs(TIMING_PROFILES.default) / 1000);
      assert.ok(value(x, 'lbd_director_registration_lease_remaining_seconds') > 0);
      assert.equal(value(x, 'lbd_sync_enabled'), 0, 'no agent.cluster.tls: sync is off');
    }
    assert.equal(value(lx, 'lbd_peer_reachable', { peer: ids[si]! }), 1);

    await pair[li]!.failTrack();
    await until(() => owners[li]!.held.size === 0, 'the unhealthy leader to release');
    // The registration record in etcd (where lbd_director_healthy is read) follows the resignation by a moment.
    let ox = await scrape({ metrics: all[li]! });
    for (let i = 0; i < 100 && value(ox, 'lbd_director_healthy') !== 0; i++) {
      await new Promise((r) => setTimeout(r, 10));
      ox = await scrape({ metrics: all[li]! });
    }
    assert.equal(value(ox, 'lbd_vip_group_role', { group: 'front', role: 'unhealthy' }), 1);
    assert.equal(value(ox, 'lbd_vip_group_role', { group: 'front', role: 'leader' }), 0);
    assert.equal(value(ox, 'lbd_director_healthy'), 0);
    assert.equal(value(ox, 'lbd_director_problems'), 1);
    assert.equal(has(ox, 'lbd_vip_group_lease_remaining_seconds'), false);
    assert.equal(has(ox, 'lbd_vip_group_kernel_lease_remaining_seconds'), false, 'the release ended the kernel lease');
  });

  it('shows connection sync at both ends: connections copied, sent, injected, caught up, and the sender\'s lag', async () => {
    const { owners, tables } = await startPair({ sync: true });
    const { li } = await steadyRoles(owners);
    const si = 1 - li;
    for (let i = 1; i <= 3; i++) {
      tables[li]!.open({
        protocol: 'tcp', client: { address: '198.18.5.1', port: 10_000 + i }, vip: { address: '198.18.0.10', port: 80 },
        realServer: { address: '198.19.1.11', port: 8080 }, localAddress: { address: '198.19.1.100', port: 30_000 + i },
        mark: 0x50001, state: 'ESTABLISHED', timeoutSec: 431_999,
      });
    }
    await until(() => tables[si]!.connections.size === 3, 'the standby to hold the leader\'s connections');
    const caughtUp = async (): Promise<boolean> => {
      const [l, s] = [await scrape({ metrics: all[li]! }), await scrape({ metrics: all[si]! })];
      return has(l, 'lbd_sync_caught_up', { direction: 'to' }) && value(l, 'lbd_sync_caught_up', { direction: 'to' }) === 1
        && has(s, 'lbd_sync_caught_up', { direction: 'from' }) && value(s, 'lbd_sync_caught_up', { direction: 'from' }) === 1;
    };
    await until(caughtUp, 'both ends caught up');
    const [lx, sx] = [await scrape({ metrics: all[li]! }), await scrape({ metrics: all[si]! })];
    const standby = ids[si]!;
    const leader = ids[li]!;
    assert.equal(value(lx, 'lbd_sync_enabled'), 1);
    assert.equal(value(lx, 'lbd_sync_source_connections'), 3, 'the three connections the leader copies');
    assert.ok(value(lx, 'lbd_sync_connections_sent_total', { peer: standby }) >= 3);
    assert.ok(value(lx, 'lbd_sync_snapshots_total', { peer: standby }) >= 1);
    assert.equal(value(lx, 'lbd_sync_queued_connections', { peer: standby }), 0);
    assert.equal(value(sx, 'lbd_sync_connections_injected_total', { peer: leader, direction: 'from' }), tables[si]!.connections.size,
      'injected as the standby\'s table holds them');
    assert.equal(value(sx, 'lbd_sync_connections_failed_total', { peer: leader, direction: 'from' }), 0);
    for (const q of ['0.5', '0.99']) {
      const lag = value(lx, 'lbd_sync_lag_seconds', { peer: standby, quantile: q });
      assert.ok(lag >= 0 && lag < 5, `lag q${q} ${lag} s`);
    }
    assert.ok(value(lx, 'lbd_sync_lag_seconds', { quantile: '0.99' }) >= value(lx, 'lbd_sync_lag_seconds', { quantile: '0.5' }));
    assert.equal(has(sx, 'lbd_sync_lag_seconds'), false, 'a receiver measures no lag of its own');
    assert.equal(has(lx, 'lbd_sync_connections_received_total'), false, 'the leader receives nothing');
  });
});

// --- Helpers: a GET over plain HTTP, and the shapes of the deploy files ---

function httpGet(url: string): Promise<{ status: number; contentType: string; body: string }> {
  return new Promise((resolve, reject) => {
    get(url, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => { body += d; }).on('end', () => {
        resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), body });
      });
    }).on('error', reject);
  });
}

/** Brackets and parentheses pair up, and quotes close: the typos that make a query fail to parse. */
function balanced(expr: string): boolean {
  const stack: string[] = [];
  const pairs: Record<string, string> = { ')': '(', ']': '[', '}': '{' };
  let quote: string | null = null;
  for (const ch of expr) {
    if (quote !== null) {
      if (ch === quote) quote = null;
      continue;
    }
    if (ch === '"' || ch === '\'' || ch === '`') quote = ch;
    else if ('([{'.includes(ch)) stack.push(ch);
    else if (ch in pairs && stack.pop() !== pairs[ch]) return false;
  }
  return stack.length === 0 && quote === null;
}

interface GrafanaPanel {
  id: number;
  type: string;
  title: string;
  gridPos?: { x: number; y: number; w: number; h: number };
  targets?: Array<{ expr: string }>;
  panels?: GrafanaPanel[];
}

interface GrafanaDashboard {
  uid: string;
  title: string;
  panels?: GrafanaPanel[];
  templating?: { list: Array<{ query?: string | { query?: string } }> };
}

interface RulesFile {
  groups: Array<{ name: string; rules: Array<{ alert: string; expr: string; for?: string; labels?: Record<string, string>; annotations?: Record<string, string> }> }>;
}

interface PrometheusConfig {
  rule_files: string[];
  scrape_configs: Array<{
    job_name: string; scheme?: string; metrics_path?: string; tls_config?: Record<string, string>;
    relabel_configs?: Array<{ target_label?: string; replacement?: string }>;
  }>;
}
