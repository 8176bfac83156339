import assert from 'node:assert/strict';
import type { SyncedConnection } from '@lbd/dataplane';
import type { Change__Output } from '@lbd/proto';
import { fromWireChange, MalformedMessage, toWireChange } from './wire.js';

function conn(over: Partial<SyncedConnection> = {}): SyncedConnection {
  return {
    protocol: 'tcp', client: { address: '198.18.2.2', port: 40_000 }, vip: { address: '198.18.0.10', port: 80 },
    realServer: { address: '198.19.1.11', port: 8080 }, localAddress: { address: '198.19.1.100', port: 1024 },
    mark: 7, state: 'ESTABLISHED', timeoutSec: 300, ...over,
  };
}

/** An upsert as the loader hands it over (every field present), with `patch` applied to it. */
function received(c: SyncedConnection, patch: (u: Record<string, any>) => void = () => undefined): Change__Output {
  const w = JSON.parse(JSON.stringify(toWireChange({ op: 'upsert', connection: c }))) as { upsert: Record<string, any> };
  patch(w.upsert);
  return { op: 'upsert', upsert: w.upsert, remove: null } as unknown as Change__Output;
}

function refusal(c: Change__Output): string {
  try {
    fromWireChange(c, 'changes[3]');
  } catch (err) {
    assert.ok(err instanceof MalformedMessage, String(err));
    return err.message;
  }
  assert.fail('accepted');
}

describe('connections on the wire', () => {
  it('an upsert comes back as it went, with the mark left for the receiver to fill in', () => {
    assert.deepEqual(fromWireChange(received(conn()), 'changes[0]'), { op: 'upsert', connection: conn({ mark: 0 }) });
    assert.deepEqual(fromWireChange(received(conn({ localAddress: null, protocol: 'udp', state: 'ASSURED' })), 'changes[0]'),
      { op: 'upsert', connection: conn({ localAddress: null, protocol: 'udp', state: 'ASSURED', mark: 0 }) });
  });

  it('a SYN-proxied connection goes with its proxy numbers and sequence adjustment; one without goes without', () => {
    const proxied = conn({
      synProxy: { isn: 4_000_000_000, its: 0, tsoff: 0 },
      seqAdjust: { original: { correctionPos: 0, offsetBefore: 0, offsetAfter: 0 }, reply: { correctionPos: 0, offsetBefore: 123_456, offsetAfter: 123_456 } },
    });
    assert.deepEqual(fromWireChange(received(proxied), 'changes[0]'), { op: 'upsert', connection: { ...proxied, mark: 0 } });
    const half = conn({ synProxy: { isn: 9, its: 0, tsoff: 0 } });
    assert.deepEqual(fromWireChange(received(half), 'changes[0]'), { op: 'upsert', connection: { ...half, mark: 0 } });
    const plain = fromWireChange(received(conn(), (u) => { u.synProxy = null; u.seqAdjust = null; }), 'changes[0]');
    assert.ok(plain.op === 'upsert' && !('synProxy' in plain.connection) && !('seqAdjust' in plain.connection));
    const refusals: Array<[(u: Record<string, any>) => void, string]> = [
      [(u) => { u.seqAdjust.reply = null; }, 'changes[3].upsert.seqAdjust.reply: null is missing (an adjustment has both directions)'],
      [(u) => { u.id.protocol = 'udp'; u.state = 'ASSURED'; }, 'changes[3].upsert.synProxy: {"isn":4000000000,"its":0,"tsoff":0} is SYN-proxy state on a udp connection, which no proxy opens'],
    ];
    for (const [patch, message] of refusals) assert.equal(refusal(received(proxied, patch)), message);
  });

  it('an IPv6 address arrives in its one canonical spelling; a timeout in its last second goes as 1 s', () => {
    const v6 = conn({
      client: { address: 'fd00:0:0::2', port: 40_000 }, vip: { address: 'FD00::10', port: 80 },
      realServer: { address: 'fd00::1:11', port: 8080 }, localAddress: { address: 'fd00::1:100', port: 1024 }, timeoutSec: 0,
    });
    const got = fromWireChange(received(v6), 'changes[0]');
    assert.equal(got.op, 'upsert');
    const c = got.connection as SyncedConnection;
    assert.deepEqual([c.client.address, c.vip.address, c.realServer.address, c.localAddress?.address, c.timeoutSec], ['fd00::2', 'fd00::10', 'fd00::1:11', 'fd00::1:100', 1]);
  });

  it('a malformed upsert is refused with the first bad field named, its value and the rule', () => {
    const cases: Array<[(u: Record<string, any>) => void, string]> = [
      [(u) => { u.id = null; }, 'changes[3].upsert.id: null is missing'],
      [(u) => { u.id.protocol = 'sctp'; }, 'changes[3].upsert.id.protocol: "sctp" is not tcp or udp'],
      [(u) => { u.id.client.address = 'fd00::2'; }, 'changes[3].upsert.id.client.address: "fd00::2" is not of the vip\'s address family'],
      [(u) => { u.id.vip.port = 0; }, 'changes[3].upsert.id.vip.port: 0 is not a port from 1 to 65535'],
      [(u) => { u.realServer = null; }, 'changes[3].upsert.realServer: null is missing'],
      [(u) => { u.realServer.address = 'fe80::1%eth0'; }, 'changes[3].upsert.realServer.address: "fe80::1%eth0" is not an IP address'],
      [(u) => { u.realServer.address = 'fd00::11'; }, 'changes[3].upsert.realServer.address: "fd00::11" is not of the vip\'s address family'],
      [(u) => { u.localAddress.address = 'fd00::100'; }, 'changes[3].upsert.localAddress.address: "fd00::100" is not of the vip\'s address family'],
      [(u) => { u.localAddress.port = 70_000; }, 'changes[3].upsert.localAddress.port: 70000 is not a port from 1 to 65535'],
      [(u) => { u.state = 'ESTABLISHED; rm'; }, 'changes[3].upsert.state: "ESTABLISHED; rm" is not a conntrack state'],
      [(u) => { u.timeoutSec = 0; }, 'changes[3].upsert.timeoutSec: 0 is not a timeout from 1 to 864000 seconds'],
    ];
    for (const [patch, message] of cases) assert.equal(refusal(received(conn(), patch)), message);
    assert.equal(refusal({ op: undefined, upsert: null, remove: null } as unknown as Change__Output), 'changes[3]: null is neither an upsert nor a remove');
  });

  it('a remove carries the binding its sender removed; one without (an older sender) is by the client tuple; a bad binding is refused', () => {
    const c = conn();
    const id = { protocol: c.protocol, client: c.client, vip: c.vip };
    const binding = { realServer: c.realServer, localAddress: c.localAddress };
    const wire = (w: ReturnType<typeof toWireChange>): Change__Output => ({ op: 'remove', upsert: null, removedRealServer: null, removedLocalAddress: null, ...JSON.parse(JSON.stringify(w)) }) as Change__Output;
    assert.deepEqual(fromWireChange(wire(toWireChange({ op: 'remove', connection: id, binding })), 'changes[0]'), { op: 'remove', connection: id, binding });
    assert.deepEqual(fromWireChange(wire(toWireChange({ op: 'remove', connection: id, binding: { ...binding, localAddress: null } })), 'changes[0]'),
      { op: 'remove', connection: id, binding: { ...binding, localAddress: null } });
    assert.deepEqual(fromWireChange(wire(toWireChange({ op: 'remove', connection: id })), 'changes[0]'), { op: 'remove', connection: id });
    const bad = wire(toWireChange({ op: 'remove', connection: id, binding: { ...binding, realServer: { address: 'fd00::11', port: 8080 } } }));
    assert.equal(refusal(bad), 'changes[3].removedRealServer.address: "fd00::11" is not of the vip\'s address family');
  });
});
