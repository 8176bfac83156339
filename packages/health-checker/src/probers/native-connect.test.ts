import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { TcpProber } from './tcp.js';
import { NativeConnector } from './native-connect.js';

describe('NativeConnector (lbd-probe)', () => {
  it('a helper that dies ends the probes it held, naming why; until it may start again, probes connect through Node', async () => {
    const server = createServer((s) => s.on('error', () => {}));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    let starts = 0;
    // Takes the first request and exits: a helper that crashed.
    const prober = new TcpProber({
      connector: 'native',
      startHelper: () => { starts++; return spawn('sh', ['-c', 'read x; echo "lbd-probe: out of luck" >&2; exit 3'], { stdio: 'pipe' }); },
    });
    try {
      const first = await prober.probe({ kind: 'tcp', address: '127.0.0.1', port }, { timeoutMs: 5000 });
      assert.deepEqual([first.reason, first.message], ['error', `tcp connect to 127.0.0.1:${port}: lbd-probe exited with 3: lbd-probe: out of luck`]);
      // Not started again at once (a helper that cannot run must not cost a process per probe): Node connects.
      const second = await prober.probe({ kind: 'tcp', address: '127.0.0.1', port }, { timeoutMs: 5000 });
      assert.deepEqual([second.reason, starts], ['ok', 1]);
    } finally {
      prober.close();
      server.close();
    }
  });

  it('an answer for a cancelled probe is not taken for the next probe on its slot', async () => {
    const lines: string[] = [];
    let sawThree!: () => void;
    const threeSeen = new Promise<void>((r) => { sawThree = r; });
    // A fake helper answering every request with OK only after it saw the next one: the first answer
    // arrives after its probe was cancelled and its slot reused. It also says on stderr what it read.
    const c = new NativeConnector(() => {
      const child = spawn('sh', ['-c', 'while read op slot gen rest; do echo "$op $slot $gen" >&2; if [ "$op" = P ] && [ -n "$last" ]; then echo "$last OK"; fi; [ "$op" = P ] && last="$slot $gen"; done'], { stdio: 'pipe' });
      child.stderr.setEncoding('utf8').on('data', (t: string) => {
        lines.push(...t.trim().split('\n'));
        if (lines.length >= 3) sawThree();
      });
      return child;
    });
    const a = c.connect('127.0.0.1', 9, 1000)!;
    a.cancel();
    const b = c.connect('127.0.0.1', 9, 1000)!;
    const third = c.connect('127.0.0.1', 9, 1000)!;
    // "0 1 OK" (a's answer) arrives when b is asked and is dropped; "0 2 OK" is b's, sent when third is asked.
    assert.equal(await b.result, 'OK');
    // stderr and stdout are separate pipes: what it read may arrive after its answers.
    await threeSeen;
    assert.deepEqual(lines.slice(0, 3), ['P 0 1', 'C 0 1', 'P 0 2']);
    third.cancel();
    c.close();
  });

  it('the compiled prober: connected, refused, and a bad address, with the Node prober\'s words', async () => {
    const server = createServer((s) => s.on('error', () => {}));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    const prober = new TcpProber({ connector: 'native' });
    try {
      const up = await prober.probe({ kind: 'tcp', address: '127.0.0.1', port }, { timeoutMs: 1000 });
      assert.deepEqual([up.reason, up.message], ['ok', `tcp connect to 127.0.0.1:${port}: connected`]);
      await new Promise<void>((r) => server.close(() => r()));
      const refused = await prober.probe({ kind: 'tcp', address: '127.0.0.1', port }, { timeoutMs: 1000 });
      assert.deepEqual([refused.reason, refused.message], ['refused', `tcp connect to 127.0.0.1:${port}: refused`]);
      const bad = await prober.probe({ kind: 'tcp', address: 'not-an-address', port }, { timeoutMs: 1000 });
      assert.deepEqual([bad.reason, bad.message], ['error', `tcp connect to not-an-address:${port}: EINVAL`]);
    } finally {
      prober.close();
      server.close();
    }
  });
});
