import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LBD_VERSION } from './version.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const versionOf = (file: string): unknown => (JSON.parse(readFileSync(file, 'utf8')) as { version?: unknown }).version;

describe('LBD_VERSION', () => {
  it('is the version of the workspace and of every package in it', () => {
    assert.match(LBD_VERSION, /^\d+\.\d+\.\d+$/);
    assert.equal(versionOf(join(ROOT, 'package.json')), LBD_VERSION, 'package.json');
    for (const dir of readdirSync(join(ROOT, 'packages'))) {
      assert.equal(versionOf(join(ROOT, 'packages', dir, 'package.json')), LBD_VERSION, `packages/${dir}/package.json`);
    }
  });
});
