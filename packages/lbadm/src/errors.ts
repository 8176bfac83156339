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

export function describeFailure(err: unknown, socket: string): Failure {
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
