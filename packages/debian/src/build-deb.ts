import { spawnSync } from 'node:child_process';
import { chmodSync, closeSync, cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { gzipSync } from 'node:zlib';
import { LBD_VERSION } from '@lbd/config';

/**
 * lbd's Debian package (issue 14): the built JavaScript with its production dependencies under
 * /usr/lib/lbd (`pnpm deploy` of this package, whose dependencies are the programs), the three programs on
 * the PATH, the systemd unit, sysctl and module files, an example config in /etc/lbd, bash completion and
 * man pages made from the programs' own --help. No compiler or pnpm on the director: only Node.
 *
 * The package is built for this machine's architecture (`dpkg --print-architecture`) when the tree holds
 * a compiled program (an ELF file: dataplane-nft's lbd-ctnl and lbd-nfbatch, the netlink helpers, and
 * health-checker's lbd-probe, the connect prober; dataplane-nft's ctnl-writer.node, lbd-ctnl's write mode
 * as a Node-API addon; they need libc only), and is `Architecture: all` otherwise. Any other Node addon
 * (`.node`) is refused: each would need its own dependencies named.
 */

/** Where the deployed tree goes on the director. */
export const LIB_DIR = '/usr/lib/lbd';

/** The programs on the PATH: name, script under LIB_DIR, man section, what it is. */
export const PROGRAMS = [
  { name: 'lbd-agent', script: 'node_modules/@lbd/director-agent/dist/bin/lbd-agent.js', section: 8, summary: 'the lbd director agent: programs nftables and conntrack, elects, syncs, serves the admin API' },
  { name: 'lbadm', script: 'node_modules/@lbd/lbadm/dist/bin/lbadm.js', section: 8, summary: 'operate lbd directors: status, config, servers and services, failovers, events, doctor' },
  { name: 'lbd-dashboard', script: 'node_modules/@lbd/director-agent/dist/bin/lbd-dashboard.js', section: 8, summary: 'the live dashboard of an lbd-agent on a loopback address' },
] as const;

/**
 * What the package needs on the director. `procps` (sysctl) and the Essential packages (perl-base: the
 * ctnetlink helpers and the announcer; util-linux: setsid) are what the agent starts besides these.
 */
export const DEPENDS = ['nodejs (>= 20)', 'nftables', 'conntrack', 'iproute2', 'procps'];
/** What a compiled program in the tree adds (lbd-ctnl, lbd-nfbatch, lbd-probe and ctnl-writer.node link libc and nothing else). */
export const NATIVE_DEPENDS = ['libc6'];
export const RECOMMENDS = ['iputils-arping'];
/** lbd's own Node addons (Node-API, libc only): the package may hold these. */
const OWN_ADDONS = ['/@lbd/dataplane-nft/dist/ctnl-writer.node'];
export const SUGGESTS = ['etcd-client', 'gobgpd'];

export interface ControlFields {
  readonly version: string;
  readonly architecture: string;
  readonly installedSizeKiB: number;
}

/** Compiled programs are built for one architecture: the package is too, and depends on libc. */
function depends(architecture: string): readonly string[] {
  return architecture === 'all' ? DEPENDS : [...DEPENDS, ...NATIVE_DEPENDS];
}

/** DEBIAN/control. */
export function renderControl(f: ControlFields): string {
  return [
    'Package: lbd',
    `Version: ${f.version}`,
    `Architecture: ${f.architecture}`,
    'Maintainer: lbd developers <lbd@localhost>',
    `Installed-Size: ${f.installedSizeKiB}`,
    `Depends: ${depends(f.architecture).join(', ')}`,
    `Recommends: ${RECOMMENDS.join(', ')}`,
    `Suggests: ${SUGGESTS.join(', ')}`,
    'Section: net',
    'Priority: optional',
    'Homepage: https://github.com/lbd/lbd',
    'Description: high-availability L4 load-balancer director (nftables + conntrack)',
    ' lbd directors program the kernel (nftables NAT and FULLNAT, conntrack) and keep it that way: health',
    ' checks, etcd leader election with fenced leadership and floating vips, connection sync between',
    ' directors over gRPC, and an ECMP tier of active FULLNAT directors behind BGP routers.',
    ' .',
    ' This package holds lbd-agent (the systemd unit lbd-agent.service), lbadm and lbd-dashboard.',
    '',
  ].join('\n');
}

/** /usr/bin/NAME: runs the program on Debian's node; `exec` keeps the PID (systemd signals the agent itself). */
export function renderWrapper(script: string): string {
  return `#!/bin/sh\nexec /usr/bin/node ${LIB_DIR}/${script} "$@"\n`;
}

/** Escapes text for roff: backslashes, and a leading `.` or `'` that would read as a request. */
function roff(line: string): string {
  return line.replace(/\\/g, '\\e').replace(/^([.'])/, '\\&$1');
}

/**
 * A man page made from a program's own --help: the usage line (its first line) as the synopsis, the whole
 * text as the description, preformatted as the program prints it.
 */
export function renderManPage(o: { name: string; section: number; summary: string; version: string; help: string }): string {
  const lines = o.help.replace(/\n+$/, '').split('\n');
  const usage = (lines[0] ?? '').replace(/^usage:\s*/, '');
  return [
    `.TH ${o.name.toUpperCase()} ${o.section} "" "lbd ${o.version}" "lbd"`,
    '.SH NAME',
    `${o.name} \\- ${roff(o.summary)}`,
    '.SH SYNOPSIS',
    '.nf',
    roff(usage),
    '.fi',
    '.SH DESCRIPTION',
    '.nf',
    ...lines.map(roff),
    '.fi',
    '.SH SEE ALSO',
    PROGRAMS.filter((p) => p.name !== o.name).map((p) => `.BR ${p.name} (${p.section})`).join(',\n'),
    '',
  ].join('\n');
}

/**
 * Maintainer scripts. An upgrade restarts a running agent once, in postinst, on the new code (the kernel
 * forwards meanwhile: the agent never sits in the packet path, and a restarted agent adopts what it finds).
 * A fresh install starts nothing: the agent needs /etc/lbd/lbd.yaml first. Removing stops the agent (it
 * hands its vip groups and slots over); purging removes /etc/lbd only if nothing of the operator's is left.
 */
export const POSTINST = `#!/bin/sh
set -e
if [ "$1" = configure ]; then
  install -d -m 0700 /etc/lbd /etc/lbd/tls
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
    # As at boot: forwarding and ARP settings, and nf_conntrack loaded.
    systemctl restart systemd-sysctl.service || true
    modprobe nf_conntrack || true
    # An upgrade ($2: the version before): a running agent restarts once, on the new code.
    if [ -n "$2" ]; then systemctl try-restart lbd-agent.service || true; fi
  fi
fi
exit 0
`;

export const PRERM = `#!/bin/sh
set -e
# Not on upgrade: the agent keeps running until postinst restarts it once.
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
  systemctl stop lbd-agent.service || true
  systemctl disable lbd-agent.service >/dev/null 2>&1 || true
fi
exit 0
`;

export const POSTRM = `#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi
if [ "$1" = purge ]; then
  # The operator's config and keys stay: only empty directories go.
  rmdir /etc/lbd/tls 2>/dev/null || true
  rmdir /etc/lbd 2>/dev/null || true
fi
exit 0
`;

/** Paths under the deployed tree that the director never needs: sources, type declarations, tests, maps. */
export function isBuildOnly(rel: string): boolean {
  const base = rel.split('/').pop()!;
  // TypeScript sources and declarations (.d.ts ends in .ts too), source maps, build info.
  if (/\.(ts|map|tsbuildinfo)$/.test(base)) return true;
  if (/\.(test|fixture)\.js$/.test(base) || base === 'tsconfig.json' || base === 'pnpm-workspace.yaml' || base === '.turbo') return true;
  if (/(^|\/)node_modules\/@types$/.test(rel)) return true;
  // lbd's own packages' src directories (a third-party `src` may be what its package.json points at).
  return rel === 'src' || /(^|\/)node_modules\/@lbd\/[^/]+\/src$/.test(rel);
}

interface BuildOptions {
  readonly repo: string;
  readonly outDir: string;
  readonly log?: (line: string) => void;
}

export interface BuildResult {
  readonly path: string;
  readonly bytes: number;
  readonly installedSizeKiB: number;
  readonly files: number;
}

function run(command: string, args: readonly string[], cwd: string, input?: string): string {
  const res = spawnSync(command, args, { cwd, encoding: 'utf8', input, maxBuffer: 64 * 1024 * 1024 });
  if (res.error) throw new Error(`${command} ${args.join(' ')}: ${res.error.message}`);
  if (res.status !== 0) throw new Error(`${command} ${args.join(' ')} exited ${res.status}: ${(res.stderr || res.stdout).trim().split('\n').slice(-8).join('\n')}`);
  return res.stdout;
}

/** A regular file that starts with ELF's magic: a compiled program or library. */
function isElf(p: string): boolean {
  const st = lstatSync(p);
  if (!st.isFile() || st.size < 4) return false;
  const fd = openSync(p, 'r');
  try {
    const head = Buffer.alloc(4);
    readSync(fd, head, 0, 4, 0);
    return head.equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]));
  } finally {
    closeSync(fd);
  }
}

/** Every path under dir (files and directories; symbolic links are not followed). */
function walk(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    out.push(p);
    if (e.isDirectory()) walk(p, out);
  }
  return out;
}

function put(stage: string, path: string, text: string | Buffer, mode = 0o644): void {
  const full = join(stage, path);
  mkdirSync(dirname(full), { recursive: true });
  writeFileSync(full, text);
  chmodSync(full, mode);
}

/** Builds dist/lbd_<version>_<arch>.deb from a built checkout (`pnpm run build` first). */
export function buildDeb(o: BuildOptions): BuildResult {
  const log = o.log ?? (() => undefined);
  const stage = mkdtempSync(join(tmpdir(), 'lbd-deb-'));
  try {
    const lib = join(stage, LIB_DIR);
    log(`deploying @lbd/debian with its production dependencies to ${LIB_DIR}`);
    run('pnpm', ['--filter', '@lbd/debian', 'deploy', '--prod', lib], o.repo);
    // Deepest first, so a directory's contents go before it is looked at.
    for (const p of walk(lib).reverse()) {
      if (!existsSync(p)) continue;
      if (isBuildOnly(relative(lib, p))) rmSync(p, { recursive: true, force: true });
    }
    // The .proto files the gRPC services load at run time live at the repository's top; the proto package
    // looks for its own copy first (protoIncludeDir), which is what a director has.
    const store = join(lib, 'node_modules/.pnpm');
    const protoEntry = readdirSync(store).find((d) => d.startsWith('@lbd+proto@'));
    const protoPackage = join(store, protoEntry ?? '@lbd+proto', 'node_modules/@lbd/proto');
    if (!existsSync(join(protoPackage, 'package.json'))) throw new Error(`@lbd/proto is not in the deployed tree (${protoPackage})`);
    // Not proto/compat: the old releases' files are for the compatibility test, not for a director.
    const compat = join(o.repo, 'proto', 'compat');
    cpSync(join(o.repo, 'proto'), join(protoPackage, 'proto'), { recursive: true, dereference: true, filter: (src) => src !== compat });
    const addons = walk(lib).filter((p) => p.endsWith('.node') && !OWN_ADDONS.some((a) => p.endsWith(a)));
    if (addons.length > 0) throw new Error(`Node addons other than lbd's own are not expected in the package (each needs its dependencies named in it): ${addons.map((p) => relative(lib, p)).join(', ')}`);
    const compiled = walk(lib).filter(isElf);
    log(compiled.length === 0 ? 'no compiled program: Architecture all' : `compiled: ${compiled.map((p) => relative(lib, p)).join(', ')}`);
    for (const p of PROGRAMS) {
      if (!existsSync(join(lib, p.script))) throw new Error(`${p.name}: ${LIB_DIR}/${p.script} is not in the deployed tree`);
      put(stage, `usr/bin/${p.name}`, renderWrapper(p.script), 0o755);
      const help = run(process.execPath, [join(lib, p.script), '--help'], o.repo);
      put(stage, `usr/share/man/man${p.section}/${p.name}.${p.section}.gz`, gzipSync(renderManPage({ ...p, version: LBD_VERSION, help }), { level: 9 }));
    }
    const lbadm = join(lib, PROGRAMS[1].script);
    put(stage, 'usr/share/bash-completion/completions/lbadm', run(process.execPath, [lbadm, 'completion', 'bash'], o.repo));
    const repoFile = (p: string): string => readFileSync(join(o.repo, p), 'utf8');
    put(stage, 'lib/systemd/system/lbd-agent.service', repoFile('deploy/systemd/lbd-agent.service'));
    put(stage, 'usr/lib/sysctl.d/60-lbd.conf', repoFile('deploy/systemd/60-lbd.conf'));
    put(stage, 'usr/lib/modules-load.d/lbd.conf', repoFile('deploy/systemd/lbd-modules.conf'));
    put(stage, 'etc/lbd/lbd.yaml.example', repoFile('deploy/examples/fullnat/dir1.yaml'));
    for (const d of ['fullnat', 'nat', 'dr', 'ecmp']) {
      for (const f of readdirSync(join(o.repo, 'deploy/examples', d))) put(stage, `usr/share/doc/lbd/examples/${d}/${f}`, repoFile(`deploy/examples/${d}/${f}`));
    }
    put(stage, 'usr/share/doc/lbd/operator-guide.md', repoFile('docs/operator-guide.md'));
    put(stage, 'usr/share/doc/lbd/copyright', `lbd ${LBD_VERSION}\nThe bundled Node.js modules under ${LIB_DIR}/node_modules keep their own licences (see each module's directory).\n`);

    // One mode per kind, whatever umask and pnpm left: directories and programs 0755, the rest 0644.
    chmodSync(stage, 0o755);
    for (const p of walk(stage)) {
      const st = lstatSync(p);
      if (st.isSymbolicLink()) continue;
      chmodSync(p, st.isDirectory() || (st.mode & 0o111) !== 0 ? 0o755 : 0o644);
    }
    chmodSync(join(stage, 'etc/lbd'), 0o700);
    const installedSizeKiB = Math.ceil(walk(stage).reduce((n, p) => n + (lstatSync(p).isFile() ? lstatSync(p).size : 0), 0) / 1024);
    const architecture = compiled.length === 0 ? 'all' : run('dpkg', ['--print-architecture'], o.repo).trim();
    put(stage, 'DEBIAN/control', renderControl({ version: LBD_VERSION, architecture, installedSizeKiB }));
    put(stage, 'DEBIAN/conffiles', '/etc/lbd/lbd.yaml.example\n');
    put(stage, 'DEBIAN/postinst', POSTINST, 0o755);
    put(stage, 'DEBIAN/prerm', PRERM, 0o755);
    put(stage, 'DEBIAN/postrm', POSTRM, 0o755);
    mkdirSync(o.outDir, { recursive: true });
    const path = join(o.outDir, `lbd_${LBD_VERSION}_${architecture}.deb`);
    log(`dpkg-deb --build ${path}`);
    run('dpkg-deb', ['--root-owner-group', '-Zxz', '--build', stage, path], o.repo);
    const files = walk(stage).filter((p) => !p.includes('/DEBIAN/') && lstatSync(p).isFile()).length;
    return { path, bytes: statSync(path).size, installedSizeKiB, files };
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}
