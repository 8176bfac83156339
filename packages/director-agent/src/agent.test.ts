import assert from 'node:assert/strict';
import { once } from 'node:events';
import { lstat, mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { status } from '@grpc/grpc-js';
import { DataPlaneError } from '@lbd/dataplane';
import { FakeDataPlane } from '@lbd/dataplane/testing';
import { waitFor } from '@lbd/testkit';
import { AdminApi, MAX_CONFIG_TEXT_BYTES, MAX_PENDING_EVENTS, applyProblemsOf, isServiceError } from '@lbd/proto';
import { AgentError } from '@lbd/operator-surfaces';
import { createLogger } from '@lbd/log';
import { Agent } from './agent.js';
import type { ApplyRecord } from './apply-record.js';

/**
 * Scenario tests: a real Agent with FakeDataPlane, a temp config file and a temp admin socket. They wait
 * on the agent's `apply` events, never on fixed sleeps.
 */

const V1 = `services:
  - name: web
    vip: 198.18.0.10
    port: 80
    mode: fullnat
    localAddresses: [198.18.2.10]
    realServers:
      - { address: 198.19.1.11, port: 8080, weight: 1 }
`;
const V2 = V1.replace('weight: 1', 'weight: 5');
const V3 = `${V1}  - { name: dns, vip: 198.18.0.53, port: 53, protocol: udp, mode: nat, realServers: [{ address: 198.19.1.53, port: 53 }] }\n`;
const BAD = `services:
  - name: web
    vip: 198.18.0.300
    port: 80
    mode: fullnat
    realServers:
      - { address: 198.19.1.11, port: 99999 }
`;
const BAD_PROBLEMS = 3; // vip, localAddresses (fullnat without a pool), port

interface Harness {
  readonly dir: string;
  readonly configPath: string;
  readonly socket: string;
  readonly dp: FakeDataPlane;
  readonly logs: Record<string, unknown>[];
  agent: Agent;
}

/** `watch: false` for tests that call reload('file-change') themselves, so no watcher event races them. */
async function startHarness(text = V1, opts: { watch?: boolean } = {}): Promise<Harness> {
  const dir = await mkdtemp(join(tmpdir(), 'lbd-agent-'));
  const configPath = join(dir, 'lbd.yaml');
  await writeFile(configPath, text);
  const dp = new FakeDataPlane();
  const logs: Record<string, unknown>[] = [];
  const socket = join(dir, 'run', 'admin.sock');
  const agent = await Agent.start({
    configPath, dataPlane: dp, adminSocket: socket, debounceMs: 20, watch: opts.watch ?? true,
    log: createLogger({ level: 'debug', write: (line) => logs.push(JSON.parse(line) as Record<string, unknown>) }),
  });
  return { dir, configPath, socket, dp, logs, agent };
}

/** The next apply attempt that satisfies `pred` (bounded by mocha's timeout). */
function nextApply(agent: Agent, pred: (r: ApplyRecord) => boolean = () => true): Promise<ApplyRecord> {
  return new Promise((resolve) => {
    const on = (r: ApplyRecord): void => {
      if (!pred(r)) return;
      agent.off('apply', on);
      resolve(r);
    };
    agent.on('apply', on);
  });
}

const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `pred` every 5 ms for at most `ms`. */
const waitUntil = (pred: () => boolean, what: string, ms = 5000): Promise<true> => waitFor(what, ms, async () => pred(), 5);

function weightOf(dp: FakeDataPlane): number | undefined {
  return dp.applied.services[0]?.realServers[0]?.weight;
}

describe('Agent', () => {
  let h: Harness;
  let api: AdminApi | undefined;

  afterEach(async () => {
    api?.close();
    api = undefined;
    await h?.agent.stop();
    await rm(h.dir, { recursive: true, force: true });
  });

  it('applies the config at start and reports it in status over the real socket', async () => {
    h = await startHarness();
    assert.equal(h.dp.applyCount, 1);
    assert.equal(weightOf(h.dp), 1);
    assert.equal((await lstat(h.socket)).mode & 0o777, 0o600, 'the socket is root-only');
    assert.equal((await lstat(join(h.dir, 'run'))).mode & 0o777, 0o700, 'the socket directory is created 0700');
    api = new AdminApi(h.socket);
    const s = await api.getStatus();
    assert.equal(s.agent?.configPath, h.configPath);
    assert.equal(s.agent?.configRevision, 1);
    assert.equal(s.agent?.lastApply?.result, 'applied');
    assert.equal(s.agent?.lastApply?.trigger, 'start');
    assert.deepEqual(s.services.map((x) => [x.name, x.key, x.mode, x.localAddresses?.first]), [['web', '198.18.0.10:80/tcp', 'fullnat', '198.18.2.10']]);
    assert.deepEqual(s.services[0]!.realServers.map((r) => [r.address, r.port, r.weight, r.quiescent]), [['198.19.1.11', 8080, 1, false]]);
    const started = h.logs.find((l) => l.msg === 'started');
    assert.ok(started, 'logs "started"');
    assert.equal(h.logs.find((l) => l.msg === 'config applied')?.operations, 1);
  });

  it('re-applies when the file changes, including a rename-replace', async () => {
    h = await startHarness();
    let applied = nextApply(h.agent);
    await writeFile(h.configPath, V2);
    assert.equal((await applied).result, 'applied');
    assert.equal(weightOf(h.dp), 5);
    assert.equal(h.agent.revision, 2);

    // What editors and config managers do: write elsewhere, rename over the file.
    applied = nextApply(h.agent);
    const temp = join(h.dir, '.lbd.yaml.swp');
    await writeFile(temp, V3);
    await rename(temp, h.configPath);
    assert.equal((await applied).result, 'applied');
    assert.equal(h.dp.applied.services.length, 2);
    assert.equal(h.agent.revision, 3);
  });

  it('does nothing for a file event when the content is unchanged; SIGHUP re-applies anyway', async () => {
    h = await startHarness(V1, { watch: false });
    await writeFile(h.configPath, V1);
    assert.equal(await h.agent.reload('file-change'), null, 'same content: nothing attempted');
    assert.equal(h.dp.applyCount, 1);
    const hup = await h.agent.reload('sighup');
    assert.equal(hup?.result, 'unchanged', 'the data plane found nothing to write');
    assert.equal(h.agent.revision, 1, 'the same config is not a new revision');
    assert.equal(h.dp.applyCount, 1);
  });

  it('keeps the running config when the new one is invalid, and logs every problem in one line', async () => {
    h = await startHarness();
    const rejected = nextApply(h.agent, (r) => r.result === 'rejected');
    await writeFile(h.configPath, BAD);
    const r = await rejected;
    assert.equal(r.problems.length, BAD_PROBLEMS);
    assert.equal(weightOf(h.dp), 1);
    assert.equal(h.dp.applyCount, 1, 'nothing applied');
    assert.equal(h.agent.config.services[0]?.vip, '198.18.0.10');
    const line = h.logs.find((l) => l.msg === 'config rejected; the running config stays');
    assert.equal((line?.problems as string[]).length, BAD_PROBLEMS);
    assert.match((line?.problems as string[])[0]!, /services\[0\]\.vip: "198\.18\.0\.300" is not an IPv4 or IPv6 address/);

    // Fixing the file applies it.
    const applied = nextApply(h.agent, (x) => x.result === 'applied');
    await writeFile(h.configPath, V2);
    await applied;
    assert.equal(weightOf(h.dp), 5);
  });

  it('keeps running on the old config when the file is deleted', async () => {
    h = await startHarness(V1, { watch: false });
    await rm(h.configPath);
    const r = await h.agent.reload('file-change');
    assert.equal(r?.result, 'rejected');
    assert.match(r?.problems[0]?.rule ?? '', /cannot be read \(ENOENT\)/);
    assert.equal(await h.agent.reload('file-change'), null, 'the same failure is reported once');
    assert.equal(weightOf(h.dp), 1);
    assert.equal(h.dp.applyCount, 1);
  });

  it('keeps the previous state when the data plane refuses, and retries on SIGHUP', async () => {
    h = await startHarness(V1, { watch: false });
    h.dp.failNextApply = new DataPlaneError('InvalidRuleset', 'apply', { detail: 'nft: syntax error' });
    await writeFile(h.configPath, V2);
    const failed = await h.agent.reload('file-change');
    assert.equal(failed?.result, 'failed');
    assert.match(failed?.error ?? '', /InvalidRuleset: nft: syntax error/);
    assert.equal(weightOf(h.dp), 1);
    assert.equal(h.agent.revision, 1);
    assert.ok(h.logs.some((l) => l.msg === 'apply failed' && l.kind === 'InvalidRuleset'));
    api = new AdminApi(h.socket);
    assert.equal((await api.getStatus()).agent?.lastApply?.result, 'failed');
    const retried = await h.agent.reload('sighup');
    assert.equal(retried?.result, 'applied');
    assert.equal(weightOf(h.dp), 5);
  });

  describe('Apply RPC', () => {
    it('dry run returns the diff and changes nothing', async () => {
      h = await startHarness();
      api = new AdminApi(h.socket);
      const res = await api.apply({ configText: V3, source: 'new.yaml', dryRun: true });
      assert.equal(res.changed, true);
      assert.equal(res.dryRun, true);
      assert.deepEqual(res.operations, ['# fake: 2 services']);
      assert.equal(res.serviceCount, 2);
      assert.equal(h.dp.applyCount, 1);
      assert.equal(h.dp.applied.services.length, 1);
      assert.equal(await readFile(h.configPath, 'utf8'), V1, 'the file is untouched');
      assert.equal(h.agent.lastApplyRecord?.trigger, 'start', 'a dry run leaves no record');
    });

    it('applies, persists the text atomically, and does not re-apply for its own file write', async () => {
      h = await startHarness();
      api = new AdminApi(h.socket);
      const res = await api.apply({ configText: V3, source: '/home/op/new.yaml', dryRun: false });
      assert.equal(res.changed, true);
      assert.equal(h.dp.applied.services.length, 2);
      assert.equal(await readFile(h.configPath, 'utf8'), V3);
      assert.deepEqual((await readdir(h.dir)).sort(), ['lbd.yaml', 'run'], 'no temp file is left');
      assert.equal(await h.agent.reload('file-change'), null, 'its own write is recognised');
      assert.equal(h.dp.applyCount, 2);
      const s = await api.getStatus();
      assert.equal(s.agent?.configSource, '/home/op/new.yaml');
      assert.equal(s.agent?.configRevision, 2);
      assert.equal(s.agent?.lastApply?.trigger, 'apply-rpc');
    });

    it('rejects invalid text with INVALID_ARGUMENT and every problem, applying nothing', async () => {
      h = await startHarness();
      api = new AdminApi(h.socket);
      const err = await api.apply({ configText: BAD, source: 'bad.yaml', dryRun: false }).then(() => null, (e: unknown) => e);
      assert.ok(isServiceError(err));
      assert.equal(err.code, status.INVALID_ARGUMENT);
      assert.match(err.details, /^bad\.yaml is invalid \(3 problems\):/);
      const problems = applyProblemsOf(err);
      assert.equal(problems?.length, BAD_PROBLEMS);
      assert.deepEqual(problems?.map((p) => p.path), ['services[0].vip', 'services[0].localAddresses', 'services[0].realServers[0].port']);
      assert.equal(problems?.[0]?.value, '"198.18.0.300"');
      assert.ok(problems?.every((p) => p.text.startsWith(`${p.path}: `) && p.fix !== ''));
      assert.equal(h.dp.applyCount, 1);
      assert.equal(await readFile(h.configPath, 'utf8'), V1);
      assert.equal(h.agent.lastApplyRecord?.result, 'rejected');
    });

    it('returns every problem even when there are thousands', async () => {
      h = await startHarness();
      api = new AdminApi(h.socket);
      const n = 2000;
      const text = `services:\n${Array.from({ length: n }, (_, i) => `  - { name: s${i}, vip: 10.0.0.300, port: 80, mode: nat }\n`).join('')}`;
      const err = await api.apply({ configText: text, source: 'big.yaml', dryRun: true }).then(() => null, (e: unknown) => e);
      assert.equal(applyProblemsOf(err)?.length, n);
      assert.match((err as { details: string }).details, /\.\.\. and 1980 more in the response message$/);
    });

    it('names the field of a bad request', async () => {
      h = await startHarness();
      api = new AdminApi(h.socket);
      const cases: [Parameters<AdminApi['apply']>[0], RegExp][] = [
        [{ configText: V1, source: '' }, /^source: is required/],
        [{ configText: V1, source: 'x'.repeat(257) }, /^source: is 257 characters long; the limit is 256/],
        [{ configText: V1, source: 'a\nb' }, /^source: contains control characters/],
        [{ configText: 'x'.repeat(MAX_CONFIG_TEXT_BYTES + 1), source: 'big' }, /^config_text: 4194305 bytes is more than the limit/],
      ];
      for (const [req, want] of cases) {
        const err: unknown = await api.apply(req).then(() => null, (e: unknown) => e);
        assert.ok(isServiceError(err), `${want} was accepted`);
        assert.equal(err.code, status.INVALID_ARGUMENT);
        assert.match(err.details, want);
        assert.equal(applyProblemsOf(err), null);
      }
      assert.equal(h.dp.applyCount, 1);
    });

    it('GetConfig gives the running text and revision; an apply expecting another revision is ABORTED and changes nothing', async () => {
      h = await startHarness(V1, { watch: false });
      api = new AdminApi(h.socket);
      assert.deepEqual(await api.getConfig(), { configText: V1, revision: 1, clustered: false, source: h.configPath });
      await api.apply({ configText: V2, source: 'edit', checkRevision: true, expectRevision: 1 });
      assert.deepEqual(await api.getConfig(), { configText: V2, revision: 2, clustered: false, source: 'edit' });
      const err: unknown = await api.apply({ configText: V3, source: 'stale edit', checkRevision: true, expectRevision: 1 }).then(() => null, (e: unknown) => e);
      assert.ok(isServiceError(err));
      assert.equal(err.code, status.ABORTED);
      assert.match(err.details, /the running config is at revision 2, not 1 as this apply expected/);
      assert.equal(await readFile(h.configPath, 'utf8'), V2);
      assert.equal(weightOf(h.dp), 5);
    });

    it('GetConfig refuses while the file holds an edit the agent does not run (so an edit of the running one cannot overwrite it)', async () => {
      h = await startHarness(V1, { watch: false });
      api = new AdminApi(h.socket);
      await writeFile(h.configPath, BAD);
      await h.agent.reload('file-change');
      const err: unknown = await api.getConfig().then(() => null, (e: unknown) => e);
      assert.ok(isServiceError(err));
      assert.equal(err.code, status.FAILED_PRECONDITION);
      assert.match(err.details, /differs from the config this director runs \(revision 1\): it was edited and not \(or not yet\) applied/);
    });

    it('maps a data plane refusal to FAILED_PRECONDITION and leaves the file alone', async () => {
      h = await startHarness();
      api = new AdminApi(h.socket);
      h.dp.failNextApply = new DataPlaneError('PermissionDenied', 'apply', { detail: 'Operation not permitted' });
      const err = await api.apply({ configText: V2, source: 'x', dryRun: false }).then(() => null, (e: unknown) => e);
      assert.ok(isServiceError(err));
      assert.equal(err.code, status.FAILED_PRECONDITION);
      assert.match(err.details, /PermissionDenied/);
      assert.equal(await readFile(h.configPath, 'utf8'), V1);
      assert.deepEqual((await readdir(h.dir)).sort(), ['lbd.yaml', 'run'], 'the staged file is removed');
    });
  });

  describe('event log', () => {
    it('an apply through the Apply RPC leaves a config event with its author, caller and the services it changed', async () => {
      h = await startHarness(V1, { watch: false });
      api = new AdminApi(h.socket);
      const [start] = h.agent.events.recent(0);
      assert.deepEqual([start?.kind, start?.from, start?.to, start?.fields.trigger, start?.fields.changes], ['config', '', 'applied', 'start', '+web']);
      await api.apply({ configText: V3.replace('weight: 1', 'weight: 0'), source: '/etc/lbd/new.yaml', author: 'alice@ops1' });
      const e = h.agent.events.recent(0).at(-1)!;
      assert.equal(e.kind, 'config');
      assert.deepEqual([e.from, e.to], ['applied', 'applied']);
      assert.equal(e.reason, 'revision 2 applied (apply-rpc from /etc/lbd/new.yaml by alice@ops1): +dns; ~web (198.19.1.11:8080 weight 1 -> 0); 1 operation');
      assert.deepEqual([e.fields.author, e.fields.caller, e.fields.revision, e.fields.source, e.fields.services], ['alice@ops1', 'unix-socket', '2', '/etc/lbd/new.yaml', '2']);
      await assert.rejects(api.apply({ configText: BAD, source: 'bad.yaml', author: 'bob@ops2' }));
      const r = h.agent.events.recent(0).at(-1)!;
      assert.deepEqual([r.kind, r.from, r.to, r.fields.author], ['config', 'applied', 'rejected', 'bob@ops2']);
      assert.match(r.reason, /^rejected \(apply-rpc from bad\.yaml by bob@ops2\), 3 problems: services\[0\]\.vip.*; revision 2 keeps running$/);
    });

    it('a refused apply leaves a failed config event with the data plane\'s words', async () => {
      h = await startHarness(V1, { watch: false });
      h.dp.failNextApply = new DataPlaneError('InvalidRuleset', 'apply', { detail: 'nft: syntax error' });
      await writeFile(h.configPath, V2);
      await h.agent.reload('sighup');
      const e = h.agent.events.recent(0).at(-1)!;
      assert.deepEqual([e.kind, e.to], ['config', 'failed']);
      assert.match(e.reason, /^the data plane refused \(sighup from .*lbd\.yaml\): .*InvalidRuleset: nft: syntax error; the previous state stays in the kernel$/);
    });

    it('ListEvents: since selects by time, limit keeps the newest, follow streams new ones; bad filters are refused by name', async () => {
      h = await startHarness(V1, { watch: false });
      api = new AdminApi(h.socket);
      const log = h.agent.events;
      await delay(5);
      const one = log.record('drill', 'switchover', '', 'pass', 'one');
      await delay(5);
      const two = log.record('drill', 'switchover', '', 'fail', 'two');
      const list = async (req: Parameters<AdminApi['listEvents']>[0]): Promise<string[]> => {
        const out: string[] = [];
        for await (const e of api!.listEvents(req)) out.push(e.reason);
        return out;
      };
      assert.deepEqual(await list({ sinceUnixMs: one.timeUnixMs }), ['one', 'two']);
      assert.deepEqual(await list({ sinceUnixMs: two.timeUnixMs }), ['two']);
      assert.deepEqual(await list({ kind: 'drill', limit: 1 }), ['two']);
      assert.equal((await list({})).length, 3, 'the start\'s config event, then both');
      await assert.rejects(list({ kind: 'nonsense' }), (err: Error & { code?: number }) => err.code === status.INVALID_ARGUMENT && /kind: "nonsense" is not one of role, vip/.test(err.message));
      await assert.rejects(list({ scope: 'everywhere' }), /scope: "everywhere" is not "local" or "cluster"/);
      await assert.rejects(list({ limit: 10_001 }), /limit: 10001 is more than 10000/);

      const ac = new AbortController();
      const got: string[] = [];
      const following = (async () => {
        for await (const e of api!.listEvents({ sinceUnixMs: two.timeUnixMs, follow: true, kind: 'drill' }, { signal: ac.signal })) {
          got.push(e.reason);
          if (got.length === 2) ac.abort();
        }
      })();
      await waitUntil(() => got.length === 1 && log.subscriberCount === 1, 'the follower to subscribe');
      log.record('health', 'x', 'up', 'down', 'not a drill');
      const { id } = await api.recordDrill({ scenario: 'box-death', result: 'pass', reason: 'three', fields: { noServiceMs: '340' } });
      await following;
      assert.deepEqual(got, ['two', 'three'], 'history, then the live drill only');
      const drill = log.recent(0).find((e) => e.id === id)!;
      assert.deepEqual([drill.kind, drill.subject, drill.to, drill.fields.noServiceMs, drill.fields.caller], ['drill', 'box-death', 'pass', '340', 'unix-socket']);
      await waitUntil(() => log.subscriberCount === 0, 'the cancelled follower to unsubscribe');
    });

    it('ListEvents sends a long history whole, through flow control, before it ends', async () => {
      h = await startHarness(V1, { watch: false });
      api = new AdminApi(h.socket);
      for (let i = 0; i < 1500; i++) h.agent.events.record('health', `s${i}`, 'up', 'down', `${i} ${'x'.repeat(500)}`);
      const got: string[] = [];
      for await (const e of api.listEvents({ kind: 'health', limit: 2000 })) got.push(e.subject);
      assert.equal(got.length, 1500);
      assert.equal(got.at(-1), 's1499');
    });

    it('ListEvents --follow cuts off a reader that does not keep up, saying why, and unsubscribes', async () => {
      h = await startHarness(V1, { watch: false });
      api = new AdminApi(h.socket);
      const log = h.agent.events;
      const call = api.client.listEvents({ sinceUnixMs: Date.now() + 3_600_000, follow: true, scope: 'local' });
      call.pause(); // a reader that reads nothing: flow control fills, then the agent's queue
      await waitUntil(() => log.subscriberCount === 1, 'the follower to subscribe');
      const reason = 'x'.repeat(200);
      for (let i = 0; i < MAX_PENDING_EVENTS + 2000 && log.subscriberCount > 0; i++) log.record('health', `s${i}`, 'up', 'down', reason);
      assert.equal(log.subscriberCount, 0, 'cut off: no longer subscribed');
      const failed = await new Promise<Error & { code?: number }>((resolve) => {
        call.on('error', resolve);
        call.on('data', () => undefined);
        call.resume();
      });
      assert.equal(failed.code, status.RESOURCE_EXHAUSTED);
      assert.match(failed.message, new RegExp(`the client read too slowly: ${MAX_PENDING_EVENTS} events waited unsent; list again with --since`));
    });

    it('RecordDrill refuses a result that is not pass or fail, naming the field', async () => {
      h = await startHarness(V1, { watch: false });
      api = new AdminApi(h.socket);
      await assert.rejects(api.recordDrill({ scenario: 'switchover', result: 'maybe', reason: '' }), (err: Error & { code?: number }) =>
        err.code === status.INVALID_ARGUMENT && /result: "maybe" is not "pass" or "fail"/.test(err.message));
      await assert.rejects(api.recordDrill({ scenario: '', result: 'pass', reason: '' }), /scenario: is required/);
    });
  });

  it('lists connections filtered by service key or name, and says which service is unknown', async () => {
    h = await startHarness(V3);
    h.dp.conns = [
      {
        protocol: 'udp', state: 'UNREPLIED', client: { address: '198.18.9.1', port: 5353 }, vip: { address: '198.18.0.53', port: 53 },
        localAddress: null, realServer: { address: '198.19.1.53', port: 53 }, expiresInSec: 29.6, unreplied: true, realServerId: 2, service: '198.18.0.53:53/udp',
      },
    ];
    api = new AdminApi(h.socket);
    assert.equal((await api.listConnections('')).length, 1);
    assert.equal((await api.listConnections('dns')).length, 1);
    assert.equal((await api.listConnections('198.18.0.10:80/tcp')).length, 0);
    const [c] = await api.listConnections('198.18.0.53:53/udp');
    assert.deepEqual([c?.localAddress, c?.expiresInSec, c?.service], [null, 30, '198.18.0.53:53/udp']);
    const err = await api.listConnections('nope').then(() => null, (e: unknown) => e);
    assert.ok(isServiceError(err));
    assert.equal(err.code, status.NOT_FOUND);
    assert.match(err.details, /^service: "nope" is neither/);
  });

  it('streams large connection tables in batches', async () => {
    h = await startHarness();
    h.dp.conns = Array.from({ length: 2500 }, (_, i) => ({
      protocol: 'tcp' as const, state: 'ESTABLISHED', client: { address: '198.18.9.1', port: 1024 + i }, vip: { address: '198.18.0.10', port: 80 },
      localAddress: { address: '198.18.2.10', port: 30000 + i }, realServer: { address: '198.19.1.11', port: 8080 }, expiresInSec: 100,
      unreplied: false, realServerId: 1, service: '198.18.0.10:80/tcp',
    }));
    api = new AdminApi(h.socket);
    assert.equal((await api.listConnections()).length, 2500);
    const s = await api.getStatus();
    assert.equal(s.services[0]?.realServers[0]?.activeConnections, 2500);
  });

  it('status calls that overlap share one kernel connection listing, and a later one lists again', async () => {
    h = await startHarness(V3);
    const conn = (service: string, port: number): (typeof h.dp.conns)[number] => ({
      protocol: 'tcp', state: 'ESTABLISHED', client: { address: '198.18.9.1', port }, vip: { address: '198.18.0.10', port: 80 },
      localAddress: null, realServer: { address: '198.19.1.11', port: 8080 }, expiresInSec: 100, unreplied: false, realServerId: 1, service,
    });
    h.dp.conns = [conn('198.18.0.10:80/tcp', 1024), conn('198.18.0.53:53/udp', 1025)];
    // A listing that ends when the test says so: the callers below all ask while it runs.
    const listed = h.dp.connections.bind(h.dp);
    let listings = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    h.dp.connections = async (filter) => { listings++; await gate; return listed(filter); };
    api = new AdminApi(h.socket);
    const calls = Promise.all([api.getStatus(), api.getStatus(), api.listConnections('dns'), api.getStats()]);
    await waitFor('a listing to start', 5000, async () => listings > 0, 5);
    release();
    const [s1, s2, dns] = await calls;
    assert.equal(listings, 1, 'one listing for four overlapping calls');
    assert.equal(dns.length, 1, 'the shared listing is filtered per caller');
    assert.equal(dns[0]?.service, '198.18.0.53:53/udp');
    assert.deepEqual(s1, s2);
    await api.getStatus();
    assert.equal(listings, 2, 'a call after the listing ended lists again');
  });

  it('stops serving without touching the data plane, and removes its socket', async () => {
    h = await startHarness();
    const before = h.dp.applyCount;
    await h.agent.stop();
    assert.equal(h.dp.applyCount, before);
    assert.equal(weightOf(h.dp), 1, 'what was applied stays');
    await assert.rejects(lstat(h.socket), { code: 'ENOENT' });
    assert.ok(h.logs.some((l) => l.msg === 'shutting down'));
    assert.equal(await h.agent.reload('sighup'), null, 'a stopped agent applies nothing');
  });

  it('refuses to start on a socket a live agent serves, before applying anything', async () => {
    h = await startHarness();
    const other = new FakeDataPlane();
    await assert.rejects(
      Agent.start({ configPath: h.configPath, dataPlane: other, adminSocket: h.socket, watch: false }),
      (err: unknown) => err instanceof AgentError && err.kind === 'SocketInUse' && /another process is serving/.test(err.message),
    );
    assert.equal(other.applyCount, 0);
    api = new AdminApi(h.socket);
    assert.equal((await api.getStatus()).agent?.pid, process.pid, 'the first agent still serves');
  });

  it('replaces a stale socket left by an agent that died', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lbd-stale-'));
    const socket = join(dir, 'admin.sock');
    // What an agent killed with -9 leaves: a socket file nobody listens on. (Node removes the file when a
    // server closes, so bind elsewhere, move the file into place, then close.)
    const server = createServer().listen(join(dir, 'other.sock'));
    await once(server, 'listening');
    await rename(join(dir, 'other.sock'), socket);
    server.close();
    await once(server, 'close');
    assert.ok((await lstat(socket)).isSocket());
    await writeFile(join(dir, 'lbd.yaml'), V1);
    h = { dir, configPath: join(dir, 'lbd.yaml'), socket, dp: new FakeDataPlane(), logs: [], agent: undefined as unknown as Agent };
    h.agent = await Agent.start({ configPath: h.configPath, dataPlane: h.dp, adminSocket: socket, watch: false });
    api = new AdminApi(socket);
    assert.equal((await api.getStatus()).services.length, 1);
  });

  it('fails to start when the data plane refuses the first apply, leaving no socket', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lbd-agent-'));
    await writeFile(join(dir, 'lbd.yaml'), V1);
    const dp = new FakeDataPlane();
    dp.failNextApply = new DataPlaneError('PermissionDenied', 'apply');
    h = { dir, configPath: join(dir, 'lbd.yaml'), socket: join(dir, 'admin.sock'), dp, logs: [], agent: undefined as unknown as Agent };
    await assert.rejects(Agent.start({ configPath: h.configPath, dataPlane: dp, adminSocket: h.socket }), DataPlaneError);
    await assert.rejects(lstat(h.socket), { code: 'ENOENT' });
    h = { ...h, agent: { stop: async () => {} } as unknown as Agent };
  });
});
