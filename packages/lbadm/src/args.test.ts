import assert from 'node:assert/strict';
import { parseArgs, UsageError } from './args.js';

describe('parseArgs', () => {
  const ok: [string[], Record<string, string | undefined>, string][] = [
    [['status'], {}, 'status /run/lbd/admin.sock json=false'],
    [['status'], { LBD_ADMIN_SOCKET: '/tmp/env.sock' }, 'status /tmp/env.sock json=false'],
    [['--socket', '/tmp/a.sock', 'status'], { LBD_ADMIN_SOCKET: '/tmp/env.sock' }, 'status /tmp/a.sock json=false'],
    [['status', '--json', '--socket=/tmp/b.sock'], {}, 'status /tmp/b.sock json=true'],
    [['stats'], {}, 'stats /run/lbd/admin.sock json=false rate=false interval=1000'],
    [['stats', '--rate', '--interval-ms', '250'], {}, 'stats /run/lbd/admin.sock json=false rate=true interval=250'],
    [['conns', '--service', 'web'], {}, 'conns /run/lbd/admin.sock json=false service=web'],
    [['conns', '--service=198.18.0.10:80/tcp'], {}, 'conns /run/lbd/admin.sock json=false service=198.18.0.10:80/tcp'],
    [['health'], {}, 'health /run/lbd/admin.sock json=false'],
    [['health', '--watch', '--json', '--service', 'web'], {}, 'health /run/lbd/admin.sock json=true service=web watch'],
    [['validate', '-f', 'lbd.yaml'], {}, 'validate /run/lbd/admin.sock json=false file=lbd.yaml'],
    [['apply', '--file', 'x.yaml', '--dry-run'], {}, 'apply /run/lbd/admin.sock json=false file=x.yaml dry-run'],
    [['doctor', '--json'], {}, 'doctor /run/lbd/admin.sock json=true'],
    [['--help'], {}, 'help /run/lbd/admin.sock json=false'],
    [['apply', '-h'], {}, 'help /run/lbd/admin.sock json=false'],
    [['cluster', 'status', '--json'], {}, 'cluster /run/lbd/admin.sock json=true args=status'],
    [['config', 'rollback', '3'], {}, 'config /run/lbd/admin.sock json=false args=rollback,3'],
    [['failover', '--group', 'default', '--to', 'dir2'], {}, 'failover /run/lbd/admin.sock json=false group=default to=dir2'],
    [['apply', '-f', 'x', '--expect-revision', '0'], {}, 'apply /run/lbd/admin.sock json=false file=x expect=0'],
    [['drill', 'failover', '--mode', 'box-death', '--count', '20'], {}, 'drill /run/lbd/admin.sock json=false args=failover mode=box-death count=20'],
  ];
  for (const [argv, env, want] of ok) {
    it(`${argv.join(' ')} -> ${want}`, () => {
      const i = parseArgs(argv, env);
      const parts = [i.command, i.socket, `json=${i.json}`];
      if (i.command === 'stats') parts.push(`rate=${i.rate}`, `interval=${i.intervalMs}`);
      if (i.service !== undefined) parts.push(`service=${i.service}`);
      if (i.file !== undefined) parts.push(`file=${i.file}`);
      if (i.dryRun) parts.push('dry-run');
      if (i.watch) parts.push('watch');
      if (i.args.length > 0) parts.push(`args=${i.args.join(',')}`);
      if (i.group !== undefined) parts.push(`group=${i.group}`);
      if (i.to !== undefined) parts.push(`to=${i.to}`);
      if (i.expectRevision !== undefined) parts.push(`expect=${i.expectRevision}`);
      if (i.mode !== undefined) parts.push(`mode=${i.mode}`, `count=${i.count}`);
      assert.equal(parts.join(' '), want);
    });
  }

  const bad: [string[], string][] = [
    [[], 'no command given'],
    [['list'], 'unknown command "list"; commands: status, stats, conns, health, validate, apply, doctor, cluster, failover, config, drill'],
    [['cluster'], 'lbadm cluster needs one of: cluster status'],
    [['cluster', 'show'], 'lbadm cluster needs one of: cluster status (not "show")'],
    [['cluster', 'status', 'now'], 'unexpected argument "now" after lbadm cluster status'],
    [['config', 'rollback'], 'lbadm config rollback needs one revision number (see lbadm config history), not none'],
    [['config', 'rollback', 'x'], 'lbadm config rollback needs one revision number (see lbadm config history), not "x"'],
    [['failover'], 'lbadm failover needs --group G (lbadm cluster status lists the vip groups)'],
    [['failover', '--to', 'dir2'], 'lbadm failover needs --group G (lbadm cluster status lists the vip groups)'],
    [['apply', '-f', 'x', '--expect-revision', '-1'], '--expect-revision: "-1" is not a config revision (0 or more)'],
    [['drill', 'failover'], 'lbadm drill failover needs --mode, one of: switchover, kill-agent, box-death, etcd-partition, peer-partition, etcd-outage'],
    [['drill', 'failover', '--mode', 'meteor'], '--mode: "meteor" is not one of switchover, kill-agent, box-death, etcd-partition, peer-partition, etcd-outage'],
    [['drill', 'failover', '--mode', 'box-death', '--count', '0'], '--count: "0" is not a whole number from 1 to 1000'],
    [['status', '--watch'], '--watch is not a flag of "lbadm status" (it belongs to lbadm health)'],
    [['status', '--service', 'web'], '--service is not a flag of "lbadm status" (it belongs to lbadm conns, lbadm health)'],
    [['status', '--verbose'], 'unknown flag --verbose'],
    [['status', 'extra'], 'unexpected argument "extra" after command status'],
    [['status', '--socket'], '--socket needs a value'],
    [['status', '--json=yes'], '--json takes no value'],
    [['status', '--rate'], '--rate is not a flag of "lbadm status" (it belongs to lbadm stats)'],
    [['validate', '--dry-run', '-f', 'x'], '--dry-run is not a flag of "lbadm validate" (it belongs to lbadm apply)'],
    [['apply'], 'lbadm apply needs -f FILE'],
    [['validate'], 'lbadm validate needs -f FILE'],
    [['stats', '--interval-ms', '500'], '--interval-ms only makes sense with --rate'],
    [['stats', '--rate', '--interval-ms', '5'], '--interval-ms: "5" is not a whole number of milliseconds from 100 to 60000'],
    [['stats', '--rate', '--interval-ms', '1e3'], '--interval-ms: "1e3" is not a whole number of milliseconds from 100 to 60000'],
  ];
  for (const [argv, message] of bad) {
    it(`${argv.join(' ') || '(nothing)'} -> usage error`, () => {
      assert.throws(() => parseArgs(argv, {}), (err: unknown) => err instanceof UsageError && err.message === message);
    });
  }
});

describe('parseArgs: the TCP admin API (--server and its TLS files)', () => {
  const TLS = ['--ca', '/pki/ca.pem', '--cert', '/pki/alice.pem', '--key', '/pki/alice.key'];
  const ENV = { LBADM_SERVER: '198.18.3.1:7412', LBADM_CA: '/env/ca.pem', LBADM_CERT: '/env/c.pem', LBADM_KEY: '/env/c.key' };

  it('flags give the server, its files and the name its certificate has', () => {
    assert.deepEqual(parseArgs(['--server', '198.18.3.1:7412', ...TLS, '--server-name', 'dir1', 'status'], {}).server, {
      address: '198.18.3.1', port: 7412, ca: '/pki/ca.pem', cert: '/pki/alice.pem', key: '/pki/alice.key', serverName: 'dir1',
    });
    assert.deepEqual(parseArgs(['--server=[fd00::1]:7412', ...TLS, 'status'], {}).server?.address, 'fd00::1');
    assert.deepEqual(parseArgs(['--server', 'dir1.example.org:7412', ...TLS, 'status'], {}).server?.serverName, undefined);
  });

  it('the environment gives them too, flags win, and an explicit --socket wins over LBADM_SERVER', () => {
    assert.deepEqual(parseArgs(['status'], { ...ENV, LBADM_SERVER_NAME: 'dir2' }).server, {
      address: '198.18.3.1', port: 7412, ca: '/env/ca.pem', cert: '/env/c.pem', key: '/env/c.key', serverName: 'dir2',
    });
    assert.equal(parseArgs(['--cert', '/flag.pem', 'status'], ENV).server?.cert, '/flag.pem');
    const local = parseArgs(['--socket', '/run/lbd/admin.sock', 'status'], ENV);
    assert.deepEqual([local.server, local.socket], [undefined, '/run/lbd/admin.sock']);
    assert.equal(parseArgs(['status'], {}).server, undefined);
  });

  const bad: [string[], Record<string, string>, string][] = [
    [['--server', '198.18.3.1', ...TLS, 'status'], {}, '--server: "198.18.3.1" is not HOST:PORT (e.g. 198.18.3.1:7412, [fd00::1]:7412 or dir1.example.org:7412)'],
    [['--server', '198.18.3.1:70000', ...TLS, 'status'], {}, '--server: "198.18.3.1:70000" is not HOST:PORT (e.g. 198.18.3.1:7412, [fd00::1]:7412 or dir1.example.org:7412)'],
    [['status'], { LBADM_SERVER: 'fd00::1:7412', LBADM_CA: '/x', LBADM_CERT: '/x', LBADM_KEY: '/x' }, 'LBADM_SERVER: "fd00::1:7412" is not HOST:PORT (e.g. 198.18.3.1:7412, [fd00::1]:7412 or dir1.example.org:7412)'],
    [['--server', '198.18.3.1:7412', '--ca', '/pki/ca.pem', 'status'], {}, '--server needs mutual TLS files: missing --cert (or LBADM_CERT), --key (or LBADM_KEY)'],
    [['--server', '198.18.3.1:7412', '--socket', '/run/x.sock', ...TLS, 'status'], {}, '--socket and --server name two ways to the agent; give one'],
    [['--cert', '/pki/alice.pem', 'status'], {}, '--cert only makes sense with --server HOST:PORT'],
    [['--server-name', 'dir1', 'status'], {}, '--server-name only makes sense with --server HOST:PORT'],
  ];
  for (const [argv, env, message] of bad) {
    it(`${argv.join(' ')} ${JSON.stringify(env)} -> usage error`, () => {
      assert.throws(() => parseArgs(argv, env), (err: unknown) => err instanceof UsageError && err.message === message);
    });
  }
});
