import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { endianness } from 'node:os';
import { DataPlaneError } from '@lbd/dataplane';
import { LineSession } from './line-session.js';
import { ElementEncodingError, encodeTimedElements, type TimedElement } from './nft-netlink.js';

/*
 * The kernel lease's renewals straight to nf_tables over netlink, without `nft`.
 *
 * Why: a leader renews its lease after every confirmed beat (40 times a second with `fast`). Through
 * `nft -i` each renewal cost 5-9 ms of CPU: nft refreshes its cache of the whole ruleset (every table,
 * chain and set of every family, the data plane's included) whenever the ruleset's generation changed,
 * which every renewal itself does, and then lists the sentinel. Measured in the lab with `fast`: the
 * leader's `nft -i` used 24-36% of a core, at the election's real-time priority, ahead of everything at
 * normal priority (etcd in the lab). `pnpm bench dataplane` (4 December) times a renewal, back to back in a
 * namespace holding 1 to 10 000 services and nothing else of lbd's, at a median of 0.1 ms through this
 * writer and 0.7 ms through `nft -i`: the lab's 5-9 ms came with its ruleset and its load.
 *
 * A renewal is one nf_tables transaction, encoded here (nft-netlink.ts' encodeTimedElements: one
 * NEWSETELEM with timeout and expiry, or one DELSETELEM, per word, each asking for an ack) and sent by
 * lbd-nfbatch, the compiled batch sender the data plane loads new tables with: one long-lived process, one
 * NETLINK_NETFILTER socket, a frame in and a line out per transaction. The kernel applies all of it or
 * none, as nft does a line. The answer names each message the kernel refused by sequence number; the writer
 * says which word that was. A transaction refused as a whole (EPERM without CAP_NET_ADMIN) is answered
 * for its BATCH_BEGIN. The program exits at EOF, so it never outlives the agent; spawned from the election
 * thread, it runs at that thread's real-time priority.
 */

/** One word of a transaction: an element of a lease set added with its remaining time, or deleted. */
export type LeaseWord = TimedElement;

/** A word's remaining time as written: whole ms, at least 1. */
export function leaseMs(ms: number): number {
  return Math.max(1, Math.floor(ms));
}

/** A word as messages name it: `A/<family>/<table>/<set>/<address>/<ms>` or `D/<family>/<table>/<set>/<address>`. */
function formatLeaseWord(w: LeaseWord): string {
  const head = `${w.op === 'add' ? 'A' : 'D'}/${w.family}/${w.table}/${w.set}/${w.address}`;
  return w.op === 'add' ? `${head}/${leaseMs(w.ms)}` : head;
}

/** The writer could not take the request (not startable, or it died under it): nothing was applied. */
export class LeaseWriterUnavailable extends Error {}

/** Restarted at most this often after it ended (the caller's fallback covers the gap). */
const RESTART_AFTER_MS = 1000;
/** A request unanswered this long gives the writer up (lbd-nfbatch itself waits up to 10 s for the kernel). */
const ANSWER_TIMEOUT_MS = 2500;
const LITTLE_ENDIAN = endianness() === 'LE';

/**
 * lbd-nfbatch's answer to one transaction, told in words: null for `ok`, else each refusal as `<word>:
 * <errno text>` (`batch: <errno text>` for the transaction as a whole), with whether any was EPERM.
 */
export function refusals(answer: string, words: readonly LeaseWord[], seqs: readonly number[], beginSeq: number): { detail: string; denied: boolean } | null {
  if (answer === 'ok') return null;
  if (!answer.startsWith('failed')) return { detail: `unexpected answer ${JSON.stringify(answer)}`, denied: false };
  let denied = false;
  const told = answer.slice('failed'.length).trim().split(' ').filter((x) => x !== '').map((item) => {
    const [seqText, errno, text] = item.split(':');
    if (errno === '1') denied = true;
    const i = seqs.indexOf(Number(seqText));
    const what = i >= 0 ? formatLeaseWord(words[i]!) : Number(seqText) === beginSeq ? 'batch' : `message ${seqText}`;
    return `${what}: ${(text ?? '').replace(/_/g, ' ')}`;
  });
  return { detail: told.join(', ') || 'refused without a reason', denied };
}

/**
 * The long-lived writer process. A request the kernel refused throws a DataPlaneError naming each refused
 * word; a request the process could not take throws LeaseWriterUnavailable (the caller writes it another way).
 */
export class LeaseWriter {
  private readonly session: LineSession;
  /** Sequence numbers go on rising across transactions (a message's number names it in the answer). */
  private seq = 1;

  /** `spawnHelper` starts lbd-nfbatch (NFBATCH_HELPER) with no arguments. */
  constructor(spawnHelper: () => ChildProcessWithoutNullStreams, answerTimeoutMs = ANSWER_TIMEOUT_MS) {
    this.session = new LineSession(spawnHelper, 'the kernel lease writer (lbd-nfbatch)', { restartAfterMs: RESTART_AFTER_MS, answerTimeoutMs });
  }

  /** Writes the words as one transaction (words computed by the caller right before this call). */
  async write(words: readonly LeaseWord[]): Promise<void> {
    if (words.length === 0) return;
    const beginSeq = this.seq;
    let encoded: ReturnType<typeof encodeTimedElements>;
    try {
      encoded = encodeTimedElements(words, beginSeq);
    } catch (e) {
      // Addresses come canonical from validated config: one that does not encode is lbd's bug, said as it is.
      if (e instanceof ElementEncodingError) throw new DataPlaneError('InvalidRuleset', 'kernel lease write (netlink)', { detail: e.message, cause: e });
      throw e;
    }
    const { bytes, seqs } = encoded;
    this.seq = (beginSeq + words.length + 2) >>> 0 || 1;
    const frame = Buffer.allocUnsafe(4 + bytes.length);
    if (LITTLE_ENDIAN) frame.writeUInt32LE(bytes.length, 0); else frame.writeUInt32BE(bytes.length, 0);
    bytes.copy(frame, 4);
    let answer: string;
    try {
      answer = await this.session.request(frame);
    } catch (e) {
      throw new LeaseWriterUnavailable((e as Error).message, { cause: e });
    }
    const refused = refusals(answer, words, seqs, beginSeq);
    if (refused === null) return;
    throw new DataPlaneError(refused.denied ? 'PermissionDenied' : 'Unknown', 'kernel lease write (netlink)', { detail: refused.detail });
  }

  /** Starts the process ahead of the first renewal: a takeover has no time to spare for starting one. */
  warm(): void {
    this.session.warm();
  }

  close(): void {
    this.session.close();
  }
}
