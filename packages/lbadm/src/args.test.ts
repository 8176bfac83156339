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
    [['server', 'drain', 'web', '198.19.1.12:8080', '--dry-run'], {}, 'server /run/lbd/admin.sock json=false dry-run args=drain,web,198.19.1.12:8080'],
    [['server', 'add', 'web', '[fd00::1]:80', '--weight', '0', '--health-port', '9000'], {}, 'server /run/lbd/admin.sock json=false args=add,web,[fd00::1]:80 server={"weight":0,"healthPort":9000}'],
    [['server', 'edit', 'web', '198.19.1.12:8080', '--weight=65535'], {}, 'server /run/lbd/admin.sock json=false args=edit,web,198.19.1.12:8080 server={"weight":65535}'],
    [['service', 'add', 'dns', '--vip', '198.18.0.53', '--port', '53', '--protocol', 'udp', '--mode', 'nat', '--vip-group', 'g2'], {},
      'service /run/lbd/admin.sock json=false args=add,dns mode=nat count=1 service={"vip":"198.18.0.53","port":53,"protocol":"udp","mode":"nat","vipGroup":"g2"}'],
    [['service', 'edit', 'web', '--local-addresses', '198.18.2.10, 198.18.2.11', '--scheduler', 'mh'], {},
      'service /run/lbd/admin.sock json=false args=edit,web service={"scheduler":"mh","localAddresses":["198.18.2.10","198.18.2.11"]}'],
    [['service', 'edit', 'web', '--mode', 'nat', '--local-addresses', 'none'], {}, 'service /run/lbd/admin.sock json=false args=edit,web mode=nat count=1 service={"mode":"nat","localAddresses":null}'],
    [['service', 'list', '--names'], {}, 'service /run/lbd/admin.sock json=false args=list names'],
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
      if (i.group !== undefined) parts.push(`group=${i.group}`);
      if (i.to !== undefined) parts.push(`to=${i.to}`);
      if (i.expectRevision !== undefined) parts.push(`expect=${i.expectRevision}`);
      if (i.mode !== undefined) parts.push(`mode=${i.mode}`, `count=${i.count}`);
      if (Object.keys(i.server).length > 0) parts.push(`server=${JSON.stringify(i.server)}`);
      if (Object.keys(i.serviceFields).length > 0) parts.push(`service=${JSON.stringify(i.serviceFields)}`);
      if (i.names) parts.push('names');
      assert.equal(parts.join(' '), want);
    });
  }

  const bad: [string[], string][] = [
    [[], 'no command given'],
    [['list'], 'unknown command "list"; commands: status, stats, conns, health, validate, apply, doctor, cluster, failover, config, drill, server, service, completion'],
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
    [['validate', '--dry-run', '-f', 'x'], '--dry-run is not a flag of "lbadm validate" (it belongs to lbadm apply, lbadm server, lbadm service)'],
    [['apply'], 'lbadm apply needs -f FILE'],
    [['validate'], 'lbadm validate needs -f FILE'],
    [['stats', '--interval-ms', '500'], '--interval-ms only makes sense with --rate'],
    [['stats', '--rate', '--interval-ms', '5'], '--interval-ms: "5" is not a whole number of milliseconds from 100 to 60000'],
    [['stats', '--rate', '--interval-ms', '1e3'], '--interval-ms: "1e3" is not a whole number of milliseconds from 100 to 60000'],
    [['server'], 'lbadm server needs one of: server add, server edit, server drain, server enable, server remove'],
    [['server', 'drain', 'web'], 'lbadm server drain needs SERVICE ADDR:PORT (SERVICE: a service name or key; lbadm service list shows them)'],
    [['server', 'drain', 'web', '198.19.1.12:8080', 'now'], 'unexpected argument "now" after lbadm server drain SERVICE ADDR:PORT'],
    [['server', 'drain', 'web', '198.19.1.12:8080', '--weight', '3'], '--weight is not a flag of "lbadm server drain" (its flags: --dry-run)'],
    [['server', 'edit', 'web', '198.19.1.12:8080'], 'lbadm server edit needs at least one of --weight, --health-port: what to change'],
    [['server', 'edit', 'web', '198.19.1.12:8080', '--weight', '65536'], '--weight: "65536" is not a weight (a whole number from 0 to 65535); give a whole number from 0 to 65535'],
    [['server', 'add', 'web', '198.19.1.12:8080', '--weight', '-1'], '--weight: "-1" is not a weight (a whole number from 0 to 65535); give a whole number from 0 to 65535'],
    [['server', 'add', 'web', '198.19.1.12:8080', '--vip', '198.18.0.1'], '--vip is not a flag of "lbadm server" (it belongs to lbadm service)'],
    [['service', 'add', 'dns', '--vip', '198.18.0.53'], 'lbadm service add needs --port, --mode (e.g. --vip 198.18.0.10 --port 80 --mode fullnat --local-addresses 198.18.2.10)'],
    [['service', 'add', 'dns', '--vip', '198.18.0.53', '--port', '53', '--mode', 'dr'], '--mode: "dr" is not one of fullnat, nat'],
    [['service', 'edit', 'web', '--protocol', 'sctp'], '--protocol: "sctp" is not a supported protocol; use one of: tcp, udp'],
    [['service', 'edit', 'web', '--port', '0'], '--port: "0" is not a port (a whole number from 1 to 65535); give a whole number from 1 to 65535'],
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
