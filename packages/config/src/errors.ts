import { formatProblem, type Problem } from './validate.js';

/** Exit codes that scripts can trust (sysexits.h). */
export const EXIT = {
  ok: 0,
  /** Something was found wrong (doctor problems, failed apply). */
  failure: 1,
  usage: 64,
  unavailable: 69,
  software: 70,
  noPermission: 77,
  config: 78,
} as const;

/**
 * The one error for configuration that cannot be used: unreadable, not YAML/JSON, or invalid.
 * `problems` lists every problem found, so the operator fixes them all in one edit.
 */
export class ConfigError extends Error {
  constructor(
    readonly kind: 'Unreadable' | 'Syntax' | 'Invalid',
    readonly source: string,
    readonly problems: readonly Problem[],
    opts: { cause?: unknown } = {},
  ) {
    super(ConfigError.render(source, problems, kind), { cause: opts.cause });
    this.name = 'ConfigError';
  }

  /** A headline naming the source and the kind of failure, then one indented line per problem. */
  static render(source: string, problems: readonly Problem[], kind: ConfigError['kind'] = 'Invalid'): string {
    const n = problems.length;
    const count = `${n} problem${n === 1 ? '' : 's'}`;
    const headline = kind === 'Unreadable' ? `${source} cannot be read:`
      : kind === 'Syntax' ? `${source} is not valid YAML or JSON (${count}):`
      : `${source} is invalid (${count}):`;
    return [headline, ...problems.map((p) => `  ${formatProblem(p)}`)].join('\n');
  }
}
