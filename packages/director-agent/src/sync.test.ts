import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { connectionKey, type SyncedConnection } from '@lbd/dataplane';
import { FakeAddressOwner, FakeDataPlane, FakeConnectionTable } from '@lbd/dataplane/testing';
import { connSyncPort } from '@lbd/config';
import { createConnSyncClient, createPeerClient, type ConnSyncStatus__Output, type PeerSecurity } from '@lbd/proto';
import { silentLogger } from '@lbd/log';
import { LoopbackCluster, clusterAgentYaml, freePort, frontConfig, issueCert, makeCa, makeClusterPki, type ClusterPki } from '@lbd/testkit';
import { Agent } from './agent.js';
import { inProcessSync, type SyncHost, type SyncHostFactory } from './sync-host.js';
import { startClusterPair, stopClusterPair, type PairMember } from './testing/cluster-pair.js';

/**
 * Connection sync between two clustered agents in this process: real etcd on loopback, real gRPC with
 * mutual TLS on loopback, fake kernels (FakeConnectionTable stands in for conntrack). The kernel side, with
 * streams that must survive, is test/src/connsync.privileged.test.ts.
 */

const CLUSTER_CONFIG = frontConfig({
  realServers: ['198.19.1.11:8080', '198.19.1.12:8080'],
  moreServices: `  - name: nosync
    vip: 198.18.0.10
    port: 81
    mode: nat
    vipGroup: front
    sync: { enabled: false }
    realServers:
      - { address: 198.19.1.11, port: 8081 }
`,
});

function connection(i: number, port = 80, over: Partial<SyncedConnection> = {}): SyncedConnection {
  return {
    protocol: 'tcp', client: { address: '198.18.5.1', port: 10_000 + i }, vip: { address: '198.18.0.10', port },
    realServer: { address: '198.19.1.12', port: port === 80 ? 8080 : 8081 }, localAddress: port === 80 ? { address: '198.19.1.100', port: 30_000 + i } : null,
    mark: 0x50002, state: 'ESTABLISHED', timeoutSec: 431_999, ...over,
  };
}

async function waitFor(what: string, check: () => boolean | Promise<boolean>, ms = 8000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

type Member = PairMember;

describe('clustered lbd-agents: connection sync over mutual TLS (real etcd and gRPC on loopback, fake kernel)', function () {
  this.timeout(40_000);
  let cluster: LoopbackCluster;
  let dir: string;
  let pki: ClusterPki;
  const members: Member[] = [];

  // The agent answers in the message's input type; every field is filled in, as the wire would show.
  const sync = async (m: Member): Promise<ConnSyncStatus__Output> => (await m.agent.admin.clusterStatus()).sync as ConnSyncStatus__Output;

  before(async () => {
    cluster = await LoopbackCluster.open('lbd-sync');
    dir = cluster.dir;
    pki = await makeClusterPki(join(dir, 'pki'), ['dir1', 'dir2', 'dir3']);
  });
  beforeEach(async () => {
    await startClusterPair(await cluster.writePairConfigs({ pki }), { connectionTable: true }, members);
  });
  afterEach(() => stopClusterPair(members));
  after(() => cluster?.close());

  it('the leader\'s connections reach the standby with the standby\'s marks; after a failover they connection back; status shows both ends', async () => {
    const [a, b] = members as [Member, Member];
    assert.ok(a.table.prepared && b.table.prepared, 'the kernel options for mid-stream takeover are set on start');
    assert.ok((await a.agent.admin.applyText(CLUSTER_CONFIG, 'cluster.yaml', false, { author: 't' })).ok);
    // dir1 has the higher priority, but whoever applies the config first may be elected (preempt: never):
    // on a busy machine that can be dir2. Start from dir1 leading either way.
    await waitFor('a leader', () => a.owner.held.size > 0 || b.owner.held.size > 0);
    // A switchover asked of a leader that is just re-confirming its term is refused: ask until it is done.
    await waitFor('dir1 to lead', async () => {
      if (a.owner.held.size === 0 && b.owner.held.size > 0) await b.agent.admin.failover('front', 'dir1').catch(() => undefined);
      return a.owner.held.size > 0;
    }, 20_000);
    a.table.open(connection(1));
    a.table.open(connection(2));
    a.table.open(connection(3, 81)); // sync disabled for this service
    await waitFor('dir2 to hold dir1\'s connections', () => b.table.connections.size === 2);
    const bMarks = await (b.dp.observe());
    const want = bMarks.services.find((s) => s.key === '198.18.0.10:80/tcp')!.realServers.find((r) => r.address === '198.19.1.12')!.realServerId;
    assert.equal(b.table.connections.get(connectionKey(connection(1)))!.mark, want, 'injected with the standby\'s own mark for that real server');
    assert.deepEqual(b.table.connections.get(connectionKey(connection(1)))!.localAddress, connection(1).localAddress);
    assert.equal(b.table.connections.has(connectionKey(connection(3, 81))), false, 'a service with sync disabled is not copied');

    await waitFor('both ends caught up', async () => (await sync(a)).peers[0]?.caughtUp === true && (await sync(b)).peers[0]?.caughtUp === true);
    const sa = await sync(a);
    assert.equal(sa.enabled, true);
    assert.equal(sa.connections, 2);
    assert.deepEqual([sa.peers[0]!.peer, sa.peers[0]!.direction, sa.peers[0]!.state], ['dir2', 'to', 'streaming']);
    const sb = await sync(b);
    assert.deepEqual([sb.peers[0]!.peer, sb.peers[0]!.direction, sb.peers[0]!.groups], ['dir1', 'from', ['front']]);
    assert.equal(sb.peers[0]!.injected, 2);

    a.table.close(connection(2));
    await waitFor('the close to reach dir2', () => b.table.connections.size === 1);

    // A connection opened a moment before a planned switchover is at the target when the switchover is done,
    // even when the target's kernel is slow to take it.
    const apply = b.table.apply.bind(b.table);
    b.table.apply = async (c) => { await new Promise((r) => setTimeout(r, 100)); return apply(c); };
    a.table.open(connection(5));
    await a.agent.admin.failover('front', 'dir2');
    b.table.apply = apply;
    assert.ok(b.table.connections.has(connectionKey(connection(5))), 'the switchover waited for the target to acknowledge the newest connection');
    await waitFor('dir2 to lead', () => b.owner.held.size > 0 && a.owner.held.size === 0);
    b.table.open(connection(4));
    await waitFor('dir1 to get dir2\'s connections, the synced one included', () => a.table.connections.has(connectionKey(connection(4))) && a.table.connections.has(connectionKey(connection(1))));
  });

  it('an unreadable TLS file stops the start, naming the field and the file', async () => {
    const configPath = join(dir, 'bad-tls.yaml');
    const missing = join(dir, 'no-such-ca.pem');
    await writeFile(configPath, clusterAgentYaml({
      director: 'dir3', etcdEndpoint: cluster.endpoint, prefix: '/lbd-sync-bad-tls', peerListenPort: await freePort(), peers: [],
      pki: { ...pki, ca: { ...pki.ca, certPath: missing } },
    }));
    await assert.rejects(
      Agent.start({ configPath, dataPlane: new FakeDataPlane(), serve: false, watch: false, addressOwner: new FakeAddressOwner(), connectionSync: inProcessSync(new FakeConnectionTable()), log: silentLogger }),
      { message: `agent.cluster.tls.ca: cannot read ${missing} (ENOENT); give a readable PEM file` },
    );
  });

  it('a connection sync that does not answer leaves cluster status answering: sync shown off, with why', async () => {
    const configPath = join(dir, 'stuck-sync.yaml');
    await writeFile(configPath, clusterAgentYaml({
      director: 'dir3', etcdEndpoint: cluster.endpoint, prefix: '/lbd-sync-stuck', peerListenPort: await freePort(), peers: [], pki,
    }));
    // As a sync thread whose event loop is stuck: everything works but its report, which never comes.
    const stuck: SyncHostFactory = (o, c) => Object.assign(Object.create(inProcessSync(new FakeConnectionTable())(o, c)) as SyncHost, {
      report: () => new Promise<never>(() => undefined),
    });
    const agent = await Agent.start({ configPath, dataPlane: new FakeDataPlane(), serve: false, watch: false, addressOwner: new FakeAddressOwner(), connectionSync: stuck, log: silentLogger });
    try {
      const st = await agent.admin.clusterStatus();
      assert.equal(st.sync?.enabled, false);
      assert.equal(st.sync?.disabledReason, 'connection sync did not answer within 2000 ms');
    } finally {
      await agent.stop();
    }
  });

  it('a client certificate from another CA, one naming a director that is not a peer, and no certificate are all refused; a peer is asked to wait for the config', async () => {
    const [a] = members as [Member, Member];
    const pem = async (p: string): Promise<Buffer> => readFile(p);
    const other = await makeCa(join(dir, 'other'), 'other-ca');
    const foreign = await issueCert(other, join(dir, 'other'), 'dir2');
    const attempt = async (security: PeerSecurity): Promise<string> => {
      const client = createConnSyncClient('127.0.0.1', connSyncPort(a.port), security, 'dir1');
      try {
        return await new Promise<string>((resolve) => {
          const call = client.Stream();
          call.on('error', (e: grpc.ServiceError) => resolve(`${grpc.status[e.code]}: ${e.details}`));
          call.on('data', () => undefined);
          call.write({ seq: 1, hello: { from: 'dir2', session: 'x', groups: ['front'] } });
        });
      } finally {
        client.close();
      }
    };
    const ca = await pem(pki.ca.certPath);
    const untrusted = await attempt({ kind: 'tls', ca, cert: await pem(foreign.certPath), key: await pem(foreign.keyPath) });
    assert.match(untrusted, /^UNAVAILABLE/, untrusted);
    const notPeer = await attempt({ kind: 'tls', ca, cert: await pem(pki.certs.dir3!.certPath), key: await pem(pki.certs.dir3!.keyPath) });
    assert.equal(notPeer, 'PERMISSION_DENIED: the client certificate names dir3, not one of this director\'s peers (dir2)');
    // The right peer, but this director has no cluster config yet: it would refuse every connection, so it asks for later.
    const early = await attempt({ kind: 'tls', ca, cert: await pem(pki.certs.dir2!.certPath), key: await pem(pki.certs.dir2!.keyPath) });
    assert.equal(early, 'UNAVAILABLE: this director has no cluster config yet; try again shortly');
    // Without a client certificate the TLS handshake itself fails (the server requires one).
    const plain = await new Promise<string>((resolve) => {
      const client = createConnSyncClient('127.0.0.1', connSyncPort(a.port), { kind: 'insecure' }, 'dir1');
      const call = client.Stream();
      call.on('error', (e: grpc.ServiceError) => { client.close(); resolve(grpc.status[e.code] ?? String(e.code)); });
      call.write({ seq: 1, hello: { from: 'dir2', session: 'x', groups: [] } });
    });
    assert.equal(plain, 'UNAVAILABLE');
    assert.equal(a.table.applyCount, 0, 'nothing was injected');
  });

  it('promises are answered on peerListen (the election\'s own listener), only to a configured peer whose certificate names it', async () => {
    const [a] = members as [Member, Member];
    const pem = async (p: string): Promise<Buffer> => readFile(p);
    const ca = await pem(pki.ca.certPath);
    const as = async (cert: 'dir2' | 'dir3', from: string): Promise<string> => {
      const client = createPeerClient('127.0.0.1', a.port, { kind: 'tls', ca, cert: await pem(pki.certs[cert]!.certPath), key: await pem(pki.certs[cert]!.keyPath) }, 'dir1');
      try {
        return await new Promise<string>((resolve) => {
          client.RequestPromise({ from, group: 'front', term: 1, beat: 1, durationMs: 500 }, { deadline: Date.now() + 5000 }, (err, res) => {
            resolve(err ? `${grpc.status[err.code]}: ${err.details}` : `granted ${res!.granted}: ${res!.reason}`);
          });
        });
      } finally {
        client.close();
      }
    };
    assert.equal(await as('dir3', 'dir3'), 'PERMISSION_DENIED: dir3 is not in dir1\'s agent.cluster.peers');
    assert.equal(await as('dir3', 'dir2'), 'PERMISSION_DENIED: the client certificate names dir3, not dir2');
    // dir2 itself is heard: with no cluster config yet, dir1 serves no group and can take nothing over.
    assert.equal(await as('dir2', 'dir2'), 'granted true: dir1 does not serve front');
    // Connection sync is not served there, nor promises on the sync port.
    const wrong = await new Promise<string>((resolve) => {
      const client = createPeerClient('127.0.0.1', connSyncPort(a.port), { kind: 'tls', ca, cert: readFileSync(pki.certs.dir2!.certPath), key: readFileSync(pki.certs.dir2!.keyPath) }, 'dir1');
      client.RequestPromise({ from: 'dir2', group: 'front', term: 1, beat: 1, durationMs: 500 }, { deadline: Date.now() + 5000 }, (err) => { client.close(); resolve(err ? grpc.status[err.code] ?? '' : 'answered'); });
    });
    assert.equal(wrong, 'UNIMPLEMENTED');
  });
});
