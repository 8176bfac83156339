/**
 * Typed configuration. Everything after `loadConfig()` / `parseConfig()` takes these types, never raw
 * YAML or JSON: every default and unit is decided here, once.
 */

export type Protocol = 'tcp' | 'udp';
export type ForwardingMode = 'fullnat' | 'nat';
export type Scheduler = 'rr' | 'wrr' | 'sh' | 'mh';
export type AddressFamily = 4 | 6;

export const PROTOCOLS: readonly Protocol[] = ['tcp', 'udp'];
export const FORWARDING_MODES: readonly ForwardingMode[] = ['fullnat', 'nat'];
export const SCHEDULERS: readonly Scheduler[] = ['rr', 'wrr', 'sh', 'mh'];

/** Highest real-server weight, as in IPVS. Weight 0 = quiescent: no new connections, old ones live on. */
export const MAX_WEIGHT = 65535;

export interface RealServer {
  /** Canonical text form (IPv6 compressed, lower case). */
  readonly address: string;
  readonly port: number;
  readonly weight: number;
}

/** An inclusive, contiguous address range: the fullnat SNAT pool of one service. */
export interface AddressRange {
  readonly first: string;
  readonly last: string;
  /** Number of addresses in the range (capped at 2^32 for IPv6). */
  readonly size: number;
}

export interface Service {
  readonly name: string;
  readonly family: AddressFamily;
  readonly vip: string;
  readonly port: number;
  readonly protocol: Protocol;
  readonly mode: ForwardingMode;
  readonly scheduler: Scheduler;
  /** Seconds of source-address affinity; 0 = off. */
  readonly persistenceSec: number;
  /** The fullnat SNAT pool; null in nat mode. */
  readonly localAddresses: AddressRange | null;
  /** Expire a removed real server's connections (IPVS expire_nodest_conn); off by default. */
  readonly expireOnRemove: boolean;
  readonly realServers: readonly RealServer[];
}

export interface AgentSettings {
  /** Path of the root-only admin unix socket. */
  readonly adminSocket: string;
}

export interface Config {
  readonly agent: AgentSettings;
  readonly services: readonly Service[];
}

export const DEFAULT_ADMIN_SOCKET = '/run/lbd/admin.sock';

/** `198.18.0.10:80/tcp`, `[fd00::10]:80/tcp`: the one way a service is named in logs, CLI and errors. */
export function serviceKey(s: { vip: string; port: number; protocol: Protocol }): string {
  return `${hostPort(s.vip, s.port)}/${s.protocol}`;
}

export function hostPort(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}
