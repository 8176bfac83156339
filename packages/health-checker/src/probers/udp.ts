import { createSocket } from 'node:dgram';
import { isIPv6 } from 'node:net';
import { attempt, classifyNetError, describeTarget, mismatchMessage } from '../attempt.js';
import type { ProbeOptions, ProbeResult, ProbeTarget, Prober } from '../types.js';

/**
 * udp: send one datagram (`send`, required: UDP has no handshake, so only a reply proves a server) and
 * wait for a reply that contains `expect` (any reply when `expect` is unset). No reply within the timeout
 * is reason 'timeout'.
 *
 * Why a connected socket: the kernel then reports an ICMP port unreachable from the target as
 * ECONNREFUSED on the socket, so a stopped server fails at once as 'refused' instead of after the timeout,
 * and datagrams from any other source are not delivered to the probe.
 */
export class UdpProber implements Prober {
  probe(target: ProbeTarget, opts: ProbeOptions): Promise<ProbeResult> {
    const what = describeTarget(target);
    return attempt(target, opts, (ctx) => {
      if (target.send === undefined) {
        ctx.settle('error', `${what}: a udp check needs a datagram to send`);
        return;
      }
      const payload = target.send;
      const socket = createSocket(isIPv6(target.address) ? 'udp6' : 'udp4');
      ctx.onCleanup(() => socket.close());
      socket.once('error', (err) => {
        const [reason, words] = classifyNetError(err);
        ctx.settle(reason, `${what}: ${words}`);
      });
      socket.on('message', (msg) => {
        const reply = msg.toString('utf8');
        if (target.expect === undefined) ctx.settle('ok', `${what}: got a reply`);
        else if (reply.includes(target.expect)) ctx.settle('ok', `${what}: reply contains ${JSON.stringify(target.expect)}`);
        else ctx.settle('reply-mismatch', mismatchMessage(what, reply, target.expect));
      });
      ctx.setPhase('connecting');
      socket.connect(target.port, target.address, () => {
        ctx.setPhase('sent, no reply');
        socket.send(payload, (err) => {
          if (err) {
            const [reason, words] = classifyNetError(err);
            ctx.settle(reason, `${what}: ${words}`);
          }
        });
      });
    });
  }
}
