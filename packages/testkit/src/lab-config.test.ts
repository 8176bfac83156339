import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CLUSTER } from './cluster-topology.js';
import { LOCAL_ADDRESSES, SERVER_PORTS, VIPS, realServer } from './director-topology.js';

/**
 * deploy/lab/lab.yaml must speak of the addresses the lab topology creates; this catches the two drifting
 * apart (the config package validates the file's shape, not whether the lab has those addresses).
 */
describe('deploy/lab/lab.yaml matches the lab topology', () => {
  const text = readFileSync(fileURLToPath(new URL('../../../deploy/lab/lab.yaml', import.meta.url)), 'utf8')
    .split('\n').map((l) => l.replace(/#.*$/, '')).join('\n');
  const rs = [1, 2, 3].map(realServer);

  it('uses only vips, local addresses, the floating gateway and real servers of the topology', () => {
    const known = new Set<string>([
      ...Object.values(VIPS), ...LOCAL_ADDRESSES.ipv4, ...LOCAL_ADDRESSES.ipv6, ...rs.flatMap((r) => [r.ipv4, r.ipv6]),
      ...Object.values(CLUSTER.serverGateway), ...Object.values(CLUSTER.drVip),
    ]);
    const found = text.match(/\b(?:\d{1,3}\.){3}\d{1,3}\b|\bfd00:[0-9a-f:]+/g) ?? [];
    assert.ok(found.length > 10, 'no addresses found: has the file moved?');
    for (const a of found) assert.ok(known.has(a), `${a} is not an address of the lab topology`);
  });

  it('points real servers at the ports lbd-testserver listens on', () => {
    const ports = [...text.matchAll(/address: [^,]+, port: (\d+)/g)].map((m) => Number(m[1]));
    assert.ok(ports.length > 0);
    for (const p of ports) assert.ok((Object.values(SERVER_PORTS) as number[]).includes(p), `port ${p} is not one of ${Object.values(SERVER_PORTS).join(', ')}`);
  });
});

describe('agentFileText', () => {
  it('moves the peer-link TLS files to a lab\'s own directory', async () => {
    const { agentFileText } = await import('./ha-lab.js');
    const text = await agentFileText('dir2', { adminSocket: '/tmp/x/dir2.sock', etcdPrefix: '/lbd/test/x', tlsDir: '/tmp/x/tls', etcdTlsDir: '/tmp/x/etcd' });
    assert.match(text, /^ {4}tls: \{ ca: \/tmp\/x\/tls\/ca\.pem, cert: \/tmp\/x\/tls\/dir2\.pem, key: \/tmp\/x\/tls\/dir2\.key \}$/m);
    assert.match(text, /^ {4}etcdTls: \{ ca: \/tmp\/x\/etcd\/etcd-ca\.pem, cert: \/tmp\/x\/etcd\/dir2\.pem, key: \/tmp\/x\/etcd\/dir2\.key \}$/m);
    assert.match(text, /^ {4}etcd: \[https:\/\/198\.18\.3\.11:2379, https:\/\/198\.18\.3\.12:2379, https:\/\/198\.18\.3\.13:2379\]$/m);
    assert.doesNotMatch(text, /\/run\/lbd\/lab-tls/);
  });

  it('turns the lab\'s etcd over TLS into plain etcd for labs that run it plain', async () => {
    const { agentFileText } = await import('./ha-lab.js');
    const text = await agentFileText('dir1', { adminSocket: '/tmp/x/dir1.sock', etcdPrefix: '/lbd/test/x', tlsDir: '/tmp/x/tls', etcdTlsDir: null });
    assert.match(text, /^ {4}etcd: \[http:\/\/198\.18\.3\.11:2379, http:\/\/198\.18\.3\.12:2379, http:\/\/198\.18\.3\.13:2379\]$/m);
    assert.doesNotMatch(text, /^\s*etcdTls:/m);
  });
});
