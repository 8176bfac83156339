import { spawn } from 'node:child_process';
import { isIPv6 } from 'node:net';
import { attempt, describeTarget, timeoutMessage } from '../attempt.js';
import type { ProbeOptions, ProbeResult, ProbeTarget, Prober } from '../types.js';

/**
 * icmp: one echo request with iputils `ping -n -c 1 -W <seconds> -4|-6 <address>`.
 *
 * Why not the `ping` npm package (0.4.4), which wraps the same binary: it cannot be aborted (it has no
 * signal and never kills its child, so a probe could outlive its timeout), it sets LANG=C in the agent's
 * own process.env on every call (Object.assign(process.env, ...)), it turns a timeout of 0 into 2 s, and it
 * reports only alive/packet loss, so 'unreachable' and 'timeout' cannot be told apart without parsing its
 * raw output anyway. Sub-second timeouts and IPv6 it would handle (iputils accepts `-W 0.5`, and it runs
 * `ping6`, a link to ping on Debian). Spawning ping ourselves costs the same process per probe and gives us
 * the exit status (0 reply, 1 no reply, 2 error) and the kill on timeout.
 *
 * ping needs CAP_NET_RAW (Debian's binary has it as a file capability) or ICMP datagram sockets allowed by
 * net.ipv4.ping_group_range; without either every probe fails with reason 'error' and ping's own words.
 */
export class IcmpProber implements Prober {
  /**
   * `command`: the argv that runs ping (default ['ping']); the prober appends its arguments. A prefix such
   * as ['ip', 'netns', 'exec', 'ns1', 'ping'] probes from another namespace (tests do).
   */
  constructor(private readonly opts: { command?: readonly string[] } = {}) {}

  probe(target: ProbeTarget, opts: ProbeOptions): Promise<ProbeResult> {
    const what = describeTarget(target);
    return attempt(target, opts, (ctx) => {
      ctx.setPhase('no echo reply');
      // -W is how long ping waits for the reply; our own timer (attempt) kills it at the same moment if
      // it has not exited, so the probe never outlives timeoutMs.
      const seconds = (Math.max(1, opts.timeoutMs) / 1000).toFixed(3);
      const family = isIPv6(target.address) ? '-6' : '-4';
      const [file = 'ping', ...prefix] = this.opts.command ?? [];
      const child = spawn(file, [...prefix, '-n', '-c', '1', '-W', seconds, family, target.address], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, LC_ALL: 'C' }, // its words are parsed: no translations
      });
      let exited = false;
      ctx.onCleanup(() => {
        if (!exited) child.kill('SIGKILL');
      });
      let out = '';
      const collect = (chunk: string): void => {
        if (out.length < 8192) out += chunk;
      };
      child.stdout.setEncoding('utf8').on('data', collect);
      child.stderr.setEncoding('utf8').on('data', collect);
      child.once('error', (err: NodeJS.ErrnoException) => {
        exited = true;
        ctx.settle('error', `${what}: cannot run ping: ${err.code === 'ENOENT' ? 'not installed (Debian package iputils-ping)' : err.message}`);
      });
      // 'close', not 'exit': ping's last words (the reply line, the error) must have been read.
      child.once('exit', () => {
        exited = true;
      });
      child.once('close', (code) => {
        exited = true;
        const [reason, message] = interpretPing(code, out);
        ctx.settle(reason, reason === 'timeout' ? timeoutMessage(target, opts.timeoutMs, 'no echo reply') : `${what}: ${message}`);
      });
    });
  }
}

/** iputils ping's exit status and words → reason and message (words after the target's description). */
export function interpretPing(code: number | null, output: string): [ProbeResult['reason'], string] {
  const unreachable = /^From \S+ icmp_seq=\d+ (.*Unreachable.*)$/im.exec(output) ?? /(Network is unreachable|No route to host)/i.exec(output);
  if (code === 0) {
    const rtt = /time[=<]([\d.]+) ?ms/.exec(output);
    return ['ok', rtt ? `reply in ${rtt[1]} ms` : 'reply'];
  }
  if (unreachable) return ['unreachable', (unreachable[1] ?? unreachable[0]).trim().toLowerCase()];
  if (code === 1) return ['timeout', 'no echo reply'];
  const lines = output.split('\n').map((l) => l.trim().replace(/^ping: /, '')).filter((l) => l !== '' && !l.startsWith('PING '));
  const denied = lines.find((l) => /not permitted|permission denied/i.test(l));
  if (denied) return ['error', `${denied} (ping needs CAP_NET_RAW, or net.ipv4.ping_group_range to include the agent's group)`];
  return ['error', lines.at(-1) ?? `exit ${code ?? 'by signal'}`];
}
