// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto

import type { AgentInfo as _lbd_admin_v1_AgentInfo, AgentInfo__Output as _lbd_admin_v1_AgentInfo__Output } from '../../../lbd/admin/v1/AgentInfo.js';
import type { ServiceStatus as _lbd_admin_v1_ServiceStatus, ServiceStatus__Output as _lbd_admin_v1_ServiceStatus__Output } from '../../../lbd/admin/v1/ServiceStatus.js';
import type { SynProxyStats as _lbd_admin_v1_SynProxyStats, SynProxyStats__Output as _lbd_admin_v1_SynProxyStats__Output } from '../../../lbd/admin/v1/SynProxyStats.js';

export interface GetStatusResponse {
  'agent'?: (_lbd_admin_v1_AgentInfo | null);
  'services'?: (_lbd_admin_v1_ServiceStatus)[];
  /**
   * The kernel's SYN proxy on this director, all SYN-proxied services together; unset when none has it.
   */
  'synProxy'?: (_lbd_admin_v1_SynProxyStats | null);
}

export interface GetStatusResponse__Output {
  'agent': (_lbd_admin_v1_AgentInfo__Output | null);
  'services': (_lbd_admin_v1_ServiceStatus__Output)[];
  /**
   * The kernel's SYN proxy on this director, all SYN-proxied services together; unset when none has it.
   */
  'synProxy': (_lbd_admin_v1_SynProxyStats__Output | null);
}
