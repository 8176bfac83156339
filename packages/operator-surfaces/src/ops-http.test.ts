import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '@lbd/log';
import { issueCert, makeCa } from '@lbd/testkit';
import { OpsHttpServer, authorizeCertificate, certificateNames } from './ops-http.js';
import type { OpsRoute } from './ops-types.js';

/** The ops listener's own rules, without an agent (the agent's listeners end to end: director-agent's admin-security.test.ts). */
describe('ops listener authorization', () => {
  it('certificate names: subjectAltName DNS entries, else the common name', () => {
    assert.deepEqual(certificateNames({ subjectaltname: 'DNS:a, IP Address:127.0.0.1, DNS:b', subject: { CN: 'c' } as never }), ['a', 'b']);
    assert.deepEqual(certificateNames({ subject: { CN: 'Alice Smith' } as never }), ['Alice Smith']);
    assert.deepEqual(certificateNames(undefined), []);
  });

  it('a listed name wins over *, the strongest listed name wins, and case does not matter', () => {
    const clients = [{ name: '*', role: 'write' as const }, { name: 'viewer', role: 'read' as const }, { name: 'Ops-Alice', role: 'write' as const }];
    assert.deepEqual(authorizeCertificate(['viewer'], clients), { ok: true, caller: { name: 'viewer', role: 'read' } });
    assert.deepEqual(authorizeCertificate(['viewer', 'ops-alice'], clients), { ok: true, caller: { name: 'ops-alice', role: 'write' } });
    assert.deepEqual(authorizeCertificate(['someone'], clients), { ok: true, caller: { name: 'someone', role: 'write' } });
    assert.equal(authorizeCertificate(['someone'], clients.slice(1)).ok, false);
    assert.match((authorizeCertificate([], clients) as { reason: string }).reason, /names nobody/);
  });

  it('an OpsHttpServer closes with a streaming response open', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'lbd-ops-close-'));
    try {
      const ca = await makeCa(dir, 'ca');
      const srv = await issueCert(ca, dir, 'dir1');
      const tls = { ca: await readFile(ca.certPath), cert: await readFile(srv.certPath), key: await readFile(srv.keyPath) };
      const stream: OpsRoute = { method: 'GET', path: '/stream', role: 'read', handle(_req, res) { res.writeHead(200); res.write('open\n'); } };
      const server = await OpsHttpServer.listen({ address: '127.0.0.1', port: 0, tls, clients: [{ name: '*', role: 'read' }], log: createLogger({ write: () => {} }) }, [stream]);
      const req = httpsRequest({ host: '127.0.0.1', port: server.port, path: '/stream', servername: 'dir1', ca: tls.ca, cert: tls.cert, key: tls.key, agent: false });
      req.end();
      const [res] = await once(req, 'response') as [NodeJS.ReadableStream];
      await once(res, 'data');
      await server.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
