/**
 * Test helpers of @lbd/director-agent (`@lbd/director-agent/testing`); never imported by production code.
 */
export { serveOpsRoutes, type PlainOpsServer } from './ops-routes-server.js';
export { FakeDashboardBackend, MemoryEventSource } from './dashboard.js';
