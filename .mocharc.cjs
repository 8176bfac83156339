'use strict';
/**
 * mocha runs the compiled tests (`pnpm test` builds first). `test/reporter.cjs` ends the output with the
 * line CI reads: `N passed, N failed, N skipped`.
 */
const fs = require('node:fs');
const path = require('node:path');

const SPEC = ['packages/*/dist/**/*.test.js', 'test/dist/**/*.test.js'];

/**
 * Whether any file matches `<dirs>/dist/**\/*.test.js`. A pattern that matches nothing (a package with no
 * tests yet, an unbuilt test/) is left out instead of making mocha print a warning for it. When nothing
 * matches at all, `fail-zero` makes the run fail: zero tests is a broken build, not a green one.
 */
function hasTests(pattern) {
  const [prefix] = pattern.split('/dist/');
  const dirs = prefix.endsWith('/*')
    ? safeList(path.join(__dirname, prefix.slice(0, -2))).map((d) => path.join(__dirname, prefix.slice(0, -2), d))
    : [path.join(__dirname, prefix)];
  return dirs.some((d) => containsTest(path.join(d, 'dist')));
}

function safeList(dir) {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}

function containsTest(dir) {
  let entries;
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return false;
  }
  return entries.some((e) => (e.isDirectory() ? e.name !== 'node_modules' && containsTest(path.join(dir, e.name)) : e.name.endsWith('.test.js')));
}

/**
 * Files named on the command line (`npx mocha test/dist/x.test.js`) run alone: mocha appends a config's
 * spec to the command line's, so without this a run of one file ran the whole suite, privileged drills
 * included.
 */
const named = process.argv.slice(2).some((a) => /\.test\.js$/.test(a));

module.exports = {
  ...(named ? {} : { spec: SPEC.filter(hasTests) }),
  exit: true, // gRPC channels and etcd watchers may keep the event loop alive after the last test
  timeout: 20000,
  'fail-zero': true,
  reporter: path.join(__dirname, 'test', 'reporter.cjs'),
};
