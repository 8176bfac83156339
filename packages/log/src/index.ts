/**
 * A tiny structured logger: one JSON object per line, `{"time","level","msg",...fields}`. The agent logs
 * transitions (started, config applied or rejected, apply failed, shutting down), not steady state, so
 * this needs no buffering, sampling or dependency.
 */

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];

export type LogFields = Readonly<Record<string, unknown>>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
}

export interface LoggerOptions {
  readonly level?: LogLevel;
  /** Receives each line without its newline; default: process.stdout. */
  readonly write?: (line: string) => void;
  readonly now?: () => Date;
}

/** Keys the logger owns; a field of the same name is prefixed rather than allowed to hide them. */
const RESERVED = new Set(['time', 'level', 'msg']);

export function createLogger(opts: LoggerOptions = {}): Logger {
  const min = LOG_LEVELS.indexOf(opts.level ?? 'info');
  const write = opts.write ?? ((line: string) => { process.stdout.write(`${line}\n`); });
  const now = opts.now ?? (() => new Date());
  const emit = (level: LogLevel) => (msg: string, fields: LogFields = {}): void => {
    if (LOG_LEVELS.indexOf(level) < min) return;
    const record: Record<string, unknown> = { time: now().toISOString(), level, msg };
    for (const [k, v] of Object.entries(fields)) record[RESERVED.has(k) ? `field_${k}` : k] = v;
    write(JSON.stringify(record, replacer));
  };
  return { debug: emit('debug'), info: emit('info'), warn: emit('warn'), error: emit('error') };
}

/** An Error as a log line shows it: its message, with its kind when it has one (DataPlaneError's). */
export function errorField(err: Error): string | { readonly kind: unknown; readonly message: string } {
  const kind = (err as { kind?: unknown }).kind;
  return kind === undefined ? err.message : { kind, message: err.message };
}

/** Errors become errorField's; bigints become numbers' text. */
function replacer(_key: string, value: unknown): unknown {
  if (value instanceof Error) return errorField(value);
  if (typeof value === 'bigint') return value.toString();
  return value;
}

/** A logger that drops everything: for library callers that did not pass one. */
export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };
