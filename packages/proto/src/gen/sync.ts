// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
import type * as grpc from '@grpc/grpc-js';
import type { MessageTypeDefinition } from '@grpc/proto-loader';

import type { Endpoint as _lbd_common_v1_Endpoint, Endpoint__Output as _lbd_common_v1_Endpoint__Output } from './lbd/common/v1/Endpoint.js';
import type { Ack as _lbd_peer_v1_Ack, Ack__Output as _lbd_peer_v1_Ack__Output } from './lbd/peer/v1/Ack.js';
import type { Change as _lbd_peer_v1_Change, Change__Output as _lbd_peer_v1_Change__Output } from './lbd/peer/v1/Change.js';
import type { Changes as _lbd_peer_v1_Changes, Changes__Output as _lbd_peer_v1_Changes__Output } from './lbd/peer/v1/Changes.js';
import type { ConnSyncClient as _lbd_peer_v1_ConnSyncClient, ConnSyncDefinition as _lbd_peer_v1_ConnSyncDefinition } from './lbd/peer/v1/ConnSync.js';
import type { ConnectionId as _lbd_peer_v1_ConnectionId, ConnectionId__Output as _lbd_peer_v1_ConnectionId__Output } from './lbd/peer/v1/ConnectionId.js';
import type { GroupConnection as _lbd_peer_v1_GroupConnection, GroupConnection__Output as _lbd_peer_v1_GroupConnection__Output } from './lbd/peer/v1/GroupConnection.js';
import type { GroupConnectionsReply as _lbd_peer_v1_GroupConnectionsReply, GroupConnectionsReply__Output as _lbd_peer_v1_GroupConnectionsReply__Output } from './lbd/peer/v1/GroupConnectionsReply.js';
import type { GroupConnectionsRequest as _lbd_peer_v1_GroupConnectionsRequest, GroupConnectionsRequest__Output as _lbd_peer_v1_GroupConnectionsRequest__Output } from './lbd/peer/v1/GroupConnectionsRequest.js';
import type { Hello as _lbd_peer_v1_Hello, Hello__Output as _lbd_peer_v1_Hello__Output } from './lbd/peer/v1/Hello.js';
import type { Resync as _lbd_peer_v1_Resync, Resync__Output as _lbd_peer_v1_Resync__Output } from './lbd/peer/v1/Resync.js';
import type { SeqAdjust as _lbd_peer_v1_SeqAdjust, SeqAdjust__Output as _lbd_peer_v1_SeqAdjust__Output } from './lbd/peer/v1/SeqAdjust.js';
import type { SeqAdjustDirection as _lbd_peer_v1_SeqAdjustDirection, SeqAdjustDirection__Output as _lbd_peer_v1_SeqAdjustDirection__Output } from './lbd/peer/v1/SeqAdjustDirection.js';
import type { SnapshotBegin as _lbd_peer_v1_SnapshotBegin, SnapshotBegin__Output as _lbd_peer_v1_SnapshotBegin__Output } from './lbd/peer/v1/SnapshotBegin.js';
import type { SnapshotEnd as _lbd_peer_v1_SnapshotEnd, SnapshotEnd__Output as _lbd_peer_v1_SnapshotEnd__Output } from './lbd/peer/v1/SnapshotEnd.js';
import type { SynProxyState as _lbd_peer_v1_SynProxyState, SynProxyState__Output as _lbd_peer_v1_SynProxyState__Output } from './lbd/peer/v1/SynProxyState.js';
import type { SyncMessage as _lbd_peer_v1_SyncMessage, SyncMessage__Output as _lbd_peer_v1_SyncMessage__Output } from './lbd/peer/v1/SyncMessage.js';
import type { SyncReply as _lbd_peer_v1_SyncReply, SyncReply__Output as _lbd_peer_v1_SyncReply__Output } from './lbd/peer/v1/SyncReply.js';
import type { SyncedConnection as _lbd_peer_v1_SyncedConnection, SyncedConnection__Output as _lbd_peer_v1_SyncedConnection__Output } from './lbd/peer/v1/SyncedConnection.js';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  lbd: {
    common: {
      v1: {
        Endpoint: MessageTypeDefinition<_lbd_common_v1_Endpoint, _lbd_common_v1_Endpoint__Output>
      }
    }
    peer: {
      v1: {
        Ack: MessageTypeDefinition<_lbd_peer_v1_Ack, _lbd_peer_v1_Ack__Output>
        Change: MessageTypeDefinition<_lbd_peer_v1_Change, _lbd_peer_v1_Change__Output>
        Changes: MessageTypeDefinition<_lbd_peer_v1_Changes, _lbd_peer_v1_Changes__Output>
        ConnSync: SubtypeConstructor<typeof grpc.Client, _lbd_peer_v1_ConnSyncClient> & { service: _lbd_peer_v1_ConnSyncDefinition }
        ConnectionId: MessageTypeDefinition<_lbd_peer_v1_ConnectionId, _lbd_peer_v1_ConnectionId__Output>
        GroupConnection: MessageTypeDefinition<_lbd_peer_v1_GroupConnection, _lbd_peer_v1_GroupConnection__Output>
        GroupConnectionsReply: MessageTypeDefinition<_lbd_peer_v1_GroupConnectionsReply, _lbd_peer_v1_GroupConnectionsReply__Output>
        GroupConnectionsRequest: MessageTypeDefinition<_lbd_peer_v1_GroupConnectionsRequest, _lbd_peer_v1_GroupConnectionsRequest__Output>
        Hello: MessageTypeDefinition<_lbd_peer_v1_Hello, _lbd_peer_v1_Hello__Output>
        Resync: MessageTypeDefinition<_lbd_peer_v1_Resync, _lbd_peer_v1_Resync__Output>
        SeqAdjust: MessageTypeDefinition<_lbd_peer_v1_SeqAdjust, _lbd_peer_v1_SeqAdjust__Output>
        SeqAdjustDirection: MessageTypeDefinition<_lbd_peer_v1_SeqAdjustDirection, _lbd_peer_v1_SeqAdjustDirection__Output>
        SnapshotBegin: MessageTypeDefinition<_lbd_peer_v1_SnapshotBegin, _lbd_peer_v1_SnapshotBegin__Output>
        SnapshotEnd: MessageTypeDefinition<_lbd_peer_v1_SnapshotEnd, _lbd_peer_v1_SnapshotEnd__Output>
        SynProxyState: MessageTypeDefinition<_lbd_peer_v1_SynProxyState, _lbd_peer_v1_SynProxyState__Output>
        SyncMessage: MessageTypeDefinition<_lbd_peer_v1_SyncMessage, _lbd_peer_v1_SyncMessage__Output>
        SyncReply: MessageTypeDefinition<_lbd_peer_v1_SyncReply, _lbd_peer_v1_SyncReply__Output>
        SyncedConnection: MessageTypeDefinition<_lbd_peer_v1_SyncedConnection, _lbd_peer_v1_SyncedConnection__Output>
      }
    }
  }
}

