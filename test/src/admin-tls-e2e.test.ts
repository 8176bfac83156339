import assert from 'node:assert/strict';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EXIT } from '@lbd/config';
import { FakeDataPlane } from '@lbd/dataplane/testing';
import { Agent } from '@lbd/director-agent';
import { freePort, issueCert, makeCa, type CertFiles } from '@lbd/testkit';
import { runLbadm as lbadm } from './lbadm-run.js';

/**
 * lbadm --server against a real lbd-agent's admin API over TCP with mutual TLS (FakeDataPlane, loopback):
 * a writer applies, a reader is refused writes, and every way the TLS setup can be wrong ends in words
 * that name the fix and an exit code scripts can trust.
 */

const CONFIG = `services:
  - name: web
    vip: 198.18.0.10
    port: 80
    mode: nat
    realServers:
      - { address: 198.19.1.11, port: 8080, weight: 2 }
`;

describe('lbadm --server: the admin API over mutual TLS (end to end)', function () {
  this.timeout(60_000);
  let dir: string;
  let port: number;
  let dp: FakeDataPlane;
  let agent: Agent;
  let caPath: string;
  /** The director's file: a client over the network sends its agent: section unchanged with the services. */
  let fileText: string;
  const certs: Record<string, CertFiles> = {};

  const as = (name: string, extra: string[] = ['--server-name', 'dir1']): string[] =>
    ['--server', `127.0.0.1:${port}`, '--ca', caPath, '--cert', certs[name]!.certPath, '--key', certs[name]!.keyPath, ...extra];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lbadm-tls-e2e-'));
    const ca = await makeCa(join(dir, 'pki'), 'ca');
    caPath = ca.certPath;
    for (const name of ['dir1', 'ops-alice', 'viewer', 'mallory']) certs[name] = await issueCert(ca, join(dir, 'pki'), name);
    const rogue = await makeCa(join(dir, 'rogue'), 'rogue-ca');
    certs.rogue = await issueCert(rogue, join(dir, 'rogue'), 'ops-alice');
    port = await freePort();
    const configPath = join(dir, 'lbd.yaml');
    fileText = `agent:
  admin:
    grpcListen: 127.0.0.1:${port}
    tls: { ca: ${caPath}, cert: ${certs.dir1!.certPath}, key: ${certs.dir1!.keyPath} }
    clients: [{ name: ops-alice, role: write }, { name: viewer, role: read }]
${CONFIG}`;
    await writeFile(configPath, fileText);
    dp = new FakeDataPlane();
    agent = await Agent.start({ configPath, dataPlane: dp, adminSocket: join(dir, 'admin.sock'), watch: false });
  });

  after(async () => {
    await agent?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('a reader reads (flags or environment) and is refused an apply with exit 77; a writer applies', async () => {
    const status = await lbadm([...as('viewer'), 'status']);
    assert.equal(status.code, EXIT.ok, status.err);
    assert.match(status.out, /^TCP {2}198\.18\.0\.10:80 wrr nat \(web\)$/m);
    const env = { LBADM_SERVER: `127.0.0.1:${port}`, LBADM_CA: caPath, LBADM_CERT: certs.viewer!.certPath, LBADM_KEY: certs.viewer!.keyPath, LBADM_SERVER_NAME: 'dir1' };
    assert.equal((await lbadm(['health'], env)).code, EXIT.ok);

    const next = join(dir, 'next.yaml');
    await writeFile(next, fileText.replace('weight: 2', 'weight: 5'));
    const refused = await lbadm(['apply', '-f', next], env);
    assert.equal(refused.code, EXIT.noPermission);
    assert.equal(refused.err, `lbadm: permission denied by lbd-agent at 127.0.0.1:${port}: the client certificate viewer has role read, and Apply without dry_run needs role write; give viewer role write in agent.admin.clients, or use a certificate that has it\n`);
    assert.equal((await lbadm(['apply', '-f', next, '--dry-run'], env)).code, EXIT.ok, 'a dry run only reads');
    assert.equal(dp.applied.services[0]?.realServers[0]?.weight, 2);

    const applied = await lbadm([...as('ops-alice'), 'apply', '-f', next]);
    assert.equal(applied.code, EXIT.ok, applied.err);
    assert.equal(dp.applied.services[0]?.realServers[0]?.weight, 5);

    const servicesOnly = join(dir, 'services-only.yaml');
    await writeFile(servicesOnly, CONFIG);
    const widen = await lbadm([...as('ops-alice'), 'apply', '-f', servicesOnly]);
    assert.equal(widen.code, EXIT.config);
    assert.match(widen.err, /^ {2}agent: differs from this director's own agent settings, which a client over the network \(here ops-alice\) may not change; send the agent: section of .*lbd\.yaml unchanged with the services/m);
  });

  it('an unlisted certificate is refused with exit 77, naming it and the fix', async () => {
    const r = await lbadm([...as('mallory'), 'status']);
    assert.equal(r.code, EXIT.noPermission);
    assert.match(r.err, /^lbadm: permission denied by lbd-agent at 127\.0\.0\.1:\d+: the client certificate mallory is not listed in agent\.admin\.clients; add \{name: mallory, role: read\}/);
  });

  it('a certificate from another CA: the agent ends the handshake, exit 69', async () => {
    const r = await lbadm([...as('rogue'), 'status']);
    assert.equal(r.code, EXIT.unavailable);
    assert.match(r.err, /ended the TLS handshake \(.*\): it does not trust this client's certificate .*rogue.*ops-alice\.pem, which must be signed by the CA in the agent's agent\.admin\.tls\.ca\n$/);
  });

  it('the agent\'s certificate: another CA, or a name other than the address, say what to give', async () => {
    const wrongCa = await lbadm(['--server', `127.0.0.1:${port}`, '--ca', join(dir, 'rogue', 'rogue-ca.pem'), '--cert', certs.viewer!.certPath, '--key', certs.viewer!.keyPath, '--server-name', 'dir1', 'status']);
    assert.equal(wrongCa.code, EXIT.unavailable);
    assert.match(wrongCa.err, /its certificate is not signed by the CA in --ca \(.*\); give the CA of agent\.admin\.tls\n$/);
    const noName = await lbadm([...as('viewer', []), 'status']);
    assert.equal(noName.code, EXIT.unavailable);
    assert.equal(noName.err, `lbadm: lbd-agent at 127.0.0.1:${port}: its certificate names DNS:dir1, not 127.0.0.1; pass --server-name dir1 (or set LBADM_SERVER_NAME)\n`);
  });

  it('files that are missing, unreadable, or not what they should be are named before anything is sent', async () => {
    const missing = await lbadm(['--server', `127.0.0.1:${port}`, '--ca', join(dir, 'nope.pem'), '--cert', certs.viewer!.certPath, '--key', certs.viewer!.keyPath, 'status']);
    assert.equal(missing.code, EXIT.usage);
    assert.equal(missing.err, `lbadm: --ca ${join(dir, 'nope.pem')}: cannot read it (ENOENT); give the CA that signed the agent's certificate as a readable PEM file\n`);
    const mismatch = await lbadm(['--server', `127.0.0.1:${port}`, '--ca', caPath, '--cert', certs.viewer!.certPath, '--key', certs.mallory!.keyPath, 'status']);
    assert.equal(mismatch.code, EXIT.usage);
    assert.equal(mismatch.err, `lbadm: --key ${certs.mallory!.keyPath}: is not the private key of --cert ${certs.viewer!.certPath}; give the key the certificate was issued for\n`);
    const notCert = await lbadm(['--server', `127.0.0.1:${port}`, '--ca', caPath, '--cert', certs.viewer!.keyPath, '--key', certs.viewer!.keyPath, 'status']);
    assert.equal(notCert.code, EXIT.usage);
    assert.match(notCert.err, /--cert .*viewer\.key: is not a PEM certificate/);
    if (process.getuid?.() !== 0) {
      // Root reads anything: the mode only stops others.
      const locked = join(dir, 'locked.key');
      await writeFile(locked, 'x');
      await chmod(locked, 0o000);
      const denied = await lbadm(['--server', `127.0.0.1:${port}`, '--ca', caPath, '--cert', certs.viewer!.certPath, '--key', locked, 'status']);
      assert.equal(denied.code, EXIT.noPermission);
    }
  });

  it('nothing listening: exit 69, naming the address and the setting', async () => {
    const closed = await freePort();
    const r = await lbadm(['--server', `127.0.0.1:${closed}`, '--ca', caPath, '--cert', certs.viewer!.certPath, '--key', certs.viewer!.keyPath, 'status']);
    assert.equal(r.code, EXIT.unavailable);
    assert.equal(r.err, `lbadm: nothing is listening on 127.0.0.1:${closed}: is lbd-agent running there with agent.admin.grpcListen set to that address?\n`);
  });
});
