import assert from 'node:assert/strict';
import { ADMIN_DEFAULTS } from './types.js';
import { formatProblem, validateConfig } from './validate.js';

/** agent.admin: the operators' TCP listeners (admin gRPC and HTTPS), their TLS and the clients' roles. */

const TLS = { ca: '/etc/lbd/tls/ca.pem', cert: '/etc/lbd/tls/dir1.pem', key: '/etc/lbd/tls/dir1.key' };
const CLUSTER = {
  director: 'dir1', etcd: ['http://198.18.3.11:2379'], prefix: '/lbd/lab', peerListen: '198.18.4.1:7411', peers: [],
  interfaces: { vip: 'eth0', local: 'eth1' },
};

function problems(raw: unknown): string[] {
  const r = validateConfig(raw);
  return r.ok ? [] : r.problems.map(formatProblem);
}

function admin(raw: unknown): unknown {
  const r = validateConfig(raw);
  assert.ok(r.ok, r.ok ? '' : r.problems.map(formatProblem).join('\n'));
  return r.config.agent.admin;
}

describe('agent.admin settings', () => {
  it('off by default: no listener, no TLS, no clients', () => {
    assert.deepEqual(admin({}), ADMIN_DEFAULTS);
    assert.deepEqual(admin({ agent: { admin: {} } }), ADMIN_DEFAULTS);
  });

  it('both listeners, own TLS, clients with roles (IPv6 in brackets)', () => {
    assert.deepEqual(admin({ agent: { admin: {
      grpcListen: '198.18.3.1:7412', httpListen: '[fd00::1]:9443', tls: TLS,
      clients: [{ name: 'ops-alice', role: 'write' }, { name: 'prometheus', role: 'read' }, { name: '*', role: 'read' }],
    } } }), {
      grpcListen: { address: '198.18.3.1', port: 7412 }, httpListen: { address: 'fd00::1', port: 9443 }, tls: TLS,
      clients: [{ name: 'ops-alice', role: 'write' }, { name: 'prometheus', role: 'read' }, { name: '*', role: 'read' }],
    });
  });

  it('TLS defaults to agent.cluster.tls; its own wins', () => {
    const clusterTls = { ca: '/etc/lbd/peer/ca.pem', cert: '/etc/lbd/peer/dir1.pem', key: '/etc/lbd/peer/dir1.key' };
    const clients = [{ name: 'ops-alice', role: 'write' }];
    assert.deepEqual((admin({ agent: { cluster: { ...CLUSTER, tls: clusterTls }, admin: { grpcListen: '198.18.3.1:7412', clients } } }) as { tls: unknown }).tls, clusterTls);
    assert.deepEqual((admin({ agent: { cluster: { ...CLUSTER, tls: clusterTls }, admin: { grpcListen: '198.18.3.1:7412', tls: TLS, clients } } }) as { tls: unknown }).tls, TLS);
  });

  it('a listener needs TLS (its own or the cluster\'s) and at least one client', () => {
    assert.deepEqual(problems({ agent: { admin: { httpListen: '198.18.3.1:9443' } } }), [
      "agent.admin.tls: is required: the listeners serve only mutual TLS, and there is no agent.cluster.tls to default to; write tls: {ca: /etc/lbd/tls/ca.pem, cert: /etc/lbd/tls/dir1.pem, key: /etc/lbd/tls/dir1.key} (PEM files: the CA that signs the clients' certificates, and this director's certificate and key)",
      "agent.admin.clients: is required: without it every client certificate is refused; write clients: [{name: ops-alice, role: write}, {name: prometheus, role: read}] (a certificate's DNS name or common name, or '*' for any certificate the CA signed)",
    ]);
    assert.deepEqual(problems({ agent: { admin: { grpcListen: '198.18.3.1:7412', tls: TLS, clients: [] } } }), [
      "agent.admin.clients: [] is empty, so every client certificate would be refused; write clients: [{name: ops-alice, role: write}, {name: prometheus, role: read}] (a certificate's DNS name or common name, or '*' for any certificate the CA signed)",
    ]);
  });

  it('an admin listener on the connection-sync port (peerListen + 1) is refused', () => {
    assert.deepEqual(problems({ agent: { cluster: CLUSTER, admin: { grpcListen: '198.18.4.1:7412', tls: TLS, clients: [{ name: 'ops', role: 'read' }] } } }), [
      "agent.admin.grpcListen: \"198.18.4.1:7412\" is the address and port connection sync listens on (agent.cluster.peerListen's port + 1); give it another port, or move agent.cluster.peerListen",
    ]);
  });

  it('every problem of a bad admin section, each with its path, value, rule and fix', () => {
    assert.deepEqual(problems({ agent: { cluster: CLUSTER, admin: {
      grpcListen: '198.18.4.1:7411', httpListen: 'localhost:9443', tls: { ca: 'ca.pem', cert: TLS.cert, key: TLS.key }, client: [],
      clients: [
        { name: 'ops-alice', role: 'write' }, { name: 'OPS-ALICE', role: 'read' }, { name: '*.ops', role: 'read' }, { name: 'a,b', role: 'read' },
        { role: 'read' }, { name: 'bob', role: 'admin' }, { name: 'carol', role: 'Write' }, { name: 'dave' }, 'eve',
      ],
    } } }), [
      'agent.admin.client: [] is not a known field; did you mean "clients"?',
      'agent.admin.httpListen: "localhost" is not an IPv4 or IPv6 address; give an IPv4 address such as 198.18.0.10 or an IPv6 address such as fd00::10 (no prefix length, port or zone)',
      'agent.admin.grpcListen: "198.18.4.1:7411" is the same address and port as agent.cluster.peerListen; give it its own port, e.g. 7412 for gRPC and 9443 for HTTPS',
      "agent.admin.tls.ca: \"ca.pem\" is not an absolute path; write tls: {ca: /etc/lbd/tls/ca.pem, cert: /etc/lbd/tls/dir1.pem, key: /etc/lbd/tls/dir1.key} (PEM files: the CA that signs the clients' certificates, and this director's certificate and key)",
      'agent.admin.clients[1].name: "OPS-ALICE" is already listed by agent.admin.clients[0]; list every certificate name once, with the one role it has',
      "agent.admin.clients[2].name: \"*.ops\" is a partial wildcard; only '*' alone (any certificate the CA signed) is supported; list each certificate name, or use '*'",
      "agent.admin.clients[3].name: \"a,b\" is not a certificate name; give the client certificate's DNS name or common name (letters, digits, \".\", \"-\", \"_\", \"@\", spaces inside; no commas), or '*'",
      "agent.admin.clients[4].name: a certificate name is required; give the client certificate's DNS name or common name (letters, digits, \".\", \"-\", \"_\", \"@\", spaces inside; no commas), or '*'",
      'agent.admin.clients[5].role: "admin" is not a supported role; use one of: read, write',
      'agent.admin.clients[6].role: "Write" is not a supported role; write it in lower case: write',
      'agent.admin.clients[7].role: a role is required; set it to one of: read, write',
      'agent.admin.clients[8]: "eve" is a string, not a client; write {name: ops-alice, role: write}',
    ]);
  });

  it('the two listeners may not share a port', () => {
    assert.deepEqual(problems({ agent: { admin: { grpcListen: '198.18.3.1:7412', httpListen: '198.18.3.1:7412', tls: TLS, clients: [{ name: '*', role: 'read' }] } } }), [
      'agent.admin.httpListen: "198.18.3.1:7412" is the same address and port as grpcListen; give each listener its own port, e.g. 7412 for gRPC and 9443 for HTTPS',
    ]);
  });

  it('a mapping is required', () => {
    assert.deepEqual(problems({ agent: { admin: '198.18.3.1:7412' } }), [
      'agent.admin: "198.18.3.1:7412" is a string, not a mapping; write admin: {grpcListen: 198.18.3.1:7412, clients: [{name: ops-alice, role: write}]} or leave it out',
    ]);
  });
});
