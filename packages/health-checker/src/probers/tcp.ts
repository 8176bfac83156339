import { connect } from 'node:net';
import { REPLY_LIMIT_BYTES, attempt, classifyNetError, describeTarget, mismatchMessage } from '../attempt.js';
import type { ProbeOptions, ProbeResult, ProbeTarget, Prober } from '../types.js';

/**
 * tcp: connect (up when the handshake completes), optionally write `send` and wait for a reply that
 * contains `expect` (like keepalived's TCP_CHECK plus HAProxy's tcp-check send/expect). It does not speak
 * any protocol beyond that; use http/https or exec for more.
 */
export class TcpProber implements Prober {
  probe(target: ProbeTarget, opts: ProbeOptions): Promise<ProbeResult> {
    const what = describeTarget(target);
    return attempt(target, opts, (ctx) => {
      ctx.setPhase('connecting');
      const socket = connect({ host: target.address, port: target.port, noDelay: true });
      // destroy(), not end(): a probe never waits for a polite close, and a hung server must not keep it open.
      ctx.onCleanup(() => socket.destroy());
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
}

function withWhat(what: string, [reason, words]: ReturnType<typeof classifyNetError>): ReturnType<typeof classifyNetError> {
  return [reason, `${what}: ${words}`];
}
