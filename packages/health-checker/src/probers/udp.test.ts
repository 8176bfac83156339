import assert from 'node:assert/strict';
import { createSocket, type Socket } from 'node:dgram';
import type { AddressInfo } from 'node:net';
import { UdpProber } from './udp.js';

/**
 * The udp prober against sockets this test binds on 127.0.0.1 and ::1: an echo server, a server that never
 * answers, a wrong answer, and a closed port (the kernel's ICMP port unreachable → refused).
 */

const sockets: Socket[] = [];

async function bind(type: 'udp4' | 'udp6', address: string, onMessage?: (s: Socket, msg: Buffer, from: AddressInfo) => void): Promise<number> {
  const s = createSocket(type);
  sockets.push(s);
  if (onMessage) s.on('message', (msg, from) => onMessage(s, msg, from));
  await new Promise<void>((resolve, reject) => {
    s.once('error', reject);
    s.bind(0, address, () => resolve());
  });
  return s.address().port;
}

const echo = (s: Socket, msg: Buffer, from: AddressInfo): void => s.send(msg, from.port, from.address);
const prober = new UdpProber();

describe('UdpProber', () => {
  afterEach(async () => {
    await Promise.all(sockets.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  });

  it('echo: the reply contains expect → ok (127.0.0.1 and ::1)', async () => {
    for (const [type, host, shown] of [['udp4', '127.0.0.1', '127.0.0.1'], ['udp6', '::1', '[::1]']] as const) {
      const port = await bind(type, host, echo);
      const r = await prober.probe({ kind: 'udp', address: host, port, send: 'PING lbd', expect: 'PING' }, { timeoutMs: 1000 });
      assert.deepEqual([r.ok, r.reason, r.message], [true, 'ok', `udp ${shown}:${port}: reply contains "PING"`]);
    }
  });

  it('any reply is enough without expect', async () => {
    const port = await bind('udp4', '127.0.0.1', (s, _m, from) => s.send('whatever', from.port, from.address));
    const r = await prober.probe({ kind: 'udp', address: '127.0.0.1', port, send: 'x' }, { timeoutMs: 1000 });
    assert.deepEqual([r.reason, r.message], ['ok', `udp 127.0.0.1:${port}: got a reply`]);
  });

  it('no answer → timeout', async () => {
    let received = 0;
    const port = await bind('udp4', '127.0.0.1', () => received++);
    const r = await prober.probe({ kind: 'udp', address: '127.0.0.1', port, send: 'PING', expect: 'PONG' }, { timeoutMs: 200 });
    assert.deepEqual([r.ok, r.reason, r.message], [false, 'timeout', `udp 127.0.0.1:${port}: timeout after 200 ms (sent, no reply)`]);
    assert.equal(received, 1, 'the datagram was sent once');
  });

  it('a wrong answer → reply-mismatch', async () => {
    const port = await bind('udp4', '127.0.0.1', (s, _m, from) => s.send('NXDOMAIN', from.port, from.address));
    const r = await prober.probe({ kind: 'udp', address: '127.0.0.1', port, send: 'q', expect: 'NOERROR' }, { timeoutMs: 1000 });
    assert.deepEqual([r.reason, r.message], ['reply-mismatch', `udp 127.0.0.1:${port}: reply "NXDOMAIN" does not contain "NOERROR"`]);
  });

  it('a closed port → refused at once (ICMP port unreachable on the connected socket)', async () => {
    const port = await bind('udp4', '127.0.0.1');
    await new Promise<void>((resolve) => sockets.pop()?.close(() => resolve()));
    const r = await prober.probe({ kind: 'udp', address: '127.0.0.1', port, send: 'PING' }, { timeoutMs: 2000 });
    assert.deepEqual([r.reason, r.message], ['refused', `udp 127.0.0.1:${port}: refused`]);
    assert.ok(r.durationMs < 1000, `${r.durationMs} ms: not a timeout`);
  });

  it('a udp target without a datagram to send is an error result', async () => {
    const r = await prober.probe({ kind: 'udp', address: '127.0.0.1', port: 9 }, { timeoutMs: 1000 });
    assert.deepEqual([r.reason, r.message], ['error', 'udp 127.0.0.1:9: a udp check needs a datagram to send']);
  });
});
