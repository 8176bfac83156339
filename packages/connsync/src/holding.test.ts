import assert from 'node:assert/strict';
import type { SyncedConnection } from '@lbd/dataplane';
import type { GroupConnectionsReply__Output } from '@lbd/proto';
import { holdingFromReplies, holdingReplies } from './holding.js';
import { MalformedMessage } from './wire.js';

const head = { director: 'dir2', role: 'leader', claimedAtUnixMs: 1_800_000_000_100, releasedAtUnixMs: 0, readAtUnixMs: 1_800_000_000_200, leaseDroppedPackets: 41 };

function conn(port: number, state: string, rs = '198.19.1.11'): SyncedConnection {
  return {
    protocol: 'tcp', client: { address: '198.18.2.2', port }, vip: { address: '198.18.0.10', port: 80 }, realServer: { address: rs, port: 8080 },
    localAddress: { address: '198.19.1.100', port }, mark: 7, state, timeoutSec: 300,
  };
}

/** What a reply looks like once it crossed the wire (every field present, as the loader gives it). */
function overTheWire(replies: ReturnType<typeof holdingReplies>): GroupConnectionsReply__Output[] {
  return JSON.parse(JSON.stringify(replies)) as GroupConnectionsReply__Output[];
}

describe('GroupConnections: a director\'s holding of a group, both ways over the wire', () => {
  it('comes back as it was sent: the group\'s state, and each connection\'s state and binding, in batches', () => {
    const connections = Array.from({ length: 12_001 }, (_, i) => conn(10_000 + i, i % 2 === 0 ? 'ESTABLISHED' : 'SYN_RECV', i % 3 === 0 ? '198.19.1.12' : '198.19.1.11'));
    const replies = holdingReplies(head, connections);
    assert.deepEqual(replies.map((r) => r.connections!.length), [5000, 5000, 2001]);
    const h = holdingFromReplies(overTheWire(replies), 'dir2');
    assert.deepEqual([h.director, h.role, h.claimedAtUnixMs, h.releasedAtUnixMs, h.readAtUnixMs, h.leaseDroppedPackets, h.connections.size], ['dir2', 'leader', head.claimedAtUnixMs, 0, head.readAtUnixMs, 41, 12_001]);
    assert.deepEqual(h.connections.get('tcp 198.18.2.2:10000 198.18.0.10:80'), { state: 'ESTABLISHED', binding: '198.19.1.12:8080>198.19.1.100:10000' });
    // An empty group is one message with the state.
    assert.equal(holdingFromReplies(overTheWire(holdingReplies(head, [])), 'dir2').connections.size, 0);
  });

  it('refuses an answer from another director than asked, a state conntrack has no word for, and a connection without its binding', () => {
    const good = overTheWire(holdingReplies(head, [conn(10_000, 'ESTABLISHED')]));
    assert.throws(() => holdingFromReplies(good, 'dir3'), (e: unknown) => e instanceof MalformedMessage && /is not dir3, who was asked/.test(e.message));
    const badState = overTheWire(holdingReplies(head, [conn(10_000, 'HALF_OPEN')]));
    assert.throws(() => holdingFromReplies(badState, 'dir2'), /GroupConnections\[0\]\.connections\[0\]\.state: "HALF_OPEN" is not a conntrack state/);
    const noServer = overTheWire(holdingReplies(head, [conn(10_000, 'ESTABLISHED')]));
    noServer[0]!.connections[0]!.realServer = null;
    assert.throws(() => holdingFromReplies(noServer, 'dir2'), /realServer: null is missing/);
    assert.throws(() => holdingFromReplies([], 'dir2'), /came back from dir2 with no message/);
    const badCount = overTheWire(holdingReplies({ ...head, leaseDroppedPackets: -2 }, []));
    assert.throws(() => holdingFromReplies(badCount, 'dir2'), /leaseDroppedPackets: -2 is not a packet count \(or -1\)/);
  });
});
