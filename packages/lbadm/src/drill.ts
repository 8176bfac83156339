import { request } from 'node:http';
import { EXIT } from '@lbd/config';
import type { AdminApi, DrillResult__Output } from '@lbd/proto';
import { PROBE_INTERVAL_MS, type Invocation } from './args.js';
import { json } from './format.js';

/**
 * `lbadm drill switchover`: the agent moves the group there and back and measures it from both directors
 * (admin RunDrill); lbadm adds what a client beside it saw (--probe), prints one line and records the
 * drill event (RecordDrill), so the event holds both.
 */

/** The agent's two moves, each waiting for sync (up to 15 s back), and four table reads. */
const DRILL_TIMEOUT_MS = 120_000;
/** A probe request that has no answer by then failed. */
const PROBE_TIMEOUT_MS = 1000;
/** Requests in flight at most: a vip that answers nothing must not pile up sockets. */
const PROBE_MAX_IN_FLIGHT = 50;

interface ProbeReport {
  readonly requests: number;
  readonly failed: number;
  /** Failures per kind (ECONNREFUSED, timeout, HTTP 503, ...). */
  readonly errors: Readonly<Record<string, number>>;
}

/** Requests `url` on a fresh connection every `intervalMs` until stopped; `stop` resolves once the last one settled. */
function startProbe(url: URL, intervalMs = PROBE_INTERVAL_MS): { stop(): Promise<ProbeReport> } {
  let requests = 0;
  let failed = 0;
  const errors: Record<string, number> = {};
  const pending = new Set<Promise<void>>();
  const fail = (kind: string): void => {
    failed++;
    errors[kind] = (errors[kind] ?? 0) + 1;
  };
  const one = (): void => {
    if (pending.size >= PROBE_MAX_IN_FLIGHT) {
      requests++;
      fail('too many in flight');
      return;
    }
    requests++;
    const p = new Promise<void>((resolve) => {
      const req = request(url, { agent: false, timeout: PROBE_TIMEOUT_MS, headers: { connection: 'close' } }, (res) => {
        res.resume();
        res.on('end', () => {
          if ((res.statusCode ?? 0) >= 500) fail(`HTTP ${res.statusCode}`);
          resolve();
        });
        res.on('error', (e) => { fail((e as NodeJS.ErrnoException).code ?? e.message); resolve(); });
      });
      req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'timeout' })));
      req.on('error', (e) => { fail((e as NodeJS.ErrnoException).code ?? e.message); resolve(); });
      req.end();
    });
    pending.add(p);
    void p.then(() => pending.delete(p));
  };
  const timer = setInterval(one, intervalMs);
  one();
  return {
    async stop() {
      clearInterval(timer);
      await Promise.all([...pending]);
      return { requests, failed, errors };
    },
  };
}

export async function drill(api: AdminApi, inv: Invocation, author: string, io: { stdout(text: string): void }): Promise<number> {
  const probe = inv.probe === undefined ? null : startProbe(inv.probe);
  let r: DrillResult__Output;
  let seen: ProbeReport | null = null;
  try {
    r = await api.runDrill({ scenario: 'switchover', group: inv.vipGroup!, to: inv.to ?? '', author }, { timeoutMs: DRILL_TIMEOUT_MS });
  } finally {
    seen = (await probe?.stop()) ?? null;
  }
  const fields: Record<string, string> = { ...r.fields };
  let summary = r.summary;
  if (seen !== null) {
    fields.probeRequests = String(seen.requests);
    fields.failedRequests = String(seen.failed);
    const kinds = Object.entries(seen.errors).map(([k, n]) => `${k} ${n}`).join(', ');
    summary += `; probe ${inv.probe!.href}: ${seen.failed} of ${seen.requests} requests failed${kinds === '' ? '' : ` (${kinds})`}`;
  }
  const recorded = await api.recordDrill({ scenario: 'switchover', result: r.result, reason: summary, fields }, { timeoutMs: 10_000 });
  io.stdout(inv.json ? json({ ...r, summary, fields, probe: seen, event: recorded.id }) : `${summary}\n`);
  return r.result === 'pass' ? EXIT.ok : EXIT.failure;
}
