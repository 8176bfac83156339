import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LBD_VERSION } from '@lbd/config';
import { buildDeb, type BuildResult } from '@lbd/debian';
import { Topology, removeOrphans, requireRoot, runCommand, runPrefix, waitFor, type BackgroundProcess, type ExecResult } from '@lbd/testkit';

/**
 * Issue 14: lbd's Debian package, installed for real. The test builds the package from this checkout
 * (`pnpm package` does the same), makes a clean Debian 13 root with debootstrap (kept between runs in
 * CACHE, copied per run), installs the package into it with `dpkg -i` and its dependencies from the
 * archive (`apt-get -f install`: nodejs, nftables, conntrack, iproute2, procps), and runs the installed
 * programs from that root: --version, `lbadm validate` of the shipped example, and an agent against an
 * etcd in a network namespace, which programs the namespace's kernel from the root's own nft.
 *
 * This is the one test that reaches beyond loopback and the test namespaces: debootstrap and apt fetch
 * from the Debian archive the machine's apt sources name, as installing the test's packages does.
 */

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const CACHE = '/var/cache/lbd-tests/debootstrap-trixie-minbase';
const SUITE = 'trixie';

/** The archive the machine's apt uses (deb822 or one-line sources), for debootstrap. */
async function debianMirror(): Promise<string> {
  const files = ['/etc/apt/sources.list.d/debian.sources', '/etc/apt/sources.list'];
  for (const f of files) {
    const text = await readFile(f, 'utf8').catch(() => '');
    const m = /^URIs:\s*(\S+)/m.exec(text) ?? /^deb\s+(?:\[[^\]]*\]\s+)?(\S+)/m.exec(text);
    if (m && !m[1]!.includes('security')) return m[1]!;
  }
  return 'http://deb.debian.org/debian';
}

/** A pristine Debian root in CACHE, made once: debootstrap into a temp dir, renamed when complete. */
async function cachedRoot(): Promise<number> {
  if (existsSync(join(CACHE, 'etc/debian_version'))) return 0;
  const started = Date.now();
  const partial = `${CACHE}.partial-${process.pid}`;
  await mkdir(join(CACHE, '..'), { recursive: true });
  try {
    await runCommand('debootstrap', ['--variant=minbase', SUITE, partial, await debianMirror()], { timeoutMs: 600_000 });
    await rename(partial, CACHE);
  } finally {
    await rm(partial, { recursive: true, force: true });
  }
  return Date.now() - started;
}

describe('lbd\'s Debian package, installed into a clean Debian root @privileged', function () {
  this.timeout(600_000);
  let work: string;
  let root: string;
  let deb: BuildResult;
  let mounted: string[] = [];
  let t: Topology | undefined;
  const agents: BackgroundProcess[] = [];

  /** The root's environment: the host's PATH and extra CA file (which the root does not have) left behind. */
  const rootEnv = (): NodeJS.ProcessEnv => {
    const { NODE_EXTRA_CA_CERTS: _ca, ...env } = process.env;
    return { ...env, PATH: '/usr/sbin:/usr/bin:/sbin:/bin', DEBIAN_FRONTEND: 'noninteractive', LANG: 'C' };
  };

  /** A command inside the root (and, with `ns`, inside that namespace). */
  const inRoot = (args: readonly string[], opts: { ns?: string; allowFailure?: boolean; timeoutMs?: number } = {}): Promise<ExecResult> =>
    runCommand(opts.ns ? 'ip' : 'chroot', opts.ns ? ['netns', 'exec', opts.ns, 'chroot', root, ...args] : [root, ...args],
      { allowFailure: opts.allowFailure ?? false, timeoutMs: opts.timeoutMs ?? 60_000, env: rootEnv() });

  before(async function () {
    this.timeout(900_000);
    await requireRoot(this, { commands: ['debootstrap', 'dpkg-deb', 'chroot', 'etcd', 'ip', 'pnpm'] });
    await removeOrphans('lbdt');
    work = await mkdtemp(join(tmpdir(), 'lbd-deb-test-'));
    const built = Date.now();
    deb = buildDeb({ repo: REPO, outDir: work });
    const debootstrapMs = await cachedRoot();
    process.stderr.write(`      package: ${(deb.bytes / 1024 / 1024).toFixed(1)} MiB, ${deb.files} files, installed ${(deb.installedSizeKiB / 1024).toFixed(1)} MiB, built in ${Date.now() - built - debootstrapMs} ms`
      + `${debootstrapMs > 0 ? `; debootstrap ${SUITE} took ${debootstrapMs} ms (cached for later runs in ${CACHE})` : ''}\n`);
    root = join(work, 'root');
    await runCommand('cp', ['-a', CACHE, root], { timeoutMs: 120_000 });
    // What apt, dpkg and node expect of a running system; unmounted (lazily) in after().
    for (const [where, args] of [['proc', ['-t', 'proc', 'proc']], ['dev', ['--bind', '/dev']], ['sys', ['-t', 'sysfs', 'sysfs']]] as const) {
      await runCommand('mount', [...args, join(root, where)]);
      mounted.push(join(root, where));
    }
    await copyFile('/etc/resolv.conf', join(root, 'etc/resolv.conf')).catch(() => undefined);
  });

  after(async function () {
    this.timeout(120_000);
    for (const a of agents) await a.stop(5000).catch(() => undefined);
    await t?.destroy();
    for (const m of mounted.reverse()) await runCommand('umount', ['-l', m], { allowFailure: true });
    mounted = [];
    if (!work) return;
    // Never remove through a mount: with the host's /dev still bound under it, rm would empty the host's /dev.
    const left = (await readFile('/proc/mounts', 'utf8')).split('\n').map((l) => l.split(' ')[1] ?? '').filter((m) => m.startsWith(`${work}/`));
    if (left.length > 0) throw new Error(`not removing ${work}: still mounted under it: ${left.join(', ')}`);
    await rm(work, { recursive: true, force: true });
  });

  it('installs with dpkg -i and its dependencies from the archive; the programs, man pages and completion are in place', async () => {
    await copyFile(deb.path, join(root, 'tmp/lbd.deb'));
    const started = Date.now();
    // Without its dependencies dpkg unpacks it and leaves it unconfigured; apt then fetches them and configures it.
    const dpkg = await inRoot(['dpkg', '-i', '/tmp/lbd.deb'], { allowFailure: true });
    assert.match(`${dpkg.stdout}${dpkg.stderr}`, /Unpacking lbd \(/);
    await inRoot(['apt-get', 'update', '-q'], { timeoutMs: 300_000 });
    await inRoot(['apt-get', '-f', 'install', '-y', '-q', '--no-install-recommends'], { timeoutMs: 600_000 });
    const status = await inRoot(['dpkg-query', '-W', '-f=${Status} ${Version}', 'lbd']);
    assert.equal(status.stdout, `install ok installed ${LBD_VERSION}`);
    process.stderr.write(`      installed with its dependencies in ${Date.now() - started} ms\n`);

    for (const p of ['lbd-agent', 'lbadm', 'lbd-dashboard']) {
      assert.equal((await inRoot([p, '--version'])).stdout, `${p} ${LBD_VERSION}\n`);
      assert.ok(existsSync(join(root, `usr/share/man/man8/${p}.8.gz`)), `${p}'s man page`);
    }
    // The man page is lbadm's own help.
    const man = (await runCommand('sh', ['-c', `gzip -dc ${join(root, 'usr/share/man/man8/lbadm.8.gz')}`])).stdout;
    assert.match(man, /^\.TH LBADM 8 /);
    assert.ok(man.includes('exit codes:'), 'the help text is the description');
    assert.match(await readFile(join(root, 'usr/share/bash-completion/completions/lbadm'), 'utf8'), /complete .*lbadm/);
    assert.match(await readFile(join(root, 'lib/systemd/system/lbd-agent.service'), 'utf8'), /^ExecStart=\/usr\/bin\/lbd-agent --config \/etc\/lbd\/lbd\.yaml$/m);
    // No compiler or pnpm came along, and no TypeScript source.
    assert.equal((await inRoot(['sh', '-c', 'command -v pnpm tsc || true'])).stdout, '');
    assert.equal((await inRoot(['sh', '-c', 'find /usr/lib/lbd -name "*.ts" | head -1'])).stdout, '');

    // The compiled helpers are there and run on the root's libc (wrong arguments: their usage, exit 2).
    const ctnl = (await inRoot(['sh', '-c', 'find /usr/lib/lbd -name lbd-ctnl -type f'])).stdout.trim();
    assert.match(ctnl, /\/dist\/lbd-ctnl$/, 'lbd-ctnl is in the package');
    const usage = await inRoot([ctnl], { allowFailure: true });
    assert.deepEqual([usage.code, usage.stderr.trim()], [2, 'usage: lbd-ctnl events BYTES [keep-young] | write BYTES | dump']);
    // And the nf_tables batch sender, which loads a new table's elements.
    const nfbatch = (await inRoot(['sh', '-c', 'find /usr/lib/lbd -name lbd-nfbatch -type f'])).stdout.trim();
    assert.match(nfbatch, /\/dist\/lbd-nfbatch$/, 'lbd-nfbatch is in the package');
    const nfbatchUsage = await inRoot([nfbatch, 'x'], { allowFailure: true });
    assert.deepEqual([nfbatchUsage.code, nfbatchUsage.stderr.trim()], [2, 'usage: lbd-nfbatch < FRAMES | lbd-nfbatch counter FAMILY TABLE NAME | lbd-nfbatch table FAMILY TABLE [FAMILY TABLE]...']);
    // And the health checker's connect prober.
    const probe = (await inRoot(['sh', '-c', 'find /usr/lib/lbd -name lbd-probe -type f'])).stdout.trim();
    assert.match(probe, /\/dist\/lbd-probe$/, 'lbd-probe is in the package');
    const probeUsage = await inRoot([probe, 'x'], { allowFailure: true });
    assert.deepEqual([probeUsage.code, probeUsage.stderr.trim()], [2, 'usage: lbd-probe < REQUESTS']);
    // And lbd-ctnl's write mode as a Node addon, which the root's node loads (a standby's writes in its sync thread).
    const addon = (await inRoot(['sh', '-c', 'find /usr/lib/lbd -name ctnl-writer.node -type f'])).stdout.trim();
    assert.match(addon, /\/dataplane-nft\/dist\/ctnl-writer\.node$/, 'ctnl-writer.node is in the package');
    const loads = await inRoot(['node', '-e', `process.stdout.write(Object.keys(require(${JSON.stringify(addon)})).join(' '))`]);
    assert.equal(loads.stdout, 'open begin write end abort close');
    assert.equal((await inRoot(['dpkg-query', '-W', '-f=${Architecture}', 'lbd'])).stdout, (await runCommand('dpkg', ['--print-architecture'])).stdout.trim());

    const validate = await inRoot(['lbadm', 'validate', '-f', '/etc/lbd/lbd.yaml.example'], { allowFailure: true });
    assert.equal(validate.code, 0, `${validate.stdout}${validate.stderr}`);
  });

  it('the installed agent runs against etcd in a namespace: lbadm applies a cluster config and the agent claims the vip and programs the namespace\'s kernel from the root\'s nft', async () => {
    assert.ok(existsSync(join(root, 'usr/bin/lbd-agent')), 'the package is installed (the test before)');
    t = new Topology(runPrefix('lbdt', 'deb'));
    await t.addHost('dir1', { forwarding: true });
    for (const [ifname, cidr] of [['eth0', '198.18.0.2/24'], ['eth1', '198.19.1.1/24']] as const) {
      // A veth pair with both ends in the namespace (this kernel has no dummy interfaces).
      await t.ip('dir1', 'link', 'add', ifname, 'type', 'veth', 'peer', 'name', `${ifname}p`);
      await t.ip('dir1', 'addr', 'add', cidr, 'dev', ifname);
      for (const l of [ifname, `${ifname}p`]) await t.ip('dir1', 'link', 'set', l, 'up');
    }
    const ns = t.ns('dir1');
    const etcdData = join(work, 'etcd');
    const etcd = t.spawn('dir1', 'etcd', ['--name', 'deb', '--data-dir', etcdData, '--listen-client-urls', 'http://127.0.0.1:2379',
      '--advertise-client-urls', 'http://127.0.0.1:2379', '--listen-peer-urls', 'http://127.0.0.1:2380', '--initial-advertise-peer-urls', 'http://127.0.0.1:2380',
      '--initial-cluster', 'deb=http://127.0.0.1:2380'], { label: 'dir1:etcd' });
    agents.push(etcd);
    await waitFor('etcd in the namespace to answer', 30_000, async () =>
      ((await t!.exec('dir1', 'etcdctl', ['--endpoints', 'http://127.0.0.1:2379', 'endpoint', 'health'], { allowFailure: true })).code === 0 ? true : undefined), 200);

    await writeFile(join(root, 'etc/lbd/lbd.yaml'), [
      'agent:',
      '  adminSocket: /run/lbd/admin.sock',
      '  cluster:',
      '    director: dir1',
      '    etcd: [http://127.0.0.1:2379]',
      '    prefix: /lbd/deb',
      '    peerListen: 127.0.0.1:7411',
      '    peers: []',
      '    interfaces: { vip: eth0, local: eth1 }',
      '',
    ].join('\n'), { mode: 0o600 });
    await writeFile(join(root, 'tmp/cluster.yaml'), [
      'services:',
      '  - name: web',
      '    vip: 198.18.0.10',
      '    port: 80',
      '    mode: fullnat',
      '    localAddresses: [198.19.1.100-198.19.1.101]',
      '    realServers:',
      '      - { address: 198.19.1.11, port: 8080 }',
      '',
    ].join('\n'));
    await mkdir(join(root, 'run/lbd'), { recursive: true, mode: 0o700 });
    const agent = t.spawn('dir1', 'chroot', [root, '/usr/bin/lbd-agent', '--config', '/etc/lbd/lbd.yaml'], { label: 'dir1:packaged-agent', env: rootEnv() });
    agents.push(agent);
    const said = (): string => `\nthe agent's output:\n${agent.stdout.split('\n').slice(-15).join('\n')}\n${agent.stderr.split('\n').slice(-15).join('\n')}`;
    await waitFor('the packaged agent\'s admin socket to answer', 60_000, async () => {
      if (!agent.running) throw new Error(`the packaged agent exited${said()}`);
      return (await inRoot(['lbadm', 'status'], { ns, allowFailure: true })).code === 0 ? true : undefined;
    }, 250).catch((e: Error) => { throw new Error(`${e.message}${said()}`); });
    const applied = await inRoot(['lbadm', 'apply', '-f', '/tmp/cluster.yaml'], { ns, allowFailure: true });
    assert.equal(applied.code, 0, `${applied.stdout}${applied.stderr}`);
    // A cluster of one leads its group: it claims the vip and programs the service from the root's nft.
    await waitFor('the vip on eth0 and the service in the kernel', 30_000, async () => {
      const addrs = (await t!.ip('dir1', '-j', 'addr', 'show', 'dev', 'eth0')).stdout;
      const table = (await inRoot(['nft', 'list', 'ruleset'], { ns, allowFailure: true })).stdout;
      return addrs.includes('198.18.0.10') && table.includes('198.19.1.11') ? true : undefined;
    }, 250);
    const status = await inRoot(['lbadm', 'status', '--json'], { ns });
    assert.deepEqual((JSON.parse(status.stdout) as { services: Array<{ key: string }> }).services.map((s) => s.key), ['198.18.0.10:80/tcp']);
    const cluster = await inRoot(['lbadm', 'cluster', 'status', '--json'], { ns });
    assert.deepEqual((JSON.parse(cluster.stdout) as { directors: Array<{ id: string; version: string }> }).directors.map((d) => [d.id, d.version]), [['dir1', LBD_VERSION]]);
    await agent.stop(15_000);
  });
});
