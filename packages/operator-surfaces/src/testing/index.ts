/**
 * Test helpers of @lbd/operator-surfaces (`@lbd/operator-surfaces/testing`); never imported by production code.
 */
export { serveOpsRoutes, type PlainOpsServer } from './ops-routes-server.js';
export { FakeDashboardBackend, MemoryEventSource } from './dashboard.js';
