/**
 * @lbd/testkit: private test infrastructure. Network-namespace topologies, the standard director topology
 * and its addresses, the privileged-test gate, and the test servers and clients that run inside the
 * namespaces. Never imported by production packages.
 */
export { BackgroundProcess, CommandError, formatCommand, parseJsonObject, runCommand } from './exec.js';
export type { ExecOptions, ExecResult, OutputStream, ProcessExit, SpawnOptions } from './exec.js';
export { FrrRouter } from './frr.js';
export { BRIDGE, Topology, deleteNamespace, listNamespaces, namespacePids, removeOrphans, removeStale, runPrefix } from './netns.js';
export type { HostOptions, LinkEnd } from './netns.js';
export { issueCert, makeCa, makeClusterPki } from './certs.js';
export type { CaFiles, CertFiles, ClusterPki } from './certs.js';
export { privilegeProblem, requireRoot } from './privileged.js';
export type { PrivilegeOptions } from './privileged.js';
export {
  BYPASS_GATEWAY, CLIENT, CLIENT_NET, DIRECTOR, HOSTS, LOCAL_ADDRESSES, MAX_REAL_SERVERS, SERVER_NET, SERVER_PORTS, VIPS,
  directorTopology, realServer, setUpDrRealServer,
} from './director-topology.js';
export type { DirectorTopology, DirectorTopologyOptions, RealServerHost } from './director-topology.js';
export { TESTCLIENT_BIN, TESTSERVER_BIN, runTestClient, spawnTestClient, startTestServers } from './processes.js';
export type { ServerPorts } from './processes.js';
export { STREAM_INTERVAL_MS, startTestServer } from './testserver.js';
export type { RunningTestServer, ServerAnswer, TestServerConfig } from './testserver.js';
export type { Counts, HttpPacedResult, HttpResult, PacedRecord, ReadyReport, StreamResult, TcpOnceResult, UdpFlowsReadyReport, UdpFlowsResult, UdpResult } from './testclient.js';
export { StreamChecker } from './stream-check.js';
export type { StreamReport } from './stream-check.js';
export { UdpFlowChecker } from './udp-flow-check.js';
export type { UdpFlowReport, UdpFlowStep, UdpFlowTiming } from './udp-flow-check.js';
export {
  CLUSTER, CUT_TARGETS, DIRECTOR_NAMES, ETCD_ENDPOINTS, ETCD_MEMBERS, FLOATING_ADDRESSES,
  clusterDirector, clusterHostNames, clusterTopology, etcdMember, holdsAddress, openClusterTopology,
} from './cluster-topology.js';
export type {
  ClusterDirector, ClusterTopology, ClusterTopologyOptions, CutTarget, DirectorName, EtcdMember, FloatingAddress,
} from './cluster-topology.js';
export { LoopbackCluster, PAIR_DIRECTORS, PAIR_GROUP, clusterAgentYaml, frontConfig } from './loopback-cluster.js';
export type { ClusterAgentOptions, FrontConfigOptions, PairConfigOptions, PairDirector, PairFiles } from './loopback-cluster.js';
export { ETCD_NICE, etcdMemberArgs, etcdMemberCommand, etcdctlIn, freePeerPorts, freePort, startEtcd, startEtcdCluster } from './etcd.js';
export type { EtcdClusterOptions, EtcdMemberTiming, EtcdOptions, RunningEtcd, RunningEtcdCluster } from './etcd.js';
export { AGENT_BIN, HA_GROUP, HA_VIP, LBADM_BIN, OPS_CLIENTS, adminListeners, agentFileText, holdersOf, labConfigText, lbadmAdmin, leaderOf, startHaLab, waitFor, waitSteady } from './ha-lab.js';
export type { ClusterStatusView, HaAdmin, HaLab, HaLabOptions, OpsClientName, SteadyTarget } from './ha-lab.js';
export { SERVICE_BACK_SLACK_MS, drillLabel, drillPassed, drillProblems, formatDrill, runDrill, summary as drillSummary } from './drill.js';
export type { DrillOptions, DrillResult, DrillTarget, HolderChange } from './drill.js';
export { ArpProbe, VipCapture, dualFigures, parseCaptureLine, sentFigures } from './vip-capture.js';
export type { CaptureSubject, DualFigures, SentFigures, VipCaptureResult, VipPacket, VipPacketKind } from './vip-capture.js';
export { BusyLoops } from './busy-loops.js';
export { SPOOFED_SOURCES, synFlood, tcpExtCounter } from './syn-flood.js';
export type { SynFloodOptions, SynFloodResult } from './syn-flood.js';
export { ECMP_ASN, ECMP_DIRECTORS, ECMP_SLOTS, ECMP_SPARE, ECMP_TIMING, ECMP_DR_VIP, ECMP_VIP, ecmpClusterConfig, ecmpFabricAddress, ecmpNextHop, ecmpSlotOfLocalAddress, startEcmpLab } from './ecmp-lab.js';
export type { EcmpDirector, EcmpLab, EcmpLabOptions, RouterMode } from './ecmp-lab.js';
export { MIRROR_TABLE, movedShare, ResilientMirror } from './resilient-mirror.js';
export { ECMP_DRILL_SCENARIOS, ecmpDrillProblems, ecmpDrillRecord, ecmpDrillSummary, runEcmpDrill } from './ecmp-drill.js';
export type { EcmpDrillResult, EcmpDrillScenario } from './ecmp-drill.js';
