// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/peer.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { PingReply as _lbd_peer_v1_PingReply, PingReply__Output as _lbd_peer_v1_PingReply__Output } from '../../../lbd/peer/v1/PingReply.js';
import type { PingRequest as _lbd_peer_v1_PingRequest, PingRequest__Output as _lbd_peer_v1_PingRequest__Output } from '../../../lbd/peer/v1/PingRequest.js';
import type { PromiseReply as _lbd_peer_v1_PromiseReply, PromiseReply__Output as _lbd_peer_v1_PromiseReply__Output } from '../../../lbd/peer/v1/PromiseReply.js';
import type { PromiseRequest as _lbd_peer_v1_PromiseRequest, PromiseRequest__Output as _lbd_peer_v1_PromiseRequest__Output } from '../../../lbd/peer/v1/PromiseRequest.js';

export interface PeerClient extends grpc.Client {
  /**
   * Liveness of the peer link, for `lbadm cluster status`.
   */
  Ping(argument: _lbd_peer_v1_PingRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_peer_v1_PingReply__Output>): grpc.ClientUnaryCall;
  Ping(argument: _lbd_peer_v1_PingRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_peer_v1_PingReply__Output>): grpc.ClientUnaryCall;
  Ping(argument: _lbd_peer_v1_PingRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_peer_v1_PingReply__Output>): grpc.ClientUnaryCall;
  Ping(argument: _lbd_peer_v1_PingRequest, callback: grpc.requestCallback<_lbd_peer_v1_PingReply__Output>): grpc.ClientUnaryCall;
  /**
   * Liveness of the peer link, for `lbadm cluster status`.
   */
  ping(argument: _lbd_peer_v1_PingRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_peer_v1_PingReply__Output>): grpc.ClientUnaryCall;
  ping(argument: _lbd_peer_v1_PingRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_peer_v1_PingReply__Output>): grpc.ClientUnaryCall;
  ping(argument: _lbd_peer_v1_PingRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_peer_v1_PingReply__Output>): grpc.ClientUnaryCall;
  ping(argument: _lbd_peer_v1_PingRequest, callback: grpc.requestCallback<_lbd_peer_v1_PingReply__Output>): grpc.ClientUnaryCall;
  
  /**
   * A leader whose beats etcd has stopped confirming asks each peer to promise not to take the group
   * over for duration_ms. A peer grants it only when it cannot reach etcd either (then nobody can take
   * over, and the leader may keep its vips: fail-static); a peer that reaches etcd refuses, and the
   * leader releases within its safety window.
   */
  RequestPromise(argument: _lbd_peer_v1_PromiseRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_peer_v1_PromiseReply__Output>): grpc.ClientUnaryCall;
  RequestPromise(argument: _lbd_peer_v1_PromiseRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_peer_v1_PromiseReply__Output>): grpc.ClientUnaryCall;
  RequestPromise(argument: _lbd_peer_v1_PromiseRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_peer_v1_PromiseReply__Output>): grpc.ClientUnaryCall;
  RequestPromise(argument: _lbd_peer_v1_PromiseRequest, callback: grpc.requestCallback<_lbd_peer_v1_PromiseReply__Output>): grpc.ClientUnaryCall;
  /**
   * A leader whose beats etcd has stopped confirming asks each peer to promise not to take the group
   * over for duration_ms. A peer grants it only when it cannot reach etcd either (then nobody can take
   * over, and the leader may keep its vips: fail-static); a peer that reaches etcd refuses, and the
   * leader releases within its safety window.
   */
  requestPromise(argument: _lbd_peer_v1_PromiseRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_peer_v1_PromiseReply__Output>): grpc.ClientUnaryCall;
  requestPromise(argument: _lbd_peer_v1_PromiseRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_lbd_peer_v1_PromiseReply__Output>): grpc.ClientUnaryCall;
  requestPromise(argument: _lbd_peer_v1_PromiseRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_lbd_peer_v1_PromiseReply__Output>): grpc.ClientUnaryCall;
  requestPromise(argument: _lbd_peer_v1_PromiseRequest, callback: grpc.requestCallback<_lbd_peer_v1_PromiseReply__Output>): grpc.ClientUnaryCall;
  
}

export interface PeerHandlers extends grpc.UntypedServiceImplementation {
  /**
   * Liveness of the peer link, for `lbadm cluster status`.
   */
  Ping: grpc.handleUnaryCall<_lbd_peer_v1_PingRequest__Output, _lbd_peer_v1_PingReply>;
  
  /**
   * A leader whose beats etcd has stopped confirming asks each peer to promise not to take the group
   * over for duration_ms. A peer grants it only when it cannot reach etcd either (then nobody can take
   * over, and the leader may keep its vips: fail-static); a peer that reaches etcd refuses, and the
   * leader releases within its safety window.
   */
  RequestPromise: grpc.handleUnaryCall<_lbd_peer_v1_PromiseRequest__Output, _lbd_peer_v1_PromiseReply>;
  
}

export interface PeerDefinition extends grpc.ServiceDefinition {
  Ping: MethodDefinition<_lbd_peer_v1_PingRequest, _lbd_peer_v1_PingReply, _lbd_peer_v1_PingRequest__Output, _lbd_peer_v1_PingReply__Output>
  RequestPromise: MethodDefinition<_lbd_peer_v1_PromiseRequest, _lbd_peer_v1_PromiseReply, _lbd_peer_v1_PromiseRequest__Output, _lbd_peer_v1_PromiseReply__Output>
}
