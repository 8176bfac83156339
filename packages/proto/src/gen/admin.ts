// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
import type * as grpc from '@grpc/grpc-js';
import type { MessageTypeDefinition } from '@grpc/proto-loader';

import type { AddressRange as _lbd_admin_v1_AddressRange, AddressRange__Output as _lbd_admin_v1_AddressRange__Output } from './lbd/admin/v1/AddressRange.js';
import type { AdminClient as _lbd_admin_v1_AdminClient, AdminDefinition as _lbd_admin_v1_AdminDefinition } from './lbd/admin/v1/Admin.js';
import type { AgentInfo as _lbd_admin_v1_AgentInfo, AgentInfo__Output as _lbd_admin_v1_AgentInfo__Output } from './lbd/admin/v1/AgentInfo.js';
import type { ApplyRecord as _lbd_admin_v1_ApplyRecord, ApplyRecord__Output as _lbd_admin_v1_ApplyRecord__Output } from './lbd/admin/v1/ApplyRecord.js';
import type { ApplyRequest as _lbd_admin_v1_ApplyRequest, ApplyRequest__Output as _lbd_admin_v1_ApplyRequest__Output } from './lbd/admin/v1/ApplyRequest.js';
import type { ApplyResponse as _lbd_admin_v1_ApplyResponse, ApplyResponse__Output as _lbd_admin_v1_ApplyResponse__Output } from './lbd/admin/v1/ApplyResponse.js';
import type { BgpSessionStatus as _lbd_admin_v1_BgpSessionStatus, BgpSessionStatus__Output as _lbd_admin_v1_BgpSessionStatus__Output } from './lbd/admin/v1/BgpSessionStatus.js';
import type { ClusterStatus as _lbd_admin_v1_ClusterStatus, ClusterStatus__Output as _lbd_admin_v1_ClusterStatus__Output } from './lbd/admin/v1/ClusterStatus.js';
import type { ConfigHistoryRequest as _lbd_admin_v1_ConfigHistoryRequest, ConfigHistoryRequest__Output as _lbd_admin_v1_ConfigHistoryRequest__Output } from './lbd/admin/v1/ConfigHistoryRequest.js';
import type { ConfigHistoryResponse as _lbd_admin_v1_ConfigHistoryResponse, ConfigHistoryResponse__Output as _lbd_admin_v1_ConfigHistoryResponse__Output } from './lbd/admin/v1/ConfigHistoryResponse.js';
import type { ConfigVersion as _lbd_admin_v1_ConfigVersion, ConfigVersion__Output as _lbd_admin_v1_ConfigVersion__Output } from './lbd/admin/v1/ConfigVersion.js';
import type { ConnSyncPeer as _lbd_admin_v1_ConnSyncPeer, ConnSyncPeer__Output as _lbd_admin_v1_ConnSyncPeer__Output } from './lbd/admin/v1/ConnSyncPeer.js';
import type { ConnSyncStatus as _lbd_admin_v1_ConnSyncStatus, ConnSyncStatus__Output as _lbd_admin_v1_ConnSyncStatus__Output } from './lbd/admin/v1/ConnSyncStatus.js';
import type { Connection as _lbd_admin_v1_Connection, Connection__Output as _lbd_admin_v1_Connection__Output } from './lbd/admin/v1/Connection.js';
import type { Counters as _lbd_admin_v1_Counters, Counters__Output as _lbd_admin_v1_Counters__Output } from './lbd/admin/v1/Counters.js';
import type { DirectorGroup as _lbd_admin_v1_DirectorGroup, DirectorGroup__Output as _lbd_admin_v1_DirectorGroup__Output } from './lbd/admin/v1/DirectorGroup.js';
import type { DirectorStatus as _lbd_admin_v1_DirectorStatus, DirectorStatus__Output as _lbd_admin_v1_DirectorStatus__Output } from './lbd/admin/v1/DirectorStatus.js';
import type { DoctorRequest as _lbd_admin_v1_DoctorRequest, DoctorRequest__Output as _lbd_admin_v1_DoctorRequest__Output } from './lbd/admin/v1/DoctorRequest.js';
import type { DoctorResponse as _lbd_admin_v1_DoctorResponse, DoctorResponse__Output as _lbd_admin_v1_DoctorResponse__Output } from './lbd/admin/v1/DoctorResponse.js';
import type { DrillMove as _lbd_admin_v1_DrillMove, DrillMove__Output as _lbd_admin_v1_DrillMove__Output } from './lbd/admin/v1/DrillMove.js';
import type { DrillResult as _lbd_admin_v1_DrillResult, DrillResult__Output as _lbd_admin_v1_DrillResult__Output } from './lbd/admin/v1/DrillResult.js';
import type { EcmpStatus as _lbd_admin_v1_EcmpStatus, EcmpStatus__Output as _lbd_admin_v1_EcmpStatus__Output } from './lbd/admin/v1/EcmpStatus.js';
import type { Event as _lbd_admin_v1_Event, Event__Output as _lbd_admin_v1_Event__Output } from './lbd/admin/v1/Event.js';
import type { FailoverRequest as _lbd_admin_v1_FailoverRequest, FailoverRequest__Output as _lbd_admin_v1_FailoverRequest__Output } from './lbd/admin/v1/FailoverRequest.js';
import type { FailoverResponse as _lbd_admin_v1_FailoverResponse, FailoverResponse__Output as _lbd_admin_v1_FailoverResponse__Output } from './lbd/admin/v1/FailoverResponse.js';
import type { Finding as _lbd_admin_v1_Finding, Finding__Output as _lbd_admin_v1_Finding__Output } from './lbd/admin/v1/Finding.js';
import type { GetClusterStatusRequest as _lbd_admin_v1_GetClusterStatusRequest, GetClusterStatusRequest__Output as _lbd_admin_v1_GetClusterStatusRequest__Output } from './lbd/admin/v1/GetClusterStatusRequest.js';
import type { GetConfigRequest as _lbd_admin_v1_GetConfigRequest, GetConfigRequest__Output as _lbd_admin_v1_GetConfigRequest__Output } from './lbd/admin/v1/GetConfigRequest.js';
import type { GetConfigResponse as _lbd_admin_v1_GetConfigResponse, GetConfigResponse__Output as _lbd_admin_v1_GetConfigResponse__Output } from './lbd/admin/v1/GetConfigResponse.js';
import type { GetHealthRequest as _lbd_admin_v1_GetHealthRequest, GetHealthRequest__Output as _lbd_admin_v1_GetHealthRequest__Output } from './lbd/admin/v1/GetHealthRequest.js';
import type { GetHealthResponse as _lbd_admin_v1_GetHealthResponse, GetHealthResponse__Output as _lbd_admin_v1_GetHealthResponse__Output } from './lbd/admin/v1/GetHealthResponse.js';
import type { GetStatsRequest as _lbd_admin_v1_GetStatsRequest, GetStatsRequest__Output as _lbd_admin_v1_GetStatsRequest__Output } from './lbd/admin/v1/GetStatsRequest.js';
import type { GetStatsResponse as _lbd_admin_v1_GetStatsResponse, GetStatsResponse__Output as _lbd_admin_v1_GetStatsResponse__Output } from './lbd/admin/v1/GetStatsResponse.js';
import type { GetStatusRequest as _lbd_admin_v1_GetStatusRequest, GetStatusRequest__Output as _lbd_admin_v1_GetStatusRequest__Output } from './lbd/admin/v1/GetStatusRequest.js';
import type { GetStatusResponse as _lbd_admin_v1_GetStatusResponse, GetStatusResponse__Output as _lbd_admin_v1_GetStatusResponse__Output } from './lbd/admin/v1/GetStatusResponse.js';
import type { GroupStatus as _lbd_admin_v1_GroupStatus, GroupStatus__Output as _lbd_admin_v1_GroupStatus__Output } from './lbd/admin/v1/GroupStatus.js';
import type { HealthCheckInfo as _lbd_admin_v1_HealthCheckInfo, HealthCheckInfo__Output as _lbd_admin_v1_HealthCheckInfo__Output } from './lbd/admin/v1/HealthCheckInfo.js';
import type { HealthEvent as _lbd_admin_v1_HealthEvent, HealthEvent__Output as _lbd_admin_v1_HealthEvent__Output } from './lbd/admin/v1/HealthEvent.js';
import type { HealthSchedulerStats as _lbd_admin_v1_HealthSchedulerStats, HealthSchedulerStats__Output as _lbd_admin_v1_HealthSchedulerStats__Output } from './lbd/admin/v1/HealthSchedulerStats.js';
import type { ListConnectionsRequest as _lbd_admin_v1_ListConnectionsRequest, ListConnectionsRequest__Output as _lbd_admin_v1_ListConnectionsRequest__Output } from './lbd/admin/v1/ListConnectionsRequest.js';
import type { ListConnectionsResponse as _lbd_admin_v1_ListConnectionsResponse, ListConnectionsResponse__Output as _lbd_admin_v1_ListConnectionsResponse__Output } from './lbd/admin/v1/ListConnectionsResponse.js';
import type { ListEventsRequest as _lbd_admin_v1_ListEventsRequest, ListEventsRequest__Output as _lbd_admin_v1_ListEventsRequest__Output } from './lbd/admin/v1/ListEventsRequest.js';
import type { ProbeResultInfo as _lbd_admin_v1_ProbeResultInfo, ProbeResultInfo__Output as _lbd_admin_v1_ProbeResultInfo__Output } from './lbd/admin/v1/ProbeResultInfo.js';
import type { Problem as _lbd_admin_v1_Problem, Problem__Output as _lbd_admin_v1_Problem__Output } from './lbd/admin/v1/Problem.js';
import type { RealServerHealth as _lbd_admin_v1_RealServerHealth, RealServerHealth__Output as _lbd_admin_v1_RealServerHealth__Output } from './lbd/admin/v1/RealServerHealth.js';
import type { RealServerStats as _lbd_admin_v1_RealServerStats, RealServerStats__Output as _lbd_admin_v1_RealServerStats__Output } from './lbd/admin/v1/RealServerStats.js';
import type { RealServerStatus as _lbd_admin_v1_RealServerStatus, RealServerStatus__Output as _lbd_admin_v1_RealServerStatus__Output } from './lbd/admin/v1/RealServerStatus.js';
import type { RecordDrillRequest as _lbd_admin_v1_RecordDrillRequest, RecordDrillRequest__Output as _lbd_admin_v1_RecordDrillRequest__Output } from './lbd/admin/v1/RecordDrillRequest.js';
import type { RecordDrillResponse as _lbd_admin_v1_RecordDrillResponse, RecordDrillResponse__Output as _lbd_admin_v1_RecordDrillResponse__Output } from './lbd/admin/v1/RecordDrillResponse.js';
import type { RollbackRequest as _lbd_admin_v1_RollbackRequest, RollbackRequest__Output as _lbd_admin_v1_RollbackRequest__Output } from './lbd/admin/v1/RollbackRequest.js';
import type { RollbackResponse as _lbd_admin_v1_RollbackResponse, RollbackResponse__Output as _lbd_admin_v1_RollbackResponse__Output } from './lbd/admin/v1/RollbackResponse.js';
import type { RunDrillRequest as _lbd_admin_v1_RunDrillRequest, RunDrillRequest__Output as _lbd_admin_v1_RunDrillRequest__Output } from './lbd/admin/v1/RunDrillRequest.js';
import type { ServiceStats as _lbd_admin_v1_ServiceStats, ServiceStats__Output as _lbd_admin_v1_ServiceStats__Output } from './lbd/admin/v1/ServiceStats.js';
import type { ServiceStatus as _lbd_admin_v1_ServiceStatus, ServiceStatus__Output as _lbd_admin_v1_ServiceStatus__Output } from './lbd/admin/v1/ServiceStatus.js';
import type { SynProxyStats as _lbd_admin_v1_SynProxyStats, SynProxyStats__Output as _lbd_admin_v1_SynProxyStats__Output } from './lbd/admin/v1/SynProxyStats.js';
import type { WatchHealthRequest as _lbd_admin_v1_WatchHealthRequest, WatchHealthRequest__Output as _lbd_admin_v1_WatchHealthRequest__Output } from './lbd/admin/v1/WatchHealthRequest.js';
import type { Endpoint as _lbd_common_v1_Endpoint, Endpoint__Output as _lbd_common_v1_Endpoint__Output } from './lbd/common/v1/Endpoint.js';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  lbd: {
    admin: {
      v1: {
        AddressRange: MessageTypeDefinition<_lbd_admin_v1_AddressRange, _lbd_admin_v1_AddressRange__Output>
        Admin: SubtypeConstructor<typeof grpc.Client, _lbd_admin_v1_AdminClient> & { service: _lbd_admin_v1_AdminDefinition }
        AgentInfo: MessageTypeDefinition<_lbd_admin_v1_AgentInfo, _lbd_admin_v1_AgentInfo__Output>
        ApplyRecord: MessageTypeDefinition<_lbd_admin_v1_ApplyRecord, _lbd_admin_v1_ApplyRecord__Output>
        ApplyRequest: MessageTypeDefinition<_lbd_admin_v1_ApplyRequest, _lbd_admin_v1_ApplyRequest__Output>
        ApplyResponse: MessageTypeDefinition<_lbd_admin_v1_ApplyResponse, _lbd_admin_v1_ApplyResponse__Output>
        BgpSessionStatus: MessageTypeDefinition<_lbd_admin_v1_BgpSessionStatus, _lbd_admin_v1_BgpSessionStatus__Output>
        ClusterStatus: MessageTypeDefinition<_lbd_admin_v1_ClusterStatus, _lbd_admin_v1_ClusterStatus__Output>
        ConfigHistoryRequest: MessageTypeDefinition<_lbd_admin_v1_ConfigHistoryRequest, _lbd_admin_v1_ConfigHistoryRequest__Output>
        ConfigHistoryResponse: MessageTypeDefinition<_lbd_admin_v1_ConfigHistoryResponse, _lbd_admin_v1_ConfigHistoryResponse__Output>
        ConfigVersion: MessageTypeDefinition<_lbd_admin_v1_ConfigVersion, _lbd_admin_v1_ConfigVersion__Output>
        ConnSyncPeer: MessageTypeDefinition<_lbd_admin_v1_ConnSyncPeer, _lbd_admin_v1_ConnSyncPeer__Output>
        ConnSyncStatus: MessageTypeDefinition<_lbd_admin_v1_ConnSyncStatus, _lbd_admin_v1_ConnSyncStatus__Output>
        Connection: MessageTypeDefinition<_lbd_admin_v1_Connection, _lbd_admin_v1_Connection__Output>
        Counters: MessageTypeDefinition<_lbd_admin_v1_Counters, _lbd_admin_v1_Counters__Output>
        DirectorGroup: MessageTypeDefinition<_lbd_admin_v1_DirectorGroup, _lbd_admin_v1_DirectorGroup__Output>
        DirectorStatus: MessageTypeDefinition<_lbd_admin_v1_DirectorStatus, _lbd_admin_v1_DirectorStatus__Output>
        DoctorRequest: MessageTypeDefinition<_lbd_admin_v1_DoctorRequest, _lbd_admin_v1_DoctorRequest__Output>
        DoctorResponse: MessageTypeDefinition<_lbd_admin_v1_DoctorResponse, _lbd_admin_v1_DoctorResponse__Output>
        DrillMove: MessageTypeDefinition<_lbd_admin_v1_DrillMove, _lbd_admin_v1_DrillMove__Output>
        DrillResult: MessageTypeDefinition<_lbd_admin_v1_DrillResult, _lbd_admin_v1_DrillResult__Output>
        EcmpStatus: MessageTypeDefinition<_lbd_admin_v1_EcmpStatus, _lbd_admin_v1_EcmpStatus__Output>
        Event: MessageTypeDefinition<_lbd_admin_v1_Event, _lbd_admin_v1_Event__Output>
        FailoverRequest: MessageTypeDefinition<_lbd_admin_v1_FailoverRequest, _lbd_admin_v1_FailoverRequest__Output>
        FailoverResponse: MessageTypeDefinition<_lbd_admin_v1_FailoverResponse, _lbd_admin_v1_FailoverResponse__Output>
        Finding: MessageTypeDefinition<_lbd_admin_v1_Finding, _lbd_admin_v1_Finding__Output>
        GetClusterStatusRequest: MessageTypeDefinition<_lbd_admin_v1_GetClusterStatusRequest, _lbd_admin_v1_GetClusterStatusRequest__Output>
        GetConfigRequest: MessageTypeDefinition<_lbd_admin_v1_GetConfigRequest, _lbd_admin_v1_GetConfigRequest__Output>
        GetConfigResponse: MessageTypeDefinition<_lbd_admin_v1_GetConfigResponse, _lbd_admin_v1_GetConfigResponse__Output>
        GetHealthRequest: MessageTypeDefinition<_lbd_admin_v1_GetHealthRequest, _lbd_admin_v1_GetHealthRequest__Output>
        GetHealthResponse: MessageTypeDefinition<_lbd_admin_v1_GetHealthResponse, _lbd_admin_v1_GetHealthResponse__Output>
        GetStatsRequest: MessageTypeDefinition<_lbd_admin_v1_GetStatsRequest, _lbd_admin_v1_GetStatsRequest__Output>
        GetStatsResponse: MessageTypeDefinition<_lbd_admin_v1_GetStatsResponse, _lbd_admin_v1_GetStatsResponse__Output>
        GetStatusRequest: MessageTypeDefinition<_lbd_admin_v1_GetStatusRequest, _lbd_admin_v1_GetStatusRequest__Output>
        GetStatusResponse: MessageTypeDefinition<_lbd_admin_v1_GetStatusResponse, _lbd_admin_v1_GetStatusResponse__Output>
        GroupStatus: MessageTypeDefinition<_lbd_admin_v1_GroupStatus, _lbd_admin_v1_GroupStatus__Output>
        HealthCheckInfo: MessageTypeDefinition<_lbd_admin_v1_HealthCheckInfo, _lbd_admin_v1_HealthCheckInfo__Output>
        HealthEvent: MessageTypeDefinition<_lbd_admin_v1_HealthEvent, _lbd_admin_v1_HealthEvent__Output>
        HealthSchedulerStats: MessageTypeDefinition<_lbd_admin_v1_HealthSchedulerStats, _lbd_admin_v1_HealthSchedulerStats__Output>
        ListConnectionsRequest: MessageTypeDefinition<_lbd_admin_v1_ListConnectionsRequest, _lbd_admin_v1_ListConnectionsRequest__Output>
        ListConnectionsResponse: MessageTypeDefinition<_lbd_admin_v1_ListConnectionsResponse, _lbd_admin_v1_ListConnectionsResponse__Output>
        ListEventsRequest: MessageTypeDefinition<_lbd_admin_v1_ListEventsRequest, _lbd_admin_v1_ListEventsRequest__Output>
        ProbeResultInfo: MessageTypeDefinition<_lbd_admin_v1_ProbeResultInfo, _lbd_admin_v1_ProbeResultInfo__Output>
        Problem: MessageTypeDefinition<_lbd_admin_v1_Problem, _lbd_admin_v1_Problem__Output>
        RealServerHealth: MessageTypeDefinition<_lbd_admin_v1_RealServerHealth, _lbd_admin_v1_RealServerHealth__Output>
        RealServerStats: MessageTypeDefinition<_lbd_admin_v1_RealServerStats, _lbd_admin_v1_RealServerStats__Output>
        RealServerStatus: MessageTypeDefinition<_lbd_admin_v1_RealServerStatus, _lbd_admin_v1_RealServerStatus__Output>
        RecordDrillRequest: MessageTypeDefinition<_lbd_admin_v1_RecordDrillRequest, _lbd_admin_v1_RecordDrillRequest__Output>
        RecordDrillResponse: MessageTypeDefinition<_lbd_admin_v1_RecordDrillResponse, _lbd_admin_v1_RecordDrillResponse__Output>
        RollbackRequest: MessageTypeDefinition<_lbd_admin_v1_RollbackRequest, _lbd_admin_v1_RollbackRequest__Output>
        RollbackResponse: MessageTypeDefinition<_lbd_admin_v1_RollbackResponse, _lbd_admin_v1_RollbackResponse__Output>
        RunDrillRequest: MessageTypeDefinition<_lbd_admin_v1_RunDrillRequest, _lbd_admin_v1_RunDrillRequest__Output>
        ServiceStats: MessageTypeDefinition<_lbd_admin_v1_ServiceStats, _lbd_admin_v1_ServiceStats__Output>
        ServiceStatus: MessageTypeDefinition<_lbd_admin_v1_ServiceStatus, _lbd_admin_v1_ServiceStatus__Output>
        SynProxyStats: MessageTypeDefinition<_lbd_admin_v1_SynProxyStats, _lbd_admin_v1_SynProxyStats__Output>
        WatchHealthRequest: MessageTypeDefinition<_lbd_admin_v1_WatchHealthRequest, _lbd_admin_v1_WatchHealthRequest__Output>
      }
    }
    common: {
      v1: {
        Endpoint: MessageTypeDefinition<_lbd_common_v1_Endpoint, _lbd_common_v1_Endpoint__Output>
      }
    }
  }
}

