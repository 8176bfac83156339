import { dirname, isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import protobuf from 'protobufjs';
import type { ProtoGrpcType } from './gen/gobgp.js';
import type { GobgpApiClient } from './gen/apipb/GobgpApi.js';
import type { Any } from './gen/google/protobuf/Any.js';

/**
 * GoBGP's gRPC API, loaded from the definitions the build copied out of Debian's
 * golang-github-osrg-gobgp-dev into dist/gobgp-api/ (scripts/gen.mjs; its types are in src/gen/).
 */
const API_DIR = join(dirname(fileURLToPath(import.meta.url)), 'gobgp-api');
const FILES = ['gobgp.proto', 'attribute.proto', 'capability.proto'];

/** Must match scripts/gen.mjs's options, or the generated types would describe objects the loader does not produce. */
const LOADER_OPTIONS: protoLoader.Options = { keepCase: false, longs: Number, enums: String, defaults: true, oneofs: true, includeDirs: [API_DIR] };

let loaded: { api: ProtoGrpcType; root: protobuf.Root } | null = null;

function load(): { api: ProtoGrpcType; root: protobuf.Root } {
  if (loaded) return loaded;
  const def = protoLoader.loadSync(FILES, LOADER_OPTIONS);
  const api = grpc.loadPackageDefinition(def) as unknown as ProtoGrpcType;
  // Path attributes and NLRI travel as google.protobuf.Any: encoded here with the same definitions.
  const root = new protobuf.Root();
  // Their imports name each other bare (`import "gobgp.proto"`); google/protobuf/* are protobufjs's own.
  root.resolvePath = (_origin, target) => (isAbsolute(target) || target.startsWith('google/') ? target : join(API_DIR, target));
  root.loadSync(FILES.map((f) => join(API_DIR, f)), { keepCase: false });
  loaded = { api, root };
  return loaded;
}

export function gobgpClient(address: string): GobgpApiClient {
  const { api } = load();
  return new api.apipb.GobgpApi(address, grpc.credentials.createInsecure());
}

/** `message` (fields in camelCase) as a google.protobuf.Any of GoBGP's type `type` (`IPAddressPrefix`, ...). */
export function packAny(type: string, message: Record<string, unknown>): Any {
  const t = load().root.lookupType(`apipb.${type}`);
  // fromObject takes enum names; verify checks the converted message (it wants enum numbers).
  const m = t.fromObject(message);
  const problem = t.verify(m);
  if (problem) throw new Error(`apipb.${type}: ${problem}`);
  return { type_url: `type.googleapis.com/apipb.${type}`, value: Buffer.from(t.encode(m).finish()) };
}
