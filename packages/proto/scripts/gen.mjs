#!/usr/bin/env node
// Regenerates src/gen/ from /proto with proto-loader-gen-types, then stamps every file with a header.
// Run: pnpm --filter @lbd/proto run gen. The options must match LOADER_OPTIONS in src/index.ts, or the
// generated types would describe objects the loader does not produce.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');
// Relative paths (run from the package directory) keep absolute checkout paths out of the generated code.
const protoRoot = join('..', '..', 'proto');
const outDir = join('src', 'gen');
const files = ['lbd/admin/v1/admin.proto', 'lbd/peer/v1/peer.proto', 'lbd/peer/v1/sync.proto'];
const args = [
  '--keepCase=false', '--longs=Number', '--enums=String', '--defaults', '--oneofs', '--includeComments',
  '--grpcLib=@grpc/grpc-js', '--importFileExtension=.js', '-I', protoRoot, '-O', outDir, ...files,
];
const command = `proto-loader-gen-types ${args.join(' ')}`;

process.chdir(pkg);
rmSync(outDir, { recursive: true, force: true });
execFileSync(join(pkg, 'node_modules', '.bin', 'proto-loader-gen-types'), args, { stdio: 'inherit', cwd: pkg });

const header = [
  '// GENERATED CODE: do not edit by hand.',
  `// Generated from proto/${files.join(', proto/')} by \`pnpm --filter @lbd/proto run gen\`, which runs`,
  `// ${command}`,
  '',
].join('\n');
const walk = (dir) => readdirSync(dir).flatMap((n) => (statSync(join(dir, n)).isDirectory() ? walk(join(dir, n)) : [join(dir, n)]));
// One module that re-exports every generated type, so src/index.ts need not list them.
const modules = walk(outDir).filter((f) => ![join(outDir, 'admin.ts'), join(outDir, 'peer.ts'), join(outDir, 'sync.ts')].includes(f)).sort();
writeFileSync(join(outDir, 'index.ts'), [
  "export type { ProtoGrpcType } from './admin.js';",
  "export type { ProtoGrpcType as PeerProtoGrpcType } from './peer.js';",
  "export type { ProtoGrpcType as SyncProtoGrpcType } from './sync.js';",
  ...modules.map((f) => `export type * from './${f.slice(outDir.length + 1).replace(/\.ts$/, '.js')}';`),
  '',
].join('\n'));
for (const file of walk(outDir)) writeFileSync(file, header + readFileSync(file, 'utf8'));
console.log(`generated ${walk(outDir).length} files in packages/proto/${outDir}`);
