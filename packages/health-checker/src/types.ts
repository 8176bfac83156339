/**
 * The one prober shape. The agent builds a ProbeTarget from config (a check may target another address or
 * port than the service: a health port); a Prober turns it into a ProbeResult. A failed probe is data, not
 * an exception: probers never throw (or reject) for a server that is down, slow or misbehaving.
 */

export type CheckKind = 'tcp' | 'http' | 'https' | 'icmp' | 'udp' | 'exec';

export const CHECK_KINDS: readonly CheckKind[] = ['tcp', 'http', 'https', 'icmp', 'udp', 'exec'];

/** What to probe. Only the fields of the target's kind are read; the others are ignored. */
export interface ProbeTarget {
  kind: CheckKind;
  /** IPv4 or IPv6 literal (no names: a health check must not depend on DNS). */
  address: string;
  /** Unused for icmp and exec (exec gets it in LBD_RS_PORT). */
  port: number;
  /** tcp: bytes to write after connecting (optional); udp: the datagram to send (required). */
  send?: string;
  /** tcp, udp: a substring the reply must contain. tcp without expect is up once connected (and `send` written). */
  expect?: string;
  /** http/https: request method (default GET). */
  method?: string;
  /** http/https: request path with query (default '/'). */
  path?: string;
  /** http/https: Host header (default: none set by us, so undici sends address:port). */
  host?: string;
  /** http/https: accepted status codes and inclusive ranges; default [[200, 399]]. */
  expectStatus?: ReadonlyArray<number | readonly [number, number]>;
  /** http/https: a regular expression (source) that the first 64 KiB of the body must match. */
  bodyPattern?: string;
  /** https: verify the server certificate chain and name (default true). */
  tlsVerify?: boolean;
  /** https: TLS server name (SNI, and the name verified); default `host` when set, else none. */
  sni?: string;
  /** exec: argv (no shell); the environment gets LBD_RS_ADDRESS and LBD_RS_PORT. */
  command?: readonly string[];
}

/**
 * Why a probe failed, as a closed set that metrics and the dashboard can count on. `ok` for a success.
 * - timeout: no answer within the timeout (connect, reply, headers, body, echo reply, exit)
 * - refused: TCP RST to the SYN, or ICMP port unreachable for UDP
 * - reset: the connection was reset or closed before the check finished
 * - unreachable: no route, host or network unreachable
 * - status: HTTP status not in the expected set
 * - body-mismatch: HTTP body does not match bodyPattern
 * - reply-mismatch: tcp/udp reply does not contain `expect`
 * - exit-code: the exec check exited non-zero (or was killed by a signal other than ours)
 * - tls: TLS handshake or certificate verification failed
 * - error: anything else (bad target, a command that cannot start, an unexpected local error)
 */
export type ProbeReason =
  | 'ok'
  | 'timeout'
  | 'refused'
  | 'reset'
  | 'unreachable'
  | 'status'
  | 'body-mismatch'
  | 'reply-mismatch'
  | 'exit-code'
  | 'tls'
  | 'error';

export interface ProbeResult {
  ok: boolean;
  reason: ProbeReason;
  /** Human words an operator reads in logs and `lbadm health`: 'tcp connect to 198.19.1.12:8080: refused'. */
  message: string;
  /** Wall time of the probe (the probe latency shown with transitions). */
  durationMs: number;
}

export interface ProbeOptions {
  /** The probe fails with reason 'timeout' when it has not finished after this long. */
  timeoutMs: number;
  /** Aborting ends the probe at once (e.g. the scheduler's timeout, or the check was removed). */
  signal?: AbortSignal;
}

export interface Prober {
  /** Never throws for a failed probe: a failure is a ProbeResult with ok false. */
  probe(target: ProbeTarget, opts: ProbeOptions): Promise<ProbeResult>;
}
