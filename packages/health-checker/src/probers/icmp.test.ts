import assert from 'node:assert/strict';
import { IcmpProber, interpretPing } from './icmp.js';

/**
 * The icmp prober: iputils ping's words and exit status mapped to reasons (table), and real echoes to
 * 127.0.0.1 and ::1. Unreachable and timeout against real addresses need a namespace of their own:
 * icmp.privileged.test.ts.
 */

describe('IcmpProber', () => {
  const prober = new IcmpProber();

  it('127.0.0.1 answers → ok with the round-trip time', async () => {
    const r = await prober.probe({ kind: 'icmp', address: '127.0.0.1', port: 0 }, { timeoutMs: 2000 });
    assert.equal(r.reason, 'ok', r.message);
    assert.match(r.message, /^icmp echo to 127\.0\.0\.1: reply in [\d.]+ ms$/);
  });

  it('::1 answers → ok', async () => {
    const r = await prober.probe({ kind: 'icmp', address: '::1', port: 0 }, { timeoutMs: 2000 });
    assert.equal(r.reason, 'ok', r.message);
  });

  it('ping missing → error naming the package', async () => {
    const missing = new IcmpProber({ command: ['/nonexistent/ping'] });
    const r = await missing.probe({ kind: 'icmp', address: '127.0.0.1', port: 0 }, { timeoutMs: 2000 });
    assert.deepEqual([r.reason, r.message], ['error', 'icmp echo to 127.0.0.1: cannot run ping: not installed (Debian package iputils-ping)']);
  });

  it('an abort kills ping', async () => {
    const controller = new AbortController();
    // `sleep` stands in for a ping that never returns; the prober appends ping's arguments, which sleep
    // would reject, so run it through sh, which ignores them.
    const stuck = new IcmpProber({ command: ['sh', '-c', 'exec sleep 30'] });
    const p = stuck.probe({ kind: 'icmp', address: '127.0.0.1', port: 0 }, { timeoutMs: 30_000, signal: controller.signal });
    controller.abort(new DOMException('timeout', 'TimeoutError'));
    const r = await p;
    assert.deepEqual([r.reason, r.message], ['timeout', 'icmp echo to 127.0.0.1: timeout after 30000 ms (no echo reply)']);
  });
});

describe('interpretPing (iputils exit status and words)', () => {
  const table: Array<[string, number | null, string, [string, string]]> = [
    ['a reply', 0, 'PING 127.0.0.1 (127.0.0.1) 56(84) bytes of data.\n64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=0.025 ms\n', ['ok', 'reply in 0.025 ms']],
    ['no reply', 1, 'PING 198.18.0.99 (198.18.0.99) 56(84) bytes of data.\n\n--- 198.18.0.99 ping statistics ---\n1 packets transmitted, 0 received, 100% packet loss, time 0ms\n', ['timeout', 'no echo reply']],
    ['a router says host unreachable', 1, 'PING 198.19.1.9 (198.19.1.9) 56(84) bytes of data.\nFrom 198.19.1.1 icmp_seq=1 Destination Host Unreachable\n', ['unreachable', 'destination host unreachable']],
    ['IPv6 address unreachable', 1, 'PING fd00::9(fd00::9) 56 data bytes\nFrom fd00::1 icmp_seq=1 Destination unreachable: Address unreachable\n', ['unreachable', 'destination unreachable: address unreachable']],
    ['no route', 2, 'ping: connect: Network is unreachable\n', ['unreachable', 'network is unreachable']],
    ['no privilege', 2, 'ping: socktype: SOCK_RAW\nping: socket: Operation not permitted\n', ['error', "socket: Operation not permitted (ping needs CAP_NET_RAW, or net.ipv4.ping_group_range to include the agent's group)"]],
    ['another error', 2, 'ping: 198.18.0.300: Name or service not known\n', ['error', '198.18.0.300: Name or service not known']],
  ];
  for (const [name, code, output, want] of table) {
    it(name, () => assert.deepEqual(interpretPing(code, output), want));
  }
});
