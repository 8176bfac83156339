// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/sync.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { SyncMessage as _lbd_peer_v1_SyncMessage, SyncMessage__Output as _lbd_peer_v1_SyncMessage__Output } from '../../../lbd/peer/v1/SyncMessage.js';
import type { SyncReply as _lbd_peer_v1_SyncReply, SyncReply__Output as _lbd_peer_v1_SyncReply__Output } from '../../../lbd/peer/v1/SyncReply.js';

export interface ConnSyncClient extends grpc.Client {
  Stream(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_lbd_peer_v1_SyncMessage, _lbd_peer_v1_SyncReply__Output>;
  Stream(options?: grpc.CallOptions): grpc.ClientDuplexStream<_lbd_peer_v1_SyncMessage, _lbd_peer_v1_SyncReply__Output>;
  stream(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_lbd_peer_v1_SyncMessage, _lbd_peer_v1_SyncReply__Output>;
  stream(options?: grpc.CallOptions): grpc.ClientDuplexStream<_lbd_peer_v1_SyncMessage, _lbd_peer_v1_SyncReply__Output>;
  
}

export interface ConnSyncHandlers extends grpc.UntypedServiceImplementation {
  Stream: grpc.handleBidiStreamingCall<_lbd_peer_v1_SyncMessage__Output, _lbd_peer_v1_SyncReply>;
  
}

export interface ConnSyncDefinition extends grpc.ServiceDefinition {
  Stream: MethodDefinition<_lbd_peer_v1_SyncMessage, _lbd_peer_v1_SyncReply, _lbd_peer_v1_SyncMessage__Output, _lbd_peer_v1_SyncReply__Output>
}
