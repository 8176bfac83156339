// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/sync.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { GroupConnectionsReply as _lbd_peer_v1_GroupConnectionsReply, GroupConnectionsReply__Output as _lbd_peer_v1_GroupConnectionsReply__Output } from '../../../lbd/peer/v1/GroupConnectionsReply.js';
import type { GroupConnectionsRequest as _lbd_peer_v1_GroupConnectionsRequest, GroupConnectionsRequest__Output as _lbd_peer_v1_GroupConnectionsRequest__Output } from '../../../lbd/peer/v1/GroupConnectionsRequest.js';
import type { SyncMessage as _lbd_peer_v1_SyncMessage, SyncMessage__Output as _lbd_peer_v1_SyncMessage__Output } from '../../../lbd/peer/v1/SyncMessage.js';
import type { SyncReply as _lbd_peer_v1_SyncReply, SyncReply__Output as _lbd_peer_v1_SyncReply__Output } from '../../../lbd/peer/v1/SyncReply.js';

export interface ConnSyncClient extends grpc.Client {
  /**
   * What this director holds of one vip group's (or ECMP slot's) connections now, and when it last claimed
   * and released the group's addresses: what a drill (lbadm drill switchover) compares on both directors
   * around a move. Streamed in batches (a busy group has many). Only a configured peer may ask (mutual
   * TLS, as Stream). Added after 0.1.0: a director of 0.1.0 answers UNIMPLEMENTED.
   */
  GroupConnections(argument: _lbd_peer_v1_GroupConnectionsRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_lbd_peer_v1_GroupConnectionsReply__Output>;
  GroupConnections(argument: _lbd_peer_v1_GroupConnectionsRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_lbd_peer_v1_GroupConnectionsReply__Output>;
  /**
   * What this director holds of one vip group's (or ECMP slot's) connections now, and when it last claimed
   * and released the group's addresses: what a drill (lbadm drill switchover) compares on both directors
   * around a move. Streamed in batches (a busy group has many). Only a configured peer may ask (mutual
   * TLS, as Stream). Added after 0.1.0: a director of 0.1.0 answers UNIMPLEMENTED.
   */
  groupConnections(argument: _lbd_peer_v1_GroupConnectionsRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_lbd_peer_v1_GroupConnectionsReply__Output>;
  groupConnections(argument: _lbd_peer_v1_GroupConnectionsRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_lbd_peer_v1_GroupConnectionsReply__Output>;
  
  Stream(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_lbd_peer_v1_SyncMessage, _lbd_peer_v1_SyncReply__Output>;
  Stream(options?: grpc.CallOptions): grpc.ClientDuplexStream<_lbd_peer_v1_SyncMessage, _lbd_peer_v1_SyncReply__Output>;
  stream(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_lbd_peer_v1_SyncMessage, _lbd_peer_v1_SyncReply__Output>;
  stream(options?: grpc.CallOptions): grpc.ClientDuplexStream<_lbd_peer_v1_SyncMessage, _lbd_peer_v1_SyncReply__Output>;
  
}

export interface ConnSyncHandlers extends grpc.UntypedServiceImplementation {
  /**
   * What this director holds of one vip group's (or ECMP slot's) connections now, and when it last claimed
   * and released the group's addresses: what a drill (lbadm drill switchover) compares on both directors
   * around a move. Streamed in batches (a busy group has many). Only a configured peer may ask (mutual
   * TLS, as Stream). Added after 0.1.0: a director of 0.1.0 answers UNIMPLEMENTED.
   */
  GroupConnections: grpc.handleServerStreamingCall<_lbd_peer_v1_GroupConnectionsRequest__Output, _lbd_peer_v1_GroupConnectionsReply>;
  
  Stream: grpc.handleBidiStreamingCall<_lbd_peer_v1_SyncMessage__Output, _lbd_peer_v1_SyncReply>;
  
}

export interface ConnSyncDefinition extends grpc.ServiceDefinition {
  GroupConnections: MethodDefinition<_lbd_peer_v1_GroupConnectionsRequest, _lbd_peer_v1_GroupConnectionsReply, _lbd_peer_v1_GroupConnectionsRequest__Output, _lbd_peer_v1_GroupConnectionsReply__Output>
  Stream: MethodDefinition<_lbd_peer_v1_SyncMessage, _lbd_peer_v1_SyncReply, _lbd_peer_v1_SyncMessage__Output, _lbd_peer_v1_SyncReply__Output>
}
