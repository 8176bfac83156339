// GENERATED CODE: do not edit by hand.
// Generated from proto/lbd/admin/v1/admin.proto by `pnpm --filter @lbd/proto run gen`, which runs
// proto-loader-gen-types --keepCase=false --longs=Number --enums=String --defaults --oneofs --includeComments --grpcLib=@grpc/grpc-js --importFileExtension=.js -I ../../proto -O src/gen lbd/admin/v1/admin.proto
// Original file: ../../proto/lbd/admin/v1/admin.proto


export interface ApplyRequest {
  /**
   * YAML or JSON, at most 4 MiB.
   */
  'configText'?: (string);
  /**
   * Names the text in messages and in status, e.g. the file path lbadm read it from (1 to 256 chars).
   */
  'source'?: (string);
  /**
   * Validate and compute the rule diff only; change nothing.
   */
  'dryRun'?: (boolean);
}

export interface ApplyRequest__Output {
  /**
   * YAML or JSON, at most 4 MiB.
   */
  'configText': (string);
  /**
   * Names the text in messages and in status, e.g. the file path lbadm read it from (1 to 256 chars).
   */
  'source': (string);
  /**
   * Validate and compute the rule diff only; change nothing.
   */
  'dryRun': (boolean);
}
