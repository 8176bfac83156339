import assert from 'node:assert/strict';
import { sourceOf } from './manage.js';

describe('lbadm server / service: the source an edit is recorded with', () => {
  it('keeps what the command changes and drops where the agent is, how to reach it, and how to print', () => {
    assert.equal(sourceOf(['--socket', '/run/lbd/dir1.sock', 'server', 'drain', 'web', '198.19.1.12:8080', '--json']), 'lbadm server drain web 198.19.1.12:8080');
    assert.equal(
      sourceOf(['--server', '10.0.3.2:7412', '--server-name=dir1', '--ca', '/etc/lbd/tls/ca.pem', '--cert=/home/alice/alice.pem', '--key', '/home/alice/alice.key',
        'server', 'edit', 'web', '198.19.1.12:8080', '--weight', '3', '--dry-run']),
      'lbadm server edit web 198.19.1.12:8080 --weight 3',
    );
  });
});
