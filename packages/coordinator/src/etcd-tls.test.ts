import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { issueCert, makeCa, startEtcd, type RunningEtcd } from '@lbd/testkit';
import { EtcdKv, type EtcdTlsMaterial } from './kv.js';

/**
 * agent.cluster.etcdTls against a real etcd run with --client-cert-auth (issue 14): a director's client
 * certificate from the cluster's etcd CA gets in; no certificate, or one from another CA, does not.
 */
describe('EtcdKv over TLS with client certificates (real etcd on loopback)', function () {
  this.timeout(30_000);
  let dir: string;
  let etcd: RunningEtcd;
  let dir1: EtcdTlsMaterial;
  let stranger: EtcdTlsMaterial;
  const kvs: EtcdKv[] = [];
  const kv = (tls: EtcdTlsMaterial | null): EtcdKv => {
    const k = new EtcdKv(etcd.endpoints, 2000, { tls });
    kvs.push(k);
    return k;
  };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lbd-etcd-tls-'));
    const ca = await makeCa(join(dir, 'ca'), 'etcd-ca');
    const server = await issueCert(ca, join(dir, 'ca'), 'etcd1', ['127.0.0.1']);
    const client = await issueCert(ca, join(dir, 'ca'), 'dir1');
    const other = await makeCa(join(dir, 'other'), 'other-ca');
    const otherClient = await issueCert(other, join(dir, 'other'), 'dir1');
    const material = async (caPath: string, c: { certPath: string; keyPath: string }): Promise<EtcdTlsMaterial> =>
      ({ ca: await readFile(caPath), cert: await readFile(c.certPath), key: await readFile(c.keyPath) });
    dir1 = await material(ca.certPath, client);
    stranger = await material(ca.certPath, otherClient);
    etcd = await startEtcd({ tls: { ca: ca.certPath, cert: server.certPath, key: server.keyPath, client: { cert: client.certPath, key: client.keyPath } } });
  });
  after(async () => {
    for (const k of kvs) k.close();
    await etcd?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('serves https only', () => {
    assert.match(etcd.endpoints[0]!, /^https:\/\/127\.0\.0\.1:\d+$/);
  });

  it('a director with its client certificate reads and writes', async () => {
    const k = kv(dir1);
    await k.put('/lbd/tls/probe', 'yes');
    assert.equal((await k.get('/lbd/tls/probe'))?.value, 'yes');
  });

  it('refuses a client without a certificate, and one whose certificate another CA signed', async () => {
    // etcd's HTTP gateway, trusting etcd's CA: with the director's certificate it answers, without one the
    // handshake fails (so it is the missing certificate that is refused, not an untrusted server).
    const range = (cert?: { cert: Uint8Array; key: Uint8Array }): Promise<number> => new Promise((resolve, reject) => {
      const req = request(`${etcd.endpoints[0]}/v3/kv/range`, { method: 'POST', ca: Buffer.from(dir1.ca), ...(cert ? { cert: Buffer.from(cert.cert), key: Buffer.from(cert.key) } : {}) }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end(JSON.stringify({ key: Buffer.from('/lbd/tls/probe').toString('base64') }));
    });
    assert.equal(await range(dir1), 200);
    await assert.rejects(range(), /certificate|socket hang up|ECONNRESET/);
    await assert.rejects(kv(null).get('/lbd/tls/probe'));
    await assert.rejects(kv(stranger).get('/lbd/tls/probe'));
  });
});
