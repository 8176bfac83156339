import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { serviceKey, type EcmpTier, type Service } from '@lbd/config';
import { connectionKey, type SyncedConnection } from '@lbd/dataplane';
import { FakeConnectionTable } from '@lbd/dataplane/testing';
import { silentLogger } from '@lbd/log';
import { connSyncServiceDefinition, type ConnSyncHandlers, type SyncMessage, type SyncMessage__Output, type SyncReply, type SyncReply__Output } from '@lbd/proto';
import type { Dial } from './sender.js';
import { SlotMap } from './slots.js';
import { ConnectionSync, realServerName } from './sync.js';

/** The part of an ECMP tier a SlotMap reads: slot count and local-address pools. */
function tier(pools: { ipv4?: Array<[string, string]>; ipv6?: Array<[string, string]> }, slots = Math.max(pools.ipv4?.length ?? 0, pools.ipv6?.length ?? 0)): EcmpTier {
  const family = (ranges: Array<[string, string]> | undefined): EcmpTier['ipv4'] => (ranges === undefined ? null : {
    nextHops: ranges.map((_, i) => `198.18.200.${i + 1}`),
    localAddresses: ranges.map(([first, last]) => ({ first, last, size: 0 })),
  });
  return {
    slots, ipv4: family(pools.ipv4), ipv6: family(pools.ipv6), asn: 64512, routers: [],
    attributes: { origin: 'igp', med: null, communities: [] }, preempt: 'after-sync', preemptDelayMs: 0, announce: { count: 3, intervalMs: 200 },
  };
}

describe('SlotMap: which slot a local address belongs to', () => {
  // Listed out of order on purpose: the lookup must not depend on pools being in address order.
  const map = new SlotMap(tier({
    ipv4: [['198.19.2.8', '198.19.2.11'], ['198.19.2.0', '198.19.2.3'], ['198.19.2.4', '198.19.2.7'], ['198.19.3.0', '198.19.3.255']],
    ipv6: [['fd00::2:8', 'fd00::2:b'], ['fd00::2:0', 'fd00::2:3'], ['fd00::2:4', 'fd00::2:7'], ['fd00::3:0', 'fd00::3:ffff']],
  }));

  const cases: Array<[string, number | null]> = [
    ['198.19.2.0', 1], ['198.19.2.3', 1], ['198.19.2.4', 2], ['198.19.2.7', 2], ['198.19.2.8', 0], ['198.19.2.11', 0],
    ['198.19.2.12', null], ['198.19.1.255', null], ['198.19.3.128', 3], ['198.19.4.0', null], ['0.0.0.0', null], ['255.255.255.255', null],
    ['fd00::2:0', 1], ['fd00::2:b', 0], ['FD00:0:0:0:0:0:2:5', 2], ['fd00::2:c', null], ['fd00::3:abcd', 3], ['fd00::4:0', null], ['::', null],
    // The same 32 low bits in the other family are not the same address.
    ['::c613:200', null], ['not an address', null], ['fe80::1%eth0', null],
  ];
  for (const [address, slot] of cases) {
    it(`${address} → ${slot === null ? 'no slot' : `slot ${slot}`}`, () => {
      assert.equal(map.slotOf(address), slot);
      assert.equal(map.groupOf(address), slot === null ? null : `slot-${slot}`);
    });
  }

  it('leading(): only the slots led answer, each with its pools as text; none led is null', () => {
    const led = map.leading(new Set(['slot-1', 'slot-3', 'default']));
    assert.ok(led !== null);
    assert.deepEqual([...led.led], [['slot-1', '198.19.2.0-198.19.2.3 fd00::2:0-fd00::2:3'], ['slot-3', '198.19.3.0-198.19.3.255 fd00::3:0-fd00::3:ffff']]);
    assert.equal(led.groupOf('198.19.2.1'), 'slot-1');
    assert.equal(led.groupOf('198.19.2.5'), null, 'slot 2 is not led');
    assert.equal(led.groupOf('fd00::3:1'), 'slot-3');
    assert.equal(map.leading(new Set(['default', 'slot-9'])), null);
  });

  it('a tier of one family, and no tier, have no slots for the other or for any', () => {
    const v4 = new SlotMap(tier({ ipv4: [['198.19.2.0', '198.19.2.3']] }));
    assert.equal(v4.slotOf('198.19.2.2'), 0);
    assert.equal(v4.slotOf('fd00::2:2'), null);
    assert.equal(SlotMap.NONE.slotOf('198.19.2.2'), null);
    assert.equal(SlotMap.NONE.leading(new Set(['slot-0'])), null);
  });

  it('pools of two slots that overlap are refused, both named', () => {
    assert.throws(() => new SlotMap(tier({ ipv4: [['198.19.2.0', '198.19.2.7'], ['198.19.2.4', '198.19.2.11']] })),
      /the local addresses of slot-0 \(198\.19\.2\.0-198\.19\.2\.7\) and slot-1 \(198\.19\.2\.4-198\.19\.2\.11\) overlap; each slot needs its own/);
  });
});

// ---- connection sync with slots: two directors' ConnectionSync over an in-memory link ---------------------------

const quiet = silentLogger;
const def = connSyncServiceDefinition().Stream;
const roundTripMessage = (m: SyncMessage): SyncMessage__Output => def.requestDeserialize(def.requestSerialize(m));
const roundTripReply = (r: SyncReply): SyncReply__Output => def.responseDeserialize(def.responseSerialize(r));
type ServerCall = Parameters<ConnSyncHandlers['Stream']>[0];

function service(over: Partial<Service> & Pick<Service, 'name' | 'vip' | 'port'>): Service {
  return {
    family: 4, protocol: 'tcp', mode: 'fullnat', scheduler: 'mh', persistenceSec: 0, localAddresses: null, expireOnRemove: false,
    realServers: [{ address: '198.19.1.11', port: 8443, weight: 1, healthCheck: null }], onDown: 'quiesce', slowStartMs: 0,
    fallback: 'drop', sorryServer: null, vipGroup: 'default', sync: { enabled: true, minAgeMs: 0 }, ecmp: false, synProxy: false, connectionLimit: null, ...over,
  };
}

/** An ECMP service: its vipGroup (`default`) is not what its connections go with. */
const WEB = service({ name: 'web', vip: '198.18.0.20', port: 443, ecmp: true });
/** A service of the vip group `default`, with a pool of its own. */
const FRONT = service({ name: 'front', vip: '198.18.0.10', port: 80, localAddresses: { first: '198.19.1.100', last: '198.19.1.103', size: 4 } });
const TIER = tier({ ipv4: [['198.19.2.0', '198.19.2.3'], ['198.19.2.4', '198.19.2.7']] });
/** Each director's own mark for the one real server of each service. */
const MARKS: Record<string, number> = { dir1: 0x10001, dir2: 0x20001 };

function conn(i: number, localAddress: string, s: Service = WEB): SyncedConnection {
  return {
    protocol: 'tcp', client: { address: '198.18.5.1', port: 10_000 + i }, vip: { address: s.vip, port: s.port },
    realServer: { address: '198.19.1.11', port: 8443 }, localAddress: { address: localAddress, port: 20_000 + i },
    mark: 0x10001, state: 'ESTABLISHED', timeoutSec: 431_999,
  };
}
const keys = (fs: readonly SyncedConnection[]): string[] => fs.map(connectionKey).sort();

async function until(what: string, check: () => boolean, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** The server side of a stream as ConnectionSync.handlers() sees it: a duplex call from a peer whose certificate names it. */
class FakeServerCall extends EventEmitter {
  constructor(private readonly from: string, readonly write: (r: SyncReply) => void) {
    super();
  }

  getAuthContext(): { sslPeerCertificate: { subjectaltname: string } } {
    return { sslPeerCertificate: { subjectaltname: `DNS:${this.from}` } };
  }

  end(): void {}
}

interface Director {
  readonly id: string;
  readonly table: FakeConnectionTable;
  readonly sync: ConnectionSync;
}

/** dir1 and dir2, each the other's peer, with `tierConfig` (null: setConfig's one-argument form, as before the tier). */
async function directors(tierConfig: EcmpTier | null): Promise<[Director, Director]> {
  const all = new Map<string, Director>();
  const dial = (from: string): Dial => (peer, h) => {
    let open = true;
    const call = new FakeServerCall(from, (r) => { const out = roundTripReply(r); setImmediate(() => { if (open) h.reply(out); }); });
    call.on('error', (e: { details?: string }) => { open = false; setImmediate(() => h.closed(e.details ?? 'error')); });
    all.get(peer)!.sync.handlers().Stream(call as unknown as ServerCall);
    return {
      write: (m) => { const out = roundTripMessage(m); setImmediate(() => { if (open) call.emit('data', out); }); return true; },
      close: () => { open = false; call.emit('cancelled'); },
    };
  };
  for (const [id, peer] of [['dir1', 'dir2'], ['dir2', 'dir1']] as const) {
    const table = new FakeConnectionTable();
    const sync = new ConnectionSync({
      self: id, peers: [{ id: peer, address: '127.0.0.1', port: 1 }], security: { kind: 'insecure' }, table, log: quiet, dial: dial(id),
    });
    await sync.start();
    await (tierConfig === null ? sync.setConfig([WEB, FRONT]) : sync.setConfig([WEB, FRONT], tierConfig));
    sync.setMarks(new Map([WEB, FRONT].map((s) => [realServerName(serviceKey(s), s.realServers[0]!), MARKS[id]!])));
    all.set(id, { id, table, sync });
  }
  return [all.get('dir1')!, all.get('dir2')!];
}

describe('connection sync in the ECMP tier: connections go with their slot', () => {
  const open: Director[] = [];
  afterEach(async () => { for (const d of open.splice(0)) await d.sync.close(); });
  const start = async (t: EcmpTier | null = TIER): Promise<[Director, Director]> => { const ds = await directors(t); open.push(...ds); return ds; };

  const S0 = [conn(1, '198.19.2.1'), conn(2, '198.19.2.3')];
  const S1 = [conn(3, '198.19.2.4'), conn(4, '198.19.2.7')];
  const NO_SLOT = conn(5, '198.19.9.9');
  const OF_FRONT = conn(6, '198.19.1.100', FRONT);
  const fill = (d: Director): void => { for (const f of [...S0, ...S1, NO_SLOT, OF_FRONT]) d.table.connections.set(connectionKey(f), f); };
  const has = (d: Director, f: SyncedConnection): boolean => d.table.connections.has(connectionKey(f));

  it('leading slot-0 sends slot 0\'s connections only (not slot 1\'s, not those in no slot\'s pool), with the standby\'s marks; the standby is caught up on slot-0 alone', async () => {
    const [a, b] = await start();
    fill(a);
    await a.sync.setLeading(new Set(['slot-0']));
    await until('caught up on slot-0', () => b.sync.notCaughtUp('slot-0') === null);
    assert.deepEqual([...b.table.connections.keys()].sort(), keys(S0));
    assert.ok([...b.table.connections.values()].every((f) => f.mark === MARKS.dir2));
    assert.match(b.sync.notCaughtUp('slot-1') ?? '', /connection sync of slot-1 not caught up/);
    assert.notEqual(b.sync.notCaughtUp('default'), null, 'the vip group is not led: nothing of it was sent');
    // New connections: slot 1's first, then slot 0's. Had slot 1's been sent, it would have arrived first.
    a.table.open(conn(7, '198.19.2.5'));
    a.table.open(conn(8, '198.19.2.2'));
    await until('the new slot 0 connection', () => has(b, conn(8, '198.19.2.2')));
    assert.ok(!has(b, conn(7, '198.19.2.5')));
    a.table.close(S0[0]!);
    await until('the closed slot 0 connection removed', () => !has(b, S0[0]!));
    assert.deepEqual(a.sync.status().leading, ['slot-0']);
  });

  it('leading both slots sends both; giving slot 0 up stops its copies, and the standby is caught up on slot-1 alone', async () => {
    const [a, b] = await start();
    fill(a);
    await a.sync.setLeading(new Set(['slot-0', 'slot-1']));
    await until('caught up on both slots', () => b.sync.notCaughtUp('slot-0') === null && b.sync.notCaughtUp('slot-1') === null);
    assert.deepEqual([...b.table.connections.keys()].sort(), keys([...S0, ...S1]));
    await a.sync.setLeading(new Set(['slot-1']));
    // Until the new snapshot is applied the standby still counts slot 0 as caught up from dir1; after it, not.
    await until('a snapshot of slot 1 alone', () => b.sync.notCaughtUp('slot-1') === null && b.sync.notCaughtUp('slot-0') !== null);
    assert.deepEqual(Object.keys(b.sync.status().receivers[0]!.caughtUp), ['slot-1']);
    a.table.open(conn(9, '198.19.2.0'));
    a.table.open(conn(10, '198.19.2.6'));
    await until('the new slot 1 connection', () => has(b, conn(10, '198.19.2.6')));
    assert.ok(!has(b, conn(9, '198.19.2.0')), 'slot 0 is no longer dir1\'s to send');
    assert.ok(S0.every((f) => has(b, f)), 'a snapshot of slot 1 leaves the copies of slot 0 alone');
  });

  it('a copy of a slot the receiver leads is not applied; while a slot moves, the sender\'s removes wait for its next snapshot', async () => {
    const [a, b] = await start();
    fill(a);
    await a.sync.setLeading(new Set(['slot-0', 'slot-1']));
    await until('caught up on both slots', () => b.sync.notCaughtUp('slot-0') === null && b.sync.notCaughtUp('slot-1') === null);
    // dir2 takes slot 1 over before dir1 has let it go.
    await b.sync.setLeading(new Set(['slot-1']));
    const skipped = b.sync.status().receivers.find((r) => r.peer === 'dir1')!.skipped;
    a.table.open(conn(11, '198.19.2.6')); // slot 1: live on dir2 now, dir1's copy must not win
    a.table.close(S0[0]!); // slot 0: the wire does not say a remove's slot, and dir2 leads one that dir1 sends
    a.table.open(conn(12, '198.19.2.2')); // slot 0: the sentinel
    await until('the new slot 0 connection', () => has(b, conn(12, '198.19.2.2')));
    assert.ok(!has(b, conn(11, '198.19.2.6')));
    assert.ok(has(b, S0[0]!));
    assert.equal(b.sync.status().receivers.find((r) => r.peer === 'dir1')!.skipped, skipped + 2);
    // dir1 lets slot 1 go: its new snapshot of slot 0 leaves out the closed connection, which goes.
    await a.sync.setLeading(new Set(['slot-0']));
    await until('the stale slot 0 connection removed', () => !has(b, S0[0]!) && b.sync.notCaughtUp('slot-0') === null);
    assert.deepEqual([...b.table.connections.keys()].sort(), keys([S0[1]!, conn(12, '198.19.2.2'), ...S1]));
  });

  it('a vip group\'s services go with the group as before; an ECMP service never goes with its vipGroup, and without a tier (setConfig with services alone) is not synced', async () => {
    const [a, b] = await start(null);
    fill(a);
    await a.sync.setLeading(new Set(['default', 'slot-0', 'slot-1']));
    await until('caught up on default', () => b.sync.notCaughtUp('default') === null);
    assert.deepEqual([...b.table.connections.keys()], [connectionKey(OF_FRONT)]);
    assert.deepEqual(Object.keys(b.sync.status().receivers[0]!.caughtUp), ['default']);
  });
});
