import { watch, type FSWatcher } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Tells when the config file may have changed. It watches the file's directory, not the file: editors
 * and config managers replace files by writing a temp file and renaming it over the original, which
 * leaves a watch on the old inode blind (and a symlink swap, as in Kubernetes ConfigMaps, changes no
 * file named like the config at all). Any event in the directory counts; events are debounced, and the
 * caller compares the content hash, so a spurious event costs one read and nothing else.
 */
export interface ConfigWatcher {
  close(): void;
}

export function watchConfigFile(path: string, onChange: () => void, opts: { debounceMs: number; onError: (err: Error) => void }): ConfigWatcher {
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  const fire = (): void => {
    if (closed) return;
    clearTimeout(timer);
    timer = setTimeout(() => { if (!closed) onChange(); }, opts.debounceMs);
  };
  let watcher: FSWatcher;
  try {
    watcher = watch(dirname(path), { persistent: false }, fire);
  } catch (err) {
    // A missing directory: the agent keeps running on the config it has; SIGHUP still works.
    opts.onError(err as Error);
    return { close() { closed = true; } };
  }
  watcher.on('error', (err) => opts.onError(err));
  return {
    close() {
      closed = true;
      clearTimeout(timer);
      watcher.close();
    },
  };
}
