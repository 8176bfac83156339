import assert from 'node:assert/strict';
import { parseConntrack, parseDeletedCount } from './conntrack.js';

describe('conntrack parsing', () => {
  it('reads a fullnat TCP entry: original and reply tuples, state, flags, mark', () => {
    const [e] = parseConntrack('tcp      6 431999 ESTABLISHED src=198.18.0.2 dst=198.18.0.10 sport=40000 dport=80 src=198.19.1.11 dst=198.19.1.100 sport=8080 dport=40001 [ASSURED] mark=65537 use=1\n');
    assert.deepEqual(e, {
      protocol: 'tcp', state: 'ESTABLISHED', expiresInSec: 431999, unreplied: false, assured: true, mark: 65537,
      original: { src: { address: '198.18.0.2', port: 40000 }, dst: { address: '198.18.0.10', port: 80 } },
      reply: { src: { address: '198.19.1.11', port: 8080 }, dst: { address: '198.19.1.100', port: 40001 } },
    });
  });

  it('reads UDP and IPv6 entries, an UNREPLIED flag in the middle, and the extended format', () => {
    const out = parseConntrack([
      'udp      17 29 src=198.18.0.2 dst=198.18.0.11 sport=5000 dport=53 [UNREPLIED] src=198.19.1.12 dst=198.18.0.2 sport=5353 dport=5000 mark=131074 use=1',
      'ipv6     10 tcp      6 118 TIME_WAIT src=fd00:0:0:1::2 dst=fd00:0:0:10::10 sport=1 dport=80 src=fd00:0:0:2::11 dst=fd00:0:0:2::100 sport=8080 dport=1 [ASSURED] mark=3 use=1',
      'icmp     1 29 src=198.18.0.2 dst=198.18.0.1 type=8 code=0 id=1 src=198.18.0.1 dst=198.18.0.2 type=0 code=0 id=1 mark=0 use=1',
      'conntrack v1.4.7 (conntrack-tools): 3 flow entries have been shown.',
    ].join('\n'));
    assert.equal(out.length, 2);
    assert.equal(out[0]!.state, 'UNREPLIED');
    assert.equal(out[0]!.unreplied, true);
    assert.equal(out[0]!.reply.src.port, 5353);
    assert.equal(out[1]!.state, 'TIME_WAIT');
    assert.equal(out[1]!.original.dst.address, 'fd00:0:0:10::10');
  });

  it('counts deleted entries from conntrack -D', () => {
    assert.equal(parseDeletedCount('conntrack v1.4.7 (conntrack-tools): 12 flow entries have been deleted.'), 12);
    assert.equal(parseDeletedCount('conntrack v1.4.7 (conntrack-tools): 0 flow entries have been deleted.'), 0);
  });
});
