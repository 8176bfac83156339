import assert from 'node:assert/strict';
import { parseHostPort, parseTestClientArgs, parseTestServerArgs, UsageError } from './args.js';

describe('testkit args', () => {
  describe('parseHostPort', () => {
    const good: [string, string, number, 4 | 6][] = [
      ['198.18.0.10:80', '198.18.0.10', 80, 4],
      ['[fd00:0:0:1::10]:9000', 'fd00:0:0:1::10', 9000, 6],
      ['[::1]:65535', '::1', 65535, 6],
    ];
    for (const [text, host, port, family] of good) {
      it(`accepts ${text}`, () => assert.deepEqual(parseHostPort(text), { host, port, family }));
    }
    for (const bad of ['198.18.0.10', 'fd00::10:80', '[198.18.0.10]:80', '198.18.0.300:80', '198.18.0.10:0', '198.18.0.10:70000', 'host:80', '']) {
      it(`rejects ${JSON.stringify(bad)}`, () => assert.throws(() => parseHostPort(bad), UsageError));
    }
  });

  describe('parseTestServerArgs', () => {
    it('takes the ports and defaults to dual-stack', () => {
      assert.deepEqual(parseTestServerArgs(['--name', 'rs1', '--http', '8080', '--stream=9000', '--udp', '5353']),
        { name: 'rs1', bind: '::', http: 8080, stream: 9000, udp: 5353 });
    });
    it('takes --bind', () => {
      assert.equal(parseTestServerArgs(['--name', 'rs1', '--http', '80', '--bind', '198.19.1.11']).bind, '198.19.1.11');
    });
    const bad: [string[], RegExp][] = [
      [['--http', '80'], /--name is required/],
      [['--name', 'rs 1', '--http', '80'], /--name "rs 1" must be/],
      [['--name', 'rs1'], /nothing to serve/],
      [['--name', 'rs1', '--http', '0'], /--http 0 is out of range \(1 to 65535\)/],
      [['--name', 'rs1', '--http', 'x'], /--http "x" is not a whole number/],
      [['--name', 'rs1', '--http'], /--http needs a value/],
      [['--name', 'rs1', '--http', '80', '--http', '81'], /--http given twice/],
      [['--name', 'rs1', '--htp', '80'], /unknown option --htp/],
      [['--name', 'rs1', '--http', '80', '--bind', 'any'], /--bind "any" is not an IPv4 or IPv6 address/],
      [['rs1'], /unexpected argument "rs1"/],
    ];
    for (const [argv, message] of bad) {
      it(`rejects ${argv.join(' ')}`, () => assert.throws(() => parseTestServerArgs(argv), (e: Error) => e instanceof UsageError && message.test(e.message)));
    }
  });

  describe('parseTestClientArgs', () => {
    it('parses http with defaults', () => {
      const c = parseTestClientArgs(['http', '--url', 'http://198.18.0.10/', '--count', '600']);
      assert.equal(c.mode, 'http');
      if (c.mode !== 'http') return;
      assert.equal(c.url.href, 'http://198.18.0.10/');
      assert.deepEqual([c.count, c.concurrency, c.newConnection, c.timeoutMs], [600, 1, false, 2000]);
    });
    it('parses http with an IPv6 URL and options', () => {
      const c = parseTestClientArgs(['http', '--url', 'http://[fd00:0:0:1::10]:80/x', '--count', '5', '--concurrency', '4', '--new-connection', '--timeout-ms', '500']);
      assert.ok(c.mode === 'http' && c.url.hostname === '[fd00:0:0:1::10]' && c.concurrency === 4 && c.newConnection && c.timeoutMs === 500);
    });
    it('parses stream with the 60 s default bound', () => {
      assert.deepEqual(parseTestClientArgs(['stream', '--target', '198.18.0.10:9000', '--connections', '50']), {
        mode: 'stream', target: { host: '198.18.0.10', port: 9000, family: 4 }, connections: 50, durationMs: 60_000, timeoutMs: 2000, stallMs: 1000,
      });
    });
    it('parses udp and tcp-once with a source port', () => {
      assert.deepEqual(parseTestClientArgs(['udp', '--target', '[fd00:0:0:1::10]:53', '--count', '3', '--source-port', '40000']), {
        mode: 'udp', target: { host: 'fd00:0:0:1::10', port: 53, family: 6 }, count: 3, sourcePort: 40000, timeoutMs: 2000,
      });
      const t = parseTestClientArgs(['tcp-once', '--target', '198.18.0.10:9000', '--count', '20']);
      assert.ok(t.mode === 'tcp-once' && t.sourcePort === undefined && t.count === 20);
    });
    it('parses udp-flows with defaults and a first port', () => {
      assert.deepEqual(parseTestClientArgs(['udp-flows', '--target', '198.18.0.10:5353', '--flows', '100']), {
        mode: 'udp-flows', target: { host: '198.18.0.10', port: 5353, family: 4 }, flows: 100,
        intervalMs: 50, durationMs: 60_000, timeoutMs: 500, maxRetries: 20,
      });
      const c = parseTestClientArgs(['udp-flows', '--target', '198.18.0.10:5353', '--flows', '10', '--first-port', '41000', '--interval-ms', '20',
        '--duration-ms', '5000', '--timeout-ms', '300', '--max-retries', '5']);
      assert.ok(c.mode === 'udp-flows' && c.firstPort === 41000 && c.intervalMs === 20 && c.durationMs === 5000 && c.timeoutMs === 300 && c.maxRetries === 5);
    });
    it('parses http-paced: the drill load, with its bounds', () => {
      assert.deepEqual(parseTestClientArgs(['http-paced', '--url', 'http://198.18.0.10/', '--interval-ms', '5', '--timeout-ms', '500', '--duration-ms', '40000',
        '--max-in-flight', '200', '--max-requests', '8010']), {
        mode: 'http-paced', url: new URL('http://198.18.0.10/'), intervalMs: 5, timeoutMs: 500, durationMs: 40_000, maxInFlight: 200, maxRequests: 8010,
      });
      const d = parseTestClientArgs(['http-paced', '--url', 'http://198.18.0.10/', '--interval-ms', '10', '--duration-ms', '1000']);
      assert.ok(d.mode === 'http-paced' && d.timeoutMs === 2000 && d.maxInFlight === 200 && d.maxRequests === 101, JSON.stringify(d));
    });
    const bad: [string[], RegExp][] = [
      [[], /a mode is required/],
      [['http-paced', '--url', 'http://198.18.0.10/'], /--interval-ms is required/],
      [['http-paced', '--url', 'http://198.18.0.10/', '--interval-ms', '5', '--max-in-flight', '0'], /--max-in-flight 0 is out of range/],
      [['udp-flows', '--target', '198.18.0.10:5353'], /--flows is required/],
      [['udp-flows', '--target', '198.18.0.10:5353', '--flows', '1001'], /--flows 1001 is out of range \(1 to 1000\)/],
      [['udp-flows', '--target', '198.18.0.10:5353', '--flows', '10', '--first-port', '65530'], /runs past port 65535 \(the last flow would use 65539\)/],
      [['udp-flows', '--target', '198.18.0.10:5353', '--flows', '1', '--duration-ms', '4000000'], /--duration-ms 4000000 is out of range/],
      [['ftp'], /unknown mode "ftp"/],
      [['http', '--count', '1'], /--url is required/],
      [['http', '--url', 'nope', '--count', '1'], /is not a URL/],
      [['http', '--url', 'https://198.18.0.10/', '--count', '1'], /only http:\/\//],
      [['http', '--url', 'http://198.18.0.10/'], /--count is required/],
      [['http', '--url', 'http://198.18.0.10/', '--count', '2000000'], /--count 2000000 is out of range \(1 to 1000000\)/],
      [['http', '--url', 'http://198.18.0.10/', '--count', '1', '--new-connection=yes'], /--new-connection takes no value/],
      [['stream', '--connections', '1'], /--target is required/],
      [['stream', '--target', '198.18.0.10:9000', '--connections', '0'], /--connections 0 is out of range/],
      [['stream', '--target', '198.18.0.10:9000', '--connections', '1', '--duration-ms', '4000000'], /--duration-ms 4000000 is out of range/],
      [['udp', '--target', '198.18.0.10:53', '--count', '1', '--source-port', '0'], /--source-port 0 is out of range/],
      [['tcp-once', '--target', '198.18.0.10:9000', '--count', '1', '--connections', '2'], /unknown option --connections/],
    ];
    for (const [argv, message] of bad) {
      it(`rejects ${argv.join(' ') || '(nothing)'}`, () => assert.throws(() => parseTestClientArgs(argv), (e: Error) => e instanceof UsageError && message.test(e.message)));
    }
  });
});
