import { readFile } from 'node:fs/promises';
import { parseDocument } from 'yaml';
import { ConfigError } from './errors.js';
import type { Config } from './types.js';
import { validateConfig } from './validate.js';

/**
 * Parses YAML or JSON text (JSON is YAML) and validates it. `source` names the text in messages.
 * Throws ConfigError listing every problem; returns a Config only when there are none.
 */
export function parseConfig(text: string, source: string): Config {
  const doc = parseDocument(text, { prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    const lines = text.split('\n');
    throw new ConfigError('Syntax', source, doc.errors.map((e) => {
      const line = e.linePos?.[0].line;
      return {
        path: `line ${line ?? '?'}, column ${e.linePos?.[0].col ?? '?'}`,
        value: line !== undefined ? (lines[line - 1] ?? '').trim() : '',
        rule: `is not valid YAML or JSON: ${e.message.split('\n')[0]}`,
        fix: 'correct the syntax there (indentation, a missing ":" or quote)',
      };
    }));
  }
  const result = validateConfig(doc.toJS());
  if (!result.ok) throw new ConfigError('Invalid', source, result.problems);
  return result.config;
}

export async function loadConfig(path: string): Promise<Config> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException).code ?? 'error';
    throw new ConfigError('Unreadable', path, [{
      path: '(file)', value: path, rule: `cannot be read (${code})`,
      fix: code === 'ENOENT' ? 'check the path, or create the file' : 'check the file\'s permissions',
    }], { cause });
  }
  return parseConfig(text, path);
}
