#!/usr/bin/env node
// Build step: GoBGP's API definitions (Apache-2.0) come from Debian's golang-github-osrg-gobgp-dev, not from
// this repository. This copies the three .proto files the announcer loads at run time into dist/gobgp-api/,
// and generates their TypeScript types into src/gen/ (ignored by git) with proto-loader-gen-types, with the
// same loader options as src/gobgp-api.ts. LBD_GOBGP_API_DIR overrides where the files are looked for.
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');
const DEBIAN_DIR = '/usr/share/gocode/src/github.com/osrg/gobgp/api';
const apiDir = process.env.LBD_GOBGP_API_DIR || DEBIAN_DIR;
const files = ['gobgp.proto', 'attribute.proto', 'capability.proto'];

const missing = files.filter((f) => !existsSync(join(apiDir, f)));
if (missing.length > 0) {
  console.error(`@lbd/announcer: GoBGP's API definitions are missing from ${apiDir} (${missing.join(', ')}).`);
  console.error("Install Debian's golang-github-osrg-gobgp-dev (apt-get install golang-github-osrg-gobgp-dev; test/run and");
  console.error('deploy/lab/lab install it), or point LBD_GOBGP_API_DIR at a directory holding GoBGP 3.x api/*.proto.');
  process.exit(1);
}

const out = join(pkg, 'dist', 'gobgp-api');
mkdirSync(out, { recursive: true });
for (const f of files) copyFileSync(join(apiDir, f), join(out, f));

const gen = join(pkg, 'src', 'gen');
rmSync(gen, { recursive: true, force: true });
execFileSync(join(pkg, 'node_modules', '.bin', 'proto-loader-gen-types'), [
  '--keepCase=false', '--longs=Number', '--enums=String', '--defaults', '--oneofs',
  '--grpcLib=@grpc/grpc-js', '--importFileExtension=.js', '-I', out, '-O', gen, ...files,
], { stdio: 'inherit', cwd: pkg });
