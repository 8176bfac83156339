// What tsc does not see (`pnpm run lint` runs this with dependency-cruiser and knip). Type-aware, on the
// TypeScript sources only. Deliberately a short list, not a style guide: unhandled rejections and errors
// dropped without a word (the first run found 35 such sites, one of them hiding a failed config apply).
import tseslint from 'typescript-eslint';

/**
 * An error dropped without a word. A dropping callback must say why, inside it: `.catch(() => { /* why *\/ })`
 * (no-empty-function, like no-empty for catch blocks, counts a function holding a comment as not empty).
 * `() => undefined` cannot hold one, so it is refused outright.
 */
const SILENT_CATCH = [
  "CallExpression[callee.property.name='catch'] > ArrowFunctionExpression[body.type='Identifier'][body.name='undefined']",
  "CallExpression[callee.property.name='catch'] > ArrowFunctionExpression[body.type='UnaryExpression'][body.operator='void']",
].map((selector) => ({
  selector,
  message: 'An error dropped without a word: handle it, log it with its reason, or say why it is safe to drop '
    + 'in a comment inside the callback: .catch(() => { /* why */ }).',
}));

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', 'packages/proto/src/gen/**', '**/*.cjs', 'eslint.config.js', 'deploy/**'] },
  {
    files: ['packages/*/src/**/*.ts', 'test/src/**/*.ts'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // A promise nobody awaits or catches: its rejection is unhandled and kills the agent.
      '@typescript-eslint/no-floating-promises': ['error', { ignoreVoid: true }],
      // A promise where a plain value is expected (an async callback to an event emitter, a promise in an if).
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false, attributes: false } }],
      // An empty catch block or callback must say why (a comment inside it is enough).
      'no-empty': ['error', { allowEmptyCatch: false }],
      'no-empty-function': ['error', { allow: ['methods', 'asyncMethods'] }],
      'no-restricted-syntax': ['error', ...SILENT_CATCH],
    },
  },
  {
    // Tests may drop errors of their own cleanup; the product may not.
    files: ['**/*.test.ts', '**/*.fixture.ts', '**/testing/**/*.ts', 'packages/testkit/src/**/*.ts', 'test/src/**/*.ts'],
    rules: { 'no-restricted-syntax': 'off', 'no-empty': 'off', 'no-empty-function': 'off' },
  },
);
