import assert from 'node:assert/strict';
import { once } from 'node:events';
import { get, type IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import type { LbdEvent } from '@lbd/config';
import { FakeDashboardBackend, MemoryEventSource, serveOpsRoutes, type PlainOpsServer } from '../testing/index.js';
import { Dashboard } from './routes.js';
import type { DashboardState } from './state.js';

const WEB = '198.18.0.10:80/tcp';

const RS = { address: '198.19.1.11', port: 8080 };

/** One service with one checked real server, as the agent answers. */
function backendOf(): FakeDashboardBackend {
  return new FakeDashboardBackend(
    {
      agent: { configRevision: 1, configSha256: 'abc', configSource: 'test' },
      services: [{
        name: 'web', key: WEB, vip: '198.18.0.10', port: 80, protocol: 'tcp', mode: 'nat', scheduler: 'rr', flags: [],
        realServers: [{ ...RS, weight: 1, quiescent: false, eligible: true, health: 'up', flags: [], effectiveWeight: 1 }],
      }],
    },
    {
      realServers: [{
        service: WEB, ...RS, state: 'up', flags: [], check: { kind: 'tcp', key: 'tcp|198.19.1.11:8080', description: 'tcp connect', intervalMs: 1000 },
        lastResult: { ok: true, reason: 'ok', message: 'connected', latencyMs: 1.5 }, successes: 3, weight: 1, effectiveWeight: 1,
      }],
    },
  );
}

interface Sse { type: string; id: string | undefined; data: string }

/** An SSE client on a plain HTTP GET: each parsed message, waited on by predicate. */
class SseReader {
  readonly messages: Sse[] = [];
  private waiters: (() => void)[] = [];
  private buf = '';
  ended = false;

  constructor(readonly res: IncomingMessage) {
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      this.buf += chunk;
      for (let i = this.buf.indexOf('\n\n'); i >= 0; i = this.buf.indexOf('\n\n')) {
        const block = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 2);
        const msg: Sse = { type: 'message', id: undefined, data: '' };
        let hasData = false;
        for (const line of block.split('\n')) {
          const [field, ...rest] = line.split(': ');
          const value = rest.join(': ');
          if (field === 'event') msg.type = value;
          else if (field === 'id') msg.id = value;
          else if (field === 'data') { msg.data = value; hasData = true; }
        }
        if (hasData) this.messages.push(msg);
      }
      this.wake();
    });
    res.on('close', () => { this.ended = true; this.wake(); });
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  async next(pred: (m: Sse) => boolean, what: string, timeoutMs = 5000): Promise<Sse> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const i = this.messages.findIndex(pred);
      if (i >= 0) return this.messages.splice(0, i + 1)[i]!;
      if (this.ended) throw new Error(`${what}: the stream ended`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`${what}: not within ${timeoutMs} ms; got ${JSON.stringify(this.messages.map((m) => m.type))}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => { clearTimeout(t); resolve(); });
      });
    }
  }

  close(): void {
    this.res.destroy();
  }
}

async function openStream(url: string, headers: Record<string, string> = {}): Promise<SseReader> {
  const req = get(`${url}/api/events/stream`, { headers });
  const [res] = (await once(req, 'response')) as [IncomingMessage];
  assert.equal(res.statusCode, 200);
  assert.match(String(res.headers['content-type']), /^text\/event-stream/);
  return new SseReader(res);
}

async function fetchText(url: string): Promise<{ status: number; type: string; body: string; headers: IncomingMessage['headers'] }> {
  const [res] = (await once(get(url), 'response')) as [IncomingMessage];
  res.setEncoding('utf8');
  let body = '';
  for await (const chunk of res) body += chunk as string;
  return { status: res.statusCode ?? 0, type: String(res.headers['content-type']), body, headers: res.headers };
}

async function until(what: string, check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const stateOf = (m: Sse): DashboardState => JSON.parse(m.data) as DashboardState;

describe('dashboard routes', () => {
  let backend: FakeDashboardBackend;
  let events: MemoryEventSource;
  let dashboard: Dashboard;
  let server: PlainOpsServer;
  const readers: SseReader[] = [];

  async function start(opts: { maxQueuedEvents?: number; maxStreams?: number; events?: boolean; healthPollMs?: number; keepSamplingMs?: number } = {}): Promise<void> {
    dashboard = new Dashboard({
      backend, events: opts.events === false ? null : events, pollMs: 60_000, healthPollMs: opts.healthPollMs ?? 60_000,
      ...(opts.keepSamplingMs !== undefined ? { keepSamplingMs: opts.keepSamplingMs } : {}),
      ...(opts.maxQueuedEvents ? { maxQueuedEvents: opts.maxQueuedEvents } : {}), ...(opts.maxStreams ? { maxStreams: opts.maxStreams } : {}),
    });
    server = await serveOpsRoutes(dashboard.routes());
  }

  async function stream(headers: Record<string, string> = {}): Promise<SseReader> {
    const r = await openStream(server.url, headers);
    readers.push(r);
    return r;
  }

  beforeEach(() => {
    backend = backendOf();
    events = new MemoryEventSource();
  });
  afterEach(async () => {
    for (const r of readers.splice(0)) r.close();
    dashboard?.close();
    await server?.close();
  });

  it('every route is read-only', async () => {
    await start();
    const routes = dashboard.routes();
    assert.deepEqual(routes.map((r) => `${r.method} ${r.path}${r.prefix ? '*' : ''} ${r.role}`), [
      'GET / read', 'GET /static/* read', 'GET /api/state read', 'GET /api/events read', 'GET /api/events/stream read',
    ]);
  });

  it('serves the page and its files, from the agent alone (no CDN, nothing inline), and nothing else', async () => {
    await start();
    const page = await fetchText(`${server.url}/`);
    assert.equal(page.status, 200);
    assert.match(page.type, /^text\/html/);
    assert.match(String(page.headers['content-security-policy']), /default-src 'none'; script-src 'self'/);
    for (const [path, type] of [['/static/dashboard.js', /^text\/javascript/], ['/static/dashboard.css', /^text\/css/]] as const) {
      const f = await fetchText(`${server.url}${path}`);
      assert.equal(f.status, 200, path);
      assert.match(f.type, type, path);
      assert.doesNotMatch(f.body, /https?:\/\/(?!www\.w3\.org\/2000\/svg)/, `${path} must load nothing from elsewhere`);
    }
    assert.doesNotMatch(page.body, /https?:\/\//, 'the page must load nothing from elsewhere');
    assert.doesNotMatch(page.body, /<script(?![^>]*\ssrc=)[^>]*>|style=/, 'no inline script or style (the CSP forbids them)');
    for (const path of ['/static/../routes.js', '/static/%2e%2e/package.json', '/static/', '/static/index.html.bak', '/index.html']) {
      assert.equal((await fetchText(`${server.url}${path}`)).status, 404, path);
    }
  });

  it('GET /api/state reads the agent and answers the shaped state; a part that fails is named, the rest shown', async () => {
    await start();
    backend.failing.add('cluster');
    const r = await fetchText(`${server.url}/api/state`);
    assert.equal(r.status, 200);
    const state = JSON.parse(r.body) as DashboardState;
    assert.equal(state.services[0]?.realServers[0]?.state, 'up');
    assert.deepEqual(state.problems, ['cluster status: etcd is unreachable']);
    assert.equal(state.eventLog, true);
    assert.deepEqual(backend.calls, { status: 1, health: 1, cluster: 1 }, 'one read of each call per request');
    assert.equal(dashboard.watching, false, 'a one-off read starts no poller');
  });

  it('GET /api/events filters by time and kind, bounds the count, and explains a bad query', async () => {
    await start();
    events.add('health', `${WEB} 198.19.1.11:8080`, '', 'down', { time: 1000 });
    events.add('drill', 'switchover', '', 'pass', { time: 2000 });
    events.add('role', 'default', '', 'leader', { time: 3000 });
    const body = async (q: string) => JSON.parse((await fetchText(`${server.url}/api/events${q}`)).body) as { events?: LbdEvent[]; error?: string };
    assert.deepEqual((await body('?since=2000'))!.events!.map((e) => e.kind), ['drill', 'role']);
    assert.deepEqual((await body('?kind=drill'))!.events!.map((e) => e.subject), ['switchover']);
    assert.deepEqual((await body('?limit=1'))!.events!.map((e) => e.kind), ['role']);
    const bad = await fetchText(`${server.url}/api/events?limit=0&since=x`);
    assert.equal(bad.status, 400);
    assert.match(bad.body, /limit: \\"0\\" is not a whole number from 1 to 5000/);
    assert.match(bad.body, /since: \\"x\\"/);
  });

  it('without an event log, /api/events is empty and the state says so', async () => {
    await start({ events: false });
    assert.deepEqual(JSON.parse((await fetchText(`${server.url}/api/events`)).body), { events: [] });
    const s = await stream();
    assert.equal(stateOf(await s.next((m) => m.type === 'state', 'first state')).eventLog, false);
  });

  it('the stream sends a snapshot on connect, the backlog, then each event and a new snapshot on a health transition', async () => {
    await start();
    const old = events.add('drill', 'box-death', '', 'pass', { time: Date.now() - 48 * 3600_000 });
    const recent = events.add('config', 'config', '', 'applied');
    const s = await stream();
    const backlog = [await s.next((m) => m.type === 'lbd-event', 'backlog 1'), await s.next((m) => m.type === 'lbd-event', 'backlog 2')];
    // Drill results are kept on the page even when older than the timeline's window.
    assert.deepEqual(backlog.map((m) => m.id), [old.id, recent.id]);
    const first = stateOf(await s.next((m) => m.type === 'state', 'first state'));
    assert.equal(first.services[0]?.realServers[0]?.state, 'up');
    assert.deepEqual(backend.calls, { status: 1, health: 1, cluster: 1 }, 'one read of each call on connect');
    assert.equal(dashboard.watching, true);
    assert.equal(backend.sinks.size, 1, 'watching health transitions');

    const live = events.add('role', 'default', '', 'leader');
    const got = await s.next((m) => m.type === 'lbd-event', 'live event');
    assert.equal(got.id, live.id);
    assert.deepEqual(JSON.parse(got.data), live);

    // The pollers are set to a minute: only the transition can bring this state.
    backend.transition(WEB, RS.address, RS.port, 'down');
    const down = stateOf(await s.next((m) => m.type === 'state' && stateOf(m).services[0]?.realServers[0]?.state === 'down', 'down state', 2000));
    assert.equal(down.services[0]?.counts.down, 1);
  });

  it('a reconnecting browser gets only the events after its Last-Event-ID', async () => {
    await start();
    events.add('config', 'config', '', 'applied');
    const seen = events.add('role', 'default', '', 'standby');
    const missed = events.add('role', 'default', '', 'leader');
    const s = await stream({ 'last-event-id': seen.id });
    const first = await s.next((m) => m.type === 'lbd-event', 'backlog');
    assert.equal(first.id, missed.id);
    await s.next((m) => m.type === 'state', 'state');
    assert.equal(s.messages.filter((m) => m.type === 'lbd-event').length, 0);
  });

  it('a disconnect cleans up: the last stream gone stops the status poller, the health watch and the event subscription; health sampling stops later', async () => {
    await start({ healthPollMs: 20, keepSamplingMs: 300 });
    const a = await stream();
    const b = await stream();
    await a.next((m) => m.type === 'state', 'a state');
    await b.next((m) => m.type === 'state', 'b state');
    assert.equal(dashboard.streamCount, 2);
    a.close();
    await until('one stream left', () => dashboard.streamCount === 1);
    assert.equal(dashboard.watching, true);
    b.close();
    await until('no stream left', () => dashboard.streamCount === 0);
    assert.equal(dashboard.watching, false);
    assert.equal(backend.sinks.size, 0);
    assert.equal(events.subscribers.size, 0);
    // Health goes on being read for the next page's sparklines, then stops.
    assert.equal(dashboard.sampling, true);
    const reads = backend.calls.health;
    await until('health read while nobody watches', () => backend.calls.health > reads + 2);
    await until('sampling stopped', () => !dashboard.sampling, 3000);
    const after = backend.calls.health;
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(backend.calls.health, after, 'no read once sampling stopped');
  });

  it('refuses streams past the limit, and ends every stream when the agent stops', async () => {
    await start({ maxStreams: 1 });
    const a = await stream();
    await a.next((m) => m.type === 'state', 'state');
    const refused = await fetchText(`${server.url}/api/events/stream`);
    assert.equal(refused.status, 503);
    assert.match(refused.body, /1 dashboard streams are open/);
    // The agent's health manager stopping ends its watchers.
    for (const sink of backend.sinks) sink.end();
    await until('the stream ended', () => a.ended);
    assert.equal(dashboard.streamCount, 0);
    assert.equal((await fetchText(`${server.url}/api/events/stream`)).status, 503);
  });

  it('a browser that stops reading is bounded: past the event bound its stream is cut, and the pollers stop', async () => {
    await start({ maxQueuedEvents: 8 });
    const { port } = new URL(server.url);
    const sock = connect(Number(port), '127.0.0.1');
    await once(sock, 'connect');
    sock.write('GET /api/events/stream HTTP/1.1\r\nHost: x\r\n\r\n');
    await until('the stream opened', () => dashboard.streamCount === 1);
    sock.pause(); // reads nothing more: the socket buffers fill up
    const closed = once(sock, 'close');
    sock.resume = () => sock; // nothing may resume it
    const big = 'x'.repeat(64 * 1024);
    let sent = 0;
    while (dashboard.streamCount === 1 && sent < 2000) {
      events.add('admin', 'server drain', '', 'done', { reason: big });
      sent++;
      await new Promise((r) => setImmediate(r));
    }
    assert.equal(dashboard.streamCount, 0, `the stream was not cut after ${sent} events of 64 KiB`);
    // Far fewer than it would take to fill memory: the socket buffers, then at most 8 queued.
    assert.ok(sent < 1000, `${sent} events before the cut`);
    sock.destroy();
    await closed;
    assert.equal(dashboard.watching, false);
  });
});
