import assert from 'node:assert/strict';
import { parseSynProxyStats } from './parse.js';

describe('parseSynProxyStats', () => {
  it('sums each column over the CPUs, found by name', () => {
    const text = [
      'entries\t\tsyn_received\tcookie_invalid\tcookie_valid\tcookie_retrans\tconn_reopened',
      '00000000\t0000000a\t00000009\t00000007\t00000001\t00000000',
      '00000000\t000000ff\t00000001\t00000003\t00000000\t00000000',
    ].join('\n');
    assert.deepEqual(parseSynProxyStats(text), { synReceived: 0x0a + 0xff, cookieValid: 10, cookieInvalid: 10, cookieRetransmitted: 1 });
  });

  it('is null for text without the header (not the synproxy table)', () => {
    assert.equal(parseSynProxyStats('entries searched found\n00000000 00000001 00000002\n'), null);
    assert.equal(parseSynProxyStats(''), null);
  });
});
