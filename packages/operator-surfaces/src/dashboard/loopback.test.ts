import assert from 'node:assert/strict';
import { EventEmitter, once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { get, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdminApi } from '@lbd/proto';
import { createLogger } from '@lbd/log';
import { AdminServer, type AdminBackend } from '../admin-server.js';
import type { LbdEvent } from '@lbd/config';
import { FakeDashboardBackend, MemoryEventSource } from '../testing/index.js';
import { AdminApiEventSource, parseDashboardArgs, runDashboard } from './loopback.js';
import type { DashboardState } from './state.js';

const WEB = '198.18.0.10:80/tcp';

describe('lbd-dashboard', () => {
  it('takes a socket and a loopback address, and refuses anything that would show the dashboard to the network', () => {
    const ok: [string[], { socket: string; host: string; port: number }][] = [
      [['--socket', '/run/lbd/dir1.sock'], { socket: '/run/lbd/dir1.sock', host: '127.0.0.1', port: 9400 }],
      [['--socket=/s', '--listen', '127.0.0.2:80'], { socket: '/s', host: '127.0.0.2', port: 80 }],
      [['--socket', '/s', '--listen=[::1]:9401'], { socket: '/s', host: '::1', port: 9401 }],
    ];
    for (const [argv, args] of ok) assert.deepEqual(parseDashboardArgs(argv), { kind: 'run', args }, argv.join(' '));
    const bad: [string[], RegExp][] = [
      [[], /--socket is required/],
      [['--socket', '/s', '--listen', '0.0.0.0:9400'], /0\.0\.0\.0 is not a loopback address; lbd-dashboard has no TLS/],
      [['--socket', '/s', '--listen', '198.18.0.1:9400'], /not a loopback address/],
      [['--socket', '/s', '--listen', 'localhost:9400'], /"localhost:9400" is not ADDRESS:PORT/],
      [['--socket', '/s', '--listen', '127.0.0.1:70000'], /is not ADDRESS:PORT/],
      [['--socket'], /--socket needs a value/],
      [['--sock', '/s'], /unknown flag --sock; did you mean --socket\?/],
      [['--socket', '/s', '--frobnicate'], /^unknown flag --frobnicate$/],
    ];
    assert.deepEqual(parseDashboardArgs(['--version']), { kind: 'version' });
    for (const [argv, re] of bad) {
      const r = parseDashboardArgs(argv);
      assert.equal(r.kind, 'usage', argv.join(' '));
      assert.match((r as { message: string }).message, re, argv.join(' '));
    }
  });

  it('serves the agent behind an admin socket: its state over gRPC, and its health transitions at once', async function () {
    this.timeout(15_000);
    const dir = await mkdtemp(join(tmpdir(), 'lbd-dash-'));
    const fake = new FakeDashboardBackend(
      { agent: { configRevision: 4 }, services: [{ key: WEB, name: 'web', realServers: [{ address: '198.19.1.11', port: 8080, weight: 1, health: 'up', flags: [] }] }] },
      { realServers: [{ service: WEB, address: '198.19.1.11', port: 8080, state: 'up', flags: [], check: { key: 'k', kind: 'tcp' } }] },
    );
    const unused = (): never => { throw new Error('not used by the dashboard'); };
    const backend: AdminBackend = {
      status: () => fake.status(), healthStatus: () => fake.healthStatus(), clusterStatus: () => fake.clusterStatus(),
      watchHealth: (since, sink) => fake.watchHealth(since, sink),
      stats: unused, connections: unused, applyText: unused, doctor: unused, failover: unused, runDrill: unused, configHistory: unused, rollback: unused,
      listEvents: unused, recordDrill: unused, getConfig: unused,
    };
    const socket = join(dir, 'admin.sock');
    const admin = await AdminServer.listen(socket, backend, createLogger({ write: () => {} }));
    const signals = new EventEmitter();
    const lines: string[] = [];
    const running = runDashboard(['--socket', socket, '--listen', '127.0.0.1:0'], { signals, log: createLogger({ write: (l) => lines.push(l) }) });
    try {
      const deadline = Date.now() + 5000;
      let url: string | undefined;
      while (url === undefined && Date.now() < deadline) {
        url = lines.map((l) => JSON.parse(l) as { url?: string }).find((l) => l.url)?.url;
        await new Promise((r) => setTimeout(r, 10));
      }
      assert.ok(url, `no url logged: ${lines.join('\n')}`);
      const [res] = (await once(get(`${url}api/state`), 'response')) as [IncomingMessage];
      let body = '';
      for await (const chunk of res) body += String(chunk);
      const state = JSON.parse(body) as DashboardState;
      assert.equal(state.config.revision, 4);
      assert.equal(state.services[0]?.realServers[0]?.state, 'up');

      const [stream] = (await once(get(`${url}api/events/stream`), 'response')) as [IncomingMessage];
      stream.setEncoding('utf8');
      let text = '';
      stream.on('data', (c: string) => { text += c; });
      const until = async (re: RegExp, what: string): Promise<void> => {
        const end = Date.now() + 5000;
        while (!re.test(text)) {
          if (Date.now() > end) throw new Error(`${what}: got ${text.slice(-500)}`);
          await new Promise((r) => setTimeout(r, 10));
        }
      };
      await until(/event: state\ndata: .*"state":"up"/, 'first state');
      // Over gRPC WatchHealth: the dashboard subscribed once the stream opened.
      const subscribed = Date.now() + 5000;
      while (fake.sinks.size === 0 && Date.now() < subscribed) await new Promise((r) => setTimeout(r, 10));
      assert.equal(fake.sinks.size, 1, 'the dashboard watches health through the admin socket');
      fake.transition(WEB, '198.19.1.11', 8080, 'down');
      await until(/"state":"down"/, 'the transition');
      stream.destroy();
    } finally {
      signals.emit('SIGTERM');
      assert.equal(await running, 0);
      await admin.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('follows the agent\'s event log over ListEvents: the history, then each new event once, also across an agent restart', async function () {
    this.timeout(20_000);
    const dir = await mkdtemp(join(tmpdir(), 'lbd-dash-'));
    const log = new MemoryEventSource('dir1');
    log.add('health', `${WEB} 198.19.1.12:8080`, 'up', 'down', { reason: 'http GET /: got 500, want 200-399 (2 failures)' });
    const unused = (): never => { throw new Error('not used by the event source'); };
    const backend: AdminBackend = {
      status: unused, stats: unused, connections: unused, applyText: unused, doctor: unused, healthStatus: unused, watchHealth: unused,
      clusterStatus: unused, failover: unused, runDrill: unused, configHistory: unused, rollback: unused, recordDrill: unused, getConfig: unused,
      listEvents: async (q, sink) => {
        for (const e of log.recent(q.sinceUnixMs).slice(-q.limit)) sink.event(e);
        if (!q.follow) { sink.end(); return () => {}; }
        return log.subscribe((e) => sink.event(e));
      },
    };
    const quiet = createLogger({ write: () => {} });
    const socket = join(dir, 'admin.sock');
    let admin = await AdminServer.listen(socket, backend, quiet);
    const api = new AdminApi(socket);
    const source = new AdminApiEventSource(api, 100, 50);
    const until = async (what: string, ok: () => boolean): Promise<void> => {
      for (const deadline = Date.now() + 8000; !ok(); await new Promise((r) => setTimeout(r, 20))) {
        if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}: held ${source.recent(0).map((e) => e.kind).join(', ')}`);
      }
    };
    try {
      await until('the history', () => source.recent(0).length === 1);
      const seen: LbdEvent[] = [];
      source.subscribe((e) => seen.push(e));
      log.add('role', 'default', 'standby', 'leader', { reason: 'won the election (priority 150)' });
      await until('a live event', () => seen.length === 1);
      await admin.close();
      log.add('config', 'config', '', 'applied', { reason: 'revision 2 applied' });
      admin = await AdminServer.listen(socket, backend, quiet);
      await until('the event recorded while the agent was away', () => seen.length === 2);
      await new Promise((r) => setTimeout(r, 200));
      assert.deepEqual(source.recent(0).map((e) => e.kind), ['health', 'role', 'config']);
      assert.deepEqual(seen.map((e) => e.kind), ['role', 'config']);
    } finally {
      source.close();
      api.close();
      await admin.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
