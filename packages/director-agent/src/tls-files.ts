import { readFile } from 'node:fs/promises';
import type { PeerTls } from '@lbd/config';
import { AgentError, type TlsMaterial } from '@lbd/operator-surfaces';
import type { PeerSecurity } from '@lbd/proto';

/**
 * Reads a TLS section's PEM files at start. A missing or unreadable one stops the start with the
 * setting and the file named (`agent.cluster.tls.ca: cannot read /etc/lbd/ca.pem (ENOENT)`).
 */
export async function readTlsFiles(tls: PeerTls, setting: string): Promise<TlsMaterial> {
  const read = async (field: 'ca' | 'cert' | 'key'): Promise<Buffer> => {
    try {
      return await readFile(tls[field]);
    } catch (cause) {
      throw new AgentError('Refused', `${setting}.${field}: cannot read ${tls[field]} (${(cause as NodeJS.ErrnoException).code ?? String(cause)}); give a readable PEM file`, { cause });
    }
  };
  return { ca: await read('ca'), cert: await read('cert'), key: await read('key') };
}

/** The peer link's TLS material as a worker thread receives it: Buffers arrive as plain Uint8Arrays. */
export function securityFromWorkerData(s: PeerSecurity): PeerSecurity {
  return s.kind === 'tls' ? { kind: 'tls', ca: Buffer.from(s.ca), cert: Buffer.from(s.cert), key: Buffer.from(s.key) } : s;
}
