import assert from 'node:assert/strict';
import { connectionKey, type ConnectionApplyOptions, type ConnectionApplyResult, type ConnectionChange, type ConnectionTable, type SyncedConnection } from '@lbd/dataplane';
import { FakeConnectionTable } from '@lbd/dataplane/testing';
import { silentLogger } from '@lbd/log';
import { connSyncServiceDefinition, type SyncMessage, type SyncMessage__Output, type SyncReply, type SyncReply__Output } from '@lbd/proto';
import { SyncReceiver, type ReceiverContext } from './receiver.js';
import { SyncSender, type Dial, type OutgoingFaults, type SenderOptions } from './sender.js';
import { ConnectionSource, type SyncScope } from './source.js';

/**
 * Sender, source and receiver over an in-memory link that encodes every message with the real protobuf
 * serializers, so what the receiver sees is what gRPC would deliver. The kernels are FakeConnectionTables.
 */

const SERVICE = '198.18.0.10:80/tcp';
const UDP_SERVICE = '198.18.0.10:53/udp';
const quiet = silentLogger;

function connection(i: number, over: Partial<SyncedConnection> = {}): SyncedConnection {
  return {
    protocol: 'tcp', client: { address: '198.18.5.1', port: 10_000 + i }, vip: { address: '198.18.0.10', port: 80 },
    realServer: { address: '198.19.1.11', port: 8080 + (i % 3) }, localAddress: { address: '198.19.1.100', port: 20_000 + i },
    mark: 0x10001 + (i % 3), state: 'ESTABLISHED', timeoutSec: 431_999, ...over,
  };
}

async function until(what: string, check: () => boolean, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const def = connSyncServiceDefinition().Stream;
const roundTripMessage = (m: SyncMessage): SyncMessage__Output => def.requestDeserialize(def.requestSerialize(m));
const roundTripReply = (r: SyncReply): SyncReply__Output => def.responseDeserialize(def.responseSerialize(r));

interface Pair {
  leader: FakeConnectionTable;
  standby: FakeConnectionTable;
  source: ConnectionSource;
  sender: SyncSender;
  receivers: SyncReceiver[];
  refused: string[];
  close(): Promise<void>;
}

/** The standby's marks are its own: the leader's mark + 0x100 (service ids differ between directors). */
const standbyMark = (rs: { port: number }): number => 0x10001 + 0x100 + (rs.port - 8080);

async function pair(opts: { initial?: SyncedConnection[]; scope?: SyncScope; sender?: Partial<SenderOptions>; leads?: () => boolean; allowed?: string[]; table?: FakeConnectionTable } = {}): Promise<Pair> {
  const leader = opts.table ?? new FakeConnectionTable();
  const standby = new FakeConnectionTable();
  for (const f of opts.initial ?? []) leader.connections.set(connectionKey(f), f);
  const source = new ConnectionSource(leader, quiet);
  await source.start();
  await source.setScope(opts.scope ?? new Map([[SERVICE, { group: 'g', minAgeMs: 0 }], [UDP_SERVICE, { group: 'g', minAgeMs: 0 }]]));
  const receivers: SyncReceiver[] = [];
  const refused: string[] = [];
  const ctx: ReceiverContext = {
    table: standby, log: quiet,
    markOf: (service, rs) => ([SERVICE, UDP_SERVICE].includes(service) ? standbyMark(rs) : null),
    groupOf: (service) => ([SERVICE, UDP_SERVICE].includes(service) ? 'g' : null),
    leads: opts.leads ?? (() => false),
  };
  const dial: Dial = (_peer, h) => {
    let open = true;
    const receiver = new SyncReceiver(ctx, {
      write: (r) => { const out = roundTripReply(r); setImmediate(() => { if (open) h.reply(out); }); },
      fail: (_code, details) => { refused.push(details); open = false; setImmediate(() => h.closed(details)); },
    }, new Set(opts.allowed ?? ['dir1']));
    receivers.push(receiver);
    return {
      write: (m) => { const out = roundTripMessage(m); setImmediate(() => { if (open) receiver.onMessage(out); }); return true; },
      close: () => { open = false; receiver.end('closed'); },
    };
  };
  const sender = new SyncSender({ self: 'dir1', peer: 'dir2', source, dial, log: quiet, ackTimeoutMs: 300, ...opts.sender });
  sender.start();
  return {
    leader, standby, source, sender, receivers, refused,
    close: async () => { sender.close(); await source.close(); },
  };
}

/** The standby holds exactly the leader's copiable connections, each with the same binding and its own mark. */
function assertMirrored(p: Pair): void {
  const want = [...p.leader.connections.values()].filter((f) => (f.protocol === 'tcp' ? f.state === 'ESTABLISHED' : f.state === 'ASSURED'));
  assert.deepEqual([...p.standby.connections.keys()].sort(), want.map(connectionKey).sort());
  for (const f of want) {
    const got = p.standby.connections.get(connectionKey(f))!;
    assert.deepEqual([got.realServer, got.localAddress, got.mark], [f.realServer, f.localAddress, standbyMark(f.realServer)]);
  }
}

describe('connection sync: sender, source and receiver', () => {
  const open: Pair[] = [];
  afterEach(async () => { for (const p of open.splice(0)) await p.close(); });
  const start = async (o?: Parameters<typeof pair>[0]): Promise<Pair> => { const p = await pair(o); open.push(p); return p; };

  it('a snapshot of the connections already there, then new, changed and closed connections, each with the standby\'s own mark', async () => {
    // Connections that existed before sync started come from the kernel (the source's dump), no event needed.
    const p = await start({ initial: [0, 1, 2, 3, 4].map((i) => connection(i)) });
    await until('caught up', () => p.sender.drained());
    assertMirrored(p);
    p.leader.open(connection(10, { state: 'SYN_SENT' }));
    p.leader.open(connection(11, { protocol: 'udp', vip: { address: '198.18.0.10', port: 53 }, state: 'UNREPLIED', localAddress: null, realServer: { address: '198.19.1.11', port: 8080 } }));
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(p.standby.connections.size, 5, 'half-open TCP and one-way UDP are not copied');
    p.leader.open(connection(10), 'update');
    p.leader.open(connection(11, { protocol: 'udp', vip: { address: '198.18.0.10', port: 53 }, state: 'ASSURED', localAddress: null, realServer: { address: '198.19.1.11', port: 8080 } }), 'update');
    p.leader.close(connection(2));
    await until('changes applied', () => p.standby.connections.size === 6 && !p.standby.connections.has(connectionKey(connection(2))));
    assertMirrored(p);
    assert.equal(p.sender.status().lastError, '');
    assert.ok(p.sender.status().lagP99Ms >= 0);
  });

  it('a dropped, a delayed and a reordered message each lead to a resync, and the standby converges', async () => {
    // The second fault waits for the first resync: two faults inside one resync's window would be one gap
    // (on a loaded machine they were, and the test waited for a second resync that had no cause).
    let pair: Pair | undefined;
    let n = 0;
    let delayed = false;
    const faults: OutgoingFaults = {
      fate: (m) => {
        if (!m.changes || (m.changes.changes?.length ?? 0) === 0) return 'send';
        n++;
        if (n === 3) return 'drop';
        if (!delayed && (pair?.sender.status().resyncs ?? 0) >= 1) {
          delayed = true;
          return 40; // overtaken by the next ones: arrives out of order
        }
        return 'send';
      },
    };
    const p = await start({ sender: { faults, changesPerMessage: 4, flushMs: 1 } });
    pair = p;
    // New connections until both faults have had their resync (bounded: a lost resync fails the wait below).
    for (let i = 0; i < 2000 && p.sender.status().resyncs < 2; i++) {
      p.leader.open(connection(i));
      p.leader.open(connection(i), 'update');
      if (i % 7 === 0 && i > 0) p.leader.close(connection(i - 1));
      if (i % 10 === 0) await new Promise((r) => setTimeout(r, 5));
    }
    await until('resynced and caught up', () => p.sender.status().resyncs >= 2 && p.sender.drained(), 8000);
    assertMirrored(p);
    assert.ok(p.receivers[0]!.status().resyncs >= 2);
  });

  it('changes that do not fill a message wait while one is unacknowledged and go on its ack; a full message goes on its own', async () => {
    const sent: number[] = [];
    const faults: OutgoingFaults = {
      fate: (m) => {
        const n = m.changes?.changes?.length ?? 0;
        if (n > 0) sent.push(n);
        return 'send';
      },
    };
    const p = await start({ sender: { faults, changesPerMessage: 20, flushMs: 1 } });
    await until('caught up', () => p.sender.drained());
    sent.length = 0;
    let release: () => void = () => {};
    const released = new Promise<void>((r) => { release = r; });
    let applying = 0;
    const apply = p.standby.apply.bind(p.standby);
    p.standby.apply = async (c) => { applying++; await released; return apply(c); };
    // A timer of the sender's flushMs set after its flush timer fires after it: the flush has had its turn then.
    const afterFlush = (): Promise<void> => new Promise((r) => setTimeout(r, 1));
    p.leader.open(connection(0));
    await until('the first change is being applied', () => applying === 1);
    assert.deepEqual(sent, [1]);
    for (let i = 1; i <= 5; i++) p.leader.open(connection(i));
    await afterFlush();
    assert.deepEqual(sent, [1], 'five changes wait for the ack of the message in flight');
    for (let i = 6; i <= 25; i++) p.leader.open(connection(i));
    await afterFlush();
    assert.deepEqual(sent, [1, 20], 'a full message goes without waiting');
    release();
    await until('caught up', () => p.sender.drained() && p.standby.connections.size === 26);
    assert.deepEqual(sent, [1, 20, 5], 'the rest goes once both are acknowledged');
    assertMirrored(p);
  });

  it('a connection that begins and ends while its first copy waits is never sent; one whose copy went is removed as before', async () => {
    const p = await start({ initial: [connection(1)], sender: { flushMs: 1 } });
    await until('caught up', () => p.sender.drained() && p.standby.connections.size === 1);
    let release: () => void = () => {};
    const released = new Promise<void>((r) => { release = r; });
    let applying = 0;
    const applied: ConnectionChange[][] = [];
    const apply = p.standby.apply.bind(p.standby);
    p.standby.apply = async (c) => { applying++; await released; applied.push([...c]); return apply(c); };
    // Connection 2's copy goes and is held in the standby's kernel: the next changes wait for its ack.
    p.leader.open(connection(2));
    await until('the copy of connection 2 is being applied', () => applying === 1);
    // Connection 3 begins and ends (TIME_WAIT) behind it; connection 4 begins and lives; connection 1 ends.
    p.leader.open(connection(3));
    p.leader.open(connection(3, { state: 'TIME_WAIT' }), 'update');
    p.leader.open(connection(4));
    p.leader.open(connection(1, { state: 'TIME_WAIT' }), 'update');
    p.leader.close(connection(3, { state: 'TIME_WAIT' }));
    release();
    await until('caught up', () => p.sender.drained() && applying === 2);
    const ops = applied.map((batch) => batch.map((c) => `${c.op} ${c.connection.client.port - 10_000}`));
    assert.deepEqual(ops, [['upsert 2'], ['upsert 4', 'remove-binding 1']], 'connection 3 went neither way');
    assert.deepEqual([...p.standby.connections.values()].map((f) => f.client.port - 10_000).sort(), [2, 4]);
    assert.equal(p.sender.status().endedUnsent, 1);
  });

  it('a message lost at the tail (nothing after it shows the gap) is found by the ack timeout', async () => {
    let drop = false;
    const p = await start({ sender: { faults: { fate: (m) => (drop && m.changes ? 'drop' : 'send') }, ackTimeoutMs: 200 } });
    await until('caught up', () => p.sender.drained());
    drop = true;
    p.leader.open(connection(1));
    p.leader.open(connection(1), 'update');
    await new Promise((r) => setTimeout(r, 20));
    drop = false;
    await until('a new stream and a snapshot', () => p.receivers.length === 2 && p.sender.drained(), 3000);
    assertMirrored(p);
  });

  it('a peer too slow for the window and the queue gets a snapshot instead of unbounded memory', async () => {
    // The standby applies nothing for a while: acks stop, the window fills, the queue overflows.
    let stall = true;
    const p = await start({ sender: { windowMessages: 2, changesPerMessage: 10, maxQueuedChanges: 100, ackTimeoutMs: 5000 } });
    await until('caught up', () => p.sender.drained());
    const apply = p.standby.apply.bind(p.standby);
    p.standby.apply = async (c) => { while (stall) await new Promise((r) => setTimeout(r, 5)); return apply(c); };
    for (let i = 0; i < 500; i++) { p.leader.open(connection(i)); p.leader.open(connection(i), 'update'); }
    assert.ok(p.sender.status().queued <= 100, `queue ${p.sender.status().queued} stays within its bound`);
    assert.ok(p.sender.status().overflows >= 1);
    stall = false;
    await until('caught up after the overflow', () => p.sender.drained(), 5000);
    assertMirrored(p);
  });

  it('lost events make a new snapshot; a watch that broke is started again, and later connections still arrive', async () => {
    const p = await start({ initial: [connection(1)] });
    await until('caught up', () => p.sender.drained());
    const snapshots = p.sender.status().snapshots;
    p.leader.connections.set(connectionKey(connection(2)), connection(2)); // changed while events were lost: only a dump finds it
    p.leader.lose('ENOBUFS');
    await until('a new snapshot with the connection the events missed', () => p.sender.status().snapshots > snapshots && p.standby.connections.has(connectionKey(connection(2))));
    p.leader.lose('helper exited', true);
    await until('caught up again', () => p.sender.drained() && p.sender.status().snapshots > snapshots + 1);
    p.leader.open(connection(3));
    p.leader.open(connection(3), 'update');
    await until('a connection opened after the watch broke', () => p.standby.connections.has(connectionKey(connection(3))));
    assertMirrored(p);
    assert.equal(p.source.stats().lossEvents, 2);
  });

  it('lost events: a copy whose end they hid goes too (gone from the table, or ended in TIME_WAIT, whose destroy lbd-ctnl does not report)', async () => {
    const p = await start({ initial: [connection(1), connection(2), connection(3)] });
    await until('caught up', () => p.sender.drained() && p.standby.connections.size === 3);
    const snapshots = p.sender.status().snapshots;
    // Changed while events were lost: 1 is gone, 2 ended (the kernel keeps it in TIME_WAIT for minutes).
    p.leader.connections.delete(connectionKey(connection(1)));
    p.leader.connections.set(connectionKey(connection(2)), connection(2, { state: 'TIME_WAIT' }));
    p.leader.lose('ENOBUFS');
    await until('a new snapshot without them', () => p.sender.status().snapshots > snapshots && p.sender.drained() && p.standby.connections.size === 1);
    assert.deepEqual([...p.standby.connections.keys()], [connectionKey(connection(3))]);
    assert.equal(p.source.stats().connections, 1);
  });

  it('a watch that cannot start (a saturated box) fails nothing: the table is sent as read, the watch is tried again, then events flow', async () => {
    const leader = new FakeConnectionTable();
    leader.failWatches = 2;
    leader.connections.set(connectionKey(connection(1)), connection(1));
    const p = await start({ table: leader });
    assert.equal(leader.watchStarts, 1, 'the scope change went on without the watch');
    await until('the connection the table held, copied', () => p.standby.connections.has(connectionKey(connection(1))));
    // The two failed starts and then one that runs (250 ms, then 500 ms later): the table is read and sent again.
    await until('the watch running', () => leader.watchStarts === 3);
    p.leader.open(connection(2));
    p.leader.open(connection(2), 'update');
    await until('a connection opened once the watch runs', () => p.standby.connections.has(connectionKey(connection(2))));
    assertMirrored(p);
    assert.equal(p.source.stats().lossEvents, 2);
    assert.match(p.source.stats().lastLoss, /^cannot follow the kernel's connection events: watch: no conntrack event/);
  });

  it('minAgeMs holds young connections back; one closed before it was due is never sent', async () => {
    const p = await start({ scope: new Map([[SERVICE, { group: 'g', minAgeMs: 150 }]]) });
    await until('caught up', () => p.sender.drained());
    p.leader.open(connection(1, { state: 'SYN_SENT' }));
    p.leader.open(connection(1), 'update');
    p.leader.open(connection(2, { state: 'SYN_SENT' }));
    p.leader.open(connection(2), 'update');
    await new Promise((r) => setTimeout(r, 60));
    assert.equal(p.standby.connections.size, 0);
    p.leader.close(connection(2));
    await until('the old enough one copied', () => p.standby.connections.size === 1, 2000);
    assert.ok(p.standby.connections.has(connectionKey(connection(1))));
    assert.equal(p.sender.status().connectionsSent, 1);
  });

  it('minAgeMs: one that ended before it was due (TIME_WAIT: the kernel keeps the entry for minutes) is never sent either', async () => {
    const p = await start({ scope: new Map([[SERVICE, { group: 'g', minAgeMs: 150 }]]) });
    await until('caught up', () => p.sender.drained());
    // 2 first: it is due no later than 1, so by the time 1 is sent, 2 would have been too.
    p.leader.open(connection(2, { state: 'SYN_SENT' }));
    p.leader.open(connection(2), 'update');
    p.leader.open(connection(1, { state: 'SYN_SENT' }));
    p.leader.open(connection(1), 'update');
    // Its close went by quickly (lbd-ctnl's kernel filter passes no FIN_WAIT, CLOSE_WAIT or LAST_ACK): held
    // as ESTABLISHED, it would have been sent so, a ghost on every peer for as long as an established entry lives.
    p.leader.open(connection(2, { state: 'TIME_WAIT' }), 'update');
    await until('the old enough one copied', () => p.standby.connections.size > 0, 2000);
    assert.deepEqual([...p.standby.connections.keys()], [connectionKey(connection(1))]);
    assert.equal(p.sender.status().connectionsSent, 1);
  });

  for (const keepYoung of [false, true]) it(`a planned handover sends the group's handshakes under way and unassured UDP flows (never copied as they come), so the target completes them with the same binding${keepYoung ? '; handshakes the watch kept back (lbd-ctnl keep-young) too' : ''}`, async () => {
    const p = await start();
    p.leader.keepYoung = keepYoung;
    await until('caught up', () => p.sender.drained());
    const udp = (i: number, state: string): SyncedConnection => connection(i, { protocol: 'udp', vip: { address: '198.18.0.10', port: 53 }, state, localAddress: null });
    p.leader.open(connection(1, { state: 'SYN_SENT' }));
    p.leader.open(connection(1, { state: 'SYN_RECV' }), 'update');
    p.leader.open(connection(2, { state: 'SYN_SENT' }));
    p.leader.open(connection(2), 'update');
    p.leader.open(udp(3, 'REPLIED'));
    p.leader.open(connection(4, { state: 'SYN_SENT' }));
    p.leader.close(connection(4, { state: 'SYN_SENT' }));
    await until('the established one copied', () => p.standby.connections.size === 1);
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(p.standby.connections.size, 1, 'young ones are not copied as they come');
    assert.equal(await p.source.handOverYoung('another-group'), 0);
    assert.equal(await p.source.handOverYoung('g'), 2, 'the handshake and the unassured UDP flow; not the closed one, not the established one again');
    await until('the young ones at the target', () => p.standby.connections.size === 3);
    const got = p.standby.connections.get(connectionKey(connection(1)))!;
    assert.deepEqual([got.state, got.realServer, got.localAddress], ['SYN_RECV', connection(1).realServer, connection(1).localAddress]);
    // From now on they are copied like the others: one that ends is removed at the target, and none is sent twice.
    p.leader.close(connection(1, { state: 'SYN_RECV' }));
    await until('the ended one removed at the target', () => !p.standby.connections.has(connectionKey(connection(1))));
    assert.equal(await p.source.handOverYoung('g'), 0);
  });

  it('a SYN-proxied connection reaches the standby with the cookie of its first event and the adjustment of a later one; a changed adjustment goes again', async () => {
    const p = await start();
    await until('caught up', () => p.sender.drained());
    const synProxy = { isn: 3_000_000_000, its: 0, tsoff: 0 };
    const adjust = (offset: number): SyncedConnection['seqAdjust'] => ({ original: { correctionPos: 0, offsetBefore: 0, offsetAfter: 0 }, reply: { correctionPos: 0, offsetBefore: offset, offsetAfter: offset } });
    // As the kernel reports one (seen with lbd-ctnl in the lab): its NEW event (the proxy's SYN to the real server)
    // has the cookie, the update that makes it ESTABLISHED neither, and an update without a TCP state the adjustment.
    p.leader.open(connection(1, { state: 'SYN_SENT', synProxy }));
    p.leader.open(connection(1), 'update');
    p.leader.open(connection(1, { state: '', seqAdjust: adjust(1000) }), 'update');
    await until('the proxied one copied with its adjustment', () => p.standby.connections.get(connectionKey(connection(1)))?.seqAdjust !== undefined);
    const got = p.standby.connections.get(connectionKey(connection(1)))!;
    assert.deepEqual([got.state, got.synProxy, got.seqAdjust], ['ESTABLISHED', synProxy, adjust(1000)]);
    p.leader.open(connection(1, { state: '', seqAdjust: adjust(2000) }), 'update');
    await until('the new adjustment at the standby', () => p.standby.connections.get(connectionKey(connection(1)))?.seqAdjust?.reply.offsetAfter === 2000);
    assert.deepEqual(p.standby.connections.get(connectionKey(connection(1)))!.synProxy, synProxy, 'the cookie kept');
  });

  it('an update without a TCP state of a copied connection that is not proxied keeps the state it had: nothing is sent again, nothing removed', async () => {
    const p = await start({ initial: [1].map((i) => connection(i)) });
    await until('caught up', () => p.sender.drained() && p.standby.connections.size === 1);
    const sent = p.sender.status().connectionsSent;
    p.leader.open(connection(1, { state: '' }), 'update');
    // A later connection is the sign that the update before it was handled (events go in order).
    p.leader.open(connection(2));
    await until('the later connection at the standby', () => p.standby.connections.size === 2);
    assert.equal(p.sender.status().connectionsSent, sent + 1, 'only the later connection was sent');
    assert.equal(p.standby.connections.get(connectionKey(connection(1)))?.state, 'ESTABLISHED');
  });

  it('a connection that is over (TIME_WAIT, CLOSE) leaves the standby at once, not when the leader\'s kernel forgets it', async () => {
    const p = await start({ initial: [1, 2].map((i) => connection(i)) });
    await until('caught up', () => p.sender.drained() && p.standby.connections.size === 2);
    p.leader.open(connection(1, { state: 'FIN_WAIT' }), 'update');
    p.leader.open(connection(1, { state: 'TIME_WAIT' }), 'update');
    p.leader.open(connection(2, { state: 'CLOSE' }), 'update');
    await until('both gone from the standby while the leader still holds them', () => p.standby.connections.size === 0);
    assert.equal(p.leader.connections.size, 2);
    // The kernel forgetting them later sends nothing more.
    const sent = p.sender.status().connectionsSent;
    p.leader.close(connection(1, { state: 'TIME_WAIT' }));
    p.leader.close(connection(2, { state: 'CLOSE' }));
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(p.sender.status().connectionsSent, sent);
  });

  it('a peer copy of a group this director leads is not applied (it would overwrite the live connections)', async () => {
    const p = await start({ leads: () => true });
    p.leader.open(connection(1));
    p.leader.open(connection(1), 'update');
    await until('acknowledged', () => p.sender.status().ackedSeq >= 4 && p.sender.status().queued === 0);
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(p.standby.connections.size, 0);
    assert.ok(p.receivers[0]!.status().skipped >= 1);
  });

  it('a snapshot removes what the standby holds for the group that the leader no longer has', async () => {
    const p = await start();
    p.standby.connections.set(connectionKey(connection(99)), { ...connection(99), mark: standbyMark(connection(99).realServer) });
    p.leader.open(connection(1));
    p.leader.open(connection(1), 'update');
    await until('caught up', () => p.sender.drained() && !p.standby.connections.has(connectionKey(connection(99))));
    assertMirrored(p);
  });

  it('a hello from a director the certificate does not name is refused; nothing is injected', async () => {
    const p = await start({ allowed: ['dir3'] });
    p.leader.open(connection(1));
    p.leader.open(connection(1), 'update');
    await until('refused', () => p.refused.length > 0);
    assert.match(p.refused[0]!, /hello\.from: "dir1" is not a configured peer named by the stream's certificate \(allowed: dir3\)/);
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(p.standby.connections.size, 0);
  });

  it('a peer that stays unreachable is logged once, not at every retry; again after the stream worked in between', async () => {
    const warns: unknown[] = [];
    const log = { ...quiet, warn: (_msg: string, f?: Record<string, unknown>) => { warns.push(f?.reason); } };
    const leader = new FakeConnectionTable();
    leader.connections.set(connectionKey(connection(1)), connection(1));
    const source = new ConnectionSource(leader, quiet);
    await source.start();
    await source.setScope(new Map([[SERVICE, { group: 'g', minAgeMs: 0 }]]));
    const standby = new FakeConnectionTable();
    const ctx: ReceiverContext = { table: standby, log: quiet, markOf: (_s, rs) => standbyMark(rs), groupOf: () => 'g', leads: () => false };
    let dials = 0;
    let reachable = false;
    let peerSide: Parameters<Dial>[1] | null = null;
    const dial: Dial = (_peer, h) => {
      dials++;
      if (!reachable) {
        setImmediate(() => h.closed('ECONNREFUSED'));
        return { write: () => true, close: () => {} };
      }
      peerSide = h;
      const receiver = new SyncReceiver(ctx, { write: (r) => { const out = roundTripReply(r); setImmediate(() => h.reply(out)); }, fail: () => {} }, new Set(['dir1']));
      return { write: (m) => { const out = roundTripMessage(m); setImmediate(() => receiver.onMessage(out)); return true; }, close: () => receiver.end('closed') };
    };
    const sender = new SyncSender({ self: 'dir1', peer: 'dir2', source, dial, log, ackTimeoutMs: 60_000 });
    try {
      sender.start();
      await until('four refused dials', () => dials >= 4, 10_000);
      assert.deepEqual(warns, ['ECONNREFUSED'], 'four refusals alike: said once');
      reachable = true;
      await until('the stream works', () => sender.drained() && standby.connections.size === 1, 10_000);
      reachable = false;
      peerSide!.closed('ECONNREFUSED');
      await until('said again: the stream had worked since', () => warns.length === 2, 5000);
    } finally {
      sender.close();
      await source.close();
    }
  });

  it('a connection in its last second (conntrack reads 0 s left) goes as 1 s, and the stream stays open', async () => {
    const p = await start({ initial: [connection(0, { timeoutSec: 0 }), connection(1)] });
    await until('caught up', () => p.sender.drained());
    assert.deepEqual(p.refused, []);
    assert.equal(p.standby.connections.get(connectionKey(connection(0)))?.timeoutSec, 1);
    assertMirrored(p);
  });

  for (const takenOver of [false, true]) {
    it(takenOver
      ? 'a group this director takes over during a peer\'s snapshot of it keeps what the snapshot did not name: those entries are its own live connections now'
      : 'what a peer\'s snapshot of a group does not name is removed at its end (the control: this director does not lead the group)', async () => {
      const standby = new FakeConnectionTable();
      const held: SyncedConnection = {
        protocol: 'tcp', client: { address: '198.18.5.2', port: 1001 }, vip: { address: '198.18.0.10', port: 80 }, realServer: { address: '198.19.1.11', port: 8080 },
        localAddress: { address: '198.19.1.100', port: 20001 }, mark: 0x10001, state: 'ESTABLISHED', timeoutSec: 300,
      };
      standby.connections.set(connectionKey(held), held);
      let leading = false;
      const acked: number[] = [];
      const r = new SyncReceiver({ table: standby, log: quiet, markOf: () => 0x10001, groupOf: () => 'g', leads: () => leading }, {
        write: (reply) => { if (reply.ack) acked.push(Number(reply.ack.seq)); }, fail: () => undefined,
      }, new Set(['dir1']));
      const send = (m: SyncMessage): void => r.onMessage(roundTripMessage(m));
      send({ seq: 1, hello: { from: 'dir1', session: 's', groups: ['g'] } });
      send({ seq: 2, snapshotBegin: { groups: ['g'], connections: 0, reason: 'first' } });
      // The snapshot's start has read what this director holds of g: `held` is a candidate for removal.
      await until('the snapshot begun', () => acked.includes(2));
      // This director claims g while the snapshot is still coming. The snapshot does not name `held` (had it
      // sent a copy, a director that leads g skips it: it never applies a copy of a group it leads).
      leading = takenOver;
      send({ seq: 3, snapshotEnd: {} });
      await until('the snapshot ended', () => acked.includes(3));
      assert.equal(standby.connections.has(connectionKey(held)), takenOver, takenOver ? 'its own live connection was removed' : 'a stale copy was kept');
    });
  }

  it('a snapshot\'s stale removal takes the binding it read, not a live copy of the same client connection another peer put over it since (a client port reused)', async () => {
    const standby = new FakeConnectionTable();
    const leftover: SyncedConnection = {
      protocol: 'tcp', client: { address: '198.18.2.2', port: 60496 }, vip: { address: '198.18.10.10', port: 9000 }, realServer: { address: '198.19.1.11', port: 9000 },
      localAddress: { address: '198.19.1.80', port: 60496 }, mark: 0x10001, state: 'ESTABLISHED', timeoutSec: 300,
    };
    standby.connections.set(connectionKey(leftover), leftover);
    // Slot 2's pool holds .80, slot 3's .88; this director leads neither.
    const groupOf = (_service: string, local: string | null): string => (local === '198.19.1.88' ? 'slot-3' : 'slot-2');
    const acked = new Map<string, number[]>();
    const receiver = (peer: string): SyncReceiver => {
      acked.set(peer, []);
      return new SyncReceiver({ table: standby, log: quiet, markOf: () => 0x10001, groupOf, leads: () => false }, {
        write: (reply) => { if (reply.ack) acked.get(peer)!.push(Number(reply.ack.seq)); }, fail: () => undefined,
      }, new Set([peer]));
    };
    const slot2 = receiver('dir1');
    const slot3 = receiver('dir3');
    slot2.onMessage(roundTripMessage({ seq: 1, hello: { from: 'dir1', session: 's1', groups: ['slot-2'] } }));
    slot2.onMessage(roundTripMessage({ seq: 2, snapshotBegin: { groups: ['slot-2'], connections: 0, reason: 'first' } }));
    await until('slot 2\'s snapshot begun (the leftover read as a candidate)', () => acked.get('dir1')!.includes(2));
    // Slot 3's leader has the client's new connection from the same port, bound to .88: its copy replaces the leftover.
    const live = { id: { protocol: 'tcp', client: leftover.client, vip: leftover.vip }, realServer: leftover.realServer, localAddress: { address: '198.19.1.88', port: 60496 }, state: 'ESTABLISHED', timeoutSec: 300 };
    for (const m of [{ seq: 1, hello: { from: 'dir3', session: 's3', groups: ['slot-3'] } }, { seq: 2, changes: { changes: [{ upsert: live }] } }] as SyncMessage[]) slot3.onMessage(roundTripMessage(m));
    await until('the live copy injected', () => standby.connections.get(connectionKey(leftover))?.localAddress?.address === '198.19.1.88');
    slot2.onMessage(roundTripMessage({ seq: 3, snapshotEnd: {} }));
    await until('slot 2\'s snapshot ended', () => acked.get('dir1')!.includes(3));
    assert.equal(standby.connections.get(connectionKey(leftover))?.localAddress?.address, '198.19.1.88', 'the live copy was removed as stale');
  });

  it('a peer\'s remove takes the binding the peer removed: a live copy of the same client connection from another peer stays', async () => {
    const standby = new FakeConnectionTable();
    const acked: number[] = [];
    const r = new SyncReceiver({ table: standby, log: quiet, markOf: () => 0x10001, groupOf: () => 'g', leads: () => false }, {
      write: (reply) => { if (reply.ack) acked.push(Number(reply.ack.seq)); }, fail: () => undefined,
    }, new Set(['dir1']));
    const live = connection(1, { localAddress: { address: '198.19.1.88', port: 40001 } });
    standby.connections.set(connectionKey(live), live);
    const id = { protocol: 'tcp', client: live.client, vip: live.vip };
    // The peer's own entry of the client's port had .80 (a leftover a copy from the port's new holder replaced there).
    const removeOf = (local: string): SyncMessage['changes'] => ({ changes: [{ remove: id, removedRealServer: live.realServer, removedLocalAddress: { address: local, port: 40001 } }] });
    for (const m of [{ seq: 1, hello: { from: 'dir1', session: 's', groups: ['g'] } }, { seq: 2, changes: removeOf('198.19.1.80') }] as SyncMessage[]) r.onMessage(roundTripMessage(m));
    await until('the remove applied', () => acked.includes(2));
    assert.ok(standby.connections.has(connectionKey(live)), 'the live copy was removed by another binding\'s remove');
    r.onMessage(roundTripMessage({ seq: 3, changes: removeOf('198.19.1.88') }));
    await until('the second remove applied', () => acked.includes(3));
    assert.equal(standby.connections.has(connectionKey(live)), false, 'the remove of its own binding left it');
  });

  it('lets an entry holding a copy\'s reply tuple go only when it is not of a group this director leads, and says when copies fail', async () => {
    const standby = new FakeConnectionTable();
    // The kernel's answer to what the receiver lets go: each holder offered, per group.
    const verdicts: Array<[string, boolean]> = [];
    const holders: SyncedConnection[] = [
      connection(1, { localAddress: { address: '198.19.1.100', port: 30001 } }),
      connection(2, { localAddress: { address: '198.19.1.200', port: 30002 } }),
      connection(3, { vip: { address: '198.18.0.99', port: 80 } }),
    ];
    const table: ConnectionTable = {
      prepare: () => standby.prepare(), watch: (h) => standby.watch(h), dump: () => standby.dump(),
      apply: async (changes: readonly ConnectionChange[], opts?: ConnectionApplyOptions): Promise<ConnectionApplyResult> => {
        for (const h of holders) verdicts.push([connectionKey(h), opts?.evictReplyHolder?.(h) ?? false]);
        return { inserted: 0, replaced: 0, refreshed: 0, removed: 0, failed: changes.length, errors: ['tcp x: the kernel has another entry with this connection\'s reply tuple (EEXIST)'] };
      },
    };
    const warns: string[] = [];
    const log = { ...quiet, warn: (msg: string, f?: Record<string, unknown>) => { warns.push(`${msg} ${String(f?.error)}`); } };
    // Local address .100 is in a group this director leads (live here); .200 in one it does not; the third is of no service.
    const groupOf = (service: string, local: string | null): string | null => (service !== SERVICE ? null : local === '198.19.1.100' ? 'mine' : 'theirs');
    const acked: number[] = [];
    const r = new SyncReceiver({ table, log, markOf: () => 0x10001, groupOf, leads: (g) => g === 'mine' }, {
      write: (reply) => { if (reply.ack) acked.push(Number(reply.ack.seq)); }, fail: () => undefined,
    }, new Set(['dir1']));
    const change = { upsert: { id: { protocol: 'tcp', client: { address: '198.18.5.1', port: 1000 }, vip: { address: '198.18.0.10', port: 80 } }, realServer: { address: '198.19.1.11', port: 8080 }, localAddress: { address: '198.19.1.200', port: 30002 }, state: 'ESTABLISHED', timeoutSec: 300 } };
    for (const m of [{ seq: 1, hello: { from: 'dir1', session: 's', groups: ['theirs'] } }, { seq: 2, changes: { changes: [change] } }, { seq: 3, changes: { changes: [change] } }] as SyncMessage[]) r.onMessage(roundTripMessage(m));
    await until('both applied', () => acked.includes(3));
    assert.deepEqual(verdicts.slice(0, 3), [[connectionKey(holders[0]!), false], [connectionKey(holders[1]!), true], [connectionKey(holders[2]!), true]]);
    assert.deepEqual(warns, ['connection sync: copies from a peer could not be injected tcp x: the kernel has another entry with this connection\'s reply tuple (EEXIST)'], 'said once for two alike');
  });

  it('a standby catching up writes at most 2 048 changes a kernel run, whole messages, with a turn of the event loop between runs', async () => {
    const standby = new FakeConnectionTable();
    let release = (): void => undefined;
    const held = new Promise<void>((r) => { release = r; });
    const runs: Array<{ changes: number; turned: boolean }> = [];
    let turned = true;
    const table: ConnectionTable = {
      prepare: () => standby.prepare(), watch: (h) => standby.watch(h), dump: () => standby.dump(),
      apply: async (changes: readonly ConnectionChange[]): Promise<ConnectionApplyResult> => {
        // The first run is held while the backlog arrives behind it.
        if (runs.length === 0) await held;
        runs.push({ changes: changes.length, turned });
        turned = false;
        setImmediate(() => { turned = true; });
        // A kernel run holds the thread (the addon writes on it) longer than the receiver's 2 ms gap between runs.
        const end = performance.now() + 3;
        while (performance.now() < end) { /* the kernel's work */ }
        return standby.apply(changes);
      },
    };
    const acked: number[] = [];
    const r = new SyncReceiver({ table, log: quiet, markOf: () => 0x10001, groupOf: () => 'g', leads: () => false }, {
      write: (reply) => { if (reply.ack) acked.push(Number(reply.ack.seq)); }, fail: () => undefined,
    }, new Set(['dir1']));
    const PER_MESSAGE = 600;
    const message = (seq: number): SyncMessage => ({
      seq, changes: {
        changes: Array.from({ length: PER_MESSAGE }, (_, i) => ({
          upsert: {
            id: { protocol: 'tcp', client: { address: '198.18.5.1', port: 1000 + seq * PER_MESSAGE + i }, vip: { address: '198.18.0.10', port: 80 } },
            realServer: { address: '198.19.1.11', port: 8080 }, state: 'ESTABLISHED', timeoutSec: 300,
          },
        })),
      },
    });
    r.onMessage(roundTripMessage({ seq: 1, hello: { from: 'dir1', session: 's', groups: ['g'] } }));
    r.onMessage(roundTripMessage(message(2)));
    await until('the hello acknowledged, the first run under way', () => acked.includes(1));
    // Thirty behind it: ten runs. (Without the turn, the gap's timer sometimes fires first: one run in a few, so
    // the more runs, the surer a missing turn shows.)
    for (let seq = 3; seq <= 32; seq++) r.onMessage(roundTripMessage(message(seq)));
    release();
    await until('all acknowledged', () => acked.includes(32));
    assert.equal(standby.connections.size, 31 * PER_MESSAGE);
    // 600, then the thirty behind it three at a time (a fourth would pass 2 048).
    assert.deepEqual(runs.map((x) => x.changes), [600, ...Array<number>(10).fill(1800)]);
    assert.deepEqual(runs.slice(1).map((x) => x.turned), Array<boolean>(10).fill(true), 'the event loop turned before each run after the first');
  });

  it('a malformed change ends the stream with the field named, and none of its message is injected', async () => {
    const standby = new FakeConnectionTable();
    const refused: string[] = [];
    const r = new SyncReceiver({ table: standby, log: quiet, markOf: () => 0x10001, groupOf: () => 'g', leads: () => false }, {
      write: () => undefined, fail: (_c, d) => { refused.push(d); },
    }, new Set(['dir1']));
    const good = { upsert: { id: { protocol: 'tcp', client: { address: '198.18.5.1', port: 1000 }, vip: { address: '198.18.0.10', port: 80 } }, realServer: { address: '198.19.1.11', port: 8080 }, state: 'ESTABLISHED', timeoutSec: 300 } };
    const bad = { upsert: { ...good.upsert, realServer: { address: '198.19.1.11; rm -rf /', port: 8080 } } };
    for (const m of [{ seq: 1, hello: { from: 'dir1', session: 's', groups: ['g'] } }, { seq: 2, changes: { changes: [good, bad] } }] as SyncMessage[]) r.onMessage(roundTripMessage(m));
    await until('refused', () => refused.length > 0);
    assert.equal(refused[0], 'message 2: changes[1].upsert.realServer.address: "198.19.1.11; rm -rf /" is not an IP address');
    assert.equal(standby.connections.size, 0);
  });
});
