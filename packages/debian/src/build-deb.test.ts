import assert from 'node:assert/strict';
import { LBD_VERSION } from '@lbd/config';
import { isBuildOnly, renderControl, renderManPage, renderWrapper } from './build-deb.js';

describe('the Debian package\'s parts', () => {
  it('control names the version, the architecture and what a director needs', () => {
    const c = renderControl({ version: LBD_VERSION, architecture: 'all', installedSizeKiB: 10_103 });
    assert.match(c, new RegExp(`^Package: lbd\\nVersion: ${LBD_VERSION.replace(/\./g, '\\.')}\\nArchitecture: all\\n`));
    assert.match(c, /^Depends: nodejs \(>= 20\), nftables, conntrack, iproute2, procps$/m);
    assert.match(c, /^Installed-Size: 10103$/m);
    // A compiled program (lbd-ctnl) makes the package one architecture's, depending on libc.
    const amd64 = renderControl({ version: LBD_VERSION, architecture: 'amd64', installedSizeKiB: 10_103 });
    assert.match(amd64, /^Architecture: amd64$/m);
    assert.match(amd64, /^Depends: nodejs \(>= 20\), nftables, conntrack, iproute2, procps, libc6$/m);
    // A description's continuation lines start with a space; an empty one is " .".
    for (const line of c.split('\n').slice(c.split('\n').findIndex((l) => l.startsWith('Description:')) + 1).filter(Boolean)) assert.match(line, /^ /);
  });

  it('a wrapper execs node on the program, so systemd signals the agent itself', () => {
    assert.equal(renderWrapper('node_modules/@lbd/lbadm/dist/bin/lbadm.js'), '#!/bin/sh\nexec /usr/bin/node /usr/lib/lbd/node_modules/@lbd/lbadm/dist/bin/lbadm.js "$@"\n');
  });

  it('a man page is the program\'s help, with roff\'s special characters escaped', () => {
    const page = renderManPage({ name: 'lbadm', section: 8, summary: 'operate lbd', version: '1.2.3', help: 'usage: lbadm [--json] COMMAND\n\n.starts with a dot\npath C:\\x\n' });
    assert.equal(page, [
      '.TH LBADM 8 "" "lbd 1.2.3" "lbd"', '.SH NAME', 'lbadm \\- operate lbd', '.SH SYNOPSIS', '.nf', 'lbadm [--json] COMMAND', '.fi',
      '.SH DESCRIPTION', '.nf', 'usage: lbadm [--json] COMMAND', '', '\\&.starts with a dot', 'path C:\\ex', '.fi',
      '.SH SEE ALSO', '.BR lbd-agent (8),\n.BR lbd-dashboard (8)', '',
    ].join('\n'));
  });

  it('leaves out what only a build needs', () => {
    for (const p of ['src', 'node_modules/.pnpm/@lbd+config@x/node_modules/@lbd/config/src', 'dist/index.d.ts', 'dist/index.js.map', 'dist/validate.test.js',
      'tsconfig.tsbuildinfo', 'node_modules/.pnpm/@types+node@20/node_modules/@types', '.turbo']) assert.ok(isBuildOnly(p), p);
    for (const p of ['dist/index.js', 'node_modules/.pnpm/yaml@2/node_modules/yaml/dist/index.js', 'node_modules/.pnpm/x@1/node_modules/x/src', 'package.json']) assert.ok(!isBuildOnly(p), p);
  });
});
