import assert from 'node:assert/strict';
import { EventEmitter, once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { EXIT } from '@lbd/config';
import {
  adminServiceDefinition, unixTarget, type AdminHandlers, type GetHealthResponse, type HealthEvent, type WatchHealthRequest__Output,
} from '@lbd/proto';
import { main } from './cli.js';

/**
 * `lbadm health` in-process against a stand-in agent: a real gRPC server on a temp unix socket that
 * answers GetHealth and WatchHealth from the test (lbadm may not import the agent; the agent's side of
 * these calls is tested in director-agent, and lbadm with the real agent in test/).
 */

const T0 = Date.UTC(2026, 0, 1, 0, 10, 0);

const HEALTH: GetHealthResponse = {
  sampledAtUnixMs: T0,
  realServers: [
    {
      service: '198.18.0.10:80/tcp', serviceName: 'web', address: '198.19.1.11', port: 8080,
      check: { kind: 'http', target: '198.19.1.11:8080', description: 'http GET /', key: 'k1', intervalMs: 1000, timeoutMs: 500, rise: 2, fall: 2 },
      state: 'up', sinceUnixMs: T0 - 65_000, successes: 65, failures: 0,
      lastResult: { ok: true, reason: 'ok', message: 'http GET /: got 200', latencyMs: 1 }, heldDownUntilUnixMs: 0, flags: [], weight: 1, effectiveWeight: 1,
    },
    {
      service: '198.18.0.10:53/udp', serviceName: 'dns', address: '198.19.1.11', port: 5353,
      check: { kind: 'udp', target: '198.19.1.11:5353', description: 'udp 198.19.1.11:5353', key: 'k2', intervalMs: 1000, timeoutMs: 500, rise: 2, fall: 2 },
      state: 'down', sinceUnixMs: T0 - 3_000, successes: 0, failures: 3,
      lastResult: { ok: false, reason: 'timeout', message: 'udp 198.19.1.11:5353: timeout after 500 ms (sent, no reply)', latencyMs: 500 },
      heldDownUntilUnixMs: 0, flags: ['down'], weight: 1, effectiveWeight: 0,
    },
  ],
  scheduler: { checks: 2, running: 0, waiting: 0, started: 130, completed: 130, timedOut: 3, late: 0, skipped: 0, startDelayP50Ms: 0, startDelayP99Ms: 1, startDelayMaxMs: 1 },
};

const EVENT: HealthEvent = {
  seq: 9, timeUnixMs: T0, service: '198.18.0.10:80/tcp', serviceName: 'web', address: '198.19.1.11', port: 8080, checkKind: 'http',
  from: 'up', to: 'down', reason: 'http GET /: got 500, want 200-399 (2 failures)', probeReason: 'status', latencyMs: 3,
  heldDownUntilUnixMs: 0, action: 'quiescent (weight 0)',
};

/** The stand-in agent: GetHealth answers HEALTH (or NOT_FOUND for an unknown service); WatchHealth streams what the test sends. */
class StandIn extends EventEmitter<{ watch: [WatchHealthRequest__Output]; cancelled: [] }> {
  private readonly calls = new Set<grpc.ServerWritableStream<WatchHealthRequest__Output, HealthEvent>>();
  constructor(readonly server: grpc.Server) {
    super();
  }

  static async listen(socket: string): Promise<StandIn> {
    const server = new grpc.Server();
    const s = new StandIn(server);
    const handlers: Partial<AdminHandlers> = {
      GetHealth: (call, cb) => {
        const want = call.request.service;
        if (want === '') return cb(null, HEALTH);
        const rs = HEALTH.realServers!.filter((r) => r.service === want || r.serviceName === want);
        if (rs.length === 0) return cb({ code: grpc.status.NOT_FOUND, details: `service: "${want}" is neither the key nor the name of a configured service` });
        return cb(null, { ...HEALTH, realServers: rs });
      },
      WatchHealth: (call) => {
        s.calls.add(call);
        call.on('cancelled', () => { s.calls.delete(call); s.emit('cancelled'); });
        s.emit('watch', call.request);
      },
    };
    server.addService(adminServiceDefinition(), handlers as AdminHandlers);
    await new Promise<void>((resolve, reject) => server.bindAsync(unixTarget(socket), grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
    return s;
  }

  send(e: HealthEvent): void {
    for (const c of this.calls) c.write(e);
  }

  endAll(): void {
    for (const c of this.calls) c.end();
    this.calls.clear();
  }
}

describe('lbadm health', () => {
  let dir: string;
  let socket: string;
  let agent: StandIn;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lbadm-health-'));
    socket = join(dir, 'admin.sock');
    agent = await StandIn.listen(socket);
  });

  afterEach(async () => {
    agent.server.forceShutdown();
    await rm(dir, { recursive: true, force: true });
  });

  async function lbadm(argv: string[], extra: { interrupt?: AbortSignal; onOut?: (t: string) => void } = {}): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const code = await main(['--socket', socket, ...argv], {
      stdout: (t) => { out += t; extra.onOut?.(t); }, stderr: (t) => { err += t; }, env: {},
      ...(extra.interrupt ? { interrupt: extra.interrupt } : {}), now: () => T0 - 1,
    });
    return { code, out, err };
  }

  it('prints the table', async () => {
    const r = await lbadm(['health']);
    assert.equal(r.code, EXIT.ok, r.err);
    assert.equal(r.out, [
      'SERVICE SERVER           CHECK      STATE SINCE LAST RESULT                                                 LATENCY',
      'web     198.19.1.11:8080 http GET / up    1m05s http GET /: got 200                                         1 ms',
      'dns     198.19.1.11:5353 udp        down  3s    udp 198.19.1.11:5353: timeout after 500 ms (sent, no reply) 500 ms',
      '',
      'scheduler: 2 checks; probes started 130, timed out 3, late 0, skipped 0, asked again after a stall 0; start delay p50 0 ms, p99 1 ms',
      '',
    ].join('\n'));
  });

  it('--json prints the GetHealth answer; --service filters and names an unknown service', async () => {
    const r = await lbadm(['health', '--json', '--service', 'dns']);
    assert.equal(r.code, EXIT.ok, r.err);
    const h = JSON.parse(r.out) as { sampledAtUnixMs: number; realServers: Array<{ serviceName: string; state: string; lastResult: { reason: string } }>; scheduler: { checks: number } };
    assert.equal(h.sampledAtUnixMs, T0);
    assert.deepEqual(h.realServers.map((x) => [x.serviceName, x.state, x.lastResult.reason]), [['dns', 'down', 'timeout']]);
    assert.equal(h.scheduler.checks, 2);
    const bad = await lbadm(['health', '--service', 'nope', '--watch']);
    assert.equal(bad.code, EXIT.failure);
    assert.match(bad.err, /^lbadm: not found: service: "nope" is neither/);
  });

  it('--watch prints live transitions as lines and ends cleanly (exit 0) on an interrupt', async () => {
    const interrupt = new AbortController();
    const watching = once(agent, 'watch') as Promise<[WatchHealthRequest__Output]>;
    let onPrinted = (): void => {};
    const printed = new Promise<void>((resolve) => { onPrinted = resolve; });
    const run = lbadm(['health', '--watch'], { interrupt: interrupt.signal, onOut: () => onPrinted() });
    const [req] = await watching;
    assert.equal(req.sinceUnixMs, T0 - 1, 'asks for transitions from now on');
    agent.send(EVENT);
    await printed;
    const cancelled = once(agent, 'cancelled');
    interrupt.abort();
    const r = await run;
    await cancelled; // the call was cancelled, not left open
    assert.equal(r.code, EXIT.ok, r.err);
    assert.equal(r.out, '2026-01-01T00:10:00.000Z web 198.19.1.11:8080 up -> down: http GET /: got 500, want 200-399 (2 failures) [3 ms]; quiescent (weight 0)\n');
    assert.match(r.err, /^lbadm: watching health transitions; Ctrl-C ends\n$/);
  });

  it('--watch --json prints one JSON event per line; --service filters; the agent ending the stream is exit 69', async () => {
    const watching = once(agent, 'watch');
    const run = lbadm(['health', '--watch', '--json', '--service', 'web']);
    await watching;
    agent.send({ ...EVENT, service: '198.18.0.10:53/udp', serviceName: 'dns' });
    agent.send(EVENT);
    agent.send({ ...EVENT, seq: 10, from: 'down', to: 'up', action: 'restored (weight 1)' });
    agent.endAll();
    const r = await run;
    assert.equal(r.code, EXIT.unavailable);
    assert.match(r.err, /ended the watch/);
    const lines = r.out.trimEnd().split('\n').map((l) => JSON.parse(l) as { seq: number; serviceName: string; to: string });
    assert.deepEqual(lines.map((e) => [e.seq, e.serviceName, e.to]), [[9, 'web', 'down'], [10, 'web', 'up']]);
  });
});
