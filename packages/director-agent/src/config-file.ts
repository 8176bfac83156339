import { randomBytes } from 'node:crypto';
import { chmod, open, readFile, rename, stat, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { ConfigError } from '@lbd/config';

/**
 * The config file on disk: read it (as text, so its hash can be compared before anything is parsed) and
 * replace it atomically. Parsing and validation stay in @lbd/config.
 */

/** Reads the file, mapping read failures to the same ConfigError `loadConfig` gives. */
export async function readConfigText(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException).code ?? 'error';
    const fix = code === 'ENOENT' ? 'check the path, or create the file'
      : code === 'EISDIR' ? 'give the path of a file, not a directory'
      : 'check the path and the file\'s permissions';
    throw new ConfigError('Unreadable', path, [{ path: '(file)', value: path, rule: `cannot be read (${code})`, fix }], { cause });
  }
}

/**
 * A temp file next to `path` holding `text`, synced to disk, with the mode of the file it will replace.
 * Writing it before applying proves the config can be persisted; `commit()` renames it into place
 * (atomic on one filesystem: a reader sees the old or the new file, never half of one), `discard()`
 * removes it.
 */
export async function stageFile(path: string, text: string): Promise<{ commit(): Promise<void>; discard(): Promise<void> }> {
  const dir = dirname(path);
  // Hidden, and named after the target, so an operator who finds a leftover knows what it was.
  const temp = join(dir, `.${basename(path)}.lbd-tmp-${process.pid}-${randomBytes(4).toString('hex')}`);
  let mode = 0o644;
  try {
    mode = (await stat(path)).mode & 0o7777;
  } catch {
    // A missing file gets the usual config mode.
  }
  const fh = await open(temp, 'wx', mode);
  try {
    await fh.writeFile(text, 'utf8');
    await fh.sync();
  } catch (err) {
    await fh.close();
    await unlink(temp).catch(() => { /* the write's own error is the one to report */ });
    throw err;
  }
  await fh.close();
  // open() applied the umask; the replaced file's mode is what operators expect to keep.
  await chmod(temp, mode);
  return {
    async commit() {
      await rename(temp, path);
      // The rename is durable only once the directory entry is: sync the directory too.
      const dh = await open(dir, 'r');
      try { await dh.sync(); } finally { await dh.close(); }
    },
    async discard() {
      await unlink(temp).catch(() => { /* never written, or gone: nothing to discard */ });
    },
  };
}
