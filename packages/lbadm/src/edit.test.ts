import assert from 'node:assert/strict';
import { parseConfig } from '@lbd/config';
import { EditError, diffLines, editConfig, type EditOp } from './edit.js';

const CONFIG = `# the front tier   (two spaces before this comment's parenthesis stay)
services:
  - name: web     # public site
    vip: 198.18.0.10
    port: 80
    mode: fullnat
    localAddresses: [198.18.2.10]
    realServers:
      - { address: 198.19.1.11, port: 8080, weight: 2 }
      - { address: 198.19.1.12, port: 8080, weight: 3 }   # the big one
  - name: app
    vip: 198.18.0.20
    port: 80
    mode: nat
    healthCheck: { kind: tcp }
    realServers:
      - address: 198.19.1.21
        port: 8080
`;

function edit(op: EditOp, text = CONFIG): { text: string; changed: boolean; summary: string } {
  const config = text.trim() === '' ? { services: [] } : parseConfig(text, 'test');
  return editConfig(text, config, op);
}

/** The lines of `after` that are not in `before`, and those of `before` not in `after`. */
function changedLines(before: string, after: string): { added: string[]; removed: string[] } {
  const b = before.split('\n');
  const a = after.split('\n');
  return { added: a.filter((l) => !b.includes(l)), removed: b.filter((l) => !a.includes(l)) };
}

describe('editConfig', () => {
  it('server drain: drained: true on that line only; comments, spacing and the other lines stay byte for byte', () => {
    const r = edit({ kind: 'server drain', service: 'web', server: '198.19.1.12:8080' });
    assert.equal(r.changed, true);
    assert.deepEqual(changedLines(CONFIG, r.text), {
      added: ['      - { address: 198.19.1.12, port: 8080, weight: 3, drained: true } # the big one'],
      removed: ['      - { address: 198.19.1.12, port: 8080, weight: 3 }   # the big one'],
    });
    assert.match(r.summary, /^drained 198\.19\.1\.12:8080 of web: weight 0 .*restores weight 3$/);
    const rs = parseConfig(r.text, 'after').services[0]!.realServers[1]!;
    assert.deepEqual([rs.weight, rs.drained], [0, true]);
  });

  it('server enable takes drained away again, giving back the text from before the drain', () => {
    const drained = edit({ kind: 'server drain', service: 'web', server: '198.19.1.12:8080' }).text;
    const r = edit({ kind: 'server enable', service: '198.18.0.10:80/tcp', server: '198.19.1.12:8080' }, drained);
    assert.equal(r.summary, 'enabled 198.19.1.12:8080 of web: back to weight 3');
    assert.deepEqual(parseConfig(r.text, 'after'), parseConfig(CONFIG, 'before'));
  });

  it('drain of a drained server and enable of an enabled one change nothing', () => {
    const drained = edit({ kind: 'server drain', service: 'web', server: '198.19.1.12:8080' }).text;
    const again = edit({ kind: 'server drain', service: 'web', server: '198.19.1.12:8080' }, drained);
    assert.deepEqual([again.changed, again.text === drained, again.summary], [false, true, '198.19.1.12:8080 of web is already drained; nothing to change']);
    const enabled = edit({ kind: 'server enable', service: 'web', server: '198.19.1.11:8080' });
    assert.deepEqual([enabled.changed, enabled.summary], [false, '198.19.1.11:8080 of web is not drained; nothing to change']);
  });

  it('server add writes the new server like its neighbours (one line among one-liners, a block among blocks)', () => {
    const connection = edit({ kind: 'server add', service: 'web', server: '198.19.1.13:8080', fields: { weight: 5 } });
    assert.deepEqual(changedLines(CONFIG, connection.text).added, ['      - { address: 198.19.1.13, port: 8080, weight: 5 }']);
    const block = edit({ kind: 'server add', service: 'app', server: '198.19.1.22:8080', fields: { healthPort: 9000 } });
    assert.ok(block.text.endsWith('      - address: 198.19.1.21\n        port: 8080\n      - address: 198.19.1.22\n        port: 8080\n        weight: 1\n        healthCheck: { port: 9000 }\n'), block.text);
    assert.equal(block.summary, 'added 198.19.1.22:8080 of app at weight 1');
    assert.equal(parseConfig(block.text, 'after').services[1]!.realServers[1]!.healthCheck?.port, 9000);
  });

  it('the first real server of a service goes on a line of its own, under realServers:', () => {
    const text = 'services:\n  - { name: new, vip: 198.18.0.30, port: 80, mode: nat }\n  - name: other\n    vip: 198.18.0.31\n    port: 80\n    mode: nat\n    realServers: []\n';
    const a = edit({ kind: 'server add', service: 'other', server: '198.19.1.31:80', fields: {} }, text);
    assert.ok(a.text.endsWith('    realServers:\n      - { address: 198.19.1.31, port: 80, weight: 1 }\n'), a.text);
    assert.equal(a.summary, "added 198.19.1.31:80 of other at weight 1 (other's first real server)");
  });

  it('server edit changes the weight (a drained server stays drained) and the health check port', () => {
    const r = edit({ kind: 'server edit', service: 'web', server: '198.19.1.11:8080', fields: { weight: 7 } });
    assert.deepEqual(changedLines(CONFIG, r.text).added, ['      - { address: 198.19.1.11, port: 8080, weight: 7 }']);
    assert.equal(r.summary, '198.19.1.11:8080 of web: weight 2 -> 7');
    const hp = edit({ kind: 'server edit', service: 'app', server: '198.19.1.21:8080', fields: { healthPort: 9100 } });
    assert.deepEqual(changedLines(CONFIG, hp.text).added, ['        healthCheck: { port: 9100 }']);
    assert.equal(hp.summary, '198.19.1.21:8080 of app: health check port its own -> 9100');
    const drained = edit({ kind: 'server drain', service: 'web', server: '198.19.1.12:8080' }).text;
    const d = edit({ kind: 'server edit', service: 'web', server: '198.19.1.12:8080', fields: { weight: 4 } }, drained);
    assert.match(d.summary, /weight 3 -> 4 \(it stays drained at 0 until lbadm server enable\)/);
    const same = edit({ kind: 'server edit', service: 'web', server: '198.19.1.11:8080', fields: { weight: 2 } });
    assert.equal(same.changed, false);
  });

  it('server remove drops exactly that item; IPv6 and non-canonical addresses are matched canonically', () => {
    const r = edit({ kind: 'server remove', service: 'web', server: '198.19.1.11:8080' });
    assert.deepEqual(changedLines(CONFIG, r.text), { added: [], removed: ['      - { address: 198.19.1.11, port: 8080, weight: 2 }'] });
    const v6 = 'services:\n  - { name: v6, vip: "fd00::10", port: 80, mode: nat, realServers: [{ address: "fd00:3::11", port: 80 }] }\n';
    const r6 = edit({ kind: 'server remove', service: 'v6', server: '[FD00:3:0::11]:80' }, v6);
    assert.deepEqual(parseConfig(r6.text, 'after').services[0]!.realServers, []);
  });

  it('service add appends a service (creating the list in an empty cluster config); service edit and remove', () => {
    const add = edit({ kind: 'service add', name: 'dns', fields: { vip: '198.18.0.53', port: 53, protocol: 'udp', mode: 'nat', vipGroup: 'g2' } });
    assert.ok(add.text.startsWith(CONFIG), 'the existing text is untouched');
    assert.equal(add.text.slice(CONFIG.length), '  - name: dns\n    vip: 198.18.0.53\n    port: 53\n    protocol: udp\n    mode: nat\n    vipGroup: g2\n    realServers: []\n');
    const first = edit({ kind: 'service add', name: 'web', fields: { vip: '198.18.0.10', port: 80, mode: 'fullnat', localAddresses: ['198.18.2.10'] } }, '');
    assert.deepEqual(parseConfig(first.text, 'first', { cluster: true }).services.map((s) => s.name), ['web']);
    const ed = edit({ kind: 'service edit', name: 'web', fields: { scheduler: 'mh', localAddresses: ['198.18.2.10-198.18.2.11'], vip: '198.18.0.10' } });
    assert.equal(ed.summary, 'service web: scheduler wrr -> mh, localAddresses [198.18.2.10] -> [198.18.2.10-198.18.2.11]');
    const toNat = edit({ kind: 'service edit', name: 'web', fields: { mode: 'nat', localAddresses: null } });
    assert.equal(parseConfig(toNat.text, 'nat').services[0]!.mode, 'nat');
    const rm = edit({ kind: 'service remove', name: 'app' });
    assert.deepEqual(parseConfig(rm.text, 'rm').services.map((s) => s.name), ['web']);
    assert.equal(rm.summary, 'removed service app (198.18.0.20:80/tcp) and its 1 real server(s)');
  });

  it('drain on a dr service says its flows live on only where they are remembered; remove, that its connections move now', () => {
    const text = `${CONFIG}  - name: bulk
    vip: 198.18.0.13
    port: 80
    mode: dr
    realServers:
      - { address: 198.19.1.31 }
      - { address: 198.19.1.32 }
`;
    assert.equal(edit({ kind: 'server drain', service: 'bulk', server: '198.19.1.31:80' }, text).summary,
      'drained 198.19.1.31:80 of bulk: weight 0 (flows a director has seen live on, in its flow memory; no new ones; a flow that moves to another director, on a failover, moves to another server and breaks); lbadm server enable restores weight 1');
    assert.match(edit({ kind: 'server remove', service: 'bulk', server: '198.19.1.31:80' }, text).summary, /a dr flow goes only to a server of the service: its connections move to the other servers now, and break\)$/);
  });

  it('service edit --syn-proxy on leaves the service\'s sync as it is (proxied connections are synced too), and sets or removes a connection limit', () => {
    const on = edit({ kind: 'service edit', name: 'web', fields: { synProxy: true, connectionLimit: 5000 } });
    assert.equal(on.summary, 'service web: synProxy false -> true, connectionLimit (none) -> 5000');
    const svc = parseConfig(on.text, 'on').services[0]!;
    assert.deepEqual([svc.synProxy, svc.sync.enabled, svc.connectionLimit], [true, true, 5000]);
    assert.doesNotMatch(on.text, /sync:/);
    const off = edit({ kind: 'service edit', name: 'web', fields: { synProxy: false, connectionLimit: null } }, on.text);
    assert.equal(off.summary, 'service web: synProxy true -> false, connectionLimit 5000 -> (none)');
    const after = parseConfig(off.text, 'off').services[0]!;
    assert.deepEqual([after.synProxy, after.connectionLimit], [false, null]);
    const added = edit({ kind: 'service add', name: 'api', fields: { vip: '198.18.0.30', port: 443, mode: 'nat', synProxy: true } });
    assert.deepEqual(parseConfig(added.text, 'added').services.map((s) => [s.name, s.synProxy, s.sync.enabled]), [['web', false, true], ['app', false, true], ['api', true, true]]);
  });

  const errors: [string, EditOp, string][] = [
    ['unknown service', { kind: 'server drain', service: 'wbe', server: '198.19.1.12:8080' },
      'SERVICE: "wbe" is not the name or key of a service in the running config; give one of: web, app'],
    ['server not in the service', { kind: 'server drain', service: 'app', server: '198.19.1.12:8080' },
      'ADDR:PORT: "198.19.1.12:8080" is not a real server of app; give one of: 198.19.1.21:8080'],
    ['a duplicate server', { kind: 'server add', service: 'web', server: '198.19.1.11:8080', fields: {} },
      'ADDR:PORT: "198.19.1.11:8080" is already a real server of web (services[0].realServers[0]); change it with lbadm server edit, or give another address or port'],
    ['not ADDR:PORT', { kind: 'server remove', service: 'web', server: '198.19.1.11' },
      'ADDR:PORT: "198.19.1.11" is not a real server address and port; write address:port, e.g. 198.19.1.12:8080, or [fd00::12]:8080 for IPv6 (port 1 to 65535)'],
    ['a duplicate service name', { kind: 'service add', name: 'app', fields: { vip: '198.18.0.30', port: 80, mode: 'nat' } },
      'NAME: "app" is already a service (services[1]); change it with lbadm service edit, or choose another name'],
    ['a health port without a health check', { kind: 'server edit', service: 'web', server: '198.19.1.11:8080', fields: { healthPort: 9000 } },
      "--health-port: 9000 overrides the port of web's health check, and web has none; give web a healthCheck first (e.g. {kind: tcp} in its config, applied with lbadm apply -f FILE), or leave --health-port out"],
    ['unknown service to remove', { kind: 'service remove', name: 'nope' },
      'NAME: "nope" is not the name or key of a service in the running config; give one of: web, app'],
  ];
  for (const [name, op, message] of errors) {
    it(`refuses ${name}`, () => {
      assert.throws(() => edit(op), (err: unknown) => err instanceof EditError && err.message === message);
    });
  }
});

describe('diffLines', () => {
  it('shows the changed region with three lines of context', () => {
    const after = edit({ kind: 'server drain', service: 'web', server: '198.19.1.12:8080' }).text;
    assert.equal(diffLines(CONFIG, after, 'running', 'drained'), [
      '--- running',
      '+++ drained',
      '@@ -7,7 +7,7 @@',
      '     localAddresses: [198.18.2.10]',
      '     realServers:',
      '       - { address: 198.19.1.11, port: 8080, weight: 2 }',
      '-      - { address: 198.19.1.12, port: 8080, weight: 3 }   # the big one',
      '+      - { address: 198.19.1.12, port: 8080, weight: 3, drained: true } # the big one',
      '   - name: app',
      '     vip: 198.18.0.20',
      '     port: 80',
      '',
    ].join('\n'));
    assert.equal(diffLines(CONFIG, CONFIG, 'a', 'b'), '');
  });
});
