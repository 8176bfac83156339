import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { status } from '@grpc/grpc-js';
import type { Service } from '@lbd/config';
import { DataPlaneError, type DesiredState } from '@lbd/dataplane';
import { FakeDataPlane } from '@lbd/dataplane/testing';
import { FakeClock, FakeProber } from '@lbd/health-checker/testing';
import { AdminApi, isServiceError, type HealthEvent__Output } from '@lbd/proto';
import { createLogger } from '@lbd/log';
import { Agent } from './agent.js';
import type { HealthApplyRecord } from './apply-record.js';

/**
 * Health scenarios: a real Agent with FakeDataPlane, FakeProber and FakeClock (health intervals, batching
 * and slow start run in simulated time), a temp config file and admin socket. No sleeps: time moves when
 * the test advances the clock, and the admin API is called over the real socket.
 *
 * Probes fall at a fixed phase of each check's interval (hash of its key), so a test advances by whole
 * intervals and asserts on what was applied, not on exact times.
 */

const CHECK = '{ kind: http, path: /, intervalMs: 1000, timeoutMs: 500, rise: 2, fall: 2, jitterMs: 0 }';
const RS1 = '198.19.1.11:8080';
const RS2 = '198.19.1.12:8080';
const SVC = '198.18.0.10:80/tcp';
const FAIL = { ok: false as const, reason: 'status' as const, message: 'http GET /: got 500, want 200-399' };

function web(extra = '', servers = `
      - { address: 198.19.1.11, port: 8080, weight: 1 }
      - { address: 198.19.1.12, port: 8080, weight: 2 }`): string {
  return `services:
  - name: web
    vip: 198.18.0.10
    port: 80
    mode: nat
    healthCheck: ${CHECK}${extra}
    realServers:${servers}
`;
}

interface Harness {
  readonly dir: string;
  readonly configPath: string;
  readonly socket: string;
  readonly dp: FakeDataPlane;
  readonly clock: FakeClock;
  readonly prober: FakeProber;
  readonly logs: Record<string, unknown>[];
  readonly healthApplies: HealthApplyRecord[];
  agent: Agent;
}

const harnesses: Harness[] = [];
const apis: AdminApi[] = [];

async function start(text: string, opts: { dp?: FakeDataPlane; dir?: string; historyLimit?: number } = {}): Promise<Harness> {
  const dir = opts.dir ?? (await mkdtemp(join(tmpdir(), 'lbd-health-')));
  const configPath = join(dir, 'lbd.yaml');
  await writeFile(configPath, text);
  const dp = opts.dp ?? new FakeDataPlane();
  const clock = new FakeClock();
  const prober = new FakeProber(clock);
  const logs: Record<string, unknown>[] = [];
  const socket = join(dir, 'admin.sock');
  const agent = await Agent.start({
    configPath, dataPlane: dp, adminSocket: socket, watch: false,
    log: createLogger({ level: 'debug', write: (line) => logs.push(JSON.parse(line) as Record<string, unknown>) }),
    health: { prober, clock, ...(opts.historyLimit === undefined ? {} : { historyLimit: opts.historyLimit }) },
  });
  const healthApplies: HealthApplyRecord[] = [];
  agent.on('healthApply', (r) => healthApplies.push(r));
  const h = { dir, configPath, socket, dp, clock, prober, logs, healthApplies, agent };
  harnesses.push(h);
  return h;
}

function api(h: Harness): AdminApi {
  const a = new AdminApi(h.socket);
  apis.push(a);
  return a;
}

/** Moves simulated time in small steps until `pred` holds (at most `maxMs`): no wall-clock waiting. */
async function until(h: Harness, pred: () => boolean, maxMs = 10_000, what = 'the condition'): Promise<void> {
  for (let t = 0; t <= maxMs; t += 10) {
    if (pred()) return;
    await h.clock.advance(10);
  }
  assert.fail(`${what} did not happen within ${maxMs} ms of simulated time`);
}

function service(dp: FakeDataPlane, key = SVC): Service | undefined {
  return dp.applied.services.find((s) => `${s.vip}:${s.port}/${s.protocol}` === key);
}

/** `address:port` → weight, as applied (a removed server is absent). */
function weights(dp: FakeDataPlane, key = SVC): Record<string, number> {
  return Object.fromEntries((service(dp, key)?.realServers ?? []).map((rs) => [`${rs.address}:${rs.port}`, rs.weight]));
}

function logsOf(h: Harness, msg: string): Record<string, unknown>[] {
  return h.logs.filter((l) => l.msg === msg);
}

describe('Agent health checks', () => {
  afterEach(async () => {
    for (const a of apis.splice(0)) a.close();
    for (const h of harnesses.splice(0)) {
      await h.agent.stop();
      await rm(h.dir, { recursive: true, force: true });
    }
  });

  it('makes a real server that fails `fall` probes quiescent (weight 0, one apply) and restores it after `rise` successes', async () => {
    const h = await start(web());
    assert.deepEqual(weights(h.dp), { [RS1]: 1, [RS2]: 2 });
    const applies = h.dp.applyCount;
    h.prober.set(RS2, FAIL);
    await until(h, () => weights(h.dp)[RS2] === 0, 3000, 'quiescent');
    assert.deepEqual(weights(h.dp), { [RS1]: 1, [RS2]: 0 }, 'still in the service, at weight 0: its connections live on');
    assert.equal(h.dp.applyCount, applies + 1, 'one apply');
    assert.equal(h.prober.callsTo(RS2).length, 2, 'down after exactly fall = 2 failures');

    const [down] = logsOf(h, 'real server down');
    assert.equal(down?.level, 'warn');
    assert.deepEqual(
      [down?.service, down?.name, down?.server, down?.from, down?.to, down?.reason, down?.probe, down?.action],
      [SVC, 'web', RS2, 'up', 'down', 'http GET /: got 500, want 200-399 (2 failures)', 'status', 'quiescent (weight 0)'],
    );

    h.prober.set(RS2, { ok: true, message: 'http GET /: got 200' });
    const calls = h.prober.callsTo(RS2).length;
    await until(h, () => weights(h.dp)[RS2] === 2, 3000, 'restoring');
    assert.equal(h.prober.callsTo(RS2).length - calls, 2, 'up after exactly rise = 2 successes');
    const [up] = logsOf(h, 'real server up');
    assert.deepEqual([up?.level, up?.server, up?.reason, up?.action], ['info', RS2, 'http GET /: got 200 (2 successes)', 'restored (weight 2)']);
  });

  it('leaves a health event saying why a real server left and came back, also in ListEvents', async () => {
    const h = await start(web());
    h.prober.set(RS2, FAIL);
    await until(h, () => weights(h.dp)[RS2] === 0, 3000, 'quiescent');
    h.prober.set(RS2, { ok: true, message: 'http GET /: got 200' });
    await until(h, () => weights(h.dp)[RS2] === 2, 3000, 'restoring');
    const health = h.agent.events.recent(0).filter((e) => e.kind === 'health');
    assert.deepEqual(health.map((e) => [e.subject, e.from, e.to, e.reason]), [
      [`${SVC} ${RS2}`, 'up', 'down', 'http GET /: got 500, want 200-399 (2 failures); quiescent (weight 0)'],
      [`${SVC} ${RS2}`, 'down', 'up', 'http GET /: got 200 (2 successes); restored (weight 2)'],
    ]);
    assert.deepEqual([health[0]!.fields.name, health[0]!.fields.server, health[0]!.fields.check, health[0]!.fields.probe], ['web', RS2, 'http', 'status']);
    const listed = [];
    for await (const e of api(h).listEvents({ kind: 'health', scope: 'local' })) listed.push(e);
    assert.deepEqual(listed.map((e) => [e.id, e.reason]), health.map((e) => [e.id, e.reason]));
  });

  it('removes a real server of an onDown: remove service and expires its connections', async () => {
    const h = await start(web('\n    onDown: remove'));
    const config = h.agent.config.services[0]!;
    h.prober.set(RS2, FAIL);
    await until(h, () => !(RS2 in weights(h.dp)), 3000, 'removal');
    const applied = service(h.dp)!;
    assert.deepEqual(weights(h.dp), { [RS1]: 1 });
    assert.equal(applied.expireOnRemove, true, 'the service copy expires the removed server\'s connections');
    assert.equal(config.expireOnRemove, false, 'the config itself is untouched');
    assert.equal(logsOf(h, 'real server down')[0]?.action, 'removed, connections expired');

    const s = await api(h).getStatus();
    const rs2 = s.services[0]!.realServers.find((r) => r.address === '198.19.1.12')!;
    assert.deepEqual([rs2.health, rs2.effectiveWeight, rs2.weight, rs2.flags], ['down', 0, 2, ['down', 'removed']],
      'left out on purpose: not reported as missing from the kernel');

    h.prober.set(RS2, { ok: true });
    await until(h, () => weights(h.dp)[RS2] === 2, 3000, 'return');
    assert.equal(service(h.dp)!.expireOnRemove, false);
  });

  it('ramps a recovered server\'s weight over slowStartMs, re-applying at most every max(100 ms, slowStartMs / 20)', async () => {
    const h = await start(web('\n    slowStartMs: 4000', `
      - { address: 198.19.1.11, port: 8080, weight: 1 }
      - { address: 198.19.1.12, port: 8080, weight: 20 }`));
    assert.equal(weights(h.dp)[RS2], 20, 'a server that starts up does not ramp');
    h.prober.set(RS2, FAIL);
    await until(h, () => weights(h.dp)[RS2] === 0);
    const seen: Array<[number, number]> = [];
    const apply = h.dp.apply.bind(h.dp);
    h.dp.apply = async (desired: DesiredState, o) => {
      const rs = desired.services[0]!.realServers.find((r) => r.port === 8080 && r.address === '198.19.1.12');
      seen.push([h.clock.now(), rs?.weight ?? -1]);
      return apply(desired, o);
    };
    h.prober.set(RS2, { ok: true });
    await until(h, () => weights(h.dp)[RS2] === 20, 10_000, 'full weight');
    const ws = seen.map(([, w]) => w);
    assert.equal(ws[0], 1, 'starts at 1');
    assert.ok(ws.every((w, i) => i === 0 || w >= ws[i - 1]!), `never decreases: ${ws.join(' ')}`);
    assert.ok(ws.length >= 10, `ramps in steps: ${ws.join(' ')}`);
    const gaps = seen.slice(1).map(([t], i) => t - seen[i]![0]);
    assert.ok(gaps.every((g) => g >= 200), `at most every 4000 / 20 = 200 ms: ${gaps.join(' ')}`);
    const rampEnd = seen.at(-1)![0] - seen[0]![0];
    assert.ok(rampEnd >= 4000 - 200 && rampEnd <= 4000 + 250, `full weight after about slowStartMs: ${rampEnd} ms`);
    assert.equal(logsOf(h, 'real server up')[0]?.action, 'ramping to weight 20 over 4 s');
    const applies = h.dp.applyCount;
    await h.clock.advance(3000);
    assert.equal(h.dp.applyCount, applies, 'no re-apply once the ramp is done');
  });

  it('fallback keep-last keeps the server that was up last when every server is down, and says so', async () => {
    const h = await start(web('\n    fallback: keep-last'));
    h.prober.set(RS1, FAIL);
    await until(h, () => weights(h.dp)[RS1] === 0);
    h.prober.set(RS2, FAIL);
    await until(h, () => logsOf(h, 'all real servers down').length > 0, 3000, 'all down');
    await h.clock.advance(100);
    assert.deepEqual(weights(h.dp), { [RS1]: 0, [RS2]: 2 }, 'the last one up keeps its weight');
    const [all] = logsOf(h, 'all real servers down');
    assert.deepEqual([all?.service, all?.fallback, all?.kept], [SVC, 'keep-last', [RS2]]);
    assert.match(String(logsOf(h, 'real server down')[1]?.action), /^kept at weight 2: all real servers down, fallback keep-last$/);

    const s = await api(h).getStatus();
    assert.deepEqual(s.services[0]!.flags, ['all-down', 'fallback-keep-last']);
    assert.deepEqual(s.services[0]!.realServers.map((r) => [r.address, r.health, r.effectiveWeight, r.flags]), [
      ['198.19.1.11', 'down', 0, ['down']],
      ['198.19.1.12', 'down', 2, ['down', 'kept']],
    ]);

    h.prober.set(RS1, { ok: true });
    await until(h, () => weights(h.dp)[RS1] === 1, 3000, 'recovery');
    assert.deepEqual(weights(h.dp), { [RS1]: 1, [RS2]: 0 }, 'once one is up, the kept one is quiescent');
    assert.equal(logsOf(h, 'real servers up again').length, 1);
  });

  it('passes other fallbacks to the data plane: with every server down, no real server has weight > 0', async () => {
    const h = await start(web('\n    fallback: reject'));
    h.prober.setDefault(FAIL);
    await until(h, () => Object.values(weights(h.dp)).every((w) => w === 0), 3000);
    assert.equal(service(h.dp)!.fallback, 'reject');
    assert.equal(logsOf(h, 'all real servers down')[0]?.note, 'fallback reject: new connections are reset');
    assert.match(String(logsOf(h, 'real server down')[1]?.action), /; all real servers down: fallback reject: new connections are reset$/);
  });

  it('keeps health across a config reload, and passes unchanged services as the same object', async () => {
    const two = `${web()}  - { name: other, vip: 198.18.0.20, port: 80, mode: nat, realServers: [{ address: 198.19.1.21, port: 80 }] }\n`;
    const h = await start(two);
    h.prober.set(RS2, FAIL);
    await until(h, () => weights(h.dp)[RS2] === 0);
    const before = (await api(h).getHealth('web')).realServers.find((r) => r.address === '198.19.1.12')!;
    assert.equal(before.state, 'down');

    // Applying health changes hands the data plane the very same objects for services health left alone.
    const passed: DesiredState[] = [];
    const apply = h.dp.apply.bind(h.dp);
    h.dp.apply = async (d, o) => { passed.push(d); return apply(d, o); };

    await writeFile(h.configPath, two.replace('port: 80, mode: nat, realServers: [{ address: 198.19.1.21, port: 80 }]',
      'port: 80, mode: nat, realServers: [{ address: 198.19.1.21, port: 80, weight: 3 }]'));
    assert.equal((await h.agent.reload('sighup'))?.result, 'applied');
    assert.deepEqual(weights(h.dp), { [RS1]: 1, [RS2]: 0 }, 'the down server stays down through the reload');
    const after = (await api(h).getHealth('web')).realServers.find((r) => r.address === '198.19.1.12')!;
    assert.deepEqual([after.state, after.sinceUnixMs], ['down', before.sinceUnixMs], 'the same record: not restarted in its startState');
    assert.equal(after.check?.key, before.check?.key);

    // A changed check is a new check (another key), but it starts where the old one was, not in its startState.
    await writeFile(h.configPath, two.replace('fall: 2', 'fall: 3'));
    assert.equal((await h.agent.reload('sighup'))?.result, 'applied');
    assert.deepEqual(weights(h.dp), { [RS1]: 1, [RS2]: 0 }, 'still down under the changed check');
    const changed = (await api(h).getHealth('web')).realServers.find((r) => r.address === '198.19.1.12')!;
    assert.notEqual(changed.check?.key, before.check?.key);
    assert.deepEqual([changed.state, changed.check?.fall], ['down', 3]);

    h.prober.set(RS1, FAIL);
    await until(h, () => weights(h.dp)[RS1] === 0);
    const last = passed.at(-1)!;
    const config = h.agent.config;
    assert.equal(last.services[1], config.services[1], 'the unchecked service is the config\'s own object');
    assert.notEqual(last.services[0], config.services[0], 'the merged web service is a copy');
  });

  it('a restarted agent keeps what the kernel has until the first results: no flap', async () => {
    // The first agent takes rs2 down; the kernel (the fake) keeps that after the agent stops.
    const first = await start(web());
    first.prober.set(RS2, FAIL);
    await until(first, () => weights(first.dp)[RS2] === 0);
    const dp = first.dp;
    await first.agent.stop();
    harnesses.splice(harnesses.indexOf(first), 1);

    const applies = dp.applyCount;
    const h = await start(web(), { dp, dir: first.dir });
    assert.equal(dp.applyCount, applies, 'the restart writes nothing: rs2 starts down (kernel: quiescent), rs1 up');
    assert.deepEqual(weights(dp), { [RS1]: 1, [RS2]: 0 });
    assert.ok(h.logs.some((l) => l.msg === 'health state taken from the kernel until the first results' && l.up === 1 && l.down === 1));
    const health = await api(h).getHealth();
    assert.deepEqual(health.realServers.map((r) => [r.address, r.state]), [['198.19.1.11', 'up'], ['198.19.1.12', 'down']]);

    // Healthy now: it returns after rise successes, not before.
    await h.clock.advance(1000);
    assert.equal(weights(dp)[RS2], 0, 'one success is not enough');
    await until(h, () => weights(dp)[RS2] === 2, 2000, 'return after rise');
    assert.equal(logsOf(h, 'real server down').length, 0, 'nothing flapped down');
  });

  it('a check shared by two services is probed once and moves both', async () => {
    const text = `${web()}  - name: web-alt
    vip: 198.18.0.11
    port: 80
    mode: nat
    healthCheck: ${CHECK}
    realServers:
      - { address: 198.19.1.12, port: 8080, weight: 5 }
`;
    const h = await start(text);
    await h.clock.advance(5000);
    assert.equal(h.prober.callsTo(RS2).length, 5, 'one probe per interval for both services');
    const health = await api(h).getHealth();
    const keys = health.realServers.filter((r) => r.address === '198.19.1.12').map((r) => r.check?.key);
    assert.equal(keys.length, 2);
    assert.equal(keys[0], keys[1], 'one check key');
    assert.equal(health.scheduler?.checks, 2, 'two checks for three (service, real server) pairs');

    const applies = h.dp.applyCount;
    h.prober.set(RS2, FAIL);
    await until(h, () => weights(h.dp)[RS2] === 0 && weights(h.dp, '198.18.0.11:80/tcp')[RS2] === 0, 3000);
    assert.equal(h.dp.applyCount, applies + 1, 'both services in one apply');
    assert.deepEqual(logsOf(h, 'real server down').map((l) => [l.name, l.server]), [['web', RS2], ['web-alt', RS2]]);
  });

  it('logs a failed apply and retries it', async () => {
    const h = await start(web());
    h.dp.failNextApply = new DataPlaneError('Unknown', 'apply', { detail: 'resource busy' });
    h.prober.set(RS2, FAIL);
    await until(h, () => h.healthApplies.some((r) => r.result === 'failed'), 3000);
    assert.equal(weights(h.dp)[RS2], 2, 'the kernel keeps the previous state');
    const [failed] = logsOf(h, 'health apply failed');
    assert.equal(failed?.level, 'error');
    assert.deepEqual(failed?.error, { kind: 'Unknown', message: 'apply: Unknown: resource busy' });
    await until(h, () => weights(h.dp)[RS2] === 0, 2000, 'the retry');
  });

  it('serves GetHealth, the history and WatchHealth over the admin socket', async () => {
    const h = await start(web('\n    fallback: sorry-server\n    sorryServer: { address: 198.19.1.99, port: 8080 }'), { historyLimit: 3 });
    const client = api(h);
    h.prober.set(RS2, FAIL);
    await until(h, () => weights(h.dp)[RS2] === 0);

    const health = await client.getHealth();
    assert.equal(health.sampledAtUnixMs, h.clock.now());
    const rs2 = health.realServers.find((r) => r.address === '198.19.1.12')!;
    assert.deepEqual(
      [rs2.service, rs2.serviceName, rs2.port, rs2.state, rs2.failures, rs2.flags, rs2.weight, rs2.effectiveWeight],
      [SVC, 'web', 8080, 'down', 2, ['down'], 2, 0],
    );
    assert.deepEqual([rs2.check?.kind, rs2.check?.target, rs2.check?.description, rs2.check?.rise, rs2.check?.fall], ['http', RS2, 'http GET /', 2, 2]);
    assert.deepEqual([rs2.lastResult?.ok, rs2.lastResult?.reason, rs2.lastResult?.message], [false, 'status', FAIL.message]);
    assert.equal(health.scheduler?.checks, 2);
    assert.ok((health.scheduler?.completed ?? 0) >= 3);
    assert.equal((await client.getHealth(SVC)).realServers.length, 2);
    const missing = await client.getHealth('nope').then(() => null, (e: unknown) => e);
    assert.ok(isServiceError(missing) && missing.code === status.NOT_FOUND);

    // History: bounded (3 here), oldest dropped. rs2 flaps: up, down, up, down; the last down is its
    // fifth state change within the flap window, so it is held down.
    for (const outcome of [{ ok: true as const }, FAIL, { ok: true as const }, FAIL]) {
      const seq = (): number => h.agent.health.historySince(0).at(-1)?.seq ?? 0;
      const before = seq();
      h.prober.set(RS2, outcome);
      await until(h, () => seq() > before, 5000, 'the next transition');
    }
    assert.deepEqual(h.agent.health.historySince(0).map((e) => e.seq), [3, 4, 5]);
    const held = (await client.getHealth('web')).realServers.find((r) => r.address === '198.19.1.12')!;
    assert.deepEqual(held.flags, ['down', 'held-down']);
    assert.ok(held.heldDownUntilUnixMs > h.clock.now());

    const ac = new AbortController();
    const got: HealthEvent__Output[] = [];
    const watching = new Promise<void>((resolve) => h.agent.health.once('watch', () => resolve()));
    const done = (async () => {
      for await (const e of client.watchHealth(0, { signal: ac.signal })) {
        got.push(e);
        if (got.length === 4) ac.abort();
      }
    })();
    await watching;
    h.prober.set(RS2, { ok: true });
    await until(h, () => got.length === 4, 10_000, 'the live event after the hold-down');
    await done;
    assert.deepEqual(got.map((e) => `${e.seq} ${e.from}->${e.to}`), ['3 up->down', '4 down->up', '5 up->down', '6 down->up'], 'three kept, then the live one');
    assert.ok(got[2]!.heldDownUntilUnixMs > got[2]!.timeUnixMs);
    assert.match(got[2]!.reason, /; held down 5 s: 5 state changes in 60 s$/);
    const live = got[3]!;
    assert.deepEqual([live.service, live.serviceName, live.address, live.port, live.checkKind, live.probeReason, live.action],
      [SVC, 'web', '198.19.1.12', 8080, 'http', 'ok', 'restored (weight 2)']);
    assert.ok(live.timeUnixMs >= got[2]!.heldDownUntilUnixMs, 'not before the hold-down ended');
    await until(h, () => h.agent.health.watcherCount === 0, 1000, 'the watcher to go');
    // Only what came at or after `since`.
    assert.deepEqual(h.agent.health.historySince(got[2]!.timeUnixMs).map((e) => e.seq), [5, 6]);
  });

  it('ends WatchHealth streams when the agent stops', async () => {
    const h = await start(web());
    const client = api(h);
    const watching = new Promise<void>((resolve) => h.agent.health.once('watch', () => resolve()));
    const events: HealthEvent__Output[] = [];
    const done = (async () => { for await (const e of client.watchHealth(0)) events.push(e); })();
    await watching;
    await h.agent.stop();
    await done; // ends without an error
    assert.equal(events.length, 0);
  });
});
