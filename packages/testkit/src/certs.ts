import { chmod, mkdir } from 'node:fs/promises';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { runCommand } from './exec.js';

/**
 * Throwaway PKI for tests and the lab: a cluster CA and one certificate per director, as the peer link's
 * mutual TLS expects (subjectAltName DNS:<director id>, usable as TLS server and client). Made with the
 * `openssl` CLI (3.0 or newer), never through a shell. Not for production: keys are unencrypted and the CA
 * key sits next to the certificates.
 */

export interface CaFiles {
  /** PEM certificate, self-signed, basicConstraints CA:TRUE. */
  readonly certPath: string;
  /** PEM private key (mode 0600). */
  readonly keyPath: string;
  /** The CA's common name, also the stem of its file names. */
  readonly name: string;
}

export interface CertFiles {
  readonly certPath: string;
  readonly keyPath: string;
}

export interface ClusterPki {
  readonly dir: string;
  /** `<dir>/ca.pem` and `<dir>/ca.key`. */
  readonly ca: CaFiles;
  /** Per director id: `<dir>/<id>.pem` and `<dir>/<id>.key`. */
  readonly certs: Readonly<Record<string, CertFiles>>;
}

/** Validity (days): the PKI is made fresh for each test run or `lab up`, so a year is plenty. */
const CA_DAYS = 365;
const LEAF_DAYS = 365;
/** A name that is a safe file stem, a safe `-subj` value and a DNS name: a director id (see config's NAME_PATTERN). */
const NAME = /^[a-z0-9]([a-z0-9_.-]{0,61}[a-z0-9])?$/;
const OPENSSL_TIMEOUT_MS = 15_000;

// Common to every `openssl req`: a fresh P-256 key (fast to make, accepted by Node and gRPC), unencrypted.
// `-config /dev/null` because the system openssl.cnf adds v3_ca (CA:TRUE) to every `req -x509`, which would
// turn a director's certificate into a CA; every extension is given here instead.
const REQ = ['req', '-x509', '-new', '-config', '/dev/null', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

function checkName(name: string, what: string): void {
  if (!NAME.test(name)) throw new Error(`${what} ${JSON.stringify(name)}: use 1 to 63 lower-case letters, digits, "-", "_" or ".", starting and ending with a letter or digit`);
}

async function openssl(args: readonly string[]): Promise<void> {
  await runCommand('openssl', args, { timeoutMs: OPENSSL_TIMEOUT_MS });
}

/** A self-signed CA in `<dir>/<name>.pem` and `<dir>/<name>.key`, common name `name`. */
export async function makeCa(dir: string, name: string): Promise<CaFiles> {
  checkName(name, 'CA name');
  await mkdir(dir, { recursive: true });
  const certPath = join(dir, `${name}.pem`);
  const keyPath = join(dir, `${name}.key`);
  await openssl([
    ...REQ, '-keyout', keyPath, '-out', certPath, '-days', String(CA_DAYS), '-subj', `/CN=${name}`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
    '-addext', 'subjectKeyIdentifier=hash',
  ]);
  await chmod(keyPath, 0o600);
  return { certPath, keyPath, name };
}

/**
 * A certificate for director `id`, signed by `ca`, in `<dir>/<id>.pem` and `<dir>/<id>.key`: subjectAltName
 * DNS:<id> (what the peer link checks) and IP:<a> for each of `ips` (so a client may also name it by
 * address, as a browser at https://198.18.3.1:9443/ does), extendedKeyUsage serverAuth and clientAuth
 * (each director is both ends of the link).
 */
export async function issueCert(ca: CaFiles, dir: string, id: string, ips: readonly string[] = []): Promise<CertFiles> {
  checkName(id, 'director id');
  if (id === ca.name) throw new Error(`director id ${JSON.stringify(id)} is the CA's name: its files would overwrite the CA's`);
  const bad = ips.find((a) => !isIP(a));
  if (bad !== undefined) throw new Error(`certificate ${id}: ${JSON.stringify(bad)} is not an IP address`);
  await mkdir(dir, { recursive: true });
  const certPath = join(dir, `${id}.pem`);
  const keyPath = join(dir, `${id}.key`);
  // `req -x509 -CA` (OpenSSL 3.0) signs with the CA in one step: no CSR file, no serial file.
  await openssl([
    ...REQ, '-CA', ca.certPath, '-CAkey', ca.keyPath, '-keyout', keyPath, '-out', certPath, '-days', String(LEAF_DAYS), '-subj', `/CN=${id}`,
    '-addext', 'basicConstraints=critical,CA:FALSE', '-addext', 'keyUsage=critical,digitalSignature',
    '-addext', 'extendedKeyUsage=serverAuth,clientAuth', '-addext', `subjectAltName=${[`DNS:${id}`, ...ips.map((a) => `IP:${a}`)].join(',')}`,
  ]);
  await chmod(keyPath, 0o600);
  return { certPath, keyPath };
}

/**
 * The cluster CA (`ca.pem`, `ca.key`) and one certificate per id in `dir` (created if missing): the
 * directors', and operators' client certificates (their name is what agent.admin.clients lists); `ips`:
 * addresses a certificate also names (IP subjectAltNames), per id.
 */
export async function makeClusterPki(dir: string, directorIds: readonly string[], ips: Readonly<Record<string, readonly string[]>> = {}): Promise<ClusterPki> {
  if (directorIds.length === 0) throw new Error('makeClusterPki: no director ids');
  const dup = directorIds.find((id, i) => directorIds.indexOf(id) !== i);
  if (dup !== undefined) throw new Error(`makeClusterPki: director id ${JSON.stringify(dup)} given twice`);
  for (const id of directorIds) checkName(id, 'director id');
  // Checked before anything is written, so a bad list leaves an existing PKI in `dir` alone.
  if (directorIds.includes('ca')) throw new Error('makeClusterPki: director id "ca" is the CA\'s name: its files would overwrite the CA\'s');
  const ca = await makeCa(dir, 'ca');
  const certs: Record<string, CertFiles> = {};
  for (const id of directorIds) certs[id] = await issueCert(ca, dir, id, ips[id] ?? []);
  return { dir, ca, certs };
}
