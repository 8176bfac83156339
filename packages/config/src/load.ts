import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { LineCounter, parseDocument, type YAMLError } from 'yaml';
import { ConfigError } from './errors.js';
import type { Config } from './types.js';
import { validateConfig, type Problem } from './validate.js';

/**
 * Parses YAML or JSON text (JSON is YAML) and validates it. `source` names the text in messages.
 * Throws ConfigError listing every problem; returns a Config only when there are none. `cluster`: the
 * text is a cluster config (services and vip groups, kept in etcd), which must not carry director-local
 * agent settings.
 */
export function parseConfig(text: string, source: string, opts: { cluster?: boolean } = {}): Config {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { prettyErrors: false, uniqueKeys: true, lineCounter });
  if (doc.errors.length > 0) {
    const lines = text.split(/\r?\n/);
    throw new ConfigError('Syntax', source, doc.errors.map((e) => syntaxProblem(e, lines, lineCounter)));
  }
  let raw: unknown;
  try {
    raw = doc.toJS();
  } catch (cause) {
    // The only failure left after parsing: an alias bomb (`maxAliasCount`), refused rather than expanded.
    throw new ConfigError('Syntax', source, [{
      path: '(top level)', value: undefined, rule: `cannot be expanded: ${(cause as Error).message.split(';')[0]}`,
      fix: 'write the values out instead of repeating aliases (*name)',
    }], { cause });
  }
  const result = validateConfig(raw);
  const problems = result.ok ? [] : [...result.problems];
  if (opts.cluster && typeof raw === 'object' && raw !== null && 'agent' in raw) {
    // The cluster config is shared by every director; agent settings are each director's own.
    problems.unshift({
      path: 'agent', value: undefined, rule: 'is per director and cannot be part of the cluster config',
      fix: "remove the agent section; each director keeps its own in the file lbd-agent --config reads",
    });
  }
  if (problems.length > 0 || !result.ok) throw new ConfigError('Invalid', source, problems);
  return result.config;
}

/** Fixes for the syntax errors operators make most; the rest get the general advice. */
const SYNTAX_FIXES: Partial<Record<string, { rule?: string; fix: string }>> = {
  TAB_AS_INDENT: { fix: 'indent with spaces, not tabs' },
  DUPLICATE_KEY: { fix: 'remove or rename the repeated key' },
  MULTIPLE_DOCS: { rule: 'the text holds more than one document', fix: 'keep one document: remove the second "---" and what follows it' },
};

/** `line 3, column 11: "port: : 80" is not valid YAML or JSON: <parser message>; <fix>` */
function syntaxProblem(e: YAMLError, lines: readonly string[], lineCounter: LineCounter): Problem {
  const { line, col } = lineCounter.linePos(e.pos[0]);
  const known = SYNTAX_FIXES[e.code];
  // The parser's own words, first line and first clause: its messages may advise API calls after a ";".
  const message = known?.rule ?? e.message.split('\n')[0]!.split(';')[0]!.trim();
  const text = (lines[line - 1] ?? '').trim();
  return {
    path: `line ${line}, column ${col}`,
    // At the very end of the text (an unclosed quote or bracket) there is no line to show.
    value: text === '' ? undefined : text,
    rule: `${text === '' ? 'not' : 'is not'} valid YAML or JSON: ${message}`,
    fix: known?.fix ?? 'correct the syntax there (indentation, a missing ":" or quote)',
  };
}

export async function loadConfig(path: string): Promise<Config> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException).code ?? 'error';
    const fix = code === 'ENOENT' ? 'check the path, or create the file'
      : code === 'EISDIR' ? 'give the path of a file, not a directory'
      : code === 'EACCES' || code === 'EPERM' ? 'check the file\'s permissions'
      : 'check the path and the file\'s permissions';
    throw new ConfigError('Unreadable', path, [{ path: '(file)', value: path, rule: `cannot be read (${code})`, fix }], { cause });
  }
  return parseConfig(text, path);
}

/** The sha256 (hex) of a config's text: how apply records, the config history and lbadm name a config. */
export function configSha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}
