import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { EXIT } from '@lbd/config';
import type { Invocation } from './args.js';

/**
 * `lbadm drill failover`: drills break things on purpose (kill a director's box, cut etcd), so they run
 * only in the lab, whose own command does the work (deploy/lab/lab drill, sharing the test suite's code).
 * lbadm finds it next to itself in the repository and passes its output through.
 */
export async function drill(inv: Invocation, io: { stdout(text: string): void; stderr(text: string): void }): Promise<number> {
  const lab = fileURLToPath(new URL('../../../deploy/lab/lab', import.meta.url));
  if (!existsSync(lab)) {
    io.stderr(`lbadm: drills run in the lab only, and ${lab} is not there; run lbadm from the lbd repository after deploy/lab/lab up\n`);
    return EXIT.unavailable;
  }
  const args = ['drill', '--mode', inv.mode!, '--count', String(inv.count), ...(inv.pauseMs !== undefined ? ['--pause-ms', String(inv.pauseMs)] : []), ...(inv.json ? ['--json'] : [])];
  return new Promise<number>((resolve) => {
    const child = spawn(lab, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (b: Buffer) => io.stdout(b.toString()));
    child.stderr.on('data', (b: Buffer) => io.stderr(b.toString()));
    child.on('error', (err) => { io.stderr(`lbadm: cannot run ${lab}: ${err.message}\n`); resolve(EXIT.unavailable); });
    child.on('close', (code) => resolve(code ?? EXIT.failure));
  });
}

