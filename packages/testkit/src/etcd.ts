import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { get } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * One etcd member on loopback for tests: random free client and peer ports, a temp data dir, and the
 * `etcd` binary (Debian `etcd-server`). Only spawns the process and waits for `/health` over plain HTTP:
 * the testkit does not talk the etcd API (that is the coordinator's job). `pause()`/`resume()` freeze and
 * thaw the process (SIGSTOP/SIGCONT) to simulate an etcd that stops answering without closing sockets.
 */
export interface RunningEtcd {
  readonly endpoints: string[];
  /** Kills etcd (SIGKILL, after SIGCONT if paused) and removes a data dir this launcher created. Idempotent. */
  stop(): Promise<void>;
  /** SIGSTOP: etcd keeps its sockets open but answers nothing. */
  pause(): Promise<void>;
  /** SIGCONT. */
  resume(): Promise<void>;
}

export interface EtcdOptions {
  readonly name?: string;
  /** Default: a fresh temp dir, removed by stop(). A given dir is left in place. */
  readonly dataDir?: string;
  /** etcd `--heartbeat-interval` (default 100). */
  readonly heartbeatMs?: number;
  /** etcd `--election-timeout` (default 1000). */
  readonly electionMs?: number;
  /** How long to wait for `/health` (default 15 s). */
  readonly startTimeoutMs?: number;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function healthy(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = get(`${url}/health`, { timeout: 1000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve(res.statusCode === 200 && /"health"\s*:\s*"true"/.test(body)));
      res.on('error', () => resolve(false));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
  });
}

export async function startEtcd(opts: EtcdOptions = {}): Promise<RunningEtcd> {
  const name = opts.name ?? 'lbd-test';
  const ownDir = opts.dataDir === undefined;
  const dataDir = opts.dataDir ?? (await mkdtemp(join(tmpdir(), 'lbd-etcd-')));
  const [clientPort, peerPort] = [await freePort(), await freePort()];
  const client = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const args = [
    '--name', name, '--data-dir', dataDir,
    '--listen-client-urls', client, '--advertise-client-urls', client,
    '--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer,
    '--initial-cluster', `${name}=${peer}`, '--initial-cluster-state', 'new',
    '--heartbeat-interval', String(opts.heartbeatMs ?? 100), '--election-timeout', String(opts.electionMs ?? 1000),
    '--logger', 'zap', '--log-level', 'warn',
  ];
  const child = spawn('etcd', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (c: string) => { stderr = (stderr + c).slice(-8192); });
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    child.once('exit', () => { exited = true; resolve(); });
    child.once('error', (err) => { exited = true; stderr += String(err); resolve(); });
  });
  let paused = false;
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => (stopped ??= (async () => {
    if (!exited) {
      if (paused) child.kill('SIGCONT');
      child.kill('SIGKILL');
      await exit;
    }
    if (ownDir) await rm(dataDir, { recursive: true, force: true });
  })());

  const deadline = Date.now() + (opts.startTimeoutMs ?? 15_000);
  try {
    for (;;) {
      if (exited) throw new Error(`etcd exited before it was healthy: ${stderr.trim() || 'no output'}`);
      if (await healthy(client)) break;
      if (Date.now() > deadline) throw new Error(`etcd not healthy after ${opts.startTimeoutMs ?? 15_000} ms: ${stderr.trim()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    endpoints: [client],
    stop,
    pause: async () => { if (!exited && !paused) { child.kill('SIGSTOP'); paused = true; } },
    resume: async () => { if (!exited && paused) { child.kill('SIGCONT'); paused = false; } },
  };
}
