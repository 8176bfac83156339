import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { DataPlaneError } from '@lbd/dataplane';
import { parseWriteResult, renderChunk, WRITE_CHUNK, type BatchWriter, type WriteResult } from './ctnetlink.js';

/**
 * lbd-ctnl's write mode inside this process (dist/ctnl-writer.node, built from native/ctnl-writer.c with
 * lbd-ctnl.c's own code): the same request lines and `R` answer as the helper's, on a netlink socket of the
 * calling thread, with no pipe and no second process to wake per batch. A batch runs synchronously: the
 * thread waits for the kernel's acks (at most 5 s a chunk), as the helper did. For connection sync's thread
 * on a standby, where a batch a message through the helper was about half of that thread's time, most of it
 * the wake-ups of the helper and of the thread itself (docs/kernel-io.md, "A standby's injects in its own thread").
 */

interface CtnlWriterAddon {
  open(netnsPath: string, bytes: number): number;
  begin(): void;
  write(fd: number, text: string): void;
  end(fd: number): string;
  abort(): void;
  close(fd: number): void;
}

/** Where the build puts the addon: beside this module in dist/, as lbd-ctnl. */
export const CTNL_WRITER_ADDON = fileURLToPath(new URL('./ctnl-writer.node', import.meta.url));

let loaded: { readonly addon: CtnlWriterAddon | null; readonly error: string | null } | undefined;

/** The addon, loaded once per thread's module instance; null (with why) where it was not built or does not load. */
export function ctnlWriterAddon(): { readonly addon: CtnlWriterAddon | null; readonly error: string | null } {
  if (loaded === undefined) {
    if (!existsSync(CTNL_WRITER_ADDON)) loaded = { addon: null, error: `${CTNL_WRITER_ADDON} was not built` };
    else {
      try {
        loaded = { addon: createRequire(import.meta.url)(CTNL_WRITER_ADDON) as CtnlWriterAddon, error: null };
      } catch (err) {
        loaded = { addon: null, error: `${CTNL_WRITER_ADDON}: ${err instanceof Error ? err.message : String(err)}` };
      }
    }
  }
  return loaded;
}

/** The socket's receive buffer: a batch's acks wait in it while the kernel works through the chunk. */
const RECEIVE_BUFFER_BYTES = 8 * 1024 * 1024;

export class InProcessCtnlWriter implements BatchWriter {
  private fd: number | null = null;

  /** `netns`: a namespace's name under /run/netns (as `ip netns` makes them), or null for this thread's own. */
  constructor(private readonly addon: CtnlWriterAddon, private readonly netns: string | null) {}

  run(count: number, render: (i: number) => string): Promise<WriteResult> {
    if (count === 0) return Promise.resolve({ done: 0, absent: 0, failed: 0, codes: '', firstError: null });
    let line: string;
    try {
      line = this.runNow(count, render);
    } catch (err) {
      return Promise.reject(err);
    }
    const r = parseWriteResult(line);
    return r ? Promise.resolve(r) : Promise.reject(new DataPlaneError('Unknown', 'apply', { detail: `ctnetlink writer: an answer that is not one: ${line.slice(0, 200)}` }));
  }

  private runNow(count: number, render: (i: number) => string): string {
    const a = this.addon;
    let fd: number;
    try {
      fd = this.fd ??= a.open(this.netns === null ? '' : `/run/netns/${this.netns}`, RECEIVE_BUFFER_BYTES);
    } catch (err) {
      const detail = err instanceof Error ? err.message : String(err);
      throw /not permitted/i.test(detail)
        ? new DataPlaneError('PermissionDenied', 'apply', { detail: `${detail} (lbd-agent needs CAP_NET_ADMIN)`, cause: err })
        : new DataPlaneError('Unknown', 'apply', { detail, cause: err });
    }
    a.begin();
    try {
      // A chunk at a time, as the helper's pipe takes them.
      for (let from = 0; from < count; from += WRITE_CHUNK) a.write(fd, renderChunk(from, Math.min(count, from + WRITE_CHUNK), render));
      return a.end(fd);
    } catch (err) {
      // A request that could not be rendered: the batch is cut short, and the socket goes with whatever of it
      // was sent (the next batch opens another), as the helper did.
      a.abort();
      this.closeSocket();
      throw err;
    }
  }

  close(): Promise<void> {
    this.closeSocket();
    return Promise.resolve();
  }

  private closeSocket(): void {
    if (this.fd !== null) this.addon.close(this.fd);
    this.fd = null;
  }
}
