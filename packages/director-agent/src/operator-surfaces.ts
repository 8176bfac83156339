import type { Logger } from '@lbd/log';
import { Dashboard, Metrics, metricsRoutes, type MetricsSource, type OpsSurfaces } from '@lbd/operator-surfaces';
import type { Agent } from './agent.js';

/**
 * lbd-agent's operator surfaces on agent.admin.httpListen: Prometheus metrics (GET /metrics) and the
 * live dashboard (GET /, /static/*, /api/*), both reading the agent and its event log. Built here
 * rather than in the Agent, so the Agent does not depend on the modules that read it.
 */
export function operatorSurfaces(agent: Agent, log: Logger): OpsSurfaces {
  const metrics = new Metrics(metricsSource(agent), { events: agent.events });
  const dashboard = new Dashboard({ backend: agent.admin, events: agent.events, log });
  return {
    routes: [...metricsRoutes(metrics), ...dashboard.routes()],
    close() {
      dashboard.close();
      metrics.close();
    },
  };
}

/** The agent as its metrics read it: the running config and its applies, health, and the cluster member's counters. */
export function metricsSource(agent: Agent): MetricsSource {
  const health = agent.health;
  return {
    director: agent.cluster?.settings.director ?? null,
    version: agent.version,
    startedAt: agent.startedAt,
    config: () => agent.config,
    revision: () => agent.revision,
    lastApply: () => agent.lastApplyRecord,
    dataPlaneProblem: () => agent.dataPlaneProblem(),
    status: () => agent.admin.status(),
    cluster: () => {
      const member = agent.cluster;
      return member === null ? null : { status: () => agent.admin.clusterStatus(), counters: member.counters };
    },
    checkedServers: (config) => health.entries(config),
    probeStats: () => health.stats(),
    healthNow: () => health.now(),
    subscribe(h) {
      health.on('probe', h.probe);
      health.on('event', h.health);
      agent.on('apply', h.apply);
      agent.on('healthApply', h.healthApply);
      return () => {
        health.off('probe', h.probe);
        health.off('event', h.health);
        agent.off('apply', h.apply);
        agent.off('healthApply', h.healthApply);
      };
    },
  };
}
