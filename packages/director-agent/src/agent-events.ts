import { formatProblem } from '@lbd/config';
import { shortSha, type ApplyContext, type ApplyRecord } from './apply-record.js';
import type { EventLog } from './events.js';
import type { HealthEvent } from './health.js';

/**
 * The prose of the agent's own transitions in the event log: a config apply attempt (what it changed, who
 * asked, why it failed) and a real server's health transition. The cluster member words its own (role,
 * vip, sync).
 */

/**
 * The config event of an apply attempt. `previous`: the attempt before it; `runningRevision` and
 * `runningServices`: what runs after it (the new config when it applied, the old one otherwise).
 */
export function recordConfigEvent(
  events: EventLog, r: ApplyRecord, previous: ApplyRecord | null, ctx: ApplyContext, runningRevision: number, runningServices: number,
): void {
  const revision = r.result === 'applied' || r.result === 'unchanged' ? runningRevision : (ctx.revision ?? 0);
  const by = ctx.author ? ` by ${ctx.author}` : '';
  const origin = `${r.trigger} from ${r.source}${by}`;
  let reason: string;
  switch (r.result) {
    case 'applied':
      reason = `revision ${revision} applied (${origin}): ${ctx.changes || 'no service changed'}; ${r.operations} operation${r.operations === 1 ? '' : 's'}${r.fullRebuild ? ' (full rebuild)' : ''}`;
      break;
    case 'unchanged':
      reason = `revision ${revision} (${origin}): the kernel already matched; ${ctx.changes || 'no service changed'}`;
      break;
    case 'rejected': {
      const n = r.problems.length;
      reason = `rejected (${origin}), ${n} problem${n === 1 ? '' : 's'}: ${r.problems.slice(0, 3).map(formatProblem).join('; ')}${n > 3 ? `; and ${n - 3} more` : ''}; revision ${runningRevision} keeps running`;
      break;
    }
    case 'failed':
      reason = `the data plane refused (${origin}): ${r.error}; the previous state stays in the kernel`;
      break;
  }
  events.record('config', 'config', previous?.result ?? '', r.result, reason, {
    trigger: r.trigger, revision, sha256: shortSha(r.sha256), source: r.source, author: ctx.author ?? '', durationMs: Math.round(r.durationMs * 10) / 10,
    operations: r.operations, services: runningServices, changes: ctx.changes ?? '',
    ...(ctx.caller ? { caller: ctx.caller.name } : {}), ...(ctx.comment ? { comment: ctx.comment } : {}),
  });
}

/** A real server's health transition: why it left (or came back), and what the agent does about it. */
export function recordHealthEvent(events: EventLog, e: HealthEvent): void {
  const held = e.heldDownUntil === null ? '' : `; held down for flapping until ${new Date(e.heldDownUntil).toISOString()}`;
  events.record('health', `${e.service} ${e.server}`, e.from, e.to, `${e.reason}${held}; ${e.action}`, {
    service: e.service, name: e.serviceName, server: e.server, check: e.checkKind, probe: e.probeReason, latencyMs: Math.round(e.latencyMs * 10) / 10,
    action: e.action, ...(e.heldDownUntil === null ? {} : { heldDownUntil: new Date(e.heldDownUntil).toISOString() }),
  });
}
