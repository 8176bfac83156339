import { parentPort, workerData } from 'node:worker_threads';
import type { GroupState } from '@lbd/connsync';
import type { LogFields, LogLevel, Logger } from '@lbd/log';
import { createDefaultConnectionTable } from './default-dataplane.js';
import { SyncService } from './sync-host.js';
import { crossableLogFields, type SyncRequest, type SyncThreadMessage, type SyncWorkerData } from './sync-thread.js';
import { securityFromWorkerData } from './tls-files.js';

/**
 * The connection-sync thread's entry (sync-thread.ts starts it): makes the kernel's connection table (its own
 * ctnetlink helpers), runs a SyncService on it and answers the main thread. Its log lines and its questions
 * about a group's state go to the main thread, which owns the log and the election's view.
 */
const port = parentPort;
if (port === null) throw new Error('sync-worker.js runs as a worker thread (sync-thread.ts starts it)');
const raw = workerData as SyncWorkerData;
const security = securityFromWorkerData(raw.security);

const send = (m: SyncThreadMessage): void => port.postMessage(m);
const line = (level: LogLevel) => (msg: string, fields: LogFields = {}): void => {
  try {
    send({ log: { level, msg, fields: crossableLogFields(fields) } });
  } catch {
    send({ log: { level, msg, fields: { fields: JSON.stringify(fields, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)) } } });
  }
};
const log: Logger = { debug: line('debug'), info: line('info'), warn: line('warn'), error: line('error') };

const asks = new Map<number, { resolve: (s: GroupState) => void; reject: (e: Error) => void }>();
let nextAsk = 1;
const groupState = (group: string): Promise<GroupState> => new Promise((resolve, reject) => {
  const id = nextAsk++;
  asks.set(id, { resolve, reject });
  send({ ask: id, group });
});

const table = await createDefaultConnectionTable(log, raw.ctnlHelper, raw.ctnlWriter);
const service = new SyncService({ self: raw.self, peers: raw.peers, security, listen: raw.listen }, table, { log, groupState });

port.on('message', (m: SyncRequest) => {
  if ('answer' in m) {
    const ask = asks.get(m.answer);
    asks.delete(m.answer);
    if (m.ok) ask?.resolve(m.state);
    else ask?.reject(new Error(m.error));
    return;
  }
  const run = async (): Promise<unknown> => {
    switch (m.op) {
      case 'start': return service.start();
      case 'setConfig': return service.setConfig(m.services, m.ecmp);
      case 'setMarks': return service.setMarks(m.marks);
      case 'setLeading': return service.setLeading(m.groups);
      case 'report': return service.report(m.groups);
      case 'handOverYoung': return service.handOverYoung(m.group);
      case 'drain': return service.drain(m.peer, m.timeoutMs);
      case 'holding': return service.holding(m.group, m.countersOnly);
      case 'peerHolding': return service.peerHolding(m.peer, m.group, m.timeoutMs, m.countersOnly);
      case 'close': return service.close().then(() => table.dispose());
    }
  };
  run().then(
    (value) => { if (m.id !== 0) send({ reply: m.id, ok: true, value }); },
    (err: unknown) => {
      if (m.id !== 0) send({ reply: m.id, ok: false, error: err instanceof Error ? err.message : String(err) });
      else log.error(`connection-sync thread: ${m.op} failed`, { error: err });
    },
  );
});
