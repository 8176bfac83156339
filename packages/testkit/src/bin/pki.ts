#!/usr/bin/env node
import { resolve } from 'node:path';
import { makeClusterPki } from '../certs.js';

/**
 * pki.js DIR ID[=IP,...]...: a cluster CA and one certificate per id in DIR (ca.pem, ca.key, <id>.pem,
 * <id>.key; see makeClusterPki in packages/testkit/src/certs.ts), also naming the addresses given:
 * directors and operators' client certificates, for deploy/lab/lab and by hand. Prints the files written;
 * 64 on a bad command line, 1 when openssl fails.
 */

const USAGE = 'usage: node packages/testkit/dist/bin/pki.js DIR ID[=IP,...]...   (e.g. /run/lbd/lab-tls dir1=198.18.3.1 dir2=198.18.3.2 ops viewer prometheus)';

async function main(argv: readonly string[]): Promise<number> {
  const [dir, ...specs] = argv;
  if (dir === undefined || specs.length === 0 || dir.startsWith('-')) {
    process.stderr.write(`${USAGE}\n`);
    return 64;
  }
  // ID=IP,IP: the certificate also names those addresses.
  const ids = specs.map((s) => s.split('=')[0]!);
  const ips = Object.fromEntries(specs.filter((s) => s.includes('=')).map((s) => [s.split('=')[0]!, s.slice(s.indexOf('=') + 1).split(',')]));
  const pki = await makeClusterPki(resolve(dir), ids, ips);
  const files = [pki.ca.certPath, ...ids.flatMap((id) => [pki.certs[id]!.certPath, pki.certs[id]!.keyPath])];
  process.stdout.write(`${files.join('\n')}\n`);
  return 0;
}

main(process.argv.slice(2)).then((code) => process.exit(code), (e: unknown) => {
  process.stderr.write(`pki: ${(e as Error).message ?? String(e)}\n`);
  process.exit(1);
});
