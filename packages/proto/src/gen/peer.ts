// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
import type * as grpc from '@grpc/grpc-js';
import type { MessageTypeDefinition } from '@grpc/proto-loader';

import type { PeerClient as _lbd_peer_v1_PeerClient, PeerDefinition as _lbd_peer_v1_PeerDefinition } from './lbd/peer/v1/Peer.js';
import type { PingReply as _lbd_peer_v1_PingReply, PingReply__Output as _lbd_peer_v1_PingReply__Output } from './lbd/peer/v1/PingReply.js';
import type { PingRequest as _lbd_peer_v1_PingRequest, PingRequest__Output as _lbd_peer_v1_PingRequest__Output } from './lbd/peer/v1/PingRequest.js';
import type { PromiseReply as _lbd_peer_v1_PromiseReply, PromiseReply__Output as _lbd_peer_v1_PromiseReply__Output } from './lbd/peer/v1/PromiseReply.js';
import type { PromiseRequest as _lbd_peer_v1_PromiseRequest, PromiseRequest__Output as _lbd_peer_v1_PromiseRequest__Output } from './lbd/peer/v1/PromiseRequest.js';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  lbd: {
    peer: {
      v1: {
        Peer: SubtypeConstructor<typeof grpc.Client, _lbd_peer_v1_PeerClient> & { service: _lbd_peer_v1_PeerDefinition }
        PingReply: MessageTypeDefinition<_lbd_peer_v1_PingReply, _lbd_peer_v1_PingReply__Output>
        PingRequest: MessageTypeDefinition<_lbd_peer_v1_PingRequest, _lbd_peer_v1_PingRequest__Output>
        PromiseReply: MessageTypeDefinition<_lbd_peer_v1_PromiseReply, _lbd_peer_v1_PromiseReply__Output>
        PromiseRequest: MessageTypeDefinition<_lbd_peer_v1_PromiseRequest, _lbd_peer_v1_PromiseRequest__Output>
      }
    }
  }
}

