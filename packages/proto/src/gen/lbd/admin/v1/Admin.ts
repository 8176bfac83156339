// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { ApplyRequest as _lbd_admin_v1_ApplyRequest, ApplyRequest__Output as _lbd_admin_v1_ApplyRequest__Output } from '../../../lbd/admin/v1/ApplyRequest.js';
import type { ApplyResponse as _lbd_admin_v1_ApplyResponse, ApplyResponse__Output as _lbd_admin_v1_ApplyResponse__Output } from '../../../lbd/admin/v1/ApplyResponse.js';
import type { ClusterStatus as _lbd_admin_v1_ClusterStatus, ClusterStatus__Output as _lbd_admin_v1_ClusterStatus__Output } from '../../../lbd/admin/v1/ClusterStatus.js';
import type { ConfigHistoryRequest as _lbd_admin_v1_ConfigHistoryRequest, ConfigHistoryRequest__Output as _lbd_admin_v1_ConfigHistoryRequest__Output } from '../../../lbd/admin/v1/ConfigHistoryRequest.js';
import type { ConfigHistoryResponse as _lbd_admin_v1_ConfigHistoryResponse, ConfigHistoryResponse__Output as _lbd_admin_v1_ConfigHistoryResponse__Output } from '../../../lbd/admin/v1/ConfigHistoryResponse.js';
import type { DoctorRequest as _lbd_admin_v1_DoctorRequest, DoctorRequest__Output as _lbd_admin_v1_DoctorRequest__Output } from '../../../lbd/admin/v1/DoctorRequest.js';
import type { DoctorResponse as _lbd_admin_v1_DoctorResponse, DoctorResponse__Output as _lbd_admin_v1_DoctorResponse__Output } from '../../../lbd/admin/v1/DoctorResponse.js';
import type { DrillResult as _lbd_admin_v1_DrillResult, DrillResult__Output as _lbd_admin_v1_DrillResult__Output } from '../../../lbd/admin/v1/DrillResult.js';
import type { Event as _lbd_admin_v1_Event, Event__Output as _lbd_admin_v1_Event__Output } from '../../../lbd/admin/v1/Event.js';
import type { FailoverRequest as _lbd_admin_v1_FailoverRequest, FailoverRequest__Output as _lbd_admin_v1_FailoverRequest__Output } from '../../../lbd/admin/v1/FailoverRequest.js';
import type { FailoverResponse as _lbd_admin_v1_FailoverResponse, FailoverResponse__Output as _lbd_admin_v1_FailoverResponse__Output } from '../../../lbd/admin/v1/FailoverResponse.js';
import type { GetClusterStatusRequest as _lbd_admin_v1_GetClusterStatusRequest, GetClusterStatusRequest__Output as _lbd_admin_v1_GetClusterStatusRequest__Output } from '../../../lbd/admin/v1/GetClusterStatusRequest.js';
import type { GetConfigRequest as _lbd_admin_v1_GetConfigRequest, GetConfigRequest__Output as _lbd_admin_v1_GetConfigRequest__Output } from '../../../lbd/admin/v1/GetConfigRequest.js';
import type { GetConfigResponse as _lbd_admin_v1_GetConfigResponse, GetConfigResponse__Output as _lbd_admin_v1_GetConfigResponse__Output } from '../../../lbd/admin/v1/GetConfigResponse.js';
import type { GetHealthRequest as _lbd_admin_v1_GetHealthRequest, GetHealthRequest__Output as _lbd_admin_v1_GetHealthRequest__Output } from '../../../lbd/admin/v1/GetHealthRequest.js';
import type { GetHealthResponse as _lbd_admin_v1_GetHealthResponse, GetHealthResponse__Output as _lbd_admin_v1_GetHealthResponse__Output } from '../../../lbd/admin/v1/GetHealthResponse.js';
import type { GetStatsRequest as _lbd_admin_v1_GetStatsRequest, GetStatsRequest__Output as _lbd_admin_v1_GetStatsRequest__Output } from '../../../lbd/admin/v1/GetStatsRequest.js';
import type { GetStatsResponse as _lbd_admin_v1_GetStatsResponse, GetStatsResponse__Output as _lbd_admin_v1_GetStatsResponse__Output } from '../../../lbd/admin/v1/GetStatsResponse.js';
import type { GetStatusRequest as _lbd_admin_v1_GetStatusRequest, GetStatusRequest__Output as _lbd_admin_v1_GetStatusRequest__Output } from '../../../lbd/admin/v1/GetStatusRequest.js';
import type { GetStatusResponse as _lbd_admin_v1_GetStatusResponse, GetStatusResponse__Output as _lbd_admin_v1_GetStatusResponse__Output } from '../../../lbd/admin/v1/GetStatusResponse.js';
import type { HealthEvent as _lbd_admin_v1_HealthEvent, HealthEvent__Output as _lbd_admin_v1_HealthEvent__Output } from '../../../lbd/admin/v1/HealthEvent.js';
import type { ListConnectionsRequest as _lbd_admin_v1_ListConnectionsRequest, ListConnectionsRequest__Output as _lbd_admin_v1_ListConnectionsRequest__Output } from '../../../lbd/admin/v1/ListConnectionsRequest.js';
import type { ListConnectionsResponse as _lbd_admin_v1_ListConnectionsResponse, ListConnectionsResponse__Output as _lbd_admin_v1_ListConnectionsResponse__Output } from '../../../lbd/admin/v1/ListConnectionsResponse.js';
import type { ListEventsRequest as _lbd_admin_v1_ListEventsRequest, ListEventsRequest__Output as _lbd_admin_v1_ListEventsRequest__Output } from '../../../lbd/admin/v1/ListEventsRequest.js';
import type { RecordDrillRequest as _lbd_admin_v1_RecordDrillRequest, RecordDrillRequest__Output as _lbd_admin_v1_RecordDrillRequest__Output } from '../../../lbd/admin/v1/RecordDrillRequest.js';
import type { RecordDrillResponse as _lbd_admin_v1_RecordDrillResponse, RecordDrillResponse__Output as _lbd_admin_v1_RecordDrillResponse__Output } from '../../../lbd/admin/v1/RecordDrillResponse.js';
import type { RollbackRequest as _lbd_admin_v1_RollbackRequest, RollbackRequest__Output as _lbd_admin_v1_RollbackRequest__Output } from '../../../lbd/admin/v1/RollbackRequest.js';
import type { RollbackResponse as _lbd_admin_v1_RollbackResponse, RollbackResponse__Output as _lbd_admin_v1_RollbackResponse__Output } from '../../../lbd/admin/v1/RollbackResponse.js';
import type { RunDrillRequest as _lbd_admin_v1_RunDrillRequest, RunDrillRequest__Output as _lbd_admin_v1_RunDrillRequest__Output } from '../../../lbd/admin/v1/RunDrillRequest.js';
import type { WatchHealthRequest as _lbd_admin_v1_WatchHealthRequest, WatchHealthRequest__Output as _lbd_admin_v1_WatchHealthRequest__Output } from '../../../lbd/admin/v1/WatchHealthRequest.js';

export interface AdminClient extends grpc.Client {
  /**
   * Validates a config text and, unless dry_run, applies it and persists it to the agent's config file.
   * Sends exactly one ApplyResponse, then the status. An invalid config sends an ApplyResponse whose
   * `problems` lists every problem, then ends with INVALID_ARGUMENT (the status message repeats the
   * first problems in words); nothing is applied. It is a stream only for that: a unary call cannot
   * carry a message and an error status together, and trailing metadata (the other place for
   * structured errors) is capped near 64 KiB by HTTP/2 header limits, which a few hundred problems
   * exceed.
   */
  Apply(argument: _lbd_admin_v1_ApplyRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_lbd_admin_v1_ApplyResponse__Output>;
  Apply(argument: _lbd_admin_v1_ApplyRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_lbd_admin_v1_ApplyResponse__Output>;
  /**
   * Validates a config text and, unless dry_run, applies it and persists it to the agent's config file.
   * Sends exactly one ApplyResponse, then the status. An invalid config sends an ApplyResponse whose
   * `problems` lists every problem, then ends with INVALID_ARGUMENT (the status message repeats the
   * first problems in words); nothing is applied. It is a stream only for that: a unary call cannot
   * carry a message and an error status together, and trailing metadata (the other place for
   * structured errors) is capped near 64 KiB by HTTP/2 header limits, which a few hundred problems
   * exceed.
   */
  apply(argument: _lbd_admin_v1_ApplyRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_lbd_admin_v1_ApplyResponse__Output>;
  apply(argument: _lbd_admin_v1_ApplyRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_lbd_admin_v1_ApplyResponse__Output>;
  
  /**
   * Every accepted cluster config, oldest first.
   */
  ConfigHistory(argument: _lbd_admin_v1_ConfigHistoryRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_ConfigHistoryResponse__Output>): grpc.ClientUnaryCall;
  ConfigHistory(argument: _lbd_admin_v1_ConfigHistoryRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_ConfigHistoryResponse__Output>): grpc.ClientUnaryCall;
  ConfigHistory(argument: _lbd_admin_v1_ConfigHistoryRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_ConfigHistoryResponse__Output>): grpc.ClientUnaryCall;
  ConfigHistory(argument: _lbd_admin_v1_ConfigHistoryRequest, callback: grpc.requestCallback<_lbd_admin_v1_ConfigHistoryResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Every accepted cluster config, oldest first.
   */
  configHistory(argument: _lbd_admin_v1_ConfigHistoryRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_ConfigHistoryResponse__Output>): grpc.ClientUnaryCall;
  configHistory(argument: _lbd_admin_v1_ConfigHistoryRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_ConfigHistoryResponse__Output>): grpc.ClientUnaryCall;
  configHistory(argument: _lbd_admin_v1_ConfigHistoryRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_ConfigHistoryResponse__Output>): grpc.ClientUnaryCall;
  configHistory(argument: _lbd_admin_v1_ConfigHistoryRequest, callback: grpc.requestCallback<_lbd_admin_v1_ConfigHistoryResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Checks the director for known misconfigurations (the nat return path, forwarding, rp_filter,
   * conntrack table, fullnat port exhaustion, real server reachability).
   */
  Doctor(argument: _lbd_admin_v1_DoctorRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_DoctorResponse__Output>): grpc.ClientUnaryCall;
  Doctor(argument: _lbd_admin_v1_DoctorRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_DoctorResponse__Output>): grpc.ClientUnaryCall;
  Doctor(argument: _lbd_admin_v1_DoctorRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_DoctorResponse__Output>): grpc.ClientUnaryCall;
  Doctor(argument: _lbd_admin_v1_DoctorRequest, callback: grpc.requestCallback<_lbd_admin_v1_DoctorResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Checks the director for known misconfigurations (the nat return path, forwarding, rp_filter,
   * conntrack table, fullnat port exhaustion, real server reachability).
   */
  doctor(argument: _lbd_admin_v1_DoctorRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_DoctorResponse__Output>): grpc.ClientUnaryCall;
  doctor(argument: _lbd_admin_v1_DoctorRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_DoctorResponse__Output>): grpc.ClientUnaryCall;
  doctor(argument: _lbd_admin_v1_DoctorRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_DoctorResponse__Output>): grpc.ClientUnaryCall;
  doctor(argument: _lbd_admin_v1_DoctorRequest, callback: grpc.requestCallback<_lbd_admin_v1_DoctorResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Planned switchover of a vip group: the leader releases, then names the target, which claims at
   * once. FAILED_PRECONDITION (with the reason) when the target cannot take it.
   */
  Failover(argument: _lbd_admin_v1_FailoverRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_FailoverResponse__Output>): grpc.ClientUnaryCall;
  Failover(argument: _lbd_admin_v1_FailoverRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_FailoverResponse__Output>): grpc.ClientUnaryCall;
  Failover(argument: _lbd_admin_v1_FailoverRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_FailoverResponse__Output>): grpc.ClientUnaryCall;
  Failover(argument: _lbd_admin_v1_FailoverRequest, callback: grpc.requestCallback<_lbd_admin_v1_FailoverResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Planned switchover of a vip group: the leader releases, then names the target, which claims at
   * once. FAILED_PRECONDITION (with the reason) when the target cannot take it.
   */
  failover(argument: _lbd_admin_v1_FailoverRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_FailoverResponse__Output>): grpc.ClientUnaryCall;
  failover(argument: _lbd_admin_v1_FailoverRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_FailoverResponse__Output>): grpc.ClientUnaryCall;
  failover(argument: _lbd_admin_v1_FailoverRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_FailoverResponse__Output>): grpc.ClientUnaryCall;
  failover(argument: _lbd_admin_v1_FailoverRequest, callback: grpc.requestCallback<_lbd_admin_v1_FailoverResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * The cluster as this director sees it: directors, their health and role per vip group, who leads each
   * group and why, etcd's health and the computed worst-case takeover. A director without
   * agent.cluster answers with clustered = false.
   */
  GetClusterStatus(argument: _lbd_admin_v1_GetClusterStatusRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_ClusterStatus__Output>): grpc.ClientUnaryCall;
  GetClusterStatus(argument: _lbd_admin_v1_GetClusterStatusRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_ClusterStatus__Output>): grpc.ClientUnaryCall;
  GetClusterStatus(argument: _lbd_admin_v1_GetClusterStatusRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_ClusterStatus__Output>): grpc.ClientUnaryCall;
  GetClusterStatus(argument: _lbd_admin_v1_GetClusterStatusRequest, callback: grpc.requestCallback<_lbd_admin_v1_ClusterStatus__Output>): grpc.ClientUnaryCall;
  /**
   * The cluster as this director sees it: directors, their health and role per vip group, who leads each
   * group and why, etcd's health and the computed worst-case takeover. A director without
   * agent.cluster answers with clustered = false.
   */
  getClusterStatus(argument: _lbd_admin_v1_GetClusterStatusRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_ClusterStatus__Output>): grpc.ClientUnaryCall;
  getClusterStatus(argument: _lbd_admin_v1_GetClusterStatusRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_ClusterStatus__Output>): grpc.ClientUnaryCall;
  getClusterStatus(argument: _lbd_admin_v1_GetClusterStatusRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_ClusterStatus__Output>): grpc.ClientUnaryCall;
  getClusterStatus(argument: _lbd_admin_v1_GetClusterStatusRequest, callback: grpc.requestCallback<_lbd_admin_v1_ClusterStatus__Output>): grpc.ClientUnaryCall;
  
  /**
   * The running config's text and revision, for a client that edits it and applies the result with
   * check_revision (compare-and-swap): lbadm server / service. In a cluster, the cluster config in etcd
   * (text empty and revision 0 before the first apply); alone, the text of the config this director runs.
   */
  GetConfig(argument: _lbd_admin_v1_GetConfigRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_GetConfigResponse__Output>): grpc.ClientUnaryCall;
  GetConfig(argument: _lbd_admin_v1_GetConfigRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_GetConfigResponse__Output>): grpc.ClientUnaryCall;
  GetConfig(argument: _lbd_admin_v1_GetConfigRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_GetConfigResponse__Output>): grpc.ClientUnaryCall;
  GetConfig(argument: _lbd_admin_v1_GetConfigRequest, callback: grpc.requestCallback<_lbd_admin_v1_GetConfigResponse__Output>): grpc.ClientUnaryCall;
  /**
   * The running config's text and revision, for a client that edits it and applies the result with
   * check_revision (compare-and-swap): lbadm server / service. In a cluster, the cluster config in etcd
   * (text empty and revision 0 before the first apply); alone, the text of the config this director runs.
   */
  getConfig(argument: _lbd_admin_v1_GetConfigRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_GetConfigResponse__Output>): grpc.ClientUnaryCall;
  getConfig(argument: _lbd_admin_v1_GetConfigRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_GetConfigResponse__Output>): grpc.ClientUnaryCall;
  getConfig(argument: _lbd_admin_v1_GetConfigRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_GetConfigResponse__Output>): grpc.ClientUnaryCall;
  getConfig(argument: _lbd_admin_v1_GetConfigRequest, callback: grpc.requestCallback<_lbd_admin_v1_GetConfigResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Every checked real server of every service (or of one): its check, health state and last result,
   * plus the health scheduler's figures.
   */
  GetHealth(argument: _lbd_admin_v1_GetHealthRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_GetHealthResponse__Output>): grpc.ClientUnaryCall;
  GetHealth(argument: _lbd_admin_v1_GetHealthRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_GetHealthResponse__Output>): grpc.ClientUnaryCall;
  GetHealth(argument: _lbd_admin_v1_GetHealthRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_GetHealthResponse__Output>): grpc.ClientUnaryCall;
  GetHealth(argument: _lbd_admin_v1_GetHealthRequest, callback: grpc.requestCallback<_lbd_admin_v1_GetHealthResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Every checked real server of every service (or of one): its check, health state and last result,
   * plus the health scheduler's figures.
   */
  getHealth(argument: _lbd_admin_v1_GetHealthRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_GetHealthResponse__Output>): grpc.ClientUnaryCall;
  getHealth(argument: _lbd_admin_v1_GetHealthRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_GetHealthResponse__Output>): grpc.ClientUnaryCall;
  getHealth(argument: _lbd_admin_v1_GetHealthRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_GetHealthResponse__Output>): grpc.ClientUnaryCall;
  getHealth(argument: _lbd_admin_v1_GetHealthRequest, callback: grpc.requestCallback<_lbd_admin_v1_GetHealthResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Packet, byte and connection counts per service and real server, with the time they were sampled,
   * so a client computes rates from two samples.
   */
  GetStats(argument: _lbd_admin_v1_GetStatsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_GetStatsResponse__Output>): grpc.ClientUnaryCall;
  GetStats(argument: _lbd_admin_v1_GetStatsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_GetStatsResponse__Output>): grpc.ClientUnaryCall;
  GetStats(argument: _lbd_admin_v1_GetStatsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_GetStatsResponse__Output>): grpc.ClientUnaryCall;
  GetStats(argument: _lbd_admin_v1_GetStatsRequest, callback: grpc.requestCallback<_lbd_admin_v1_GetStatsResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Packet, byte and connection counts per service and real server, with the time they were sampled,
   * so a client computes rates from two samples.
   */
  getStats(argument: _lbd_admin_v1_GetStatsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_GetStatsResponse__Output>): grpc.ClientUnaryCall;
  getStats(argument: _lbd_admin_v1_GetStatsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_GetStatsResponse__Output>): grpc.ClientUnaryCall;
  getStats(argument: _lbd_admin_v1_GetStatsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_GetStatsResponse__Output>): grpc.ClientUnaryCall;
  getStats(argument: _lbd_admin_v1_GetStatsRequest, callback: grpc.requestCallback<_lbd_admin_v1_GetStatsResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Services and real servers as configured, joined with what the kernel has and live connection counts
   * (ipvsadm -Ln), plus which config the agent runs and how its last apply went.
   */
  GetStatus(argument: _lbd_admin_v1_GetStatusRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  GetStatus(argument: _lbd_admin_v1_GetStatusRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  GetStatus(argument: _lbd_admin_v1_GetStatusRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  GetStatus(argument: _lbd_admin_v1_GetStatusRequest, callback: grpc.requestCallback<_lbd_admin_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Services and real servers as configured, joined with what the kernel has and live connection counts
   * (ipvsadm -Ln), plus which config the agent runs and how its last apply went.
   */
  getStatus(argument: _lbd_admin_v1_GetStatusRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  getStatus(argument: _lbd_admin_v1_GetStatusRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  getStatus(argument: _lbd_admin_v1_GetStatusRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  getStatus(argument: _lbd_admin_v1_GetStatusRequest, callback: grpc.requestCallback<_lbd_admin_v1_GetStatusResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * lbd's conntrack entries (ipvsadm -Lnc). Streamed in batches: a busy director has millions.
   */
  ListConnections(argument: _lbd_admin_v1_ListConnectionsRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_lbd_admin_v1_ListConnectionsResponse__Output>;
  ListConnections(argument: _lbd_admin_v1_ListConnectionsRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_lbd_admin_v1_ListConnectionsResponse__Output>;
  /**
   * lbd's conntrack entries (ipvsadm -Lnc). Streamed in batches: a busy director has millions.
   */
  listConnections(argument: _lbd_admin_v1_ListConnectionsRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_lbd_admin_v1_ListConnectionsResponse__Output>;
  listConnections(argument: _lbd_admin_v1_ListConnectionsRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_lbd_admin_v1_ListConnectionsResponse__Output>;
  
  /**
   * The event log: every transition (vip group role, floating address, real-server health, config
   * apply, connection-sync stream, drill, admin operation) with its reason, oldest first. scope
   * "local" reads this director's history (its last 2000), "cluster" the cluster's in etcd (every
   * director's last 5000; a director without agent.cluster answers with its local history). With
   * follow, new events follow as they happen until the client cancels; the agent ends the stream
   * with RESOURCE_EXHAUSTED when the client reads too slowly to keep up, and with UNAVAILABLE when
   * etcd cannot be read for the cluster scope.
   */
  ListEvents(argument: _lbd_admin_v1_ListEventsRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_lbd_admin_v1_Event__Output>;
  ListEvents(argument: _lbd_admin_v1_ListEventsRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_lbd_admin_v1_Event__Output>;
  /**
   * The event log: every transition (vip group role, floating address, real-server health, config
   * apply, connection-sync stream, drill, admin operation) with its reason, oldest first. scope
   * "local" reads this director's history (its last 2000), "cluster" the cluster's in etcd (every
   * director's last 5000; a director without agent.cluster answers with its local history). With
   * follow, new events follow as they happen until the client cancels; the agent ends the stream
   * with RESOURCE_EXHAUSTED when the client reads too slowly to keep up, and with UNAVAILABLE when
   * etcd cannot be read for the cluster scope.
   */
  listEvents(argument: _lbd_admin_v1_ListEventsRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_lbd_admin_v1_Event__Output>;
  listEvents(argument: _lbd_admin_v1_ListEventsRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_lbd_admin_v1_Event__Output>;
  
  /**
   * Stores a drill's result as a "drill" event (the lab's drills and lbadm drill call it after each run). Write role.
   */
  RecordDrill(argument: _lbd_admin_v1_RecordDrillRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_RecordDrillResponse__Output>): grpc.ClientUnaryCall;
  RecordDrill(argument: _lbd_admin_v1_RecordDrillRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_RecordDrillResponse__Output>): grpc.ClientUnaryCall;
  RecordDrill(argument: _lbd_admin_v1_RecordDrillRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_RecordDrillResponse__Output>): grpc.ClientUnaryCall;
  RecordDrill(argument: _lbd_admin_v1_RecordDrillRequest, callback: grpc.requestCallback<_lbd_admin_v1_RecordDrillResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Stores a drill's result as a "drill" event (the lab's drills and lbadm drill call it after each run). Write role.
   */
  recordDrill(argument: _lbd_admin_v1_RecordDrillRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_RecordDrillResponse__Output>): grpc.ClientUnaryCall;
  recordDrill(argument: _lbd_admin_v1_RecordDrillRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_RecordDrillResponse__Output>): grpc.ClientUnaryCall;
  recordDrill(argument: _lbd_admin_v1_RecordDrillRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_RecordDrillResponse__Output>): grpc.ClientUnaryCall;
  recordDrill(argument: _lbd_admin_v1_RecordDrillRequest, callback: grpc.requestCallback<_lbd_admin_v1_RecordDrillResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Writes an earlier cluster config again, as a new revision (swapped on the current revision like
   * any apply).
   */
  Rollback(argument: _lbd_admin_v1_RollbackRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_RollbackResponse__Output>): grpc.ClientUnaryCall;
  Rollback(argument: _lbd_admin_v1_RollbackRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_RollbackResponse__Output>): grpc.ClientUnaryCall;
  Rollback(argument: _lbd_admin_v1_RollbackRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_RollbackResponse__Output>): grpc.ClientUnaryCall;
  Rollback(argument: _lbd_admin_v1_RollbackRequest, callback: grpc.requestCallback<_lbd_admin_v1_RollbackResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Writes an earlier cluster config again, as a new revision (swapped on the current revision like
   * any apply).
   */
  rollback(argument: _lbd_admin_v1_RollbackRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_RollbackResponse__Output>): grpc.ClientUnaryCall;
  rollback(argument: _lbd_admin_v1_RollbackRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_RollbackResponse__Output>): grpc.ClientUnaryCall;
  rollback(argument: _lbd_admin_v1_RollbackRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_RollbackResponse__Output>): grpc.ClientUnaryCall;
  rollback(argument: _lbd_admin_v1_RollbackRequest, callback: grpc.requestCallback<_lbd_admin_v1_RollbackResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Runs a drill that is safe on live directors: "switchover" moves a vip group (or an ECMP slot, group
   * slot-N) to another director and back, and measures each move from both directors: how long no one
   * held the group's addresses, the established connections the new holder lacked, and the connections
   * too young to have been copied that the move caught. Takes as long as the two moves and their sync (seconds). The caller records the
   * result (RecordDrill), with what its own probe saw. FAILED_PRECONDITION when a move is refused. Write role.
   */
  RunDrill(argument: _lbd_admin_v1_RunDrillRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_DrillResult__Output>): grpc.ClientUnaryCall;
  RunDrill(argument: _lbd_admin_v1_RunDrillRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_DrillResult__Output>): grpc.ClientUnaryCall;
  RunDrill(argument: _lbd_admin_v1_RunDrillRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_DrillResult__Output>): grpc.ClientUnaryCall;
  RunDrill(argument: _lbd_admin_v1_RunDrillRequest, callback: grpc.requestCallback<_lbd_admin_v1_DrillResult__Output>): grpc.ClientUnaryCall;
  /**
   * Runs a drill that is safe on live directors: "switchover" moves a vip group (or an ECMP slot, group
   * slot-N) to another director and back, and measures each move from both directors: how long no one
   * held the group's addresses, the established connections the new holder lacked, and the connections
   * too young to have been copied that the move caught. Takes as long as the two moves and their sync (seconds). The caller records the
   * result (RecordDrill), with what its own probe saw. FAILED_PRECONDITION when a move is refused. Write role.
   */
  runDrill(argument: _lbd_admin_v1_RunDrillRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_DrillResult__Output>): grpc.ClientUnaryCall;
  runDrill(argument: _lbd_admin_v1_RunDrillRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_admin_v1_DrillResult__Output>): grpc.ClientUnaryCall;
  runDrill(argument: _lbd_admin_v1_RunDrillRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_admin_v1_DrillResult__Output>): grpc.ClientUnaryCall;
  runDrill(argument: _lbd_admin_v1_RunDrillRequest, callback: grpc.requestCallback<_lbd_admin_v1_DrillResult__Output>): grpc.ClientUnaryCall;
  
  /**
   * Health transitions: first those in the agent's history (its last 1000) at or after
   * since_unix_ms, then each new one as it happens. The stream stays open until the client cancels
   * it; the agent ends it when it shuts down, and ends it with RESOURCE_EXHAUSTED when the client
   * reads too slowly to keep up.
   */
  WatchHealth(argument: _lbd_admin_v1_WatchHealthRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_lbd_admin_v1_HealthEvent__Output>;
  WatchHealth(argument: _lbd_admin_v1_WatchHealthRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_lbd_admin_v1_HealthEvent__Output>;
  /**
   * Health transitions: first those in the agent's history (its last 1000) at or after
   * since_unix_ms, then each new one as it happens. The stream stays open until the client cancels
   * it; the agent ends it when it shuts down, and ends it with RESOURCE_EXHAUSTED when the client
   * reads too slowly to keep up.
   */
  watchHealth(argument: _lbd_admin_v1_WatchHealthRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_lbd_admin_v1_HealthEvent__Output>;
  watchHealth(argument: _lbd_admin_v1_WatchHealthRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_lbd_admin_v1_HealthEvent__Output>;
  
}

export interface AdminHandlers extends grpc.UntypedServiceImplementation {
  /**
   * Validates a config text and, unless dry_run, applies it and persists it to the agent's config file.
   * Sends exactly one ApplyResponse, then the status. An invalid config sends an ApplyResponse whose
   * `problems` lists every problem, then ends with INVALID_ARGUMENT (the status message repeats the
   * first problems in words); nothing is applied. It is a stream only for that: a unary call cannot
   * carry a message and an error status together, and trailing metadata (the other place for
   * structured errors) is capped near 64 KiB by HTTP/2 header limits, which a few hundred problems
   * exceed.
   */
  Apply: grpc.handleServerStreamingCall<_lbd_admin_v1_ApplyRequest__Output, _lbd_admin_v1_ApplyResponse>;
  
  /**
   * Every accepted cluster config, oldest first.
   */
  ConfigHistory: grpc.handleUnaryCall<_lbd_admin_v1_ConfigHistoryRequest__Output, _lbd_admin_v1_ConfigHistoryResponse>;
  
  /**
   * Checks the director for known misconfigurations (the nat return path, forwarding, rp_filter,
   * conntrack table, fullnat port exhaustion, real server reachability).
   */
  Doctor: grpc.handleUnaryCall<_lbd_admin_v1_DoctorRequest__Output, _lbd_admin_v1_DoctorResponse>;
  
  /**
   * Planned switchover of a vip group: the leader releases, then names the target, which claims at
   * once. FAILED_PRECONDITION (with the reason) when the target cannot take it.
   */
  Failover: grpc.handleUnaryCall<_lbd_admin_v1_FailoverRequest__Output, _lbd_admin_v1_FailoverResponse>;
  
  /**
   * The cluster as this director sees it: directors, their health and role per vip group, who leads each
   * group and why, etcd's health and the computed worst-case takeover. A director without
   * agent.cluster answers with clustered = false.
   */
  GetClusterStatus: grpc.handleUnaryCall<_lbd_admin_v1_GetClusterStatusRequest__Output, _lbd_admin_v1_ClusterStatus>;
  
  /**
   * The running config's text and revision, for a client that edits it and applies the result with
   * check_revision (compare-and-swap): lbadm server / service. In a cluster, the cluster config in etcd
   * (text empty and revision 0 before the first apply); alone, the text of the config this director runs.
   */
  GetConfig: grpc.handleUnaryCall<_lbd_admin_v1_GetConfigRequest__Output, _lbd_admin_v1_GetConfigResponse>;
  
  /**
   * Every checked real server of every service (or of one): its check, health state and last result,
   * plus the health scheduler's figures.
   */
  GetHealth: grpc.handleUnaryCall<_lbd_admin_v1_GetHealthRequest__Output, _lbd_admin_v1_GetHealthResponse>;
  
  /**
   * Packet, byte and connection counts per service and real server, with the time they were sampled,
   * so a client computes rates from two samples.
   */
  GetStats: grpc.handleUnaryCall<_lbd_admin_v1_GetStatsRequest__Output, _lbd_admin_v1_GetStatsResponse>;
  
  /**
   * Services and real servers as configured, joined with what the kernel has and live connection counts
   * (ipvsadm -Ln), plus which config the agent runs and how its last apply went.
   */
  GetStatus: grpc.handleUnaryCall<_lbd_admin_v1_GetStatusRequest__Output, _lbd_admin_v1_GetStatusResponse>;
  
  /**
   * lbd's conntrack entries (ipvsadm -Lnc). Streamed in batches: a busy director has millions.
   */
  ListConnections: grpc.handleServerStreamingCall<_lbd_admin_v1_ListConnectionsRequest__Output, _lbd_admin_v1_ListConnectionsResponse>;
  
  /**
   * The event log: every transition (vip group role, floating address, real-server health, config
   * apply, connection-sync stream, drill, admin operation) with its reason, oldest first. scope
   * "local" reads this director's history (its last 2000), "cluster" the cluster's in etcd (every
   * director's last 5000; a director without agent.cluster answers with its local history). With
   * follow, new events follow as they happen until the client cancels; the agent ends the stream
   * with RESOURCE_EXHAUSTED when the client reads too slowly to keep up, and with UNAVAILABLE when
   * etcd cannot be read for the cluster scope.
   */
  ListEvents: grpc.handleServerStreamingCall<_lbd_admin_v1_ListEventsRequest__Output, _lbd_admin_v1_Event>;
  
  /**
   * Stores a drill's result as a "drill" event (the lab's drills and lbadm drill call it after each run). Write role.
   */
  RecordDrill: grpc.handleUnaryCall<_lbd_admin_v1_RecordDrillRequest__Output, _lbd_admin_v1_RecordDrillResponse>;
  
  /**
   * Writes an earlier cluster config again, as a new revision (swapped on the current revision like
   * any apply).
   */
  Rollback: grpc.handleUnaryCall<_lbd_admin_v1_RollbackRequest__Output, _lbd_admin_v1_RollbackResponse>;
  
  /**
   * Runs a drill that is safe on live directors: "switchover" moves a vip group (or an ECMP slot, group
   * slot-N) to another director and back, and measures each move from both directors: how long no one
   * held the group's addresses, the established connections the new holder lacked, and the connections
   * too young to have been copied that the move caught. Takes as long as the two moves and their sync (seconds). The caller records the
   * result (RecordDrill), with what its own probe saw. FAILED_PRECONDITION when a move is refused. Write role.
   */
  RunDrill: grpc.handleUnaryCall<_lbd_admin_v1_RunDrillRequest__Output, _lbd_admin_v1_DrillResult>;
  
  /**
   * Health transitions: first those in the agent's history (its last 1000) at or after
   * since_unix_ms, then each new one as it happens. The stream stays open until the client cancels
   * it; the agent ends it when it shuts down, and ends it with RESOURCE_EXHAUSTED when the client
   * reads too slowly to keep up.
   */
  WatchHealth: grpc.handleServerStreamingCall<_lbd_admin_v1_WatchHealthRequest__Output, _lbd_admin_v1_HealthEvent>;
  
}

export interface AdminDefinition extends grpc.ServiceDefinition {
  Apply: MethodDefinition<_lbd_admin_v1_ApplyRequest, _lbd_admin_v1_ApplyResponse, _lbd_admin_v1_ApplyRequest__Output, _lbd_admin_v1_ApplyResponse__Output>
  ConfigHistory: MethodDefinition<_lbd_admin_v1_ConfigHistoryRequest, _lbd_admin_v1_ConfigHistoryResponse, _lbd_admin_v1_ConfigHistoryRequest__Output, _lbd_admin_v1_ConfigHistoryResponse__Output>
  Doctor: MethodDefinition<_lbd_admin_v1_DoctorRequest, _lbd_admin_v1_DoctorResponse, _lbd_admin_v1_DoctorRequest__Output, _lbd_admin_v1_DoctorResponse__Output>
  Failover: MethodDefinition<_lbd_admin_v1_FailoverRequest, _lbd_admin_v1_FailoverResponse, _lbd_admin_v1_FailoverRequest__Output, _lbd_admin_v1_FailoverResponse__Output>
  GetClusterStatus: MethodDefinition<_lbd_admin_v1_GetClusterStatusRequest, _lbd_admin_v1_ClusterStatus, _lbd_admin_v1_GetClusterStatusRequest__Output, _lbd_admin_v1_ClusterStatus__Output>
  GetConfig: MethodDefinition<_lbd_admin_v1_GetConfigRequest, _lbd_admin_v1_GetConfigResponse, _lbd_admin_v1_GetConfigRequest__Output, _lbd_admin_v1_GetConfigResponse__Output>
  GetHealth: MethodDefinition<_lbd_admin_v1_GetHealthRequest, _lbd_admin_v1_GetHealthResponse, _lbd_admin_v1_GetHealthRequest__Output, _lbd_admin_v1_GetHealthResponse__Output>
  GetStats: MethodDefinition<_lbd_admin_v1_GetStatsRequest, _lbd_admin_v1_GetStatsResponse, _lbd_admin_v1_GetStatsRequest__Output, _lbd_admin_v1_GetStatsResponse__Output>
  GetStatus: MethodDefinition<_lbd_admin_v1_GetStatusRequest, _lbd_admin_v1_GetStatusResponse, _lbd_admin_v1_GetStatusRequest__Output, _lbd_admin_v1_GetStatusResponse__Output>
  ListConnections: MethodDefinition<_lbd_admin_v1_ListConnectionsRequest, _lbd_admin_v1_ListConnectionsResponse, _lbd_admin_v1_ListConnectionsRequest__Output, _lbd_admin_v1_ListConnectionsResponse__Output>
  ListEvents: MethodDefinition<_lbd_admin_v1_ListEventsRequest, _lbd_admin_v1_Event, _lbd_admin_v1_ListEventsRequest__Output, _lbd_admin_v1_Event__Output>
  RecordDrill: MethodDefinition<_lbd_admin_v1_RecordDrillRequest, _lbd_admin_v1_RecordDrillResponse, _lbd_admin_v1_RecordDrillRequest__Output, _lbd_admin_v1_RecordDrillResponse__Output>
  Rollback: MethodDefinition<_lbd_admin_v1_RollbackRequest, _lbd_admin_v1_RollbackResponse, _lbd_admin_v1_RollbackRequest__Output, _lbd_admin_v1_RollbackResponse__Output>
  RunDrill: MethodDefinition<_lbd_admin_v1_RunDrillRequest, _lbd_admin_v1_DrillResult, _lbd_admin_v1_RunDrillRequest__Output, _lbd_admin_v1_DrillResult__Output>
  WatchHealth: MethodDefinition<_lbd_admin_v1_WatchHealthRequest, _lbd_admin_v1_HealthEvent, _lbd_admin_v1_WatchHealthRequest__Output, _lbd_admin_v1_HealthEvent__Output>
}
