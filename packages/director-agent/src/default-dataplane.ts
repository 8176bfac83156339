import type { DataPlane } from '@lbd/dataplane';

/**
 * The production data plane, in one small file so it is the only place the agent names the nftables
 * implementation (tests inject FakeDataPlane instead). The import is dynamic: lbd-agent validates its
 * config and exits 78 on a bad one before this module's dependencies are even loaded.
 *
 * TODO(dataplane-nft): once @lbd/dataplane-nft is committed and builds, replace the variable specifier
 * with `import('@lbd/dataplane-nft')` and add `{ "path": "../dataplane-nft" }` back to tsconfig.json's
 * references, so the compiler checks the constructor's signature.
 */
export async function createDefaultDataPlane(): Promise<DataPlane> {
  // A variable keeps tsc from resolving the package before it exists; the runtime import is the same.
  const specifier: string = '@lbd/dataplane-nft';
  const mod = (await import(specifier)) as { NftDataPlane?: new () => DataPlane };
  if (typeof mod.NftDataPlane !== 'function') {
    throw new Error(`${specifier} does not export NftDataPlane`);
  }
  return new mod.NftDataPlane();
}
