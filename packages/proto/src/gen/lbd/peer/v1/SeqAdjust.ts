// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto, proto/lbd/peer/v1/peer.proto, proto/lbd/peer/v1/sync.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto lbd/peer/v1/peer.proto lbd/peer/v1/sync.proto
// Original file: ../../proto/lbd/peer/v1/sync.proto

import type { SeqAdjustDirection as _lbd_peer_v1_SeqAdjustDirection, SeqAdjustDirection__Output as _lbd_peer_v1_SeqAdjustDirection__Output } from '../../../lbd/peer/v1/SeqAdjustDirection.js';

/**
 * conntrack's seqadj extension: per direction, numbers after correction_pos move by offset_after, others by offset_before.
 */
export interface SeqAdjust {
  'original'?: (_lbd_peer_v1_SeqAdjustDirection | null);
  'reply'?: (_lbd_peer_v1_SeqAdjustDirection | null);
}

/**
 * conntrack's seqadj extension: per direction, numbers after correction_pos move by offset_after, others by offset_before.
 */
export interface SeqAdjust__Output {
  'original': (_lbd_peer_v1_SeqAdjustDirection__Output | null);
  'reply': (_lbd_peer_v1_SeqAdjustDirection__Output | null);
}
