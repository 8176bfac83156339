'use strict';
/**
 * mocha's Spec reporter, plus one closing line that CI reads: `42 passed, 0 failed, 3 skipped`.
 * Pending tests (it.skip, this.skip(), no body) count as skipped; failed hooks count as failed.
 * Plain CommonJS, not compiled: mocha loads it before anything is built.
 */
const Mocha = require('mocha');

const { EVENT_RUN_END } = Mocha.Runner.constants;

class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    // Registered after Spec's own run-end listener, so the line comes after its epilogue and failure list.
    runner.once(EVENT_RUN_END, () => {
      const { passes = 0, failures = 0, pending = 0 } = this.stats;
      process.stdout.write(`${passes} passed, ${failures} failed, ${pending} skipped\n`);
    });
  }
}

module.exports = SummaryReporter;
