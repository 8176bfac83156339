import assert from 'node:assert/strict';
import { localRunner } from './runner.js';

describe('localRunner', () => {
  it('a command killed by a signal is 128 + its number and says so, not "command not found"', async () => {
    // nft 1.0.6 aborts (SIGABRT) on some rules: that must not read as nft missing.
    const res = await localRunner().run('sh', ['-c', 'echo "nft: an assertion failed" >&2; kill -ABRT $$']);
    assert.equal(res.code, 134);
    assert.match(res.stderr, /^nft: an assertion failed\nsh was killed by SIGABRT$/);
  });

  it('a command that is not installed is 127, "command not found"', async () => {
    const res = await localRunner().run('lbd-no-such-command', []);
    assert.deepEqual([res.code, res.stderr], [127, 'lbd-no-such-command: command not found']);
  });
});
