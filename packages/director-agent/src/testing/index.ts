/**
 * Test helpers of @lbd/director-agent (`@lbd/director-agent/testing`); never imported by production code.
 */
export { startClusterPair, stopClusterPair, type ClusterPairOptions, type PairMember, type PairMemberFiles } from './cluster-pair.js';
export { serveOpsRoutes, type PlainOpsServer } from './ops-routes-server.js';
export { FakeDashboardBackend, MemoryEventSource } from './dashboard.js';
