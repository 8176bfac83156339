import { Dashboard, type OpsSurfaces } from '@lbd/operator-surfaces';
import type { Logger } from '@lbd/log';
import type { Agent } from './agent.js';
import { Metrics, metricsRoutes } from './metrics.js';

/**
 * lbd-agent's operator surfaces on agent.admin.httpListen: Prometheus metrics (GET /metrics) and the
 * live dashboard (GET /, /static/*, /api/*), both reading the agent and its event log. Built here
 * rather than in the Agent, so the Agent does not depend on the modules that read it.
 */
export function operatorSurfaces(agent: Agent, log: Logger): OpsSurfaces {
  const metrics = new Metrics(agent, { events: agent.events });
  const dashboard = new Dashboard({ backend: agent, events: agent.events, log });
  return {
    routes: [...metricsRoutes(metrics), ...dashboard.routes()],
    close() {
      dashboard.close();
      metrics.close();
    },
  };
}
