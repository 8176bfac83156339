import assert from 'node:assert/strict';
import { FakeAddressOwner } from './addresses.js';

describe('FakeAddressOwner', () => {
  const vip = { address: '198.18.0.10', ifname: 'front0' };
  const local = { address: 'fd00:0:0:20::5', ifname: 'back0' };
  const announce = { count: 3, intervalMs: 100 };

  it('claims, replaces, releases and records calls and announcements', async () => {
    const owner = new FakeAddressOwner();
    await owner.claim('g1', [vip, local], announce);
    assert.deepEqual(await owner.present([vip, local]), [vip, local]);
    assert.equal(owner.announcements.length, 2);
    await owner.claim('g1', [vip], announce); // replaces the set
    assert.deepEqual(await owner.present([vip, local]), [vip]);
    await owner.release('g1');
    await owner.release('g1'); // idempotent
    assert.deepEqual(await owner.present([vip, local]), []);
    assert.deepEqual(owner.calls.map((c) => c.op), ['claim', 'claim', 'release', 'release']);
  });

  it('reports links set down and fails the next claim when told to', async () => {
    const owner = new FakeAddressOwner();
    assert.equal(await owner.linkUp('front0'), true);
    owner.setLink('front0', false);
    assert.equal(await owner.linkUp('front0'), false);
    owner.failNextClaim = new Error('boom');
    await assert.rejects(owner.claim('g1', [vip], announce), /boom/);
    assert.equal(owner.holds(vip), false);
    await owner.claim('g1', [vip], announce);
    assert.equal(owner.holds(vip), true);
  });

  it('close keeps the addresses unless releaseAll', async () => {
    const a = new FakeAddressOwner();
    await a.claim('g1', [vip], announce);
    await a.close();
    assert.equal(a.holds(vip), true);
    await assert.rejects(a.claim('g1', [vip], announce));
    const b = new FakeAddressOwner();
    await b.claim('g1', [vip], announce);
    await b.close({ releaseAll: true });
    assert.equal(b.holds(vip), false);
  });
});
