import assert from 'node:assert/strict';
import { EventEmitter, once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EXIT } from '@lbd/config';
import { FakeDataPlane } from '@lbd/dataplane/testing';
import type { Agent } from './agent.js';
import { parseAgentArgs, run } from './main.js';

const GOOD = 'services:\n  - { name: web, vip: 198.18.0.10, port: 80, mode: nat, realServers: [{ address: 198.19.1.11, port: 8080 }] }\n';
const BAD = 'services:\n  - { name: web, vip: 198.18.0.300, port: 0, mode: nat, realServers: [{ address: 198.19.1.11, port: 8080, weight: -1 }] }\n';

describe('parseAgentArgs', () => {
  const cases: [string[], string][] = [
    [['--config', '/etc/lbd/lbd.yaml'], 'run /etc/lbd/lbd.yaml - info'],
    [['--config=/c.yaml', '--admin-socket', '/tmp/a.sock', '--log-level', 'debug'], 'run /c.yaml /tmp/a.sock debug'],
    [['--help'], 'help'],
    [['--version'], 'version'],
    [['--config', '/c', '--log-levl', 'debug'], 'usage unknown flag --log-levl; did you mean --log-level?'],
    [[], 'usage --config PATH is required'],
    [['--config'], 'usage --config needs a value'],
    [['--config', '/c', '--verbose'], 'usage unknown flag --verbose'],
    [['--config', '/c', 'extra'], 'usage unexpected argument "extra"'],
    [['--config', '/c', '--log-level', 'trace'], 'usage --log-level: "trace" is not info or debug'],
    [['--config', '/c', '--admin-socket', 'rel.sock'], 'usage --admin-socket: "rel.sock" is not an absolute path'],
  ];
  for (const [argv, want] of cases) {
    it(`${argv.join(' ') || '(nothing)'} -> ${want}`, () => {
      const p = parseAgentArgs(argv);
      const got = p.kind === 'run' ? `run ${p.args.configPath} ${p.args.adminSocket ?? '-'} ${p.args.logLevel}`
        : p.kind === 'usage' ? `usage ${p.message}` : p.kind;
      assert.equal(got, want);
    });
  }
});

describe('lbd-agent run()', () => {
  let dir: string;
  beforeEach(async () => { dir = await mkdtemp(join(tmpdir(), 'lbd-main-')); });
  afterEach(async () => { await rm(dir, { recursive: true, force: true }); });

  it('exits 78 on a bad config, printing every problem, before a data plane exists', async () => {
    await writeFile(join(dir, 'lbd.yaml'), BAD);
    let created = false;
    const errors: string[] = [];
    const code = await run(['--config', join(dir, 'lbd.yaml'), '--admin-socket', join(dir, 'a.sock')], {
      createDataPlane: async () => { created = true; return new FakeDataPlane(); },
      writeError: (t) => errors.push(t), writeLog: () => {}, signals: new EventEmitter(),
    });
    assert.equal(code, EXIT.config);
    assert.equal(created, false);
    assert.match(errors.join('\n'), /is invalid \(3 problems\):\n {2}services\[0\]\.vip: .*\n {2}services\[0\]\.port: .*\n {2}services\[0\]\.realServers\[0\]\.weight: /);
  });

  // Each environment variable the agent reads: a value it cannot use stops it, naming the variable, the value and the choices.
  for (const [name, value, said] of [
    ['LBD_CTNETLINK', 'fast', 'it names the ctnetlink helper (conntrack events and writes), native or perl; unset it for the default'],
    ['LBD_CTNETLINK_WRITER', 'addon', 'it names where connection sync\'s writes to conntrack go, in-process or helper; unset it for the default'],
    ['LBD_TCP_PROBER', 'c', 'it names how tcp connect checks connect, native (lbd-probe) or node; unset it for the default'],
  ] as const) {
    it(`exits 78 on an ${name} it cannot use, naming the choices, before a data plane exists`, async () => {
      await writeFile(join(dir, 'lbd.yaml'), GOOD);
      let created = false;
      const errors: string[] = [];
      const code = await run(['--config', join(dir, 'lbd.yaml'), '--admin-socket', join(dir, 'a.sock')], {
        createDataPlane: async () => { created = true; return new FakeDataPlane(); },
        writeError: (t) => errors.push(t), writeLog: () => {}, signals: new EventEmitter(), env: { [name]: value },
      });
      assert.equal(code, EXIT.config);
      assert.equal(created, false);
      assert.equal(errors.join('\n'), `lbd-agent: ${name} is "${value}": ${said}`);
    });
  }

  it('exits 64 with the usage line on a bad flag', async () => {
    const errors: string[] = [];
    assert.equal(await run(['--bogus'], { writeError: (t) => errors.push(t) }), EXIT.usage);
    assert.match(errors[0]!, /^lbd-agent: unknown flag --bogus\nusage: lbd-agent --config PATH/);
  });

  it('reloads on SIGHUP and exits 0 on SIGTERM without touching the data plane', async () => {
    const configPath = join(dir, 'lbd.yaml');
    await writeFile(configPath, GOOD);
    const dp = new FakeDataPlane();
    const signals = new EventEmitter();
    const logs: string[] = [];
    let agent: Agent | undefined;
    const started = new Promise<void>((resolve) => {
      void run(['--config', configPath, '--admin-socket', join(dir, 'a.sock')], {
        createDataPlane: async () => dp, writeLog: (l) => logs.push(l), signals,
        onStarted: (a) => { agent = a; resolve(); },
      }).then((code) => signals.emit('exited', code));
    });
    await started;
    assert.equal(dp.applyCount, 1);
    const reloaded = once(agent!, 'apply');
    await writeFile(configPath, GOOD.replace('8080', '8081'));
    signals.emit('SIGHUP');
    await reloaded;
    assert.equal(dp.applied.services[0]?.realServers[0]?.port, 8081);
    const applies = dp.applyCount;
    const exited = once(signals, 'exited');
    signals.emit('SIGTERM');
    assert.deepEqual(await exited, [EXIT.ok]);
    assert.equal(dp.applyCount, applies, 'stopping applies nothing');
    assert.equal(signals.listenerCount('SIGHUP'), 0, 'run() removes its signal handlers');
    const msgs = logs.map((l) => (JSON.parse(l) as { msg: string }).msg);
    assert.ok(msgs.includes('started') && msgs.includes('shutting down'), msgs.join(', '));
  });
});
