import { parentPort, workerData } from 'node:worker_threads';
import { ElectionCore, type ElectionCoreOptions, type ElectionNotice } from './election-core.js';
import { securityFromWorkerData } from './tls-files.js';
import type { ElectionReply, ElectionRequest } from './election-thread.js';

/**
 * The election thread's entry (election-thread.ts starts it): raises itself to real-time priority first,
 * so that the processes it starts afterwards (`nft -i` for the kernel lease, `ip -batch`, announcements)
 * inherit it, then runs an ElectionCore with the kernel's address owner and answers the main thread.
 */
const port = parentPort;
if (port === null) throw new Error('election-worker.js runs as a worker thread (election-thread.ts starts it)');
const raw = workerData as ElectionCoreOptions;
const security = securityFromWorkerData(raw.security);
const o: ElectionCoreOptions = { ...raw, security };
const notify = (notice: ElectionNotice): void => port.postMessage({ notice } satisfies ElectionReply);

const { KernelAddressOwner, raiseThreadToRealtime } = await import('@lbd/dataplane-nft');
let placement = 'election thread, normal priority (agent.cluster.realtimePriority is 0)';
if (o.realtimePriority > 0) {
  try {
    placement = `election thread, ${await raiseThreadToRealtime(o.realtimePriority)}`;
  } catch (err) {
    placement = `election thread, normal priority: ${err instanceof Error ? err.message : String(err)}`;
    notify({ kind: 'log', level: 'warn', msg: 'the election thread runs at normal priority', fields: { reason: placement } });
  }
}
notify({ kind: 'log', level: 'info', msg: 'election thread started', fields: { placement } });
const owner = new KernelAddressOwner({
  stateDir: o.stateDir, onEvent: (msg, fields) => notify({ kind: 'log', level: 'info', msg, fields: { component: 'addresses', ...fields } }),
});
const core = new ElectionCore(o, owner, notify, placement);

port.on('message', (m: ElectionRequest) => {
  const run = async (): Promise<unknown> => {
    switch (m.op) {
      case 'start': return core.start();
      case 'setPlan': return core.setPlan(m.groups);
      case 'snapshot': return core.snapshot();
      case 'stop': return core.stop({ vacate: m.vacate });
      case 'setAgentProblems': return core.setAgentProblems(m.problems);
      case 'setSynced': return core.setSynced(m.synced);
      case 'handoverReady': return core.handoverReady(m.handover);
    }
  };
  run().then(
    (value) => { if (m.id !== 0) port.postMessage({ reply: m.id, ok: true, value } satisfies ElectionReply); },
    (err: unknown) => {
      if (m.id !== 0) port.postMessage({ reply: m.id, ok: false, error: err instanceof Error ? err.message : String(err) } satisfies ElectionReply);
      else notify({ kind: 'log', level: 'error', msg: `election thread: ${m.op} failed`, fields: { error: String(err) } });
    },
  );
});
