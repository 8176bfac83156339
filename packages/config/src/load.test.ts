import assert from 'node:assert/strict';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from './errors.js';
import { loadConfig, parseConfig } from './load.js';
import { ADMIN_DEFAULTS, DEFAULT_ADMIN_SOCKET, VIP_GROUP_DEFAULTS, type Config } from './types.js';

/**
 * parseConfig / loadConfig: text in, typed Config or one ConfigError out. The whole message is asserted,
 * because it is what `lbd-agent` and `lbadm validate` print.
 */

const YAML_OK = `# two services, as an operator writes them
services:
  - name: web
    vip: 198.18.0.10
    port: 80
    mode: fullnat
    localAddresses: [198.18.2.10-198.18.2.11]
    realServers:
      - { address: 198.19.1.11, port: 8080, weight: 2 }
      - { address: 198.19.1.12, port: 8080 }
  - name: web6
    vip: FD00:0:0:1:0:0:0:10
    port: 80
    mode: nat
    scheduler: mh
    realServers:
      - address: fd00:3::11
`;

const WANT_OK: Config = {
  ecmp: null,
  agent: { adminSocket: DEFAULT_ADMIN_SOCKET, cluster: null, admin: ADMIN_DEFAULTS },
  vipGroups: [{ name: 'default', ...VIP_GROUP_DEFAULTS, announce: { ...VIP_GROUP_DEFAULTS.announce }, gateways: [] }],
  services: [
    {
      name: 'web', family: 4, vip: '198.18.0.10', port: 80, protocol: 'tcp', mode: 'fullnat', scheduler: 'wrr',
      persistenceSec: 0, localAddresses: { first: '198.18.2.10', last: '198.18.2.11', size: 2 }, expireOnRemove: false,
      onDown: 'quiesce', slowStartMs: 0, fallback: 'drop', sorryServer: null, vipGroup: 'default', sync: { enabled: true, minAgeMs: 0 }, ecmp: false, synProxy: false, connectionLimit: null,
      realServers: [{ address: '198.19.1.11', port: 8080, weight: 2, healthCheck: null }, { address: '198.19.1.12', port: 8080, weight: 1, healthCheck: null }],
    },
    {
      name: 'web6', family: 6, vip: 'fd00:0:0:1::10', port: 80, protocol: 'tcp', mode: 'nat', scheduler: 'mh',
      persistenceSec: 0, localAddresses: null, expireOnRemove: false,
      onDown: 'quiesce', slowStartMs: 0, fallback: 'drop', sorryServer: null, vipGroup: 'default', sync: { enabled: true, minAgeMs: 0 }, ecmp: false, synProxy: false, connectionLimit: null,
      realServers: [{ address: 'fd00:3::11', port: 80, weight: 1, healthCheck: null }],
    },
  ],
};

/** JSON as `JSON.stringify(x, null, '\t')` writes it: tabs must be fine inside JSON's braces. */
const JSON_OK = '{\n\t"services": [\n\t\t{"name": "web", "vip": "198.18.0.10", "port": 80, "mode": "fullnat",\n'
  + '\t\t "localAddresses": ["198.18.2.10-198.18.2.11"],\n'
  + '\t\t "realServers": [{"address": "198.19.1.11", "port": 8080, "weight": 2}, {"address": "198.19.1.12", "port": 8080}]},\n'
  + '\t\t{"name": "web6", "vip": "FD00:0:0:1:0:0:0:10", "port": 80, "mode": "nat", "scheduler": "mh",\n'
  + '\t\t "realServers": [{"address": "fd00:3::11"}]}\n\t]\n}\n';

function thrown(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof ConfigError, `expected a ConfigError, got ${String(e)}`);
    return e;
  }
  assert.fail('expected a ConfigError, nothing was thrown');
}

describe('parseConfig', () => {
  it('parses YAML into the typed Config', () => {
    assert.deepEqual(parseConfig(YAML_OK, 'lbd.yaml'), WANT_OK);
  });

  it('parses JSON (indented with tabs) into the same Config', () => {
    assert.deepEqual(parseConfig(JSON_OK, 'lbd.json'), WANT_OK);
  });

  const failures: { name: string; text: string; kind: ConfigError['kind']; message: string }[] = [
    {
      name: 'YAML syntax error, with line and column',
      text: 'services:\n  - name: web\n    port: : 80\n',
      kind: 'Syntax',
      message: 'lbd.yaml is not valid YAML or JSON (1 problem):\n'
        + '  line 3, column 11: "port: : 80" is not valid YAML or JSON: Nested mappings are not allowed in compact mappings; correct the syntax there (indentation, a missing ":" or quote)',
    },
    {
      name: 'several syntax errors are all listed',
      text: 'services: []\nagent: 1\n  adminSocket: /x\n',
      kind: 'Syntax',
      message: 'lbd.yaml is not valid YAML or JSON (2 problems):\n'
        + '  line 2, column 8: "agent: 1" is not valid YAML or JSON: Nested mappings are not allowed in compact mappings; correct the syntax there (indentation, a missing ":" or quote)\n'
        + '  line 2, column 8: "agent: 1" is not valid YAML or JSON: Implicit keys need to be on a single line; correct the syntax there (indentation, a missing ":" or quote)',
    },
    {
      name: 'indentation with a tab',
      text: 'services:\n\t- name: web\n',
      kind: 'Syntax',
      message: 'lbd.yaml is not valid YAML or JSON (1 problem):\n'
        + '  line 2, column 1: "- name: web" is not valid YAML or JSON: Tabs are not allowed as indentation; indent with spaces, not tabs',
    },
    {
      name: 'a key repeated in one mapping',
      text: 'services:\n  - name: web\n    port: 80\n    port: 81\n',
      kind: 'Syntax',
      message: 'lbd.yaml is not valid YAML or JSON (1 problem):\n'
        + '  line 4, column 5: "port: 81" is not valid YAML or JSON: Map keys must be unique; remove or rename the repeated key',
    },
    {
      name: 'two documents in one file',
      text: 'services: []\n---\nservices: []\n',
      kind: 'Syntax',
      message: 'lbd.yaml is not valid YAML or JSON (1 problem):\n'
        + '  line 2, column 1: "---" is not valid YAML or JSON: the text holds more than one document; keep one document: remove the second "---" and what follows it',
    },
    {
      name: 'an unclosed quote at the end of the text',
      text: 'services:\n  - name: "web\n',
      kind: 'Syntax',
      message: 'lbd.yaml is not valid YAML or JSON (1 problem):\n'
        + '  line 3, column 1: not valid YAML or JSON: Missing closing "quote; correct the syntax there (indentation, a missing ":" or quote)',
    },
    {
      name: 'unclosed JSON bracket at the end of the text',
      text: '{"services": [\n',
      kind: 'Syntax',
      message: 'lbd.yaml is not valid YAML or JSON (2 problems):\n'
        + '  line 2, column 1: not valid YAML or JSON: Flow sequence in block collection must be sufficiently indented and end with a ]; correct the syntax there (indentation, a missing ":" or quote)\n'
        + '  line 2, column 1: not valid YAML or JSON: Flow map must end with a }; correct the syntax there (indentation, a missing ":" or quote)',
    },
    {
      name: 'an empty file is refused, not read as "no services"',
      text: '# nothing yet\n',
      kind: 'Invalid',
      message: 'lbd.yaml is invalid (1 problem):\n'
        + '  (top level): the document is empty; write "services:" followed by a list of services, or "services: []" for none',
    },
    {
      name: 'a valid YAML document that breaks two rules',
      text: 'services:\n  - name: web\n    vip: 10.0.0.300\n    port: 80\n    mode: fullnat\n',
      kind: 'Invalid',
      message: 'lbd.yaml is invalid (2 problems):\n'
        + '  services[0].vip: "10.0.0.300" is not an IPv4 or IPv6 address; give an IPv4 address such as 198.18.0.10 or an IPv6 address such as fd00::10 (no prefix length, port or zone)\n'
        + '  services[0].localAddresses: fullnat needs at least one local address (the SNAT pool real servers reply to); add localAddresses: [198.18.2.10] or a range such as [198.18.2.10-198.18.2.13], addresses this director owns',
    },
    {
      name: 'YAML .inf is named, not printed as null',
      text: 'services:\n  - {name: web, vip: 198.18.0.10, port: .inf, mode: nat}\n',
      kind: 'Invalid',
      message: 'lbd.yaml is invalid (1 problem):\n'
        + '  services[0].port: Infinity is not a port (a whole number from 1 to 65535); give a whole number from 1 to 65535',
    },
  ];
  for (const tc of failures) {
    it(tc.name, () => {
      const err = thrown(() => parseConfig(tc.text, 'lbd.yaml'));
      assert.equal(err.kind, tc.kind);
      assert.equal(err.source, 'lbd.yaml');
      assert.equal(err.message, tc.message);
      assert.equal(err.problems.length, tc.message.split('\n').length - 1);
    });
  }
});

describe('loadConfig', () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lbd-config-test-'));
  });
  after(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('reads and validates a file', async () => {
    const path = join(dir, 'lbd.yaml');
    await writeFile(path, YAML_OK);
    assert.deepEqual(await loadConfig(path), WANT_OK);
  });

  it('names the file in every message', async () => {
    const path = join(dir, 'bad.yaml');
    await writeFile(path, 'services:\n  - {name: web, vip: 198.18.0.10, port: 80, mode: nat, colour: blue}\n');
    await assert.rejects(loadConfig(path), (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      assert.equal(e.kind, 'Invalid');
      assert.equal(e.message, `${path} is invalid (1 problem):\n`
        + '  services[0].colour: "blue" is not a known field; known fields: name, vip, port, protocol, mode, scheduler, persistenceSec, localAddresses, expireOnRemove, realServers, healthCheck, onDown, slowStartMs, fallback, sorryServer, vipGroup, sync, ecmp, synProxy, connectionLimit');
      return true;
    });
  });

  it('a missing file is Unreadable, with the cause kept', async () => {
    const path = join(dir, 'missing.yaml');
    await assert.rejects(loadConfig(path), (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      assert.equal(e.kind, 'Unreadable');
      assert.equal((e.cause as NodeJS.ErrnoException).code, 'ENOENT');
      assert.equal(e.message, `${path} cannot be read:\n  (file): ${JSON.stringify(path)} cannot be read (ENOENT); check the path, or create the file`);
      return true;
    });
  });

  it('a directory is Unreadable', async () => {
    await assert.rejects(loadConfig(dir), (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      assert.equal(e.kind, 'Unreadable');
      assert.equal(e.message, `${dir} cannot be read:\n  (file): ${JSON.stringify(dir)} cannot be read (EISDIR); give the path of a file, not a directory`);
      return true;
    });
  });

  it('a file without read permission is Unreadable', async function () {
    // root reads any file, so the check only means something for another user.
    if (process.getuid?.() === 0) this.skip();
    const path = join(dir, 'secret.yaml');
    await writeFile(path, YAML_OK);
    await chmod(path, 0o000);
    await assert.rejects(loadConfig(path), (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      assert.equal(e.message, `${path} cannot be read:\n  (file): ${JSON.stringify(path)} cannot be read (EACCES); check the file's permissions`);
      return true;
    });
  });
});
