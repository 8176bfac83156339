import { fileURLToPath } from 'node:url';
import { parseJsonObject, type BackgroundProcess } from './exec.js';
import { SERVER_PORTS } from './director-topology.js';
import type { Topology } from './netns.js';

/**
 * Starting lbd-testserver and lbd-testclient inside a topology's namespaces. Node cannot enter a
 * namespace, so both run as separate `node` processes under `ip netns exec`.
 */

/** Absolute paths of the compiled bins (run them with `process.execPath`). */
export const TESTSERVER_BIN = fileURLToPath(new URL('./bin/testserver.js', import.meta.url));
export const TESTCLIENT_BIN = fileURLToPath(new URL('./bin/testclient.js', import.meta.url));

export interface ServerPorts {
  readonly http?: number;
  readonly stream?: number;
  readonly udp?: number;
}

/**
 * Starts one lbd-testserver per host, named after the host, and resolves once each has logged that it is
 * listening. The topology stops them on `destroy()`.
 */
export async function startTestServers(topology: Topology, hosts: readonly string[], ports: ServerPorts = SERVER_PORTS, timeoutMs = 10_000, faultDir?: string): Promise<BackgroundProcess[]> {
  const args = Object.entries(ports).filter(([, p]) => p !== undefined).flatMap(([k, p]) => [`--${k}`, String(p)]);
  // With faultDir, writing 500, body, hang or close to <faultDir>/<host>.fault breaks that server's HTTP answers.
  const fault = (host: string): string[] => (faultDir ? ['--fault-file', `${faultDir}/${host}.fault`] : []);
  const procs = hosts.map((host) => topology.spawn(host, process.execPath, [TESTSERVER_BIN, '--name', host, ...args, ...fault(host)], { label: `${host}:testserver` }));
  await Promise.all(procs.map((p) => p.waitForJson((v) => v.msg === 'lbd-testserver listening', timeoutMs, 'stderr')));
  return procs;
}

/**
 * Runs lbd-testclient to completion in `host` and returns its final JSON report. `args` is the command line
 * after the bin, e.g. ['http', '--url', 'http://198.18.0.10/', '--count', '600'].
 */
export async function runTestClient<T = Record<string, unknown>>(topology: Topology, host: string, args: readonly string[], timeoutMs = 120_000): Promise<T> {
  const { stdout } = await topology.exec(host, process.execPath, [TESTCLIENT_BIN, ...args], { timeoutMs });
  const last = stdout.trim().split('\n').reverse().map(parseJsonObject).find((v) => v !== undefined);
  if (last === undefined) throw new Error(`lbd-testclient ${args.join(' ')}: no JSON report on stdout: ${stdout.slice(-500)}`);
  return last as T;
}

/**
 * Starts a long-running lbd-testclient (stream, udp-flows, http-paced) in `host`. Wait for its first line
 * (`waitForJson((v) => 'ready' in v, ms)`; http-paced: 'started'), then end it with `stop()` and read
 * `lastJson()`. `label` names it in logs.
 */
export function spawnTestClient(topology: Topology, host: string, args: readonly string[], label = `${host}:testclient`): BackgroundProcess {
  return topology.spawn(host, process.execPath, [TESTCLIENT_BIN, ...args], { label });
}
