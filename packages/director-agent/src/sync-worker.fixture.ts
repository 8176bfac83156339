import { parentPort } from 'node:worker_threads';
import './sync-worker.js';

/**
 * The sync thread's program with one addition, for sync-thread.test.ts: a report asked for the group
 * `end-the-thread` ends the thread (exit code 3), as an exception nothing caught would.
 */
parentPort?.on('message', (m: { op?: string; groups?: readonly string[] }) => {
  if (m.op === 'report' && m.groups?.[0] === 'end-the-thread') process.exit(3);
});
