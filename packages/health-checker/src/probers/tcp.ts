import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { connect } from 'node:net';
import { REPLY_LIMIT_BYTES, attempt, classifyNetError, describeTarget, mismatchMessage, timeoutMessage } from '../attempt.js';
import type { ProbeOptions, ProbeResult, ProbeTarget, Prober } from '../types.js';
import { NativeConnector, nativeConnectAvailable, type PendingConnect } from './native-connect.js';

export interface TcpProberOptions {
  /**
   * Plain connect checks (no send, no expect) through lbd-probe, the compiled connect prober ('native',
   * the default where it was built), or through Node's sockets ('node'). Checks with send or expect always
   * use Node's.
   */
  readonly connector?: 'native' | 'node';
  /** Starts lbd-probe (default: the built one, here); tests start it in a namespace. */
  readonly startHelper?: () => ChildProcessWithoutNullStreams;
}

/**
 * tcp: connect (up when the handshake completes), optionally write `send` and wait for a reply that
 * contains `expect` (like keepalived's TCP_CHECK plus HAProxy's tcp-check send/expect). It does not speak
 * any protocol beyond that; use http/https or exec for more.
 */
export class TcpProber implements Prober {
  private readonly native: NativeConnector | null;

  constructor(opts: TcpProberOptions = {}) {
    const connector = opts.connector ?? (nativeConnectAvailable() ? 'native' : 'node');
    this.native = connector === 'native' ? new NativeConnector(opts.startHelper) : null;
  }

  /** Stops the compiled prober's process, if one runs (probes in flight end as errors). */
  close(): void {
    this.native?.close();
  }

  probe(target: ProbeTarget, opts: ProbeOptions): Promise<ProbeResult> {
    const what = describeTarget(target);
    if (this.native !== null && target.send === undefined && target.expect === undefined) {
      const pending = this.native.connect(target.address, target.port, opts.timeoutMs);
      // null: lbd-probe is down for a moment (it is started again within a second); Node connects meanwhile.
      if (pending !== null) return this.connectOnly(pending, target, opts, what);
    }
    return attempt(target, opts, (ctx) => {
      ctx.setPhase('connecting');
      const socket = connect({ host: target.address, port: target.port, noDelay: true });
      // Closed with a reset, not a FIN (as HAProxy's checks do): a probe never waits for a polite close, a
      // hung server cannot keep it open, and no TIME_WAIT is left behind. That matters because the
      // director's conntrack tracks every probe: a FIN close keeps each entry 120 s (600 000 entries at
      // 5 000 probes/s, more than a default table holds), a reset 10 s.
      ctx.onCleanup(() => {
        if (socket.readyState === 'open' || socket.readyState === 'readOnly' || socket.readyState === 'writeOnly') socket.resetAndDestroy();
        else socket.destroy();
      });
      let reply = '';
      let bytes = 0;
      socket.once('connect', () => {
        if (target.send === undefined && target.expect === undefined) {
          ctx.settle('ok', `${what}: connected`);
          return;
        }
        if (target.send !== undefined) {
          ctx.setPhase(target.expect === undefined ? 'connected, sending' : 'connected, no reply');
          socket.write(target.send, (err) => {
            if (err) ctx.settle(...withWhat(what, classifyNetError(err)));
            else if (target.expect === undefined) ctx.settle('ok', `${what}: connected, sent ${target.send?.length ?? 0} bytes`);
          });
        } else {
          ctx.setPhase('connected, no reply');
        }
      });
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => {
        if (target.expect === undefined) return;
        bytes += Buffer.byteLength(chunk);
        reply += chunk;
        if (reply.includes(target.expect)) ctx.settle('ok', `${what}: reply contains ${JSON.stringify(target.expect)}`);
        else if (bytes >= REPLY_LIMIT_BYTES) {
          ctx.settle('reply-mismatch', `${what}: no ${JSON.stringify(target.expect)} in the first ${REPLY_LIMIT_BYTES} bytes of the reply`);
        }
      });
      socket.once('end', () => {
        // The server closed its side before we saw what we wait for.
        if (target.expect !== undefined) {
          ctx.settle('reply-mismatch', mismatchMessage(what, reply, target.expect));
        }
      });
      socket.once('error', (err) => ctx.settle(...withWhat(what, classifyNetError(err))));
      socket.once('close', () => {
        // Closed without 'end' or 'error' (cannot normally happen); settle so the probe never waits for the timeout.
        ctx.settle('reset', `${what}: connection closed`);
      });
    });
  }

  /**
   * A plain connect through lbd-probe: the same outcomes and words as Node's path (its codes are errno
   * names, as Node's error codes are), at a fraction of the agent's CPU.
   */
  private connectOnly(pending: PendingConnect, target: ProbeTarget, opts: ProbeOptions, what: string): Promise<ProbeResult> {
    return attempt(target, opts, (ctx) => {
      ctx.setPhase('connecting');
      ctx.onCleanup(() => pending.cancel());
      void pending.result.then((code) => {
        if (code === 'OK') ctx.settle('ok', `${what}: connected`);
        else if (code === 'TIMEOUT') ctx.settle('timeout', timeoutMessage(target, opts.timeoutMs, 'connecting'));
        else if (/^E[A-Z0-9]+$/.test(code)) ctx.settle(...withWhat(what, classifyNetError(Object.assign(new Error(code), { code }))));
        else ctx.settle('error', `${what}: ${code}`);
      });
    });
  }
}

function withWhat(what: string, [reason, words]: ReturnType<typeof classifyNetError>): ReturnType<typeof classifyNetError> {
  return [reason, `${what}: ${words}`];
}
