import assert from 'node:assert/strict';
import { CHECK_KINDS, type ProbeTarget, type Prober } from '../types.js';
import { ExecProber, HttpProber, IcmpProber, ProberSet, TcpProber, UdpProber, createProber } from './index.js';

describe('createProber and ProberSet', () => {
  it('createProber gives the real prober of each kind', () => {
    const want = { tcp: TcpProber, http: HttpProber, https: HttpProber, icmp: IcmpProber, udp: UdpProber, exec: ExecProber };
    for (const kind of CHECK_KINDS) assert.ok(createProber(kind) instanceof want[kind], kind);
  });

  it('ProberSet dispatches on target.kind, with overrides', async () => {
    const seen: string[] = [];
    const fake = (name: string): Prober => ({
      probe: async (t) => {
        seen.push(`${name}:${t.kind}`);
        return { ok: true, reason: 'ok', message: name, durationMs: 0 };
      },
    });
    const set = new ProberSet({ tcp: fake('tcp'), https: fake('tls'), exec: fake('exec') });
    for (const kind of ['tcp', 'https', 'exec'] as const) await set.probe({ kind, address: '127.0.0.1', port: 1 }, { timeoutMs: 100 });
    assert.deepEqual(seen, ['tcp:tcp', 'tls:https', 'exec:exec']);
  });

  it('ProberSet turns a prober that throws, and an unknown kind, into reason error', async () => {
    const set = new ProberSet({
      tcp: { probe: () => { throw new Error('boom'); } },
      udp: { probe: () => Promise.reject(new Error('bang')) },
    });
    const tcp = await set.probe({ kind: 'tcp', address: '127.0.0.1', port: 1 }, { timeoutMs: 100 });
    assert.deepEqual([tcp.ok, tcp.reason, tcp.message], [false, 'error', 'tcp connect to 127.0.0.1:1: boom']);
    const udp = await set.probe({ kind: 'udp', address: '127.0.0.1', port: 1, send: 'x' }, { timeoutMs: 100 });
    assert.deepEqual([udp.reason, udp.message], ['error', 'udp 127.0.0.1:1: bang']);
    const odd = await set.probe({ kind: 'sctp', address: '127.0.0.1', port: 1 } as unknown as ProbeTarget, { timeoutMs: 100 });
    assert.deepEqual([odd.reason, odd.message], ['error', 'no prober for check kind "sctp"']);
  });
});
