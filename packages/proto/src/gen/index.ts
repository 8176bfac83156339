// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto
export type { ProtoGrpcType } from './admin.js';
export type * from './lbd/admin/v1/AddressRange.js';
export type * from './lbd/admin/v1/Admin.js';
export type * from './lbd/admin/v1/AgentInfo.js';
export type * from './lbd/admin/v1/ApplyRecord.js';
export type * from './lbd/admin/v1/ApplyRequest.js';
export type * from './lbd/admin/v1/ApplyResponse.js';
export type * from './lbd/admin/v1/Connection.js';
export type * from './lbd/admin/v1/Counters.js';
export type * from './lbd/admin/v1/DoctorRequest.js';
export type * from './lbd/admin/v1/DoctorResponse.js';
export type * from './lbd/admin/v1/Endpoint.js';
export type * from './lbd/admin/v1/Finding.js';
export type * from './lbd/admin/v1/GetHealthRequest.js';
export type * from './lbd/admin/v1/GetHealthResponse.js';
export type * from './lbd/admin/v1/GetStatsRequest.js';
export type * from './lbd/admin/v1/GetStatsResponse.js';
export type * from './lbd/admin/v1/GetStatusRequest.js';
export type * from './lbd/admin/v1/GetStatusResponse.js';
export type * from './lbd/admin/v1/HealthCheckInfo.js';
export type * from './lbd/admin/v1/HealthEvent.js';
export type * from './lbd/admin/v1/HealthSchedulerStats.js';
export type * from './lbd/admin/v1/ListConnectionsRequest.js';
export type * from './lbd/admin/v1/ListConnectionsResponse.js';
export type * from './lbd/admin/v1/ProbeResultInfo.js';
export type * from './lbd/admin/v1/Problem.js';
export type * from './lbd/admin/v1/RealServerHealth.js';
export type * from './lbd/admin/v1/RealServerStats.js';
export type * from './lbd/admin/v1/RealServerStatus.js';
export type * from './lbd/admin/v1/ServiceStats.js';
export type * from './lbd/admin/v1/ServiceStatus.js';
export type * from './lbd/admin/v1/WatchHealthRequest.js';
