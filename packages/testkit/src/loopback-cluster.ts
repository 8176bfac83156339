import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { issueCert, makeCa, type CaFiles, type CertFiles, type ClusterPki } from './certs.js';
import { freePeerPorts, startEtcd, type RunningEtcd } from './etcd.js';

/**
 * Two directors clustered on loopback, for tests that run lbd-agent in their own process with fake kernels:
 * one real etcd, a temp directory, and each director's config file (agent.cluster only; the cluster config
 * comes through etcd). The agents themselves are started by @lbd/director-agent/testing's startClusterPair:
 * the testkit sits below the agent it tests and cannot import it.
 */

export const PAIR_DIRECTORS = ['dir1', 'dir2'] as const;
export type PairDirector = (typeof PAIR_DIRECTORS)[number];

/** The vip group the pair shares, and each director's priority in it: dir1 is preferred. */
export const PAIR_GROUP = 'front';
const PAIR_PRIORITIES: Readonly<Record<PairDirector, number>> = { dir1: 150, dir2: 100 };

export interface FrontConfigOptions {
  /** web's real servers, `address:port` (default: 198.19.1.11:8080). */
  readonly realServers?: readonly string[];
  /** More services, as YAML list items indented like web (two spaces, then `- name: ...`). */
  readonly moreServices?: string;
}

/**
 * The cluster config the pair is given: vip group front (preempt never, so a test decides when leadership
 * moves; the real servers' gateway 198.19.1.250 floats with it) and the fullnat service web,
 * 198.18.0.10:80, with local addresses 198.19.1.100-198.19.1.101.
 */
export function frontConfig(o: FrontConfigOptions = {}): string {
  const servers = (o.realServers ?? ['198.19.1.11:8080']).map((s) => {
    const i = s.lastIndexOf(':');
    return `      - { address: ${s.slice(0, i)}, port: ${s.slice(i + 1)} }\n`;
  });
  return `vipGroups:
  - { name: ${PAIR_GROUP}, preempt: never, gateways: [198.19.1.250] }
services:
  - name: web
    vip: 198.18.0.10
    port: 80
    mode: fullnat
    localAddresses: [198.19.1.100-198.19.1.101]
    vipGroup: ${PAIR_GROUP}
    realServers:
${servers.join('')}${o.moreServices ?? ''}`;
}

export interface ClusterAgentOptions {
  readonly director: string;
  readonly etcdEndpoint: string;
  readonly prefix: string;
  readonly peerListenPort: number;
  readonly peers: readonly { readonly id: string; readonly port: number }[];
  /** Priority in the group front; none: the default priority. */
  readonly priority?: number;
  /** Mutual TLS on the peer link (connection sync needs it): this director's files from `pki`. */
  readonly pki?: ClusterPki;
  /** A track check that fails while this file exists (the director turns unhealthy within 100 ms). */
  readonly trackFile?: string;
  /** In the ECMP tier: agent.cluster.ecmp with this router id (no gobgpd is run: tests give a fake announcer). */
  readonly ecmpRouterId?: string;
  /** agent.cluster.etcdTls: the etcd CA and this director's client certificate for etcd. */
  readonly etcdTls?: { readonly ca: string; readonly cert: string; readonly key: string };
}

/** A director's config file on loopback: agent.cluster, interfaces eth0 (vips) and eth1 (local addresses). */
export function clusterAgentYaml(o: ClusterAgentOptions): string {
  const lines = [
    'agent:',
    '  cluster:',
    `    director: ${o.director}`,
    `    etcd: [${o.etcdEndpoint}]`,
    `    prefix: ${o.prefix}`,
    `    peerListen: 127.0.0.1:${o.peerListenPort}`,
    `    peers: [${o.peers.map((p) => `{ id: ${p.id}, address: "127.0.0.1:${p.port}" }`).join(', ')}]`,
    '    interfaces: { vip: eth0, local: eth1 }',
  ];
  if (o.priority !== undefined) lines.push(`    priorities: { ${PAIR_GROUP}: ${o.priority} }`);
  if (o.trackFile !== undefined) {
    lines.push(`    track: [{ name: uplink, command: [/bin/sh, -c, "test ! -e ${o.trackFile}"], intervalMs: 100, rise: 1, fall: 1 }]`);
  }
  if (o.ecmpRouterId !== undefined) {
    lines.push(`    ecmp: { interface: eth0, routerId: ${o.ecmpRouterId}, runGobgpd: false, gobgpApi: 'unix:///run/lbd/no-gobgpd.sock' }`);
  }
  if (o.etcdTls !== undefined) lines.push(`    etcdTls: { ca: ${o.etcdTls.ca}, cert: ${o.etcdTls.cert}, key: ${o.etcdTls.key} }`);
  if (o.pki !== undefined) {
    const cert = o.pki.certs[o.director];
    if (cert === undefined) throw new Error(`clusterAgentYaml: the PKI in ${o.pki.dir} has no certificate for ${o.director}`);
    lines.push(`    tls: { ca: ${o.pki.ca.certPath}, cert: ${cert.certPath}, key: ${cert.keyPath} }`);
  }
  return `${lines.join('\n')}\n`;
}

export interface PairConfigOptions {
  /** Mutual TLS on the peer link, from this PKI (it must have dir1's and dir2's certificates). */
  readonly pki?: ClusterPki;
  /** Give each director the uplink track check (PairFiles.trackFile). */
  readonly track?: boolean;
  /** Put both directors in the ECMP tier (agent.cluster.ecmp; router ids 198.18.9.11 and .12). */
  readonly ecmp?: boolean;
}

/** What one director of a pair was given. */
export interface PairFiles {
  readonly id: PairDirector;
  readonly configPath: string;
  /** Its peerListen port (connection sync listens on the next one). */
  readonly port: number;
  /** With `track`: while this file exists the director's track check fails. */
  readonly trackFile: string | undefined;
}

/** A real etcd on loopback and a temp directory, shared by the pairs a test file starts, each under a prefix of its own. */
export class LoopbackCluster {
  private pairs = 0;

  private constructor(readonly etcd: RunningEtcd, readonly dir: string, private readonly name: string,
    private readonly etcdPki: { readonly ca: CaFiles; readonly certs: ReadonlyMap<string, CertFiles> } | null) {}

  /**
   * `name` names the temp directory and the etcd prefixes (e.g. `lbd-sync`). With `etcdTls`, etcd serves only
   * TLS clients with a certificate from an etcd CA of its own (--client-cert-auth), and each director's file
   * has agent.cluster.etcdTls with its own (common name: the director id).
   */
  static async open(name: string, o: { etcdTls?: boolean } = {}): Promise<LoopbackCluster> {
    const dir = await mkdtemp(join(tmpdir(), `${name}-`));
    try {
      if (!o.etcdTls) return new LoopbackCluster(await startEtcd(), dir, name, null);
      const pkiDir = join(dir, 'etcd-pki');
      const ca = await makeCa(pkiDir, 'etcd-ca');
      const server = await issueCert(ca, pkiDir, 'etcd', ['127.0.0.1']);
      const certs = new Map<string, CertFiles>();
      for (const id of PAIR_DIRECTORS) certs.set(id, await issueCert(ca, pkiDir, id));
      const client = certs.get('dir1')!;
      const etcd = await startEtcd({ tls: { ca: ca.certPath, cert: server.certPath, key: server.keyPath, client: { cert: client.certPath, key: client.keyPath } } });
      return new LoopbackCluster(etcd, dir, name, { ca, certs });
    } catch (e) {
      await rm(dir, { recursive: true, force: true });
      throw e;
    }
  }

  get endpoint(): string {
    return this.etcd.endpoints[0]!;
  }

  /** Writes dir1's and dir2's config files for a new pair: a fresh etcd prefix, free peer ports, each the other's peer. */
  async writePairConfigs(o: PairConfigOptions = {}): Promise<readonly [PairFiles, PairFiles]> {
    const run = ++this.pairs;
    const ports = await freePeerPorts(2);
    const files = PAIR_DIRECTORS.map((id, i): PairFiles => ({
      id, configPath: join(this.dir, `${id}-${run}.yaml`), port: ports[i]!, trackFile: o.track ? join(this.dir, `${id}-${run}.broken`) : undefined,
    }));
    for (const [i, f] of files.entries()) {
      const other = files[1 - i]!;
      await writeFile(f.configPath, clusterAgentYaml({
        director: f.id, etcdEndpoint: this.endpoint, prefix: `/${this.name}-${run}`, peerListenPort: f.port, peers: [{ id: other.id, port: other.port }],
        priority: PAIR_PRIORITIES[f.id], ...(o.pki ? { pki: o.pki } : {}), ...(f.trackFile !== undefined ? { trackFile: f.trackFile } : {}),
        ...(o.ecmp ? { ecmpRouterId: `198.18.9.${11 + i}` } : {}),
        ...(this.etcdPki ? { etcdTls: { ca: this.etcdPki.ca.certPath, cert: this.etcdPki.certs.get(f.id)!.certPath, key: this.etcdPki.certs.get(f.id)!.keyPath } } : {}),
      }));
    }
    return [files[0]!, files[1]!];
  }

  /** Stops etcd and removes the directory. */
  async close(): Promise<void> {
    await this.etcd.stop();
    await rm(this.dir, { recursive: true, force: true });
  }
}
