import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { EXIT } from '@lbd/config';
import { FakeDataPlane } from '@lbd/dataplane/testing';
import { Agent, silentLogger } from '@lbd/director-agent';
import { startClusterPair, stopClusterPair, type PairMember } from '@lbd/director-agent/testing';
import { LoopbackCluster } from '@lbd/testkit';
import { runLbadm, type Run } from './lbadm-run.js';

/**
 * lbadm's management commands (server add|edit|drain|enable|remove, service add|edit|remove|list) through
 * its CLI entry point against real agents: a single director (FakeDataPlane, temp file and socket), and
 * two clustered directors against a real etcd on loopback, where the change goes through the cluster
 * config (compare-and-swap) and reaches both. A concurrent change between lbadm's read and its apply is
 * made by the agent itself, from inside its GetConfig answer, so the race happens every time.
 */

const LBADM_BIN = fileURLToPath(new URL('../../packages/lbadm/dist/bin/lbadm.js', import.meta.url));

const SERVICES = `services:
  - name: web   # the public site
    vip: 198.18.0.10
    port: 80
    mode: fullnat
    localAddresses: [198.18.2.10]
    realServers:
      - { address: 198.19.1.11, port: 8080, weight: 2 }
      - { address: 198.19.1.12, port: 8080, weight: 3 }   # the big one
  - name: app
    vip: 198.18.0.20
    port: 80
    mode: nat
    realServers:
      - { address: 198.19.1.21, port: 8080 }
`;

function lbadm(socket: string, ...argv: string[]): Promise<Run> {
  return runLbadm(['--socket', socket, ...argv]);
}

/** Programmed weights of one service, as `address:port=weight`. */
function weights(dp: FakeDataPlane, vip: string): string[] {
  const svc = dp.applied.services.find((s) => s.vip === vip);
  return (svc?.realServers ?? []).map((rs) => `${rs.address}:${rs.port}=${rs.weight}`);
}

/**
 * Makes the agent's next `times` GetConfig answers race: each answer is read, then `change` is applied
 * (as another operator would), then the now stale answer is returned.
 */
function raceGetConfig(agent: Agent, times: number, change: (n: number) => Promise<void>): void {
  const original = agent.admin.getConfig.bind(agent.admin);
  let n = 0;
  agent.admin.getConfig = async () => {
    const answer = await original();
    if (n < times) await change(++n);
    return answer;
  };
}

describe('lbadm server and service commands against a single lbd-agent', () => {
  let dir: string;
  let socket: string;
  let configPath: string;
  let dp: FakeDataPlane;
  let agent: Agent;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lbadm-manage-'));
    socket = join(dir, 'admin.sock');
    configPath = join(dir, 'lbd.yaml');
    await writeFile(configPath, SERVICES);
    dp = new FakeDataPlane();
    agent = await Agent.start({ configPath, dataPlane: dp, adminSocket: socket, watch: false, log: silentLogger });
  });
  afterEach(async () => {
    await agent.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('server drain sets weight 0 and keeps the weight in the file; enable restores it; status shows it', async () => {
    const r = await lbadm(socket, 'server', 'drain', 'web', '198.19.1.12:8080');
    assert.equal(r.code, EXIT.ok, r.err);
    assert.match(r.out, /^drained 198\.19\.1\.12:8080 of web: weight 0 \(established connections live on, no new ones\); lbadm server enable restores weight 3\n# fake: 2 services\napplied: 1 operation for 2 services\n$/);
    assert.deepEqual(weights(dp, '198.18.0.10'), ['198.19.1.11:8080=2', '198.19.1.12:8080=0']);
    const file = await readFile(configPath, 'utf8');
    assert.equal(file, SERVICES.replace('weight: 3 }   # the big one', 'weight: 3, drained: true } # the big one'), 'one line changed, comments kept');
    const status = await lbadm(socket, 'status');
    assert.match(status.out, /^ {2}-> 198\.19\.1\.12:8080 +0 +0 +0 +quiescent drained$/m);
    assert.match((await lbadm(socket, 'status', '--json')).out, /"configSource": "lbadm server drain web 198\.19\.1\.12:8080"/, 'the apply names the command');

    const again = await lbadm(socket, 'server', 'drain', '198.18.0.10:80/tcp', '198.19.1.12:8080');
    assert.deepEqual([again.code, again.out], [EXIT.ok, '198.19.1.12:8080 of web is already drained; nothing to change\n']);
    const enable = await lbadm(socket, 'server', 'enable', 'web', '198.19.1.12:8080');
    assert.equal(enable.code, EXIT.ok, enable.err);
    assert.deepEqual(weights(dp, '198.18.0.10'), ['198.19.1.11:8080=2', '198.19.1.12:8080=3']);
    // The one line lbadm wrote twice comes back with yaml's spacing before its comment.
    assert.equal(await readFile(configPath, 'utf8'), SERVICES.replace('weight: 3 }   # the big one', 'weight: 3 } # the big one'));
    // config show prints what runs now, comments and all, to bring an operator's own copy up to date.
    const show = await lbadm(socket, 'config', 'show');
    assert.deepEqual([show.code, show.out], [EXIT.ok, await readFile(configPath, 'utf8')]);
    assert.equal((JSON.parse((await lbadm(socket, 'config', 'show', '--json')).out) as { revision: number }).revision, agent.revision);
  });

  it('server add, edit and remove change the running config', async () => {
    assert.equal((await lbadm(socket, 'server', 'add', 'app', '198.19.1.22:8080', '--weight', '4')).code, EXIT.ok);
    assert.deepEqual(weights(dp, '198.18.0.20'), ['198.19.1.21:8080=1', '198.19.1.22:8080=4']);
    const edit = await lbadm(socket, 'server', 'edit', 'app', '198.19.1.22:8080', '--weight', '6');
    assert.equal(edit.code, EXIT.ok, edit.err);
    assert.match(edit.out, /^198\.19\.1\.22:8080 of app: weight 4 -> 6\n/);
    assert.deepEqual(weights(dp, '198.18.0.20'), ['198.19.1.21:8080=1', '198.19.1.22:8080=6']);
    assert.match(await readFile(configPath, 'utf8'), /- \{ address: 198\.19\.1\.22, port: 8080, weight: 6 \}\n$/);
    assert.equal((await lbadm(socket, 'server', 'remove', 'app', '198.19.1.21:8080')).code, EXIT.ok);
    assert.deepEqual(weights(dp, '198.18.0.20'), ['198.19.1.22:8080=6']);
  });

  it('service add, edit, list and remove', async () => {
    const add = await lbadm(socket, 'service', 'add', 'dns', '--vip', '198.18.0.53', '--port', '53', '--protocol', 'udp', '--mode', 'nat');
    assert.equal(add.code, EXIT.ok, add.err);
    assert.equal((await lbadm(socket, 'server', 'add', 'dns', '198.19.1.53:53')).code, EXIT.ok);
    assert.deepEqual(dp.applied.services.map((s) => `${s.name} ${s.vip}:${s.port}/${s.protocol} ${s.mode} ${s.scheduler}`), [
      'web 198.18.0.10:80/tcp fullnat wrr', 'app 198.18.0.20:80/tcp nat wrr', 'dns 198.18.0.53:53/udp nat wrr',
    ]);
    const edit = await lbadm(socket, 'service', 'edit', 'web', '--scheduler', 'mh', '--local-addresses', '198.18.2.10-198.18.2.11');
    assert.equal(edit.code, EXIT.ok, edit.err);
    const web = dp.applied.services[0]!;
    assert.deepEqual([web.scheduler, web.localAddresses?.last], ['mh', '198.18.2.11']);
    assert.equal((await lbadm(socket, 'service', 'list', '--names')).out, 'web\napp\ndns\n');
    const list = await lbadm(socket, 'service', 'list');
    assert.match(list.out, /^NAME SERVICE +MODE +SCHEDULER VIP GROUP REAL SERVERS\nweb +198\.18\.0\.10:80\/tcp +fullnat mh +default +2\n/);
    assert.equal((await lbadm(socket, 'service', 'remove', 'app')).code, EXIT.ok);
    assert.deepEqual(dp.applied.services.map((s) => s.name), ['web', 'dns']);
  });

  it('--dry-run prints the config diff and the rule changes, and changes nothing', async () => {
    const before = dp.applyCount;
    const r = await lbadm(socket, 'server', 'drain', 'web', '198.19.1.12:8080', '--dry-run');
    assert.equal(r.code, EXIT.ok, r.err);
    assert.equal(r.out, [
      'dry run: would have drained 198.19.1.12:8080 of web: weight 0 (established connections live on, no new ones); lbadm server enable restores weight 3',
      '--- running config (revision 1)',
      '+++ after: lbadm server drain web 198.19.1.12:8080',
      '@@ -6,7 +6,7 @@',
      '     localAddresses: [198.18.2.10]',
      '     realServers:',
      '       - { address: 198.19.1.11, port: 8080, weight: 2 }',
      '-      - { address: 198.19.1.12, port: 8080, weight: 3 }   # the big one',
      '+      - { address: 198.19.1.12, port: 8080, weight: 3, drained: true } # the big one',
      '   - name: app',
      '     vip: 198.18.0.20',
      '     port: 80',
      '# fake: 2 services',
      'dry run: 1 operation would be applied',
      'dry run: nothing was applied',
      '',
    ].join('\n'));
    assert.equal(dp.applyCount, before);
    assert.equal(await readFile(configPath, 'utf8'), SERVICES);
    const svc = await lbadm(socket, 'service', 'remove', 'app', '--dry-run', '--json');
    const j = JSON.parse(svc.out) as { applied: boolean; dryRun: boolean; diff: string };
    assert.deepEqual([j.applied, j.dryRun], [false, true]);
    assert.match(j.diff, /^- {2}- name: app$/m);
    assert.equal(agent.revision, 1);
  });

  it('bad inputs get clear errors and apply nothing', async () => {
    const before = dp.applyCount;
    const cases: [string[], number, RegExp][] = [
      [['server', 'drain', 'wbe', '198.19.1.12:8080'], EXIT.config, /^lbadm: SERVICE: "wbe" is not the name or key of a service in the running config; give one of: web, app\nnothing was applied\n$/],
      [['server', 'remove', 'app', '198.19.1.12:8080'], EXIT.config, /^lbadm: ADDR:PORT: "198\.19\.1\.12:8080" is not a real server of app; give one of: 198\.19\.1\.21:8080\n/],
      [['server', 'add', 'web', '198.19.1.11:8080'], EXIT.config, /is already a real server of web \(services\[0\]\.realServers\[0\]\); change it with lbadm server edit/],
      [['server', 'edit', 'web', '198.19.1.11:8080', '--weight', '70000'], EXIT.usage, /^lbadm: --weight: "70000" is not a weight \(a whole number from 0 to 65535\); give a whole number from 0 to 65535\n/],
      [['server', 'add', 'web', '[fd00::11]:8080'], EXIT.config,
        /^lbadm: the config after "lbadm server add web \[fd00::11\]:8080" is invalid \(1 problem\):\n {2}services\[0\]\.realServers\[2\]\.address: "fd00::11" is IPv6 but the vip is IPv4.*\nnothing was applied\n$/],
      [['server', 'add', 'app', '198.19.1.22:8080', '--health-port', '9000'], EXIT.config, /^lbadm: --health-port: 9000 overrides the port of app's health check, and app has none; give app a healthCheck first/],
      [['service', 'add', 'web2', '--vip', '198.18.0.10', '--port', '80', '--mode', 'nat'], EXIT.config, /services\[2\]: "198\.18\.0\.10:80\/tcp" is already defined by services\[0\] \("web"\)/],
      [['service', 'add', 'app', '--vip', '198.18.0.30', '--port', '80', '--mode', 'nat'], EXIT.config, /NAME: "app" is already a service \(services\[1\]\)/],
      [['service', 'edit', 'web', '--mode', 'nat'], EXIT.config, /services\[0\]\.localAddresses: \["198\.18\.2\.10"\] is set but nat mode does not translate source addresses; remove localAddresses/],
      [['service', 'add', 'db', '--vip', '198.18.0.300', '--port', '5432', '--mode', 'nat'], EXIT.config, /services\[2\]\.vip: "198\.18\.0\.300" is not an IPv4 or IPv6 address/],
    ];
    for (const [argv, code, message] of cases) {
      const r = await lbadm(socket, ...argv);
      assert.equal(r.code, code, `${argv.join(' ')}: ${r.err}`);
      assert.match(r.err, message, argv.join(' '));
    }
    assert.equal(dp.applyCount, before);
    assert.equal(await readFile(configPath, 'utf8'), SERVICES);
  });

  it('a change made between the read and the apply is caught by the revision swap; the edit is made again on top of it', async () => {
    // Another operator raises app's weight while lbadm drains web's server.
    raceGetConfig(agent, 1, async () => {
      const other = await agent.admin.applyText(SERVICES.replace('{ address: 198.19.1.21, port: 8080 }', '{ address: 198.19.1.21, port: 8080, weight: 9 }'), 'someone else', false);
      assert.ok(other.ok);
    });
    const r = await lbadm(socket, 'server', 'drain', 'web', '198.19.1.12:8080');
    assert.equal(r.code, EXIT.ok, r.err);
    assert.equal(r.err, 'lbadm: the config changed after revision 1 was read (someone else applied); editing the new one (attempt 2 of 3)\n');
    assert.deepEqual([...weights(dp, '198.18.0.10'), ...weights(dp, '198.18.0.20')], ['198.19.1.11:8080=2', '198.19.1.12:8080=0', '198.19.1.21:8080=9'], 'both changes hold');
    assert.equal(agent.revision, 3);
  });

  it('gives up after three lost swaps, saying so, with nothing of its own applied', async () => {
    raceGetConfig(agent, 3, async (n) => {
      const other = await agent.admin.applyText(SERVICES.replace('weight: 2', `weight: ${10 + n}`), `someone else ${n}`, false);
      assert.ok(other.ok);
    });
    const r = await lbadm(socket, 'server', 'drain', 'web', '198.19.1.12:8080');
    assert.equal(r.code, EXIT.failure);
    assert.match(r.err, /\nlbadm: the config changed between reading and applying 3 times in a row \(last: the running config is at revision 4, not 3 .*\); nothing was applied by this command/);
    assert.deepEqual(weights(dp, '198.18.0.10'), ['198.19.1.11:8080=13', '198.19.1.12:8080=3']);
  });

  it('the built bin\'s bash completion offers the agent\'s service names', async () => {
    const wrapper = join(dir, 'lbadm');
    await writeFile(wrapper, `#!/bin/sh\nexec '${process.execPath}' '${LBADM_BIN}' "$@"\n`);
    await chmod(wrapper, 0o755);
    const run = promisify(execFile);
    const script = join(dir, 'lbadm.bash');
    await writeFile(script, (await run(wrapper, ['completion', 'bash'])).stdout);
    const complete = async (...words: string[]): Promise<string> => (await run('bash', ['-c',
      `source '${script}'; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _lbadm_complete; echo "\${COMPREPLY[*]}"`])).stdout.trim();
    assert.equal(await complete(wrapper, '--socket', socket, 'server', 'drain', ''), 'web app');
    assert.equal(await complete(wrapper, '--socket', join(dir, 'none.sock'), 'server', 'drain', ''), '', 'no agent: nothing, quietly');
  });
});

describe('lbadm server and service commands in a cluster (real etcd on loopback, two directors)', function () {
  this.timeout(30_000);
  let cluster: LoopbackCluster;
  const members: PairMember[] = [];
  const agents: Agent[] = [];
  const dps: FakeDataPlane[] = [];
  let socket: string;

  before(async () => {
    cluster = await LoopbackCluster.open('lbadm-cluster');
    await startClusterPair(await cluster.writePairConfigs(), { adminSockets: true }, members);
    agents.push(...members.map((m) => m.agent));
    dps.push(...members.map((m) => m.dp));
    socket = members[0]!.socket!;
  });
  after(async () => {
    await stopClusterPair(members);
    await cluster?.close();
  });

  async function bothAt(revision: number): Promise<void> {
    for (let i = 0; i < 500 && !agents.every((a) => a.revision === revision); i++) await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(agents.map((a) => a.revision), [revision, revision]);
  }

  it('builds the cluster config from nothing, and every change reaches both directors with its author and command in the history', async () => {
    assert.equal((await lbadm(socket, 'service', 'list', '--names')).out, '', 'no cluster config yet');
    const add = await lbadm(socket, 'service', 'add', 'web', '--vip', '198.18.0.10', '--port', '80', '--mode', 'fullnat', '--local-addresses', '198.18.2.10');
    assert.equal(add.code, EXIT.ok, add.err);
    assert.match(add.out, /written to the cluster as config revision 1; every director applies it\n$/);
    for (const a of ['198.19.1.11:8080', '198.19.1.12:8080']) assert.equal((await lbadm(socket, 'server', 'add', 'web', a, '--weight', '3')).code, EXIT.ok);
    const drain = await lbadm(socket, 'server', 'drain', 'web', '198.19.1.12:8080');
    assert.equal(drain.code, EXIT.ok, drain.err);
    await bothAt(4);
    for (const dp of dps) assert.deepEqual(weights(dp, '198.18.0.10'), ['198.19.1.11:8080=3', '198.19.1.12:8080=0']);
    const history = JSON.parse((await lbadm(members[1]!.socket!, 'config', 'history', '--json')).out) as { versions: { revision: number; author: string; comment: string }[] };
    assert.deepEqual(history.versions.map((v) => [v.revision, v.comment]), [
      [1, 'lbadm service add web --vip 198.18.0.10 --port 80 --mode fullnat --local-addresses 198.18.2.10'],
      [2, 'lbadm server add web 198.19.1.11:8080 --weight 3'],
      [3, 'lbadm server add web 198.19.1.12:8080 --weight 3'],
      [4, 'lbadm server drain web 198.19.1.12:8080'],
    ]);
    assert.ok(history.versions.every((v) => /^.+@.+$/.test(v.author)), 'user@host');
  });

  it('--dry-run writes nothing to etcd', async () => {
    const r = await lbadm(socket, 'server', 'enable', 'web', '198.19.1.12:8080', '--dry-run');
    assert.equal(r.code, EXIT.ok, r.err);
    assert.match(r.out, /^-      - \{ address: 198\.19\.1\.12, port: 8080, weight: 3, drained: true \}\n\+      - \{ address: 198\.19\.1\.12, port: 8080, weight: 3 \}$/m);
    assert.match(r.out, /dry run: nothing was applied\n$/);
    assert.equal((await agents[0]!.admin.getConfig()).revision, 4);
  });

  it('a change through the other director between the read and the swap is caught and the edit made again on top of it', async () => {
    const [a, b] = agents as [Agent, Agent];
    raceGetConfig(a, 1, async () => {
      const cur = await b.admin.getConfig();
      const other = await b.admin.applyText((cur.configText ?? '').replace('port: 80\n', 'port: 80\n    scheduler: mh\n'), 'dir2 operator', false, { author: 'bob@dir2' });
      assert.ok(other.ok);
    });
    const r = await lbadm(socket, 'server', 'enable', 'web', '198.19.1.12:8080');
    assert.equal(r.code, EXIT.ok, r.err);
    assert.match(r.err, /the config changed after revision 4 was read/);
    await bothAt(6);
    for (const dp of dps) {
      assert.deepEqual(weights(dp, '198.18.0.10'), ['198.19.1.11:8080=3', '198.19.1.12:8080=3']);
      assert.equal(dp.applied.services[0]?.scheduler, 'mh', 'the other change holds');
    }
  });

  it('a cluster edit is validated as a cluster config and refused whole', async () => {
    const r = await lbadm(socket, 'server', 'edit', 'nope', '198.19.1.11:8080', '--weight', '1');
    assert.equal(r.code, EXIT.config);
    assert.match(r.err, /SERVICE: "nope" is not the name or key of a service in the running config; give one of: web\n/);
    assert.equal((await agents[0]!.admin.getConfig()).revision, 6);
  });
});
