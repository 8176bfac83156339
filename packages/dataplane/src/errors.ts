/** The data plane's one error class: a closed set of kinds, the operation, and the cause. */
export class DataPlaneError extends Error {
  constructor(
    readonly kind: 'PermissionDenied' | 'InvalidRuleset' | 'CommandMissing' | 'Unknown',
    readonly op: string,
    opts: { detail?: string; cause?: unknown } = {},
  ) {
    super(`${op}: ${kind}${opts.detail ? `: ${opts.detail}` : ''}`, { cause: opts.cause });
    this.name = 'DataPlaneError';
  }
}
