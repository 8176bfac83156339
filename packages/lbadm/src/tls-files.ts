import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { EXIT } from '@lbd/config';
import type { Failure } from './errors.js';

/** A client's TLS files as read: PEM bytes and the parsed certificate. */
export interface ClientTls {
  readonly ca: Buffer;
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly x509: X509Certificate;
}

/**
 * Reads a CA, a client certificate and its key, each named by its flag in what goes wrong, and checks
 * that the key is the certificate's: gRPC would fail later without saying which file is wrong.
 * `what`: what each file is, in words (for the agent's admin API, or for etcd).
 */
export async function readClientTls(
  files: { readonly ca: string; readonly cert: string; readonly key: string },
  flags: { readonly ca: string; readonly cert: string; readonly key: string },
  what: { readonly ca: string; readonly cert: string; readonly key: string },
): Promise<ClientTls | Failure> {
  const pem: Partial<Record<'ca' | 'cert' | 'key', Buffer>> = {};
  for (const k of ['ca', 'cert', 'key'] as const) {
    try {
      pem[k] = await readFile(files[k]);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? String(err);
      const denied = code === 'EACCES' || code === 'EPERM';
      return {
        exit: denied ? EXIT.noPermission : EXIT.usage,
        message: `lbadm: ${flags[k]} ${files[k]}: cannot read it (${code}); give ${what[k]} as a readable PEM file${denied ? ' (a key is often root-only: check its owner and mode)' : ''}`,
      };
    }
  }
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(pem.cert!);
  } catch {
    return { exit: EXIT.usage, message: `lbadm: ${flags.cert} ${files.cert}: is not a PEM certificate; give ${what.cert} (-----BEGIN CERTIFICATE-----)` };
  }
  try {
    if (!x509.checkPrivateKey(createPrivateKey(pem.key!))) {
      return { exit: EXIT.usage, message: `lbadm: ${flags.key} ${files.key}: is not the private key of ${flags.cert} ${files.cert}; give the key the certificate was issued for` };
    }
  } catch {
    return { exit: EXIT.usage, message: `lbadm: ${flags.key} ${files.key}: is not a PEM private key (an encrypted key is not supported); give ${what.key} unencrypted` };
  }
  return { ca: pem.ca!, cert: pem.cert!, key: pem.key!, x509 };
}
