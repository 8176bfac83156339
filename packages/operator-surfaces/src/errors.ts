import { status, type StatusObject } from '@grpc/grpc-js';
import { ConfigError } from '@lbd/config';
import { DataPlaneError } from '@lbd/dataplane';

/** Failures of the agent itself (not of the config or the data plane), each mapped to one gRPC status. */
export class AgentError extends Error {
  constructor(
    readonly kind: 'NotFound' | 'CannotPersist' | 'NotPersisted' | 'SocketInUse' | 'Stopped' | 'Conflict' | 'NotClustered' | 'Refused' | 'EtcdUnavailable' | 'EtcdDenied',
    message: string,
    opts: { cause?: unknown } = {},
  ) {
    super(message, { cause: opts.cause });
    this.name = 'AgentError';
  }
}

/** A caller's request is wrong; `field` is the request field (proto name), named in the message. */
export class RequestError extends Error {
  constructor(readonly code: status, readonly field: string, detail: string) {
    super(`${field}: ${detail}`);
    this.name = 'RequestError';
  }
}

/**
 * The one place errors become gRPC statuses, so each kind of failure keeps its own code (lbadm turns
 * codes into words and exit codes). Unexpected errors are INTERNAL and `unexpected` is true: the
 * caller logs those, since they are bugs.
 */
export function toGrpcStatus(err: unknown): Pick<StatusObject, 'code' | 'details'> & { unexpected: boolean } {
  if (err instanceof RequestError) return { code: err.code, details: err.message, unexpected: false };
  if (err instanceof ConfigError) return { code: status.INVALID_ARGUMENT, details: err.message, unexpected: false };
  if (err instanceof AgentError) {
    const code = {
      NotFound: status.NOT_FOUND,
      // Nothing was applied; the director's disk, not the request, must change.
      CannotPersist: status.FAILED_PRECONDITION,
      NotPersisted: status.INTERNAL,
      SocketInUse: status.UNAVAILABLE,
      Stopped: status.UNAVAILABLE,
      // Another apply won the swap: read, then try again.
      Conflict: status.ABORTED,
      NotClustered: status.FAILED_PRECONDITION,
      Refused: status.FAILED_PRECONDITION,
      EtcdUnavailable: status.UNAVAILABLE,
      // etcd's roles refuse this director's certificate the write (the config is the operators').
      EtcdDenied: status.PERMISSION_DENIED,
    }[err.kind];
    return { code, details: err.message, unexpected: false };
  }
  if (err instanceof DataPlaneError) {
    // Missing permission or tools: the director is not set up to program the kernel. A rejected ruleset
    // or anything else is lbd's fault.
    const code = err.kind === 'PermissionDenied' || err.kind === 'CommandMissing' ? status.FAILED_PRECONDITION : status.INTERNAL;
    return { code, details: `the data plane refused: ${err.message}; the previous state stays`, unexpected: false };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { code: status.INTERNAL, details: `internal error in lbd-agent: ${message}`, unexpected: true };
}
