import assert from 'node:assert/strict';
import { HEALTH_DEFAULTS, type HealthCheck } from './types.js';
import { formatProblem, validateConfig } from './validate.js';

/** Health checks, fallback and slow start: the service's check merged with each real server's overrides. */

function config(service: Record<string, unknown>, realServers: Array<Record<string, unknown>> = [{ address: '198.19.1.11', port: 8080 }]) {
  return { services: [{ name: 'web', vip: '198.18.0.10', port: 80, mode: 'nat', realServers, ...service }] };
}

const HTTP: HealthCheck = {
  kind: 'http', intervalMs: 1000, timeoutMs: 500, rise: 2, fall: 3, jitterMs: 100, startState: 'up', address: null, port: null,
  send: null, expect: null, method: 'GET', path: '/', host: null, expectStatus: HEALTH_DEFAULTS.expectStatus, bodyPattern: null,
  tlsVerify: true, sni: null, command: null, flapDamping: HEALTH_DEFAULTS.flapDamping,
};

describe('health check config', () => {
  const valid: Array<{ name: string; raw: unknown; want: Array<HealthCheck | null>; service?: Record<string, unknown> }> = [
    { name: 'no check: real servers are not checked', raw: config({}), want: [null] },
    { name: 'an http check with every default', raw: config({ healthCheck: { kind: 'http' } }), want: [HTTP] },
    {
      name: 'per-server overrides merge onto the service check',
      raw: config({ healthCheck: { kind: 'http', path: '/healthz', intervalMs: 2000, expectStatus: [200, '300-302'] } },
        [{ address: '198.19.1.11', port: 8080 }, { address: '198.19.1.12', port: 8080, healthCheck: { port: 9090, fall: 5, startState: 'down' } }]),
      want: [
        { ...HTTP, path: '/healthz', intervalMs: 2000, jitterMs: 200, expectStatus: [[200, 200], [300, 302]] },
        { ...HTTP, path: '/healthz', intervalMs: 2000, jitterMs: 200, expectStatus: [[200, 200], [300, 302]], port: 9090, fall: 5, startState: 'down' },
      ],
    },
    {
      name: 'a server with a check of another kind inherits timings, not the other kind\'s fields',
      raw: config({ healthCheck: { kind: 'http', path: '/x', rise: 4 } }, [{ address: '198.19.1.11', port: 8080, healthCheck: { kind: 'tcp', send: 'PING\r\n', expect: '+PONG' } }]),
      want: [{ ...HTTP, kind: 'tcp', rise: 4, send: 'PING\r\n', expect: '+PONG' }],
    },
    {
      name: 'flap damping: defaults, a service setting, a server override merged field by field',
      raw: config({ healthCheck: { kind: 'tcp', flapDamping: { maxTransitions: 0 } } },
        [{ address: '198.19.1.11', port: 8080 }, { address: '198.19.1.12', port: 8080, healthCheck: { flapDamping: { maxTransitions: 6, holdDownMs: 1000 } } }]),
      want: [
        { ...HTTP, kind: 'tcp', flapDamping: { ...HEALTH_DEFAULTS.flapDamping, maxTransitions: 0 } },
        { ...HTTP, kind: 'tcp', flapDamping: { ...HEALTH_DEFAULTS.flapDamping, maxTransitions: 6, holdDownMs: 1000 } },
      ],
    },
    {
      name: 'exec and udp checks, a health address',
      raw: config({}, [
        { address: '198.19.1.11', port: 8080, healthCheck: { kind: 'exec', command: ['/bin/true'], intervalMs: 5000, timeoutMs: 2000 } },
        { address: '198.19.1.12', port: 8080, healthCheck: { kind: 'udp', send: 'ping', address: '198.19.2.12', port: 5353 } },
      ]),
      want: [
        { ...HTTP, kind: 'exec', command: ['/bin/true'], intervalMs: 5000, timeoutMs: 2000, jitterMs: 500 },
        { ...HTTP, kind: 'udp', send: 'ping', address: '198.19.2.12', port: 5353 },
      ],
    },
  ];
  for (const c of valid) {
    it(c.name, () => {
      const r = validateConfig(c.raw);
      assert.ok(r.ok, r.ok ? '' : r.problems.map(formatProblem).join('\n'));
      assert.deepEqual(r.config.services[0]!.realServers.map((rs) => rs.healthCheck), c.want);
    });
  }

  it('fallback, onDown and slow start default to drop, quiesce and 0; a sorry server is typed', () => {
    const d = validateConfig(config({}));
    assert.ok(d.ok);
    assert.deepEqual([d.config.services[0]!.fallback, d.config.services[0]!.onDown, d.config.services[0]!.slowStartMs, d.config.services[0]!.sorryServer], ['drop', 'quiesce', 0, null]);
    const s = validateConfig(config({ fallback: 'sorry-server', sorryServer: { address: '198.19.1.99' }, onDown: 'remove', slowStartMs: 10000 }));
    assert.ok(s.ok);
    assert.deepEqual(s.config.services[0]!.sorryServer, { address: '198.19.1.99', port: 80 });
    assert.equal(s.config.services[0]!.onDown, 'remove');
  });

  const invalid: Array<{ name: string; raw: unknown; want: string[] }> = [
    {
      name: 'timeout not below the interval',
      raw: config({ healthCheck: { kind: 'tcp', intervalMs: 1000, timeoutMs: 1000 } }),
      want: ['services[0].healthCheck.timeoutMs: 1000 must be less than intervalMs (1000); lower timeoutMs below 1000 or raise intervalMs above 1000'],
    },
    {
      name: 'unknown kind',
      raw: config({ healthCheck: { kind: 'smtp' } }),
      want: ['services[0].healthCheck.kind: "smtp" is not a supported health check kind; use one of: tcp, http, https, icmp, udp, exec'],
    },
    {
      name: 'a check with no kind anywhere',
      raw: config({}, [{ address: '198.19.1.11', port: 8080, healthCheck: { intervalMs: 2000 } }]),
      want: ['services[0].realServers[0].healthCheck.kind: a health check kind is required; set it to one of: tcp, http, https, icmp, udp, exec'],
    },
    {
      name: 'udp without send, exec without command',
      raw: config({}, [
        { address: '198.19.1.11', port: 8080, healthCheck: { kind: 'udp' } },
        { address: '198.19.1.12', port: 8080, healthCheck: { kind: 'exec' } },
      ]),
      want: [
        'services[0].realServers[0].healthCheck.send: a udp check needs something to send; add send: the datagram the real server answers, and optionally expect',
        'services[0].realServers[1].healthCheck.command: an exec check needs a command; add command: [/path/to/check, arg...]; exit status 0 means up',
      ],
    },
    {
      name: 'http fields that are wrong',
      raw: config({ healthCheck: { kind: 'http', path: 'healthz', bodyPattern: '(ok', expectStatus: [200, '600-700'], method: 'FETCH' } }),
      want: [
        'services[0].healthCheck.method: "FETCH" is not a supported HTTP method; use one of: GET, HEAD, POST, PUT, OPTIONS',
        'services[0].healthCheck.path: "healthz" is not an HTTP path (it starts with "/" and has no spaces); write a path such as /healthz',
        'services[0].healthCheck.expectStatus[1]: "600-700" is not an HTTP status code (100-599) or a "first-last" range of them; write a list of status codes and ranges, e.g. [200, "300-399"]',
        'services[0].healthCheck.bodyPattern: "(ok" is not a valid regular expression (/(ok/: Unterminated group); escape special characters with \\, or write a plain word',
      ],
    },
    {
      name: 'a field another kind of check uses',
      raw: config({ healthCheck: { kind: 'tcp', path: '/healthz', tlsVerify: false } }),
      want: [
        'services[0].healthCheck.path: "/healthz" is not used by tcp checks (only by http, https); remove it, or use kind: http',
        'services[0].healthCheck.tlsVerify: false is not used by tcp checks (only by https); remove it, or use kind: https',
      ],
    },
    {
      name: 'jitter over half the interval, rise out of range',
      raw: config({ healthCheck: { kind: 'icmp', jitterMs: 600, rise: 0 } }),
      want: [
        'services[0].healthCheck.rise: 0 is not a count of successes (a whole number from 1 to 100); give a whole number, e.g. 2',
        'services[0].healthCheck.jitterMs: 600 must be at most half of intervalMs (1000); lower jitterMs to 500 or less',
      ],
    },
    {
      name: 'sorry server missing, or set without its fallback; bad onDown and slow start',
      raw: { services: [
        config({ fallback: 'sorry-server' }).services[0],
        { ...config({ sorryServer: { address: '198.19.1.99', port: 80 }, onDown: 'delete', slowStartMs: -1 }).services[0], name: 'web2', port: 81 },
      ] },
      want: [
        'services[0].sorryServer: fallback sorry-server needs a sorry server; add sorryServer: {address: ..., port: ...}, or choose another fallback: drop, reject, keep-last',
        'services[1].onDown: "delete" is not a supported onDown action; use one of: quiesce, remove',
        'services[1].slowStartMs: -1 is not a slow-start time (whole milliseconds from 0 to 3600000, 0 = off); give whole milliseconds, e.g. 10000, or 0 to restore full weight at once',
        'services[1].sorryServer: {"address":"198.19.1.99","port":80} is set but fallback is drop; set fallback: sorry-server to use it, or remove sorryServer',
      ],
    },
    {
      name: 'flap damping out of range',
      raw: config({ healthCheck: { kind: 'tcp', flapDamping: { holdDownMs: 10000, maxHoldDownMs: 5000, decay: 1 } } }),
      want: [
        'services[0].healthCheck.flapDamping.decay: 1 is not a known field; known fields: windowMs, maxTransitions, holdDownMs, maxHoldDownMs',
        'services[0].healthCheck.flapDamping.maxHoldDownMs: 5000 must be at least holdDownMs (10000); raise maxHoldDownMs to 10000 or more',
      ],
    },
    {
      name: 'a sorry server that is also a real server',
      raw: config({ fallback: 'sorry-server', sorryServer: { address: '198.19.1.11', port: 8080 } }),
      want: ['services[0].sorryServer: "198.19.1.11:8080" is also one of the real servers; give a sorry server that is not in realServers (it only serves when they are all down)'],
    },
  ];
  for (const c of invalid) {
    it(`rejects: ${c.name}`, () => {
      const r = validateConfig(c.raw);
      assert.equal(r.ok, false);
      if (!r.ok) assert.deepEqual(r.problems.map(formatProblem), c.want);
    });
  }
});
