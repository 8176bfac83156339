import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { AdminApi } from '@lbd/proto';
import { LBADM_BIN, removeOrphans, requireRoot, runPrefix, startHaLab, waitFor, type HaLab } from '@lbd/testkit';

/**
 * The cluster on etcd as the lab runs it (issue 14): TLS with client certificates from etcd's own CA, and
 * etcd's roles from `lbadm etcd roles` (a director writes its own registration, probe and events and the
 * shared elections; only the operator writes the config). Two real agents elect, register, beat and switch
 * over under their own certificates; a config change through an agent is refused by etcd and says how to
 * write it; the operator's certificate (lbadm --etcd, from the ops host) writes it and both directors
 * apply it; a director's certificate cannot write the config even with etcdctl, and a client without a
 * certificate is not served.
 */
const WEB = 'web';
const RS = '198.19.1.12:8080';

describe('etcd with client certificates and roles, on a two-director cluster @privileged', function () {
  this.timeout(120_000);
  let lab: HaLab<AdminApi>;

  before(async function () {
    this.timeout(150_000);
    await requireRoot(this, { commands: ['nft', 'ip', 'etcd', 'etcdctl', 'arping', 'openssl'] });
    await removeOrphans('lbdt');
    lab = await startHaLab({ prefix: runPrefix('lbdt', 'rbac'), admin: (socket) => new AdminApi(socket), etcdAccess: 'rbac' });
  });
  after(async function () {
    this.timeout(60_000);
    await lab?.destroy();
  });

  /** lbadm in `host`'s namespace (ops, or a director with its admin socket). */
  const lbadm = (host: string, args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
    lab.cluster.topology.exec(host, process.execPath, [LBADM_BIN, ...args], { allowFailure: true, timeoutMs: 60_000 });

  it('directors lead, beat and switch over under their own certificates', async () => {
    const status = await lab.api('dir1').getClusterStatus();
    assert.equal(status.etcdReachable, true, 'etcd reachable as the director\'s certificate may read it');
    assert.deepEqual([...new Set(status.directors.map((d) => d.id))].sort(), ['dir1', 'dir2'], 'both registered under their own certificates');
    const from = await lab.leader();
    const moved = await lab.api(from!).failover(lab.group, '');
    assert.notEqual(moved.to, from);
    await waitFor('the other director to lead and hold the vip', 15_000, async () => {
      const l = await lab.leader();
      return l === moved.to && (await lab.holders()).join() === l ? l : undefined;
    });
  });

  it('an agent cannot write the config: etcd refuses its certificate, and lbadm says how to write it', async () => {
    const before = (await lab.api('dir1').getConfig()).revision;
    const r = await lbadm('dir1', ['--socket', lab.socket('dir1'), 'server', 'drain', WEB, RS]);
    assert.equal(r.code, 77, r.stdout + r.stderr);
    assert.match(r.stderr, /etcd refused this director's certificate the write of the cluster config/);
    assert.match(r.stderr, /--etcd https:\/\/HOST:2379 --etcd-prefix P/);
    assert.equal((await lab.api('dir1').getConfig()).revision, before, 'nothing written');
  });

  it('the operator\'s certificate writes it from the ops host, and both directors apply it', async () => {
    const before = (await lab.api('dir1').getConfig()).revision;
    const r = await lbadm('ops', ['server', 'drain', WEB, RS, ...lab.operatorEtcd!]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, new RegExp(`written to etcd as cluster config revision ${before + 1} with the certificate of ops`));
    for (const d of ['dir1', 'dir2'] as const) {
      await waitFor(`${d} to run revision ${before + 1}`, 15_000, async () => ((await lab.api(d).getClusterStatus()).configRevision >= before + 1 ? true : undefined));
      const rs = (await lab.api(d).getStatus()).services.find((s) => s.name === WEB)?.realServers.find((x) => `${x.address}:${x.port}` === RS);
      assert.equal(rs?.quiescent, true, `${d} drained ${RS}: ${JSON.stringify(rs)}`);
    }
    // On a director, with its admin socket: the write goes to etcd and the director says when it applied it.
    const back = await lbadm('dir1', ['--socket', lab.socket('dir1'), 'server', 'enable', WEB, RS, ...lab.operatorEtcd!]);
    assert.equal(back.code, 0, back.stdout + back.stderr);
    assert.match(back.stdout, /dir1 applied it: \d+ rule operations? in \d+ ms/);
    const history = await lab.api('dir2').configHistory();
    assert.match(history.versions.at(-1)?.comment ?? '', /lbadm server enable web 198\.19\.1\.12:8080/);
  });

  it('with the operator\'s certificate: a rollback writes an old revision again; an invalid config and a mistyped prefix write nothing', async () => {
    const before = (await lab.api('dir1').getConfig()).revision;
    const back = await lbadm('ops', ['config', 'rollback', '1', ...lab.operatorEtcd!]);
    assert.equal(back.code, 0, back.stdout + back.stderr);
    assert.match(back.stdout, new RegExp(`written to etcd as cluster config revision ${before + 1} \\(rollback to revision 1\\)`));
    await waitFor(`dir2 to run revision ${before + 1}`, 15_000, async () => ((await lab.api('dir2').getClusterStatus()).configRevision === before + 1 ? true : undefined));
    const bad = `${lab.dir}/bad.yaml`;
    await writeFile(bad, 'services:\n  - name: web\n    vip: 127.0.0.1\n');
    const invalid = await lbadm('ops', ['apply', '-f', bad, ...lab.operatorEtcd!]);
    assert.equal(invalid.code, 78, invalid.stdout + invalid.stderr);
    assert.match(invalid.stderr, /nothing was written/);
    const flags = [...lab.operatorEtcd!];
    flags[flags.indexOf('--etcd-prefix') + 1] = `${lab.etcdPrefix}-typo`;
    const typo = await lbadm('ops', ['server', 'drain', WEB, RS, ...flags]);
    assert.notEqual(typo.code, 0);
    assert.match(typo.stderr, /is --etcd-prefix .*-typo the cluster's prefix/);
    assert.equal((await lab.api('dir1').getConfig()).revision, before + 1, 'nothing more written');
  });

  it('a director\'s certificate cannot write the config with etcdctl either, and no certificate is not served', async () => {
    const dir = `${lab.dir}/etcd-tls`;
    const put = (cert: string[]): Promise<{ code: number; stderr: string }> => lab.cluster.topology.exec('ops', 'etcdctl', [
      '--endpoints', lab.etcd.endpoints.join(','), '--command-timeout', '3s', '--cacert', `${dir}/etcd-ca.pem`, ...cert, 'put', `${lab.etcdPrefix}/config/desired`, 'x',
    ], { allowFailure: true, env: { ...process.env, ETCDCTL_API: '3' } });
    const asDir1 = await put(['--cert', `${dir}/dir1.pem`, '--key', `${dir}/dir1.key`]);
    assert.notEqual(asDir1.code, 0);
    assert.match(asDir1.stderr, /permission denied/);
    const anonymous = await put([]);
    assert.notEqual(anonymous.code, 0);
    assert.doesNotMatch(anonymous.stderr, /^OK/m);
    assert.equal((await lab.api('dir1').getConfig()).configText.includes('x\n'), false);
  });

  it('lbadm doctor finds etcd reached over mutual TLS, not plain', async () => {
    const r = await lbadm('dir1', ['--socket', lab.socket('dir1'), '--json', 'doctor']);
    const findings = (JSON.parse(r.stdout) as { findings: Array<{ check: string; severity: string; problem: string }> }).findings;
    const etcd = findings.find((f) => f.check === 'etcd-tls');
    assert.equal(etcd?.severity, 'ok', JSON.stringify(etcd));
  });
});
