'use strict';
/**
 * Package boundaries, enforced (`pnpm run lint`). Checks the TypeScript sources (packages/*\/src, test/src),
 * never dist/ or node_modules/.
 *
 * Why a generated tsconfig: an import of `@lbd/x` (or an exported subpath such as `@lbd/dataplane/testing`)
 * is resolved to that package's *source* entry, taken from its package.json `exports`. So the check works
 * before anything is built, cycles across packages are seen, and every other way into a package (a relative
 * path into its directory, a path into its dist/) stands out as a deep import.
 */
const fs = require('node:fs');
const path = require('node:path');

const ROOT = __dirname;

/** One workspace package: its directory name, package name and public entry points. */
function readPackages() {
  const dir = path.join(ROOT, 'packages');
  const out = [];
  for (const d of fs.readdirSync(dir).sort()) {
    let pkg;
    try {
      pkg = JSON.parse(fs.readFileSync(path.join(dir, d, 'package.json'), 'utf8'));
    } catch {
      continue;
    }
    const exportsMap = typeof pkg.exports === 'string' || pkg.exports === undefined ? { '.': pkg.exports } : pkg.exports;
    const entries = [];
    for (const [sub, target] of Object.entries(exportsMap)) {
      const file = typeof target === 'string' ? target : target && (target.types ?? target.import ?? target.default);
      if (typeof file !== 'string') continue;
      // ./dist/testing/index.d.ts -> src/testing/index.ts (tsconfig: rootDir src, outDir dist)
      const source = file.replace(/^\.\/dist\//, 'src/').replace(/\.d\.ts$|\.js$/, '.ts');
      entries.push({ specifier: sub === '.' ? pkg.name : `${pkg.name}/${sub.replace(/^\.\//, '')}`, source: `packages/${d}/${source}` });
    }
    out.push({ dir: d, name: pkg.name, entries });
  }
  return out;
}

const PACKAGES = readPackages();

/** The tsconfig depcruise resolves with: only `paths`, from package names and exports to their sources. */
function writeResolveTsconfig() {
  const paths = {};
  for (const p of PACKAGES) for (const e of p.entries) paths[e.specifier] = [e.source];
  const dir = path.join(ROOT, 'node_modules', '.cache', 'lbd-depcruise');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'tsconfig.json');
  // `include` only keeps TypeScript from refusing a config without inputs; depcruise reads `paths` from it.
  const config = { compilerOptions: { baseUrl: ROOT, paths }, include: [path.join(ROOT, 'packages', '*', 'src')] };
  const text = `${JSON.stringify(config, null, 2)}\n`;
  // Rewrite only on change: several lint runs may share the checkout.
  if (!fs.existsSync(file) || fs.readFileSync(file, 'utf8') !== text) fs.writeFileSync(file, text);
  return file;
}

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const dirOf = (name) => PACKAGES.find((p) => p.name === `@lbd/${name}`)?.dir ?? name;

/** A module of one of the named packages (short names, `config`): resolved into its directory, or unresolved by name. */
function inPackages(...names) {
  const dirs = names.map((n) => escape(dirOf(n))).join('|');
  const pkgs = names.map(escape).join('|');
  return `^(packages/(${dirs})/|@lbd/(${pkgs})(/|$))`;
}

const ANY_LBD = '^(packages/[^/]+/|@lbd/)';
/** Test code: unit tests next to the code, the testkit, and the cross-package suite. */
const TESTS = ['\\.test\\.ts$', '^packages/testkit/', '^test/'];
const TSCONFIG_ALIAS = ['aliased-tsconfig-paths', 'aliased-tsconfig'];

/** `pkg` may import only itself and `allowed` among lbd packages (tests may also use the testkit). */
function onlyImports(pkg, allowed, comment) {
  return {
    name: `${pkg}-imports-only-${allowed.length ? allowed.join('-') : 'itself'}`,
    severity: 'error',
    comment,
    from: { path: `^packages/${escape(dirOf(pkg))}/` },
    to: { path: ANY_LBD, pathNot: inPackages(pkg, ...allowed, 'testkit') },
  };
}

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A cycle (within a package or across packages) makes build order and reasoning circular: break it with an interface in the lower module.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-package-internals',
      severity: 'error',
      comment: 'Import another package only by its name or an `exports` subpath (@lbd/dataplane/testing), never by a path into its src/ or dist/.',
      from: { path: '^(packages/[^/]+|test)/' },
      to: { path: '^packages/[^/]+/', pathNot: '^$1/', dependencyTypesNot: TSCONFIG_ALIAS },
    },
    {
      name: 'no-unexported-subpath',
      severity: 'error',
      comment: 'Only subpaths listed in the package\'s `exports` are public: @lbd/x/dist/... and @lbd/x/src/... are internals.',
      from: {},
      to: {
        couldNotResolve: true,
        path: '^@lbd/[^/]+/.',
        pathNot: PACKAGES.flatMap((p) => p.entries.map((e) => `^${escape(e.specifier)}$`)),
      },
    },
    {
      name: 'child-process-only-in-dataplane-nft-health-checker-announcer-debian-testkit-test',
      severity: 'error',
      comment: 'Only the data-plane adapter runs kernel commands, the health checker runs exec checks and ping, the announcer supervises gobgpd, the package build runs pnpm and dpkg-deb, and the test harness starts processes. Inject a command runner elsewhere.',
      from: { pathNot: '^(packages/(dataplane-nft|health-checker|announcer|debian|testkit)/|test/)' },
      to: { path: '^(node:)?child_process$' },
    },
    {
      name: 'etcd3-only-in-coordinator-kv',
      severity: 'error',
      comment: 'etcd is an implementation detail of the coordinator, behind its Kv interface: only EtcdKv (packages/coordinator/src/kv.ts) imports etcd3. Use the Coordinator interface, or Kv.',
      from: { pathNot: '^packages/coordinator/src/kv\\.ts$' },
      to: { path: '(^|/)etcd3(/|$)' },
    },
    {
      name: 'testing-exports-only-in-tests',
      severity: 'error',
      comment: 'Fakes (@lbd/*/testing) are for tests: a production import of one is a bug. Inject the real implementation. (A package\'s own fakes may build on another\'s: FakeProber on FakeClock.)',
      from: { path: '^(packages/[^/]+)/', pathNot: [...TESTS, '^packages/[^/]+/src/testing/'] },
      to: { path: '^(packages/[^/]+/(src|dist)/testing/|@lbd/[^/]+/testing(/|$))', pathNot: '^$1/' },
    },
    {
      name: 'own-fakes-only-in-tests',
      severity: 'error',
      comment: 'A package\'s production code must not import its own src/testing/ fakes.',
      from: { path: '^(packages/[^/]+)/src/', pathNot: [...TESTS, '^packages/[^/]+/src/testing/'] },
      to: { path: '^$1/src/testing/' },
    },
    {
      name: 'testkit-only-in-tests',
      severity: 'error',
      comment: '@lbd/testkit (namespaces, etcd launcher, fake clock) is for tests only.',
      from: { pathNot: TESTS },
      to: { path: inPackages('testkit') },
    },
    onlyImports('config', [], 'config is the core: it imports no other lbd package.'),
    onlyImports('dataplane', ['config'], 'The DataPlane interface depends on config only.'),
    onlyImports('dataplane-nft', ['config', 'dataplane'], 'The nftables adapter implements dataplane from config; it knows nothing of the agent.'),
    onlyImports('clock', [], 'Time, injected: the smallest core, imported by whatever schedules.'),
    onlyImports('log', [], 'The structured logger (one JSON object per line): a leaf, imported by the agent and its operator surfaces.'),
    onlyImports('connsync', ['config', 'dataplane', 'log', 'proto'], 'Connection sync moves connections between a ConnectionTable and peers: it knows neither nftables, etcd nor the agent.'),
    onlyImports('coordinator', ['config', 'clock', 'log'], 'The coordinator elects and fences through etcd; it knows nothing of the data plane or the agent.'),
    onlyImports('operator-surfaces', ['config', 'dataplane', 'log', 'proto'], 'The operator surfaces (admin gRPC server, HTTPS listener, dashboard) serve what the agent gives them through interfaces (AdminBackend, DashboardBackend, EventSource): they know nothing of the agent, the kernel or etcd.'),
    onlyImports('announcer', ['config'], 'The announcer speaks BGP through a routing daemon (GoBGP) for the ECMP tier; it knows nothing of slots, the data plane or the agent.'),
    onlyImports('health-checker', ['config', 'clock'], 'The health checker probes targets and decides up/down; it knows nothing of the data plane, coordination or the agent (the agent wires it in).'),
    {
      name: 'lbadm-no-kernel-access',
      severity: 'error',
      comment: 'lbadm is a client (gRPC/etcd): it never programs the kernel or embeds the agent.',
      from: { path: '^packages/lbadm/' },
      to: { path: inPackages('dataplane-nft', 'director-agent') },
    },
    {
      name: 'no-importing-programs',
      severity: 'error',
      comment: 'director-agent and lbadm are programs at the top of the graph: only test/ may import them.',
      from: { path: '^(packages/[^/]+)/' },
      to: { path: inPackages('director-agent', 'lbadm'), pathNot: '^$1/' },
    },
  ],
  options: {
    tsPreCompilationDeps: true, // type-only imports are dependencies too
    tsConfig: { fileName: writeResolveTsconfig() },
    // node_modules are leaves (not followed), not excluded: excluded, an import of etcd3 that resolves (in
    // the coordinator, which depends on it) vanished from the graph, and the etcd3 rule never saw it.
    doNotFollow: { path: ['(^|/)node_modules/', '(^|/)dist/'] },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      mainFields: ['module', 'main', 'types', 'typings'],
    },
    skipAnalysisNotInRules: true,
    reporterOptions: { text: { highlightFocused: true } },
  },
};
