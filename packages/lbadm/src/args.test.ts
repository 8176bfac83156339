import assert from 'node:assert/strict';
import { parseArgs, parseSince, UsageError } from './args.js';

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
    [['--version'], {}, 'version /run/lbd/admin.sock json=false'],
    [['apply', '-h'], {}, 'help /run/lbd/admin.sock json=false'],
    [['cluster', 'status', '--json'], {}, 'cluster /run/lbd/admin.sock json=true args=status'],
    [['config', 'rollback', '3'], {}, 'config /run/lbd/admin.sock json=false args=rollback,3'],
    [['failover', '--vip-group', 'default', '--to', 'dir2'], {}, 'failover /run/lbd/admin.sock json=false vip-group=default to=dir2'],
    // --group: the old name, still parsed for scripts
    [['failover', '--group', 'default', '--to', 'dir2'], {}, 'failover /run/lbd/admin.sock json=false vip-group=default to=dir2'],
    [['failover', '--group=default'], {}, 'failover /run/lbd/admin.sock json=false vip-group=default'],
    [['slot', 'move', '3', '--to', 'dir2'], {}, 'slot /run/lbd/admin.sock json=false args=move,3 vip-group=slot-3 to=dir2'],
    // The live-cluster drill: a vip group or a slot (its election group), and a probe URL.
    [['drill', 'switchover', '--vip-group', 'web'], {}, 'drill /run/lbd/admin.sock json=false args=switchover vip-group=web'],
    [['drill', 'switchover', '--slot', '5', '--to', 'dir3', '--probe', 'http://198.18.0.10/'], {}, 'drill /run/lbd/admin.sock json=false args=switchover vip-group=slot-5 to=dir3 probe=http://198.18.0.10/'],
    [['apply', '-f', 'x', '--expect-revision', '0'], {}, 'apply /run/lbd/admin.sock json=false file=x expect=0'],
    [['server', 'drain', 'web', '198.19.1.12:8080', '--dry-run'], {}, 'server /run/lbd/admin.sock json=false dry-run args=drain,web,198.19.1.12:8080'],
    [['server', 'add', 'web', '[fd00::1]:80', '--weight', '0', '--health-port', '9000'], {}, 'server /run/lbd/admin.sock json=false args=add,web,[fd00::1]:80 server={"weight":0,"healthPort":9000}'],
    [['server', 'edit', 'web', '198.19.1.12:8080', '--weight=65535'], {}, 'server /run/lbd/admin.sock json=false args=edit,web,198.19.1.12:8080 server={"weight":65535}'],
    [['service', 'add', 'dns', '--vip', '198.18.0.53', '--port', '53', '--protocol', 'udp', '--mode', 'nat', '--vip-group', 'g2'], {},
      'service /run/lbd/admin.sock json=false args=add,dns mode=nat service={"vip":"198.18.0.53","port":53,"protocol":"udp","mode":"nat","vipGroup":"g2"}'],
    [['service', 'edit', 'web', '--local-addresses', '198.18.2.10, 198.18.2.11', '--scheduler', 'mh'], {},
      'service /run/lbd/admin.sock json=false args=edit,web service={"scheduler":"mh","localAddresses":["198.18.2.10","198.18.2.11"]}'],
    [['service', 'edit', 'web', '--mode', 'nat', '--local-addresses', 'none'], {}, 'service /run/lbd/admin.sock json=false args=edit,web mode=nat service={"mode":"nat","localAddresses":null}'],
    [['service', 'list', '--names'], {}, 'service /run/lbd/admin.sock json=false args=list names'],
    [['service', 'edit', 'web', '--syn-proxy', 'on', '--connection-limit', '100000'], {}, 'service /run/lbd/admin.sock json=false args=edit,web service={"synProxy":true,"connectionLimit":100000}'],
    [['service', 'edit', 'web', '--syn-proxy', 'off', '--connection-limit', 'none'], {}, 'service /run/lbd/admin.sock json=false args=edit,web service={"synProxy":false,"connectionLimit":null}'],
    [['completion', 'bash'], {}, 'completion /run/lbd/admin.sock json=false args=bash'],
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
      if (i.vipGroup !== undefined) parts.push(`vip-group=${i.vipGroup}`);
      if (i.to !== undefined) parts.push(`to=${i.to}`);
      if (i.probe !== undefined) parts.push(`probe=${i.probe.href}`);
      if (i.expectRevision !== undefined) parts.push(`expect=${i.expectRevision}`);
      if (i.mode !== undefined) parts.push(`mode=${i.mode}`);
      if (Object.keys(i.serverFields).length > 0) parts.push(`server=${JSON.stringify(i.serverFields)}`);
      if (Object.keys(i.serviceFields).length > 0) parts.push(`service=${JSON.stringify(i.serviceFields)}`);
      if (i.names) parts.push('names');
      assert.equal(parts.join(' '), want);
    });
  }

  const bad: [string[], string][] = [
    [[], 'no command given'],
    [['list'], 'unknown command "list"; commands: status, stats, conns, health, validate, apply, doctor, cluster, failover, slot, drill, config, events, server, service, etcd, completion'],
    [['cluster'], 'lbadm cluster needs one of: cluster status'],
    [['cluster', 'show'], 'lbadm cluster needs one of: cluster status (not "show")'],
    [['cluster', 'status', 'now'], 'unexpected argument "now" after lbadm cluster status'],
    [['config', 'show', 'now'], 'unexpected argument "now" after lbadm config show'],
    [['config', 'rollback'], 'lbadm config rollback needs one revision number (see lbadm config history), not none'],
    [['config', 'rollback', 'x'], 'lbadm config rollback needs one revision number (see lbadm config history), not "x"'],
    [['failover'], 'lbadm failover needs --vip-group G (lbadm cluster status lists the vip groups)'],
    [['slot', 'move'], 'lbadm slot move needs one slot number from 0 to 63 (lbadm cluster status lists the slots as groups slot-N), not none'],
    [['slot', 'move', '64'], 'lbadm slot move needs one slot number from 0 to 63 (lbadm cluster status lists the slots as groups slot-N), not "64"'],
    [['slot', 'move', 'a', 'b'], 'lbadm slot move needs one slot number from 0 to 63 (lbadm cluster status lists the slots as groups slot-N), not "a b"'],
    [['slot', 'drop', '1'], 'lbadm slot needs one of: slot move (not "drop")'],
    [['drill', 'failover', '--mode', 'box-death', '--count', '20'], 'failure drills break a cluster on purpose and run in the lab, from the lbd repository: '
      + 'deploy/lab/lab drill --scenario box-death --count 20 (deploy/lab/lab help lists the scenarios, and those of the ECMP lab: box-death, gobgpd-kill, bgp-reset, scale-out). '
      + 'On live directors, lbadm drill switchover --vip-group G (or --slot N) moves a vip group or slot and back and measures it, and lbadm events --kind drill lists the drills\' results'],
    [['--socket', '/tmp/a.sock', 'drill'], 'failure drills break a cluster on purpose and run in the lab, from the lbd repository: '
      + 'deploy/lab/lab drill --scenario SCENARIO [--count N] [--pause-ms MS] (deploy/lab/lab help lists the scenarios, and those of the ECMP lab: box-death, gobgpd-kill, bgp-reset, scale-out). '
      + 'On live directors, lbadm drill switchover --vip-group G (or --slot N) moves a vip group or slot and back and measures it, and lbadm events --kind drill lists the drills\' results'],
    [['drill', 'box-death', '--count', '3'], 'failure drills break a cluster on purpose and run in the lab, from the lbd repository: '
      + 'deploy/lab/lab drill --scenario box-death --count 3 (deploy/lab/lab help lists the scenarios, and those of the ECMP lab: box-death, gobgpd-kill, bgp-reset, scale-out). '
      + 'On live directors, lbadm drill switchover --vip-group G (or --slot N) moves a vip group or slot and back and measures it, and lbadm events --kind drill lists the drills\' results'],
    [['drill', 'switchover'], 'lbadm drill switchover needs --vip-group G or --slot N, one of them (lbadm cluster status lists the vip groups and slots)'],
    [['drill', 'switchover', '--vip-group', 'web', '--slot', '1'], 'lbadm drill switchover needs --vip-group G or --slot N, one of them (lbadm cluster status lists the vip groups and slots)'],
    [['drill', 'switchover', '--slot', '64'], '--slot: "64" is not a slot number from 0 to 63 (lbadm cluster status lists the slots as groups slot-N)'],
    [['drill', 'switchover', '--slot', '1', '--probe', 'https://198.18.0.10/'], '--probe: "https://198.18.0.10/" is not an http:// URL (the probe speaks plain HTTP to the vip)'],
    [['drill', 'switchover', '--slot', '1', '--probe', '198.18.0.10'], '--probe: "198.18.0.10" is not a URL; give one such as http://198.18.0.10/'],
    [['failover', '--to', 'dir2'], 'lbadm failover needs --vip-group G (lbadm cluster status lists the vip groups)'],
    [['failover', '--group', 'a', '--vip-group', 'b'], '--group is the old name of --vip-group; give --vip-group once'],
    [['service', 'edit', 'web', '--group', 'g2'], '--group is not a flag of "lbadm service" (it belongs to lbadm failover, lbadm drill)'],
    [['apply', '-f', 'x', '--expect-revision', '-1'], '--expect-revision: "-1" is not a config revision (0 or more)'],
    [['status', '--watch'], '--watch is not a flag of "lbadm status" (it belongs to lbadm health)'],
    [['status', '--service', 'web'], '--service is not a flag of "lbadm status" (it belongs to lbadm conns, lbadm health)'],
    [['status', '--verbose'], 'unknown flag --verbose'],
    [['status', '--sokcet', '/s'], 'unknown flag --sokcet; did you mean --socket?'],
    [['--verison'], 'unknown flag --verison; did you mean --version?'],
    [['status', 'extra'], 'unexpected argument "extra" after command status'],
    [['status', '--socket'], '--socket needs a value'],
    [['status', '--json=yes'], '--json takes no value'],
    [['status', '--rate'], '--rate is not a flag of "lbadm status" (it belongs to lbadm stats)'],
    [['validate', '--dry-run', '-f', 'x'], '--dry-run is not a flag of "lbadm validate" (it belongs to lbadm apply, lbadm server, lbadm service)'],
    [['apply'], 'lbadm apply needs -f FILE'],
    [['validate'], 'lbadm validate needs -f FILE'],
    [['stats', '--interval-ms', '500'], '--interval-ms only makes sense with --rate'],
    [['stats', '--rate', '--interval-ms', '5'], '--interval-ms: "5" is not a whole number of milliseconds from 100 to 60000'],
    [['stats', '--rate', '--interval-ms', '1e3'], '--interval-ms: "1e3" is not a whole number of milliseconds from 100 to 60000'],
    [['events', '--kind', 'roles'], '--kind: "roles" is not one of role, vip, health, config, sync, drill, admin, bgp, limit'],
    [['events', '--since', 'yesterday'], '--since: "yesterday" is neither a duration before now (10m, 2h, 1h30m, 90s, 1d) nor an RFC 3339 time with its offset (2026-12-01T10:00:00Z, 2026-12-01T11:00:00+01:00)'],
    [['events', '--since', '2026-12-01T10:00:00'], '--since: "2026-12-01T10:00:00" is neither a duration before now (10m, 2h, 1h30m, 90s, 1d) nor an RFC 3339 time with its offset (2026-12-01T10:00:00Z, 2026-12-01T11:00:00+01:00)'],
    [['events', '--since', '10'], '--since: "10" is neither a duration before now (10m, 2h, 1h30m, 90s, 1d) nor an RFC 3339 time with its offset (2026-12-01T10:00:00Z, 2026-12-01T11:00:00+01:00)'],
    [['events', '--director', 'dir 1'], '--director: "dir 1" is not a director id (letters, digits, ".", "_", "-"; lbadm cluster status lists them)'],
    [['events', '--limit', '0'], '--limit: "0" is not a whole number from 1 to 10000'],
    [['events', '--limit', '10001'], '--limit: "10001" is not a whole number from 1 to 10000'],
    [['status', '--follow'], '--follow is not a flag of "lbadm status" (it belongs to lbadm events)'],
    [['server'], 'lbadm server needs one of: server add, server edit, server drain, server enable, server remove'],
    [['server', 'drain', 'web'], 'lbadm server drain needs SERVICE ADDR:PORT (SERVICE: a service name or key; lbadm service list shows them)'],
    [['server', 'drain', 'web', '198.19.1.12:8080', 'now'], 'unexpected argument "now" after lbadm server drain SERVICE ADDR:PORT'],
    [['server', 'drain', 'web', '198.19.1.12:8080', '--weight', '3'], '--weight is not a flag of "lbadm server drain" (its flags: --dry-run)'],
    [['server', 'edit', 'web', '198.19.1.12:8080'], 'lbadm server edit needs at least one of --weight, --health-port: what to change'],
    [['server', 'edit', 'web', '198.19.1.12:8080', '--weight', '65536'], '--weight: "65536" is not a weight (a whole number from 0 to 65535); give a whole number from 0 to 65535'],
    [['server', 'add', 'web', '198.19.1.12:8080', '--weight', '-1'], '--weight: "-1" is not a weight (a whole number from 0 to 65535); give a whole number from 0 to 65535'],
    [['server', 'add', 'web', '198.19.1.12:8080', '--vip', '198.18.0.1'], '--vip is not a flag of "lbadm server" (it belongs to lbadm service)'],
    [['service', 'add', 'dns', '--vip', '198.18.0.53'], 'lbadm service add needs --port, --mode (e.g. --vip 198.18.0.10 --port 80 --mode fullnat --local-addresses 198.18.2.10)'],
    [['service', 'add', 'dns', '--vip', '198.18.0.53', '--port', '53', '--mode', 'tun'], '--mode: "tun" is not one of fullnat, nat, dr'],
    [['service', 'edit', 'web', '--protocol', 'sctp'], '--protocol: "sctp" is not a supported protocol; use one of: tcp, udp'],
    [['service', 'edit', 'web', '--port', '0'], '--port: "0" is not a port (a whole number from 1 to 65535); give a whole number from 1 to 65535'],
    [['service', 'edit', 'web', '--syn-proxy', 'yes'], '--syn-proxy: "yes" is not a supported setting; use one of: on, off'],
    [['service', 'edit', 'web', '--connection-limit', '0'], '--connection-limit: "0" is not a connection limit (a whole number from 1 to 2147483647); give the most connections the service may hold on a director, or none to remove the limit'],
    [['service', 'remove'], 'lbadm service remove needs NAME'],
    [['service', 'list', '--dry-run'], '--dry-run is not a flag of "lbadm service list" (its flags: --names)'],
    [['completion', 'fish'], 'lbadm completion needs one of: completion bash, completion zsh (not "fish")'],
  ];
  for (const [argv, message] of bad) {
    it(`${argv.join(' ') || '(nothing)'} -> usage error`, () => {
      assert.throws(() => parseArgs(argv, {}), (err: unknown) => err instanceof UsageError && err.message === message);
    });
  }
});

describe('lbadm events flags', () => {
  it('reads --follow, --kind, --director, --local and --limit', () => {
    const i = parseArgs(['events', '--follow', '--kind', 'role', '--director', 'dir2', '--local', '--limit', '50', '--json'], {});
    assert.deepEqual([i.command, i.follow, i.kind, i.director, i.local, i.limit, i.json, i.since], ['events', true, 'role', 'dir2', true, 50, true, undefined]);
    const plain = parseArgs(['events'], {});
    assert.deepEqual([plain.follow, plain.kind, plain.director, plain.local, plain.limit], [false, undefined, undefined, false, undefined]);
  });

  it('--since takes durations before now and RFC 3339 times with their offset', () => {
    assert.deepEqual(parseSince('10m'), { agoMs: 600_000 });
    assert.deepEqual(parseSince('2h'), { agoMs: 7_200_000 });
    assert.deepEqual(parseSince('1h30m'), { agoMs: 5_400_000 });
    assert.deepEqual(parseSince('90s'), { agoMs: 90_000 });
    assert.deepEqual(parseSince('1d'), { agoMs: 86_400_000 });
    assert.deepEqual(parseSince('2026-12-01T10:00:00Z'), { unixMs: Date.UTC(2026, 11, 1, 10, 0, 0) });
    assert.deepEqual(parseSince('2026-12-01T11:00:00.250+01:00'), { unixMs: Date.UTC(2026, 11, 1, 10, 0, 0, 250) });
    assert.deepEqual(parseArgs(['events', '--since=10m'], {}).since, { agoMs: 600_000 });
  });
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

describe('lbadm --etcd (the cluster config straight to etcd) and etcd roles', () => {
  const ETCD = ['--etcd', 'https://10.0.3.11:2379,https://10.0.3.12:2379', '--etcd-prefix', '/lbd/prod', '--etcd-ca', '/pki/etcd-ca.pem', '--etcd-cert', '/pki/ops.pem', '--etcd-key', '/pki/ops.key'];
  const want = { endpoints: ['https://10.0.3.11:2379', 'https://10.0.3.12:2379'], prefix: '/lbd/prod', ca: '/pki/etcd-ca.pem', cert: '/pki/ops.pem', key: '/pki/ops.key' };

  it('the commands that write the config take it, from flags or the environment; reads ignore the environment', () => {
    assert.deepEqual(parseArgs(['apply', '-f', 'c.yaml', ...ETCD], {}).etcd, want);
    assert.deepEqual(parseArgs(['server', 'drain', 'web', '198.19.1.12:8080', ...ETCD], {}).etcd, want);
    assert.deepEqual(parseArgs(['config', 'rollback', '3', ...ETCD], {}).etcd, want);
    const env = { LBADM_ETCD: 'https://10.0.3.11:2379', LBADM_ETCD_PREFIX: '/lbd', LBADM_ETCD_CA: '/e/ca', LBADM_ETCD_CERT: '/e/c', LBADM_ETCD_KEY: '/e/k' };
    assert.deepEqual(parseArgs(['service', 'remove', 'web'], env).etcd, { endpoints: ['https://10.0.3.11:2379'], prefix: '/lbd', ca: '/e/ca', cert: '/e/c', key: '/e/k' });
    assert.equal(parseArgs(['status'], env).etcd, undefined);
    assert.equal(parseArgs(['service', 'list'], env).etcd, undefined);
    assert.equal(parseArgs(['config', 'show'], env).etcd, undefined);
  });

  it('etcd roles reads the prefix, the directors and the operators', () => {
    assert.deepEqual(parseArgs(['etcd', 'roles', '--etcd-prefix', '/lbd', '--directors', 'dir1,dir2'], {}).roles, { prefix: '/lbd', directors: ['dir1', 'dir2'], operators: ['operator'] });
    assert.deepEqual(parseArgs(['etcd', 'roles', '--etcd-prefix', '/lbd', '--directors', 'dir1', '--operators', 'alice,bob'], {}).roles?.operators, ['alice', 'bob']);
  });

  const bad: [string[], Record<string, string>, string][] = [
    [['apply', '-f', 'c.yaml', '--etcd', 'http://10.0.3.11:2379'], {}, '--etcd: "http://10.0.3.11:2379" is not an https:// etcd endpoint with its port (e.g. https://10.0.3.11:2379); an operator writes the config over TLS with its client certificate'],
    [['apply', '-f', 'c.yaml', '--etcd', 'https://10.0.3.11:2379', '--etcd-prefix', '/lbd'], {}, '--etcd needs the cluster prefix and the operator\'s etcd certificate: missing --etcd-ca (or LBADM_ETCD_CA), --etcd-cert (or LBADM_ETCD_CERT), --etcd-key (or LBADM_ETCD_KEY)'],
    [['apply', '-f', 'c.yaml', ...ETCD.slice(0, 2), '--etcd-prefix', 'lbd', ...ETCD.slice(4)], {}, '--etcd-prefix: "lbd" is not an etcd key prefix such as /lbd/prod (the directors\' agent.cluster.prefix)'],
    [['apply', '-f', 'c.yaml', '--etcd-cert', '/pki/ops.pem'], {}, '--etcd-cert only makes sense with --etcd URL (or LBADM_ETCD)'],
    [['status', ...ETCD], {}, '--etcd is not a flag of "lbadm status" (it belongs to lbadm apply, lbadm config, lbadm server, lbadm service)'],
    [['config', 'show', ...ETCD], {}, 'lbadm config show reads through the agent; the --etcd flags are for the commands that write the config (apply, config rollback, server, service)'],
    [['service', 'list', ...ETCD], {}, '--etcd is not a flag of "lbadm service list" (its flags: --names)'],
    [['etcd', 'roles', '--directors', 'dir1'], {}, 'lbadm etcd roles needs --etcd-prefix P: an etcd key prefix such as /lbd/prod (the directors\' agent.cluster.prefix)'],
    [['etcd', 'roles', '--etcd-prefix', '/lbd'], {}, 'lbadm etcd roles needs --directors ID,ID,...: the cluster\'s director ids (each director\'s agent.cluster.director, the common name of its etcd certificate)'],
    [['etcd', 'roles', '--etcd-prefix', '/lbd', '--directors', 'dir1,dir1'], {}, '--directors: "dir1" is given twice'],
    [['etcd', 'roles', '--etcd-prefix', '/lbd', '--directors', 'dir1', '--operators', 'dir1'], {}, '--operators: "dir1" is also a director: a director\'s certificate must not write the config; give the operator another name'],
    [['etcd', 'roles', '--etcd-prefix', '/lbd', '--directors', 'dir 1'], {}, '--directors: "dir 1" is not a name etcd knows a certificate by here (1 to 63 letters, digits, ".", "_", "-", starting with a letter or digit)'],
  ];
  for (const [argv, env, message] of bad) {
    it(`${argv.join(' ')} -> usage error`, () => {
      assert.throws(() => parseArgs(argv, env), (err: unknown) => err instanceof UsageError && err.message === message, message);
    });
  }
});
