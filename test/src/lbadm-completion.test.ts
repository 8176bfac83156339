import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { completionScript } from '@lbd/lbadm';

const run = promisify(execFile);

/**
 * The bash script in real bash: it parses, and with COMP_WORDS set as bash sets them it offers the right
 * words. Service names come from `${COMP_WORDS[0]} service list --names`: here a stand-in command that
 * prints two names when given --socket /tmp/answers and fails otherwise (lbadm with the real agent is
 * tested in lbadm-manage.test.ts). It lives in test/ because only test code may run processes (see .dependency-cruiser.cjs).
 */
describe('lbadm completion', () => {
  let dir: string;
  let script: string;
  let fake: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lbadm-completion-'));
    script = join(dir, 'lbadm.bash');
    await writeFile(script, completionScript('bash'));
    fake = join(dir, 'fake-lbadm');
    await writeFile(fake, '#!/bin/sh\n[ "$1 $2 $3 $4 $5" = "--socket /tmp/answers service list --names" ] || { echo "no agent" >&2; exit 69; }\nprintf "web\\nweb-v6\\napp\\n"\n');
    await chmod(fake, 0o755);
  });
  after(async () => { await rm(dir, { recursive: true, force: true }); });

  /** What the completion offers for `line` (the cursor at its end; a trailing space starts a new word). */
  async function complete(line: string, command = 'lbadm'): Promise<string[]> {
    const words = line.split(' ');
    words[0] = command;
    const array = words.map((w) => `'${w}'`).join(' ');
    const { stdout } = await run('bash', ['-c', `source '${script}'; COMP_WORDS=(${array}); COMP_CWORD=${words.length - 1}; _lbadm_complete; printf '%s\\n' "\${COMPREPLY[@]}"`]);
    return stdout.split('\n').filter((x) => x !== '').sort();
  }

  it('bash -n accepts both scripts (zsh\'s is the bash function behind bashcompinit)', async () => {
    await run('bash', ['-n', script]);
    const zsh = join(dir, 'lbadm.zsh');
    await writeFile(zsh, completionScript('zsh'));
    await run('bash', ['-n', zsh]);
  });

  it('completes commands, subcommands and flags', async () => {
    assert.deepEqual(await complete('lbadm se'), ['server', 'service']);
    assert.deepEqual(await complete('lbadm server '), ['add', 'drain', 'edit', 'enable', 'remove']);
    assert.deepEqual(await complete('lbadm server edit web 198.19.1.11:8080 --'), ['--ca', '--cert', '--dry-run', '--health-port', '--help', '--json', '--key', '--server', '--server-name', '--socket', '--version', '--weight']);
    assert.deepEqual(await complete('lbadm service add dns --mode '), ['dr', 'fullnat', 'nat']);
    assert.deepEqual(await complete('lbadm --socket /tmp/x.sock sta'), ['stats', 'status']);
    assert.deepEqual(await complete('lbadm completion '), ['bash', 'zsh']);
    // --group, the old name of --vip-group, still parses but is offered nowhere
    assert.deepEqual(await complete('lbadm failover --'), ['--ca', '--cert', '--help', '--json', '--key', '--server', '--server-name', '--socket', '--to', '--version', '--vip-group']);
  });

  it('zsh runs the same completion through bashcompinit (skipped where zsh is not installed)', async function () {
    this.timeout(20_000);
    const zshPath = ['/usr/bin/zsh', '/bin/zsh'].find((p) => existsSync(p));
    if (zshPath === undefined) this.skip();
    const zsh = join(dir, 'lbadm.zsh');
    await writeFile(zsh, completionScript('zsh'));
    // zsh's compgen returns every candidate; its compadd then matches them against the word typed.
    const candidates = async (words: string[], command = 'lbadm'): Promise<string[]> => {
      const array = [command, ...words.slice(1)].map((w) => `'${w}'`).join(' ');
      const { stdout } = await run(zshPath!, ['-f', '-c', `autoload -U compinit && compinit -u -D; source '${zsh}'; COMP_WORDS=(${array}); COMP_CWORD=${words.length - 1}; compgen -F _lbadm_complete -- ''`]);
      return stdout.split('\n').filter((x) => x !== '').sort();
    };
    assert.deepEqual(await candidates(['lbadm', 'server', '']), ['add', 'drain', 'edit', 'enable', 'remove']);
    assert.deepEqual(await candidates(['lbadm', 'service', 'add', 'x', '--protocol', '']), ['tcp', 'udp']);
    assert.deepEqual(await candidates(['lbadm', '--socket', '/tmp/answers', 'server', 'enable', ''], fake), ['app', 'web', 'web-v6']);
  });

  it('completes service names from the agent, and nothing (quietly) when none answers', async () => {
    assert.deepEqual(await complete('lbadm --socket /tmp/answers server drain w', fake), ['web', 'web-v6']);
    assert.deepEqual(await complete('lbadm --socket /tmp/answers service edit ', fake), ['app', 'web', 'web-v6']);
    assert.deepEqual(await complete('lbadm --socket /tmp/answers conns --service a', fake), ['app']);
    assert.deepEqual(await complete('lbadm --socket /tmp/silent server drain w', fake), []);
    // The word after SERVICE is an address: no names there.
    assert.deepEqual(await complete('lbadm --socket /tmp/answers server drain web w', fake), []);
  });

  it('asks for service names with every connection flag of the line, in both forms, and no other flag', async () => {
    // A stand-in that answers with the words it was run with.
    const echo = join(dir, 'echo-lbadm');
    await writeFile(echo, '#!/bin/sh\nprintf "%s\\n" "$@"\n');
    await chmod(echo, 0o755);
    assert.deepEqual(await complete('lbadm --server 198.18.3.1:7412 --ca ca.pem --cert=me.pem --key me.key --server-name=dir1 --json server drain ', echo), [
      '--ca', '--cert=me.pem', '--key', '--names', '--server', '--server-name=dir1', '198.18.3.1:7412', 'ca.pem', 'list', 'me.key', 'service',
    ]);
    assert.deepEqual(await complete('lbadm --socket=/tmp/x.sock server drain ', echo), ['--names', '--socket=/tmp/x.sock', 'list', 'service']);
  });
});
