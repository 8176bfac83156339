import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { ConnectionSource, SyncReceiver, SyncSender, type Dial, type OutgoingFaults } from '@lbd/connsync';
import { connectionKey, type SyncedConnection } from '@lbd/dataplane';
import { FakeConnectionTable } from '@lbd/dataplane/testing';
import { ConntrackConnectionTable, netnsRunner } from '@lbd/dataplane-nft';
import { silentLogger } from '@lbd/director-agent';
import { connSyncServiceDefinition, type SyncMessage, type SyncReply } from '@lbd/proto';
import { deleteNamespace, removeOrphans, requireRoot, runPrefix } from '@lbd/testkit';

/**
 * A peer link that drops, delays and reorders messages, into a real kernel: the leader's connections (an
 * in-memory table, driven as a kernel would be) stream through sender and receiver, every message
 * encoded and decoded with the real protobuf serializers, into conntrack in a namespace. Whatever the link
 * loses, the standby's conntrack ends up holding exactly the leader's connections with their NAT bindings.
 */

const run = promisify(execFile);
const quiet = silentLogger;
const SERVICE = '198.18.0.10:80/tcp';
const MARK = 0x10001;

function connection(i: number): SyncedConnection {
  return {
    protocol: 'tcp', client: { address: `198.18.${10 + Math.floor(i / 50_000)}.1`, port: 1024 + (i % 50_000) }, vip: { address: '198.18.0.10', port: 80 },
    realServer: { address: `198.19.1.${11 + (i % 3)}`, port: 8080 }, localAddress: { address: '198.19.1.100', port: 1024 + (i % 60_000) },
    mark: 0x20002, state: 'ESTABLISHED', timeoutSec: 3600,
  };
}

describe('connection sync into a real kernel over a lossy link @privileged', function () {
  this.timeout(120_000);
  let ns: string;
  let standby: ConntrackConnectionTable;

  before(async function () {
    await requireRoot(this, { commands: ['conntrack', 'ip'] });
    await removeOrphans('lbdt');
    ns = `${runPrefix('lbdt', 'sf')}k`;
    await run('ip', ['netns', 'add', ns]);
    standby = new ConntrackConnectionTable({ runner: netnsRunner(ns) });
    await standby.prepare();
  });
  after(async function () {
    if (ns) await deleteNamespace(ns).catch(() => undefined);
  });

  it('drops, delays and reordering on the link end in resyncs, and conntrack converges to the leader\'s connections', async () => {
    const leader = new FakeConnectionTable();
    for (let i = 0; i < 1500; i++) leader.connections.set(connectionKey(connection(i)), connection(i));
    const source = new ConnectionSource(leader, quiet);
    await source.start();
    await source.setScope(new Map([[SERVICE, { group: 'g', minAgeMs: 0 }]]));

    // Every 17th message with changes is dropped, every 23rd held back 30 ms (overtaken by later ones).
    let n = 0;
    let faulty = true;
    const faults: OutgoingFaults = {
      fate: (m) => {
        if (!faulty || !m.changes) return 'send';
        n++;
        if (n % 17 === 0) return 'drop';
        if (n % 23 === 0) return 30;
        return 'send';
      },
    };
    const def = connSyncServiceDefinition().Stream;
    const receivers: SyncReceiver[] = [];
    const dial: Dial = (_peer, h) => {
      let open = true;
      const receiver = new SyncReceiver({
        table: standby, log: quiet, markOf: () => MARK, groupOf: (s) => (s === SERVICE ? 'g' : null), leads: () => false,
      }, {
        write: (r: SyncReply) => { const out = def.responseDeserialize(def.responseSerialize(r)); setImmediate(() => { if (open) h.reply(out); }); },
        fail: (_c, d) => { open = false; setImmediate(() => h.closed(d)); },
      }, new Set(['dir1']));
      receivers.push(receiver);
      return {
        write: (m: SyncMessage) => { const out = def.requestDeserialize(def.requestSerialize(m)); setImmediate(() => { if (open) receiver.onMessage(out); }); return true; },
        close: () => { open = false; receiver.end('closed'); },
      };
    };
    const sender = new SyncSender({ self: 'dir1', peer: 'dir2', source, dial, log: quiet, faults, changesPerMessage: 50, ackTimeoutMs: 1000 });
    sender.start();
    try {
      // Churn while the link misbehaves: new connections established, old ones closed.
      for (let i = 1500; i < 3000; i++) {
        leader.open({ ...connection(i), state: 'SYN_SENT' });
        leader.open(connection(i), 'update');
        if (i % 3 === 0) leader.close(connection(i - 1400));
        if (i % 100 === 0) await new Promise((r) => setTimeout(r, 20));
      }
      await new Promise((r) => setTimeout(r, 500));
      faulty = false;
      const deadline = Date.now() + 60_000;
      while (!sender.drained() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      assert.ok(sender.drained(), `not caught up: ${JSON.stringify(sender.status())}`);
      const st = sender.status();
      assert.ok(st.resyncs + st.snapshots > 1, `the faults led to at least one resync or new stream: ${JSON.stringify(st)}`);

      const kernel = new Map((await standby.dump()).map((f) => [connectionKey(f), f]));
      const want = [...leader.connections.values()];
      const missing = want.filter((f) => !kernel.has(connectionKey(f)));
      const extra = [...kernel.keys()].filter((k) => !leader.connections.has(k));
      assert.deepEqual([missing.length, extra.length], [0, 0], `missing ${missing.slice(0, 3).map(connectionKey).join(', ')}; extra ${extra.slice(0, 3).join(', ')}`);
      for (const f of want) {
        const k = kernel.get(connectionKey(f))!;
        assert.deepEqual([k.realServer, k.localAddress, k.mark], [f.realServer, f.localAddress, MARK], connectionKey(f));
      }
      console.log(`      ${want.length} connections in conntrack after ${st.snapshots} snapshots and ${st.resyncs} resyncs; ${receivers.length} streams`);
    } finally {
      sender.close();
      await source.close();
    }
  });
});
