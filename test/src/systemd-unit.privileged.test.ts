import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { requireRoot, runCommand } from '@lbd/testkit';

/**
 * deploy/systemd/lbd-agent.service grants lbd-agent only its CapabilityBoundingSet and makes /proc/sys
 * read-only except its ReadWritePaths. This runs the agent's kernel work under exactly that, as systemd
 * would set it up: `unshare` gives a new network namespace (gone when the process ends: nothing to clean
 * up) and a private mount namespace, where /proc/sys is bound read-only, the unit's /proc/sys paths
 * read-write, /tmp is private; `setpriv` cuts the bounding set to the unit's and sets no_new_privs.
 * packages/director-agent/src/systemd-unit.test.ts checks the same set against the programs the code
 * starts; this checks that the set is enough for them.
 */

const UNIT = fileURLToPath(new URL('../../deploy/systemd/lbd-agent.service', import.meta.url));
const FIXTURE = fileURLToPath(new URL('./sandbox-work.fixture.js', import.meta.url));
const REPO = fileURLToPath(new URL('../../', import.meta.url)).replace(/\/$/, '');

/**
 * PrivateTmp: an empty /tmp. A checkout under /tmp (a CI runner's, a clean clone) would vanish with it,
 * fixture and all, so it is bound back in at its own path, through /mnt (a mount point only in this
 * private mount namespace).
 */
function privateTmp(repo: string): string[] {
  if (!repo.startsWith('/tmp/')) return ['mount -t tmpfs tmpfs /tmp'];
  return ['mount --bind /tmp /mnt', 'mount -t tmpfs tmpfs /tmp', `mkdir -p ${repo}`, `mount --bind /mnt/${repo.slice('/tmp/'.length)} ${repo}`];
}

function unitValues(text: string, key: string): string[] {
  return text.split('\n').filter((l) => l.startsWith(`${key}=`)).flatMap((l) => l.slice(key.length + 1).trim().split(/\s+/));
}

describe('lbd-agent.service sandbox: the agent\'s kernel work under the unit\'s capabilities @privileged', function () {
  this.timeout(90_000);
  let steps: Array<{ step: string; ok: boolean; detail: string }> = [];

  before(async function () {
    await requireRoot(this, { commands: ['unshare', 'setpriv', 'nft', 'conntrack', 'arping', 'ping', 'perl', 'sysctl'] });
    const unit = await readFile(UNIT, 'utf8');
    const caps = unitValues(unit, 'CapabilityBoundingSet').map((c) => `+${c.replace(/^CAP_/, '').toLowerCase()}`);
    assert.ok(caps.length > 0, 'the unit has a CapabilityBoundingSet');
    const procRw = unitValues(unit, 'ReadWritePaths').filter((p) => p.startsWith('/proc/sys/'));
    assert.equal(unitValues(unit, 'ProtectKernelTunables')[0], 'yes');
    assert.equal(unitValues(unit, 'PrivateTmp')[0], 'yes');
    const script = [
      'set -e',
      'mount --make-rprivate /',
      'mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys',
      ...procRw.map((p) => `mount --bind ${p} ${p} && mount -o remount,bind,rw ${p}`),
      ...privateTmp(REPO),
      // sysfs of this namespace: the IPv6 announcement reads the interface's index and address there.
      'mount -t sysfs -o ro sysfs /sys',
      'ip link set lo up',
      'ip link add d0 type veth peer name d1 && ip link set d1 up && ip link set d0 up',
      'ip addr add 198.18.0.1/24 dev d0 && ip addr add fd00:0:0:1::1/64 dev d0 nodad',
      `exec setpriv --bounding-set -all,${caps.join(',')} --inh-caps -all --no-new-privs -- ${process.execPath} ${FIXTURE} d0`,
    ].join('\n');
    const res = await runCommand('unshare', ['-m', '-n', 'bash', '-c', script], { timeoutMs: 80_000, allowFailure: true });
    steps = res.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { step: string; ok: boolean; detail: string });
    assert.ok(steps.length >= 8, `the fixture ran (exit ${res.code}): ${res.stdout.slice(-1000)} ${res.stderr.slice(-1000)}`);
  });

  it('runs in a real sandbox: the rest of /proc/sys is read-only', () => {
    const s = steps.find((x) => x.step === 'kernel.core_pattern is read-only');
    assert.ok(s?.ok, s?.detail);
  });

  it('every kernel operation of a clustered director with connection sync, and the agent itself, succeed', () => {
    const failed = steps.filter((x) => !x.ok);
    assert.deepEqual(failed, [], failed.map((f) => `${f.step}: ${f.detail}`).join('\n'));
  });
});
