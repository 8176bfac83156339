import assert from 'node:assert/strict';
import { HEALTH_DEFAULTS, type HealthCheck } from '@lbd/config';
import { checkSpecFor } from './from-config.js';
import { DEFAULT_FLAP_POLICY } from './health.js';

/** A check as config's validation produces it (defaults applied, nulls for what is unset). */
function hc(over: Partial<HealthCheck>): HealthCheck {
  return {
    ...HEALTH_DEFAULTS, kind: 'tcp', jitterMs: 0, address: null, port: null, send: null, expect: null, host: null,
    bodyPattern: null, sni: null, command: null, ...over,
  };
}

const RS = { address: '198.19.1.12', port: 8080 };

describe('checkSpecFor (config → CheckSpec)', () => {
  it('tcp: the real server\'s address and port, timings and thresholds from config', () => {
    const spec = checkSpecFor(RS, hc({ kind: 'tcp' }));
    const { key, ...rest } = spec;
    assert.deepEqual(rest, {
      target: { kind: 'tcp', address: '198.19.1.12', port: 8080 },
      intervalMs: 1000, timeoutMs: 500, jitterMs: 0, thresholds: { rise: 2, fall: 3 }, flap: DEFAULT_FLAP_POLICY, startState: 'up',
    });
    assert.match(key, /^tcp 198\.19\.1\.12:8080 [0-9a-f]{8}$/);
  });

  it('a health port or address replaces the real server\'s', () => {
    const spec = checkSpecFor(RS, hc({ kind: 'http', address: '198.19.1.13', port: 9090, path: '/healthz', host: 'www.lbd.test' }));
    assert.deepEqual(spec.target, {
      kind: 'http', address: '198.19.1.13', port: 9090, method: 'GET', path: '/healthz', expectStatus: [[200, 399]], host: 'www.lbd.test',
    });
  });

  it('https carries TLS verification and SNI; udp send/expect; exec argv; icmp no port', () => {
    assert.deepEqual(checkSpecFor(RS, hc({ kind: 'https', tlsVerify: false, sni: 'rs.lbd.test', bodyPattern: 'ok' })).target, {
      kind: 'https', address: '198.19.1.12', port: 8080, tlsVerify: false, sni: 'rs.lbd.test', method: 'GET', path: '/',
      expectStatus: [[200, 399]], bodyPattern: 'ok',
    });
    assert.deepEqual(checkSpecFor(RS, hc({ kind: 'udp', send: 'PING', expect: 'PONG' })).target, {
      kind: 'udp', address: '198.19.1.12', port: 8080, send: 'PING', expect: 'PONG',
    });
    assert.deepEqual(checkSpecFor(RS, hc({ kind: 'exec', command: ['/usr/lib/lbd/check', '--quick'] })).target, {
      kind: 'exec', address: '198.19.1.12', port: 8080, command: ['/usr/lib/lbd/check', '--quick'],
    });
    assert.deepEqual(checkSpecFor(RS, hc({ kind: 'icmp' })).target, { kind: 'icmp', address: '198.19.1.12', port: 0 });
  });

  it('the same check of the same server from two services shares a key; any difference does not', () => {
    const a = checkSpecFor(RS, hc({ kind: 'http', path: '/healthz' }));
    assert.equal(checkSpecFor({ ...RS }, hc({ kind: 'http', path: '/healthz' })).key, a.key);
    assert.notEqual(checkSpecFor(RS, hc({ kind: 'http', path: '/ready' })).key, a.key);
    assert.notEqual(checkSpecFor(RS, hc({ kind: 'http', path: '/healthz', fall: 2 })).key, a.key);
    assert.notEqual(checkSpecFor({ ...RS, port: 8081 }, hc({ kind: 'http', path: '/healthz' })).key, a.key);
    // icmp checks of one address share, whatever port the servers listen on.
    assert.equal(checkSpecFor(RS, hc({ kind: 'icmp' })).key, checkSpecFor({ ...RS, port: 443 }, hc({ kind: 'icmp' })).key);
    // Fields of other kinds do not split a tcp check.
    assert.equal(checkSpecFor(RS, hc({ kind: 'tcp', path: '/x', tlsVerify: false })).key, checkSpecFor(RS, hc({ kind: 'tcp' })).key);
  });
});
