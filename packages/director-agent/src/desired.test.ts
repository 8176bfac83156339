import assert from 'node:assert/strict';
import { hostPort, parseConfig, type Config } from '@lbd/config';
import { DesiredState, type HealthLookup, type ServerHealth } from './desired.js';

/** The merge of config and health, table-driven; the agent's scenario tests cover it end to end. */

function config(extra = ''): Config {
  return parseConfig(`
services:
  - name: web
    vip: 198.18.0.10
    port: 80
    mode: nat
    healthCheck: { kind: tcp }${extra}
    realServers:
      - { address: 198.19.1.11, port: 8080, weight: 1 }
      - { address: 198.19.1.12, port: 8080, weight: 2 }
      - { address: 198.19.1.13, port: 8080, weight: 0 }
  - { name: plain, vip: 198.18.0.20, port: 80, mode: nat, realServers: [{ address: 198.19.1.21, port: 80 }] }
`, 'desired.yaml');
}

const UP: ServerHealth = { state: 'up', upWeight: -1, heldDown: false };
const DOWN: ServerHealth = { state: 'down', upWeight: -1, heldDown: false };

/** Health by `address:port` (default up at the configured weight); `ramp` gives an up weight. */
function lookup(states: Record<string, ServerHealth | number>): HealthLookup {
  return (_svc, rs) => {
    if (rs.healthCheck === null) return null;
    const s = states[hostPort(rs.address, rs.port)] ?? UP;
    if (typeof s === 'number') return { state: 'up', upWeight: s, heldDown: false };
    return { ...s, upWeight: s.upWeight < 0 ? rs.weight : s.upWeight };
  };
}

function weights(svc: { realServers: readonly { address: string; port: number; weight: number }[] }): string {
  return svc.realServers.map((rs) => `${rs.address.split('.').at(-1)}=${rs.weight}`).join(' ');
}

describe('DesiredState', () => {
  const cases: Array<{ name: string; extra?: string; states: Record<string, ServerHealth | number>; want: string; expire?: boolean; allDown?: boolean; flags?: string }> = [
    { name: 'all up: the configured weights', states: {}, want: '11=1 12=2 13=0' },
    { name: 'down, quiesce: weight 0', states: { '198.19.1.12:8080': DOWN }, want: '11=1 12=0 13=0' },
    { name: 'down, remove: left out, connections expired', extra: '\n    onDown: remove', states: { '198.19.1.12:8080': DOWN }, want: '11=1 13=0', expire: true },
    { name: 'ramping: the slow-start weight', states: { '198.19.1.12:8080': 1 }, want: '11=1 12=1 13=0', flags: 'ramping' },
    {
      name: 'all down, drop: no weight > 0, the data plane applies the fallback',
      states: { '198.19.1.11:8080': DOWN, '198.19.1.12:8080': DOWN }, want: '11=0 12=0 13=0', allDown: true,
    },
    {
      name: 'all down, keep-last with nothing remembered: nothing to keep',
      extra: '\n    fallback: keep-last', states: { '198.19.1.11:8080': DOWN, '198.19.1.12:8080': DOWN }, want: '11=0 12=0 13=0', allDown: true,
    },
    {
      name: 'a down server with a configured weight of 0 stays at 0, and does not make the service all down',
      states: { '198.19.1.13:8080': DOWN }, want: '11=1 12=2 13=0',
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const cfg = config(c.extra);
      const m = new DesiredState().merge(cfg, lookup(c.states));
      const web = m.services[0]!;
      assert.equal(weights(web), c.want);
      assert.equal(web.expireOnRemove, c.expire ?? false);
      assert.equal(m.byKey.get('198.18.0.10:80/tcp')?.allDown, c.allDown ?? false);
      assert.equal(m.ramping, c.flags === 'ramping');
      assert.equal(m.services[1], cfg.services[1], 'an unchecked service is the config\'s own object');
    });
  }

  it('passes the config\'s own object when health changes nothing, and the same copy while the merge stays the same', () => {
    const cfg = config();
    const d = new DesiredState();
    const all = d.merge(cfg, lookup({}));
    assert.equal(all.services[0], cfg.services[0]);
    const down = lookup({ '198.19.1.12:8080': DOWN });
    const first = d.merge(cfg, down);
    assert.notEqual(first.services[0], cfg.services[0]);
    assert.equal(d.merge(cfg, down).services[0] === first.services[0], false, 'not committed: a fresh copy');
    d.commit(cfg, first);
    assert.equal(d.merge(cfg, down).services[0], first.services[0], 'committed and unchanged: the same object');
    assert.notEqual(d.merge(cfg, lookup({ '198.19.1.11:8080': DOWN })).services[0], first.services[0]);
  });

  it('keep-last keeps the servers that were up in the last commit, and reports entering and leaving all-down', () => {
    const cfg = config('\n    fallback: keep-last');
    const d = new DesiredState();
    const oneDown = d.merge(cfg, lookup({ '198.19.1.11:8080': DOWN }));
    assert.deepEqual(d.commit(cfg, oneDown), []);
    const allDown = d.merge(cfg, lookup({ '198.19.1.11:8080': DOWN, '198.19.1.12:8080': DOWN }));
    assert.equal(weights(allDown.services[0]!), '11=0 12=2 13=0', 'rs2 was up last: it keeps its weight');
    assert.deepEqual(allDown.byKey.get('198.18.0.10:80/tcp')?.kept, ['198.19.1.12:8080']);
    assert.deepEqual(d.commit(cfg, allDown).map((c) => [c.name, c.allDown, c.kept]), [['web', true, ['198.19.1.12:8080']]]);
    // Still all down on the next merge: still kept (the memory is not overwritten by the kept state).
    assert.equal(weights(d.merge(cfg, lookup({ '198.19.1.11:8080': DOWN, '198.19.1.12:8080': DOWN })).services[0]!), '11=0 12=2 13=0');
    const back = d.merge(cfg, lookup({ '198.19.1.12:8080': DOWN }));
    assert.equal(weights(back.services[0]!), '11=1 12=0 13=0');
    assert.deepEqual(d.commit(cfg, back).map((c) => [c.name, c.allDown]), [['web', false]]);
  });
});
