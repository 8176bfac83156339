import { runCommand } from '@lbd/testkit';

/** Small helpers for benchmark statistics and plain-text tables. */

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Half the range as a fraction of the median: how far the repetitions spread around it. */
export function spread(values: readonly number[]): number {
  if (values.length < 2) return 0;
  const m = median(values);
  return m === 0 ? 0 : (Math.max(...values) - Math.min(...values)) / 2 / m;
}

/** 41,230 / 812.4 / 0.93: grouped integers for large values, a few significant digits for small ones. */
export function formatNumber(v: number): string {
  if (!Number.isFinite(v)) return 'n/a';
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString('en-US');
  if (Math.abs(v) >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

/** Whole counts: 1,234 (formatNumber would print small ones with decimals). */
export function formatCount(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

export function sum(xs: readonly number[]): number {
  return xs.reduce((a, b) => a + b, 0);
}

let ticksPerSec: number | undefined;
/** Clock ticks per second (`getconf CLK_TCK`), the unit of /proc/<pid>/stat's CPU times; 100 if unknown. */
export async function clockTicks(): Promise<number> {
  if (ticksPerSec === undefined) {
    const { stdout } = await runCommand('getconf', ['CLK_TCK'], { allowFailure: true });
    const tck = Number(stdout.trim());
    ticksPerSec = Number.isInteger(tck) && tck > 0 ? tck : 100;
  }
  return ticksPerSec;
}

/** The fields of a /proc/<pid>/stat line that the benchmarks read; times in clock ticks (see clockTicks). */
export interface ProcStat {
  readonly comm: string;
  readonly flags: number;
  readonly utime: number;
  readonly stime: number;
  /** Reaped children's user and system time. */
  readonly cutime: number;
  readonly cstime: number;
}

/** Parses /proc/<pid>/stat: the command name may itself hold spaces and parentheses, so fields count from the last ')'. */
export function parseProcStat(text: string): ProcStat {
  const close = text.lastIndexOf(')');
  const f = text.slice(close + 2).split(' ').map(Number);
  return {
    comm: text.slice(text.indexOf('(') + 1, close),
    flags: f[6] ?? 0, utime: f[11] ?? 0, stime: f[12] ?? 0, cutime: f[13] ?? 0, cstime: f[14] ?? 0,
  };
}

export function formatMs(ms: number): string {
  if (!Number.isFinite(ms)) return 'n/a';
  return ms >= 100 ? `${Math.round(ms)} ms` : `${ms.toFixed(1)} ms`;
}

export function formatRatio(r: number): string {
  return Number.isFinite(r) ? r.toFixed(2) : 'n/a';
}

/** Left-aligned first column, right-aligned others, two spaces between columns. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const all = [header, ...rows];
  const widths = header.map((_, c) => Math.max(...all.map((r) => (r[c] ?? '').length)));
  const line = (r: readonly string[]): string => r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ').trimEnd();
  const rule = widths.map((w) => '-'.repeat(w)).join('  ');
  return [line(header), rule, ...rows.map(line)].join('\n');
}

export function passMiss(ok: boolean | undefined): string {
  return ok === undefined ? 'n/a' : ok ? 'PASS' : 'MISS';
}
