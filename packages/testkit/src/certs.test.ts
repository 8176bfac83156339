import assert from 'node:assert/strict';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { issueCert, makeCa, makeClusterPki, type ClusterPki } from './certs.js';

/** The test PKI checked with Node's own X.509 code (what the peer link's TLS will use). Needs `openssl`. */
describe('testkit certs', () => {
  let dir: string;
  let pki: ClusterPki;
  const cert = async (path: string): Promise<X509Certificate> => new X509Certificate(await readFile(path));

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lbd-certs-test-'));
    pki = await makeClusterPki(dir, ['dir1', 'dir2']);
  });
  after(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('writes ca.pem and <id>.pem/<id>.key, keys private', async () => {
    assert.deepEqual(pki.ca, { certPath: join(dir, 'ca.pem'), keyPath: join(dir, 'ca.key'), name: 'ca' });
    assert.deepEqual(pki.certs.dir1, { certPath: join(dir, 'dir1.pem'), keyPath: join(dir, 'dir1.key') });
    for (const key of [pki.ca.keyPath, pki.certs.dir1!.keyPath, pki.certs.dir2!.keyPath]) {
      assert.equal((await stat(key)).mode & 0o777, 0o600, key);
    }
  });

  it('makes a self-signed CA', async () => {
    const ca = await cert(pki.ca.certPath);
    assert.equal(ca.ca, true);
    assert.equal(ca.subject, 'CN=ca');
    assert.ok(ca.verify(ca.publicKey));
  });

  for (const id of ['dir1', 'dir2']) {
    it(`issues ${id} with SAN DNS:${id} for server and client auth, signed by the CA`, async () => {
      const [ca, leaf] = [await cert(pki.ca.certPath), await cert(pki.certs[id]!.certPath)];
      assert.equal(leaf.subjectAltName, `DNS:${id}`);
      assert.equal(leaf.ca, false);
      assert.deepEqual([...(leaf.keyUsage ?? [])].sort(), ['1.3.6.1.5.5.7.3.1', '1.3.6.1.5.5.7.3.2']); // serverAuth, clientAuth
      assert.ok(leaf.checkIssued(ca));
      assert.ok(leaf.verify(ca.publicKey));
      // The key on disk belongs to the certificate.
      assert.ok(leaf.checkPrivateKey(createPrivateKey(await readFile(pki.certs[id]!.keyPath))));
    });
  }

  it('names the addresses given as IP subjectAltNames, which Node\'s name check accepts; refuses a non-address', async () => {
    const ca = await makeCa(join(dir, 'ips'), 'ca');
    const leaf = await cert((await issueCert(ca, join(dir, 'ips'), 'dir1', ['198.18.3.1', 'fd00:0:0:3::1'])).certPath);
    assert.equal(leaf.subjectAltName, 'DNS:dir1, IP Address:198.18.3.1, IP Address:FD00:0:0:3:0:0:0:1');
    assert.equal(leaf.checkIP('198.18.3.1'), '198.18.3.1');
    assert.equal(leaf.checkIP('198.18.3.2'), undefined);
    await assert.rejects(issueCert(ca, join(dir, 'ips'), 'dir2', ['dir2.example']), /certificate dir2: "dir2.example" is not an IP address/);
  });

  it('a certificate from another CA does not verify against the cluster CA', async () => {
    const other = await makeCa(join(dir, 'other'), 'other-ca');
    const rogue = await cert((await issueCert(other, join(dir, 'other'), 'dir1')).certPath);
    const ca = await cert(pki.ca.certPath);
    assert.equal(rogue.subjectAltName, 'DNS:dir1');
    assert.ok(rogue.verify((await cert(other.certPath)).publicKey));
    assert.equal(rogue.verify(ca.publicKey), false);
  });

  it('refuses names that are not director ids', async () => {
    await assert.rejects(makeCa(dir, '../x'), /CA name "\.\.\/x": use 1 to 63/);
    await assert.rejects(makeClusterPki(dir, ['dir1', 'dir1']), /"dir1" given twice/);
    await assert.rejects(makeClusterPki(dir, ['ca']), /is the CA's name/);
    await assert.rejects(makeClusterPki(dir, ['Dir 1']), /director id "Dir 1"/);
  });
});
