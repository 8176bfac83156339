#!/usr/bin/env node
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildDeb } from '../build-deb.js';

// `pnpm package`: from a built checkout, dist/lbd_<version>_all.deb at the repository's top.
const repo = fileURLToPath(new URL('../../../..', import.meta.url));
try {
  const r = buildDeb({ repo, outDir: join(repo, 'dist'), log: (l) => process.stderr.write(`${l}\n`) });
  process.stdout.write(`${r.path}: ${(r.bytes / 1024 / 1024).toFixed(1)} MiB, ${r.files} files, installed size ${(r.installedSizeKiB / 1024).toFixed(1)} MiB\n`);
} catch (err) {
  process.stderr.write(`lbd-build-deb: ${(err as Error).message}\n`);
  process.exitCode = 1;
}
