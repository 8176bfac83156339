import { Client, buildConnector } from 'undici';
import { REPLY_LIMIT_BYTES, attempt, classifyNetError, describeTarget, endpoint } from '../attempt.js';
import type { ProbeOptions, ProbeReason, ProbeResult, ProbeTarget, Prober } from '../types.js';

/**
 * http and https: one request with undici; up when the status is in `expectStatus` (default 200-399) and,
 * when `bodyPattern` is set, the first 64 KiB of the body match it.
 *
 * Why a new connection for every probe (a Client per probe, destroyed afterwards) rather than keep-alive:
 * - a probe must prove what a new client connection through the director needs: that the server still
 *   accepts connections. A kept-alive connection can keep answering while the listener is gone or its
 *   backlog is full;
 * - thousands of targets would hold thousands of idle sockets, and a server's keep-alive slots;
 * - TLS: a full handshake each time re-verifies the certificate (an expired or replaced certificate
 *   fails the next probe; a resumed session would skip that), and per-target SNI and verification need
 *   their own connector anyway.
 * The price is a TCP (and TLS) handshake per probe, which at a 1 s interval is small next to the
 * traffic a real server carries.
 */
export class HttpProber implements Prober {
  probe(target: ProbeTarget, opts: ProbeOptions): Promise<ProbeResult> {
    const what = describeTarget(target);
    return attempt(target, opts, (ctx) => {
      const pattern = target.bodyPattern === undefined ? undefined : compilePattern(target.bodyPattern);
      if (pattern instanceof Error) {
        ctx.settle('error', `${what}: bodyPattern ${JSON.stringify(target.bodyPattern)} is not a regular expression: ${pattern.message}`);
        return;
      }
      const tls = target.kind === 'https';
      const origin = `${tls ? 'https' : 'http'}://${endpoint(target.address, target.port)}`;
      // Our own timeout (attempt) bounds the whole probe; undici's timeouts are set to the same value so that
      // its sockets and timers never outlive a probe, and its errors name the phase that hung.
      const baseConnector = buildConnector({
        timeout: opts.timeoutMs,
        ...(tls ? { rejectUnauthorized: target.tlsVerify ?? true } : {}),
      });
      const client = new Client(origin, {
        headersTimeout: opts.timeoutMs,
        bodyTimeout: opts.timeoutMs,
        pipelining: 0, // no keep-alive: one request per connection (see above)
        // undici derives SNI from a Host header and lets it win over the connector's servername; an explicit
        // `sni` must win (a health check may name the certificate's host while sending another Host).
        connect: (options, callback) =>
          baseConnector(target.sni !== undefined ? { ...options, servername: target.sni } : options, callback),
      });
      const controller = new AbortController();
      ctx.onCleanup(() => {
        controller.abort();
        client.destroy().catch(() => {
          // Destroying a client whose socket already failed can reject; nothing is left to release.
        });
      });
      ctx.setPhase('no response headers');
      client
        .request({
          path: target.path ?? '/',
          method: target.method ?? 'GET',
          headers: target.host !== undefined ? { host: target.host } : {},
          signal: controller.signal,
          reset: true, // sends "Connection: close", so the server closes its end too
        })
        .then(async ({ statusCode, body }) => {
          const want = target.expectStatus ?? DEFAULT_STATUS;
          if (!statusMatches(statusCode, want)) {
            ctx.settle('status', `${what}: got ${statusCode}, want ${formatStatus(want)}`);
            return;
          }
          if (pattern === undefined) {
            ctx.settle('ok', `${what}: got ${statusCode}`);
            return;
          }
          ctx.setPhase(`got ${statusCode}, body incomplete`);
          const text = await readPrefix(body, REPLY_LIMIT_BYTES);
          if (pattern.test(text)) ctx.settle('ok', `${what}: got ${statusCode}, body matches /${pattern.source}/`);
          else ctx.settle('body-mismatch', `${what}: body does not match /${pattern.source}/`);
        })
        .catch((err: unknown) => {
          if (ctx.done) return; // our own cleanup aborted it
          const [reason, words] = classifyHttpError(err);
          ctx.settle(reason, `${what}: ${words}`);
        });
    });
  }
}

const DEFAULT_STATUS: ReadonlyArray<readonly [number, number]> = [[200, 399]];

export function statusMatches(code: number, want: ReadonlyArray<number | readonly [number, number]>): boolean {
  return want.some((w) => (typeof w === 'number' ? code === w : code >= w[0] && code <= w[1]));
}

/** '200-399', '200, 204', '200 or 300-302'. */
export function formatStatus(want: ReadonlyArray<number | readonly [number, number]>): string {
  const parts = want.map((w) => (typeof w === 'number' ? String(w) : w[0] === w[1] ? String(w[0]) : `${w[0]}-${w[1]}`));
  return parts.length <= 1 ? (parts[0] ?? 'none') : `${parts.slice(0, -1).join(', ')} or ${parts[parts.length - 1]}`;
}

/** Reads up to `limit` bytes of a body and decodes them; stops reading there (the rest is never fetched). */
async function readPrefix(body: AsyncIterable<Buffer | Uint8Array>, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buf = Buffer.from(chunk);
    chunks.push(buf.subarray(0, limit - size));
    size += Math.min(buf.length, limit - size);
    if (size >= limit) break; // leaving the loop destroys the stream
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Compiled patterns by source. Config validates patterns at the edge; the cache only saves recompiling the
 * same few patterns on every probe. Bounded so that an agent fed ever-new patterns does not grow.
 */
const patterns = new Map<string, RegExp | Error>();

function compilePattern(source: string): RegExp | Error {
  let re = patterns.get(source);
  if (re === undefined) {
    try {
      re = new RegExp(source);
    } catch (err) {
      re = err instanceof Error ? err : new Error(String(err));
    }
    if (patterns.size >= 1024) patterns.clear();
    patterns.set(source, re);
  }
  return re;
}

const TLS_CODE = /CERT|SSL|TLS|^EPROTO$/;

/** undici and socket errors → reason and words. */
function classifyHttpError(err: unknown): [ProbeReason, string] {
  const e = err as { code?: unknown; cause?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  switch (code) {
    case 'UND_ERR_CONNECT_TIMEOUT':
      return ['timeout', 'connect timeout'];
    case 'UND_ERR_HEADERS_TIMEOUT':
      return ['timeout', 'connected, no response headers in time'];
    case 'UND_ERR_BODY_TIMEOUT':
      return ['timeout', 'body not received in time'];
    case 'UND_ERR_SOCKET': {
      // "other side closed" and friends; the cause, when there is one, is the socket error.
      if (e?.cause) {
        const inner = classifyHttpError(e.cause);
        if (inner[0] !== 'error') return inner;
      }
      return ['reset', `connection closed: ${String(e?.message ?? 'socket error')}`];
    }
  }
  if (TLS_CODE.test(code)) return ['tls', `tls: ${String(e?.message ?? code)}`];
  return classifyNetError(err);
}
