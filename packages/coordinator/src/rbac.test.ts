import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { issueCert, makeCa, runCommand, startEtcd, type CaFiles, type RunningEtcd } from '@lbd/testkit';
import { EtcdCoordinator } from './coordinator.js';
import { Elections } from './elections.js';
import type { PeerTransport, PromiseReply, PromiseRequest } from './group-election.js';
import { EtcdKv, type EtcdTlsMaterial } from './kv.js';
import { etcdRolePlan, etcdRoleScript, roleBase } from './rbac.js';
import { keys } from './records.js';
import { TIMING_PROFILES } from './timing.js';

describe('etcd roles (pure)', () => {
  it('names roles per cluster prefix', () => {
    assert.equal(roleBase('/lbd'), 'lbd');
    assert.equal(roleBase('/lbd/prod/'), 'lbd-prod');
  });

  it('a director writes its own records and the shared elections, an operator the config, nobody else anything', () => {
    const plan = etcdRolePlan('/lbd/prod', ['dir1', 'dir2'], ['ops']);
    const writes = (user: string): string[] => plan.users.find((u) => u.name === user)!.roles
      .flatMap((r) => plan.roles.find((x) => x.name === r)!.permissions)
      .filter((p) => p.access === 'readwrite').map((p) => `${p.key}${p.prefix ? '*' : ''}`).sort();
    assert.deepEqual(writes('dir1'), ['/lbd/prod/directors/dir1', '/lbd/prod/events/dir1/*', '/lbd/prod/groups/*', '/lbd/prod/probes/dir1']);
    assert.deepEqual(writes('ops'), ['/lbd/prod/config/*']);
    const script = etcdRoleScript(plan);
    assert.match(script, /etcdctl role grant-permission lbd-prod-operator --prefix=true readwrite \/lbd\/prod\/config\//);
    assert.match(script, /etcdctl auth enable\n$/);
  });
});

/**
 * The roles against a real etcd (3.4, --client-cert-auth, authentication enabled by the script itself):
 * directors run their real elections, registrations, probes, failovers and event histories under their own
 * certificates, and may not write the config or each other's records; the operator's certificate writes the
 * config; a client without a certificate is refused. What a director does and the roles allow are checked
 * together here, so a new key the coordinator writes fails this test until the roles grant it.
 */
describe('etcd roles against a real etcd with client certificates', function () {
  this.timeout(60_000);
  const prefix = '/lbd/rbac';
  const timing = TIMING_PROFILES.default;
  let dir: string;
  let ca: CaFiles;
  let etcd: RunningEtcd;
  const material: Record<string, EtcdTlsMaterial> = {};
  const files: Record<string, { certPath: string; keyPath: string }> = {};
  const closers: Array<() => Promise<void> | void> = [];

  const kv = (who: string): EtcdKv => {
    const k = new EtcdKv(etcd.endpoints, 3000, { tls: material[who]! });
    closers.push(() => k.close());
    return k;
  };
  const runScript = async (): Promise<void> => {
    const script = join(dir, 'roles.sh');
    await writeFile(script, etcdRoleScript(etcdRolePlan(prefix, ['dir1', 'dir2'], ['ops'])));
    await runCommand('sh', [script], {
      timeoutMs: 30_000,
      env: { ...process.env, ETCDCTL_ENDPOINTS: etcd.endpoints.join(','), ETCDCTL_CACERT: ca.certPath, ETCDCTL_CERT: files.root!.certPath, ETCDCTL_KEY: files.root!.keyPath },
    });
  };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lbd-rbac-'));
    ca = await makeCa(join(dir, 'ca'), 'etcd-ca');
    const server = await issueCert(ca, join(dir, 'ca'), 'etcd1', ['127.0.0.1']);
    for (const who of ['root', 'dir1', 'dir2', 'ops', 'dir3']) {
      files[who] = await issueCert(ca, join(dir, 'ca'), who);
      material[who] = { ca: await readFile(ca.certPath), cert: await readFile(files[who]!.certPath), key: await readFile(files[who]!.keyPath) };
    }
    etcd = await startEtcd({ tls: { ca: ca.certPath, cert: server.certPath, key: server.keyPath, client: { cert: files.root!.certPath, key: files.root!.keyPath } } });
    await runScript();
    // Again: the script adds only what is missing, so an operator may run it after adding a director.
    await runScript();
  });
  after(async () => {
    for (const c of closers.splice(0).reverse()) await c();
    await etcd?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('directors elect, register, probe, fail over and keep events under their own certificates', async () => {
    const transport: PeerTransport & { nodes: Map<string, Elections> } = {
      nodes: new Map(),
      async requestPromise(peer: string, req: PromiseRequest): Promise<PromiseReply> {
        const e = this.nodes.get(peer);
        if (!e) throw new Error('peer unreachable');
        return e.answerPromise(req);
      },
    };
    const held = new Map<string, string>();
    const start = async (id: string, priority: number): Promise<{ e: Elections; c: EtcdCoordinator }> => {
      const tls = material[id]!;
      const c = new EtcdCoordinator({ id, endpoints: etcd.endpoints, etcdTls: tls, prefix, timing });
      const e = new Elections({
        id, endpoints: etcd.endpoints, etcdTls: tls, prefix, timing, peers: ['dir1', 'dir2'].filter((p) => p !== id), peerAddress: `${id}:7411`, version: 'test', transport,
        hooks: { lease: async () => undefined, claim: async (g) => { held.set(g, id); }, release: async (g) => { if (held.get(g) === id) held.delete(g); } },
        health: () => ({ ok: true, problems: [] }),
      });
      transport.nodes.set(id, e);
      closers.push(async () => { await e.close({ vacate: true }); await c.close(); });
      await e.start();
      await e.setGroups([{ name: 'g', priority, preempt: 'never', preemptDelayMs: 0 }]);
      return { e, c };
    };
    const waitFor = async (pred: () => boolean | Promise<boolean>, what: string): Promise<void> => {
      for (const until = Date.now() + 10_000; Date.now() < until;) {
        if (await pred()) return;
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error(`timed out waiting for ${what}`);
    };
    const d1 = await start('dir1', 150);
    await waitFor(() => held.get('g') === 'dir1', 'dir1 to lead g');
    const d2 = await start('dir2', 100);
    await waitFor(() => d2.e.views()['g']?.leader === 'dir1', 'dir2 to see dir1 lead');
    const status = await d2.c.status(['g']);
    assert.equal(status.etcd.reachable, true, 'a director reads etcd\'s reachability under the cluster prefix');
    assert.equal(status.groups[0]!.record?.director, 'dir1');
    // Registrations on leases, written by each director itself.
    const reader = kv('dir2');
    await waitFor(async () => (await reader.get(keys(prefix).director('dir1'))) !== null, 'dir1\'s registration');
    // A planned switchover: the handoff request and the beats of the new leader.
    const moved = await d1.c.failover('g');
    assert.equal(moved.to, 'dir2');
    await waitFor(() => held.get('g') === 'dir2', 'dir2 to hold g');
    // Events: each director's own history, listed by the other.
    d1.c.appendEvent({ id: `${Date.now()}-rbac1`, timeUnixMs: Date.now(), director: 'dir1', kind: 'admin', subject: 'rbac', from: '', to: 'done', reason: 'test', fields: {} });
    await waitFor(async () => (await d2.c.listEvents(0, 10)).events.some((x) => x.id.endsWith('-rbac1')), 'dir1\'s event in the cluster history');
  });

  it('a director certificate cannot write the config, nor another director\'s records; the operator\'s can', async () => {
    const k = keys(prefix);
    const d1 = new EtcdCoordinator({ id: 'dir1', endpoints: etcd.endpoints, etcdTls: material.dir1!, prefix, timing });
    const ops = new EtcdCoordinator({ id: 'ops', endpoints: etcd.endpoints, etcdTls: material.ops!, prefix, timing });
    closers.push(() => d1.close(), () => ops.close());
    await assert.rejects(d1.writeConfig({ text: 'services: []', author: 'dir1', at: Date.now(), comment: 'test' }, 0), /permission denied/i);
    const dir1 = kv('dir1');
    for (const key of [k.director('dir2'), k.probe('dir2'), `${prefix}/events/dir2/1`, k.config, `${prefix}/elsewhere`, '/other-cluster/x']) {
      await assert.rejects(dir1.put(key, 'x'), /permission denied/i, `dir1 wrote ${key}`);
    }
    const w = await ops.writeConfig({ text: 'services: []', author: 'ops', at: Date.now(), comment: 'test' }, 0);
    assert.deepEqual(w, { ok: true, revision: 1 });
    assert.equal((await d1.currentConfig())?.revision, 1, 'directors read the config');
    await assert.rejects(kv('ops').put(k.leader('g'), 'x'), /permission denied/i, 'an operator does not beat');
  });

  it('refuses a certificate etcd has no user for, and a client without one', async () => {
    await assert.rejects(kv('dir3').get(keys(prefix).config), /permission denied|user name not found|invalid/i);
    const plain = new EtcdKv(etcd.endpoints, 2000, { tls: null });
    closers.push(() => plain.close());
    await assert.rejects(plain.get(keys(prefix).config));
  });
});
