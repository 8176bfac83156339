import { status } from '@grpc/grpc-js';
import { EXIT } from '@lbd/config';
import { isServiceError } from '@lbd/proto';

/**
 * The one place lbadm turns failures into plain words and exit codes. gRPC's status names mean little
 * to an operator at 3 a.m.; "no agent is listening on /run/lbd/admin.sock" does.
 */

export interface Failure {
  readonly exit: number;
  readonly message: string;
}

const AGENT_DOWN_HINT = 'is lbd-agent running? (systemctl status lbd-agent) If it serves another socket, use --socket PATH or set LBD_ADMIN_SOCKET';

/** Words for each status code the agent can send, and the exit code scripts get for it. */
const BY_CODE: Partial<Record<status, { exit: number; words: string }>> = {
  [status.INVALID_ARGUMENT]: { exit: EXIT.usage, words: 'the agent refused the request' },
  [status.NOT_FOUND]: { exit: EXIT.failure, words: 'not found' },
  [status.FAILED_PRECONDITION]: { exit: EXIT.failure, words: 'the agent cannot do that now' },
  [status.PERMISSION_DENIED]: { exit: EXIT.noPermission, words: 'permission denied' },
  [status.UNAUTHENTICATED]: { exit: EXIT.noPermission, words: 'permission denied' },
  [status.RESOURCE_EXHAUSTED]: { exit: EXIT.failure, words: 'too large for the agent' },
  [status.UNIMPLEMENTED]: { exit: EXIT.failure, words: 'this lbd-agent does not know that request (is it older than lbadm?)' },
  [status.INTERNAL]: { exit: EXIT.failure, words: 'lbd-agent failed' },
  [status.UNKNOWN]: { exit: EXIT.failure, words: 'lbd-agent failed' },
  [status.CANCELLED]: { exit: EXIT.failure, words: 'the request was cancelled' },
  [status.ABORTED]: { exit: EXIT.failure, words: 'the request was aborted' },
};

/** What lbadm talked to: the unix socket's path, or the TCP admin API's HOST:PORT. */
export type AdminTarget = string | TcpTarget;

interface TcpTarget {
  readonly server: string;
  /** This client's certificate file (--cert). */
  readonly cert: string;
}

export function describeFailure(err: unknown, target: AdminTarget): Failure {
  if (typeof target !== 'string') return describeTcpFailure(err, target);
  const socket = target;
  const errno = (err as NodeJS.ErrnoException).code;
  if (typeof errno === 'string') return describeErrno(errno, socket, (err as Error).message);
  if (!isServiceError(err)) {
    return { exit: EXIT.failure, message: `lbadm: ${err instanceof Error ? err.message : String(err)}` };
  }
  const details = err.details || err.message;
  if (err.code === status.UNAVAILABLE) {
    // grpc-js reports a failed connect as UNAVAILABLE with the errno in the details.
    const m = /\b(ENOENT|ECONNREFUSED|EACCES|EPERM|ENOTSOCK)\b/.exec(details);
    if (m) return describeErrno(m[1]!, socket, details);
    return { exit: EXIT.unavailable, message: `lbadm: lbd-agent at ${socket} is unavailable: ${details}` };
  }
  if (err.code === status.DEADLINE_EXCEEDED) {
    return { exit: EXIT.unavailable, message: `lbadm: lbd-agent at ${socket} did not answer in time; it may be overloaded or stuck` };
  }
  const known = BY_CODE[err.code as status];
  return { exit: known?.exit ?? EXIT.failure, message: `lbadm: ${known?.words ?? `error ${err.code}`}: ${details}` };
}

function describeErrno(code: string, socket: string, detail: string): Failure {
  switch (code) {
    case 'ENOENT':
      return { exit: EXIT.unavailable, message: `lbadm: no admin socket at ${socket}: ${AGENT_DOWN_HINT}` };
    case 'ECONNREFUSED':
      return { exit: EXIT.unavailable, message: `lbadm: nothing is listening on ${socket} (a stale socket?): ${AGENT_DOWN_HINT}` };
    case 'ENOTSOCK':
      return { exit: EXIT.unavailable, message: `lbadm: ${socket} is not a socket; use --socket PATH to name the agent's admin socket` };
    case 'EACCES':
    case 'EPERM':
      return { exit: EXIT.noPermission, message: `lbadm: permission denied on ${socket}: the admin socket is root-only; run lbadm as root (sudo lbadm ...)` };
    default:
      return { exit: EXIT.failure, message: `lbadm: ${detail}` };
  }
}

/** The TCP admin API (lbadm --server): the same codes, and words for what goes wrong with mutual TLS. */
function describeTcpFailure(err: unknown, target: TcpTarget): Failure {
  const at = `lbd-agent at ${target.server}`;
  if (!isServiceError(err)) return { exit: EXIT.failure, message: `lbadm: ${err instanceof Error ? err.message : String(err)}` };
  // grpc-js wraps a failed connect as "No connection established. Last error: X (time). Resolution note: ": keep X.
  const details = (err.details || err.message).replace(/^No connection established\. Last error: /, '').replace(/( \(\d{4}-\d\d-\d\dT[^)]*\))?\.? Resolution note: .*$/, '').replace(/^Error: /, '');
  if (err.code === status.UNAVAILABLE) {
    const m = /the agent's certificate names (.*), not (\S+):/.exec(details);
    if (m) {
      const named = /DNS:([^,\s]+)/.exec(m[1]!)?.[1];
      return { exit: EXIT.unavailable, message: `lbadm: ${at}: its certificate names ${m[1]}, not ${m[2]}; pass --server-name ${named ?? 'NAME'} (or set LBADM_SERVER_NAME)` };
    }
    if (/ECONNREFUSED/.test(details)) {
      return { exit: EXIT.unavailable, message: `lbadm: nothing is listening on ${target.server}: is lbd-agent running there with agent.admin.grpcListen set to that address?` };
    }
    if (/self[- ]signed|unable to (get|verify)|certificate verify|UNABLE_TO/i.test(details)) {
      return { exit: EXIT.unavailable, message: `lbadm: ${at}: its certificate is not signed by the CA in --ca (${details}); give the CA of agent.admin.tls` };
    }
    if (/ECONNRESET|Failed to connect|alert|certificate required|unknown ca|bad certificate|handshake/i.test(details)) {
      // The agent's own certificate passed (else the cases above): the agent ended the handshake, which it
      // does when it does not trust this client's certificate. grpc-js words that as a reset or "Failed to connect".
      return {
        exit: EXIT.unavailable,
        message: `lbadm: ${at} ended the TLS handshake (${details}): it does not trust this client's certificate ${target.cert}, which must be signed by the CA in the agent's agent.admin.tls.ca`,
      };
    }
    return { exit: EXIT.unavailable, message: `lbadm: ${at} is unavailable: ${details}` };
  }
  if (err.code === status.DEADLINE_EXCEEDED) {
    return { exit: EXIT.unavailable, message: `lbadm: ${at} did not answer in time; it may be overloaded, or a firewall drops the connection` };
  }
  if (err.code === status.PERMISSION_DENIED) return { exit: EXIT.noPermission, message: `lbadm: permission denied by ${at}: ${details}` };
  return describeFailure(err, target.server);
}
