import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { loadProtoTree, protoFiles, wireCompatibilityProblems } from './compat.js';
import { protoIncludeDir } from './index.js';

/**
 * The current .proto files against those of every release kept in proto/compat/<version>/ (a rolling
 * upgrade runs two adjacent versions side by side), and the checker against breaks made on purpose.
 */

describe('proto compatibility with the releases kept in proto/compat', () => {
  const root = protoIncludeDir();
  const compat = join(root, 'compat');
  const releases = existsSync(compat) ? readdirSync(compat, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name) : [];

  it('keeps at least the release this version follows', () => {
    assert.ok(releases.length > 0, `no release's .proto files under ${compat}`);
  });

  it('loads the same files as the services (compat left out)', () => {
    assert.deepEqual(protoFiles(root), ['lbd/admin/v1/admin.proto', 'lbd/common/v1/endpoint.proto', 'lbd/peer/v1/peer.proto', 'lbd/peer/v1/sync.proto']);
  });

  for (const version of releases) {
    it(`the current files are wire-compatible with release ${version}`, () => {
      assert.deepEqual(wireCompatibilityProblems(loadProtoTree(join(compat, version)), loadProtoTree(root)), []);
    });
  }
});

describe('wireCompatibilityProblems', () => {
  const BASE = `syntax = "proto3";
package t.v1;
enum Color { COLOR_UNSPECIFIED = 0; RED = 1; GREEN = 2; }
message Item { string name = 1; repeated uint32 ports = 2; Color color = 3; Inner inner = 4; map<string, uint64> counts = 5;
  message Inner { int64 at = 1; } }
service Things {
  rpc Get(Item) returns (Item);
  rpc Watch(Item) returns (stream Item);
}
`;
  let dir: string;
  beforeEach(() => { dir = mkdtempSync(join(tmpdir(), 'lbd-proto-compat-')); });
  afterEach(() => { rmSync(dir, { recursive: true, force: true }); });

  function tree(name: string, text: string): ReturnType<typeof loadProtoTree> {
    const file = join(dir, name, 't/v1/t.proto');
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, text);
    return loadProtoTree(join(dir, name));
  }
  const problems = (changed: string): string[] => wireCompatibilityProblems(tree('old', BASE), tree('new', changed));

  it('nothing changed, or only what an old peer skips: compatible', () => {
    assert.deepEqual(problems(BASE), []);
    const added = BASE
      .replace('Inner inner = 4;', 'Inner inner = 4; bool fresh = 6;')
      .replace('GREEN = 2;', 'GREEN = 2; BLUE = 3;')
      .replace('rpc Get(Item) returns (Item);', 'rpc Get(Item) returns (Item);\n  rpc Put(Item) returns (Item);')
      .replace('string name = 1;', 'string label = 1;');
    assert.deepEqual(problems(added), []);
  });

  it('a field removed: its number must be reserved', () => {
    assert.deepEqual(problems(BASE.replace('repeated uint32 ports = 2; ', '')), [
      't.v1.Item: field 2 (ports) removed without reserving its number: add `reserved 2;` so it is never reused',
    ]);
    assert.deepEqual(problems(BASE.replace('repeated uint32 ports = 2; ', 'reserved 2; ')), []);
    assert.deepEqual(problems(BASE.replace('repeated uint32 ports = 2; ', 'reserved 1 to 2; ').replace('string name = 1; ', '')), []);
    // A map's value type is a field's type like any other.
    assert.deepEqual(problems(BASE.replace('map<string, uint64> counts = 5;', 'map<string, uint32> counts = 5;')), [
      't.v1.Item: field 5 (counts) changed from map<string, uint64> to map<string, uint32>: a peer of the old version reads it as map<string, uint64>; add a new field instead',
    ]);
  });

  it('a field\'s type or repetition changed, a nested message\'s too', () => {
    assert.deepEqual(problems(BASE.replace('string name = 1;', 'bytes name = 1;').replace('repeated uint32 ports = 2;', 'uint32 ports = 2;').replace('int64 at = 1;', 'uint64 at = 1;')), [
      't.v1.Item: field 1 (name) changed from string to bytes: a peer of the old version reads it as string; add a new field instead',
      't.v1.Item: field 2 (ports) changed from repeated uint32 to uint32: a peer of the old version reads it as repeated uint32; add a new field instead',
      't.v1.Item.Inner: field 1 (at) changed from int64 to uint64: a peer of the old version reads it as int64; add a new field instead',
    ]);
  });

  it('an enum value removed, unless reserved', () => {
    assert.deepEqual(problems(BASE.replace(' GREEN = 2;', '')), ['t.v1.Color: value 2 (GREEN) removed without reserving its number: add `reserved 2;`']);
    assert.deepEqual(problems(BASE.replace(' GREEN = 2;', ' reserved 2;')), []);
  });

  it('a message renamed, a method removed or its streaming changed', () => {
    const renamed = problems(BASE.replace(/\bItem\b/g, 'Thing'));
    assert.ok(renamed.includes('message t.v1.Item is gone: keep it (a peer of the old version still sends or calls it)'), renamed.join('\n'));
    assert.deepEqual(problems(BASE.replace('  rpc Get(Item) returns (Item);\n', '')), [
      't.v1.Things: method Get is gone: keep it (a peer or lbadm of the old version calls /t.v1.Things/Get)',
    ]);
    assert.deepEqual(problems(BASE.replace('returns (stream Item)', 'returns (Item)')), [
      't.v1.Things: method Watch changed from /t.v1.Things/Watch (t.v1.Item) returns (stream t.v1.Item) to /t.v1.Things/Watch (t.v1.Item) returns (t.v1.Item): add a new method instead',
    ]);
  });
});
