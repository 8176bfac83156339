#!/usr/bin/env node
import { resolve } from 'node:path';
import { makeClusterPki } from '../certs.js';

/**
 * pki.js DIR ID...: a cluster CA and one certificate per director id in DIR (ca.pem, ca.key, <id>.pem,
 * <id>.key; see makeClusterPki in packages/testkit/src/certs.ts), for deploy/lab/lab and by hand. Prints
 * the files written; 64 on a bad command line, 1 when openssl fails.
 */

const USAGE = 'usage: node packages/testkit/dist/bin/pki.js DIR DIRECTOR_ID...   (e.g. /run/lbd/lab-tls dir1 dir2)';

async function main(argv: readonly string[]): Promise<number> {
  const [dir, ...ids] = argv;
  if (dir === undefined || ids.length === 0 || dir.startsWith('-')) {
    process.stderr.write(`${USAGE}\n`);
    return 64;
  }
  const pki = await makeClusterPki(resolve(dir), ids);
  const files = [pki.ca.certPath, ...ids.flatMap((id) => [pki.certs[id]!.certPath, pki.certs[id]!.keyPath])];
  process.stdout.write(`${files.join('\n')}\n`);
  return 0;
}

main(process.argv.slice(2)).then((code) => process.exit(code), (e: unknown) => {
  process.stderr.write(`pki: ${(e as Error).message ?? String(e)}\n`);
  process.exit(1);
});
