import type { Endpoint, HealthCheck } from '@lbd/config';
import type { FlapPolicy } from './health.js';
import { checkKey, type CheckSpec } from './scheduler.js';
import type { ProbeTarget } from './types.js';

/**
 * Config → CheckSpec: the one place that reads a validated HealthCheck (config's per-server effective
 * check) and turns it into what the scheduler runs. The agent calls it for every real server with a
 * check and gives the results to `HealthScheduler.set()`.
 *
 * Only the fields of the check's kind go into the target, so fields that do not matter for a kind (config
 * fills http defaults such as method GET for every check) cannot make two identical checks look different:
 * two services that check the same real server the same way get the same key and share one check.
 * Config has no flap policy yet: DEFAULT_FLAP_POLICY unless the agent passes one.
 */
export function checkSpecFor(server: Endpoint, hc: HealthCheck, flap: FlapPolicy = hc.flapDamping): CheckSpec {
  const target: ProbeTarget = { kind: hc.kind, address: hc.address ?? server.address, port: hc.port ?? server.port };
  switch (hc.kind) {
    case 'tcp':
    case 'udp':
      if (hc.send !== null) target.send = hc.send;
      if (hc.expect !== null) target.expect = hc.expect;
      break;
    case 'http':
    case 'https':
      if (hc.kind === 'https') {
        target.tlsVerify = hc.tlsVerify;
        if (hc.sni !== null) target.sni = hc.sni;
      }
      target.method = hc.method;
      target.path = hc.path;
      target.expectStatus = hc.expectStatus;
      if (hc.host !== null) target.host = hc.host;
      if (hc.bodyPattern !== null) target.bodyPattern = hc.bodyPattern;
      break;
    case 'icmp':
      target.port = 0; // unused: not part of what makes two icmp checks the same
      break;
    case 'exec':
      target.command = hc.command ?? [];
      break;
  }
  const spec: Omit<CheckSpec, 'key'> = {
    target,
    intervalMs: hc.intervalMs,
    timeoutMs: hc.timeoutMs,
    jitterMs: hc.jitterMs,
    thresholds: { rise: hc.rise, fall: hc.fall },
    flap,
    startState: hc.startState,
  };
  return { key: checkKey(spec), ...spec };
}
