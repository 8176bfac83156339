/**
 * Test helpers of @lbd/director-agent (`@lbd/director-agent/testing`); never imported by production code.
 */
export { startClusterPair, stopClusterPair, type ClusterPairOptions, type PairMember, type PairMemberFiles } from './cluster-pair.js';
