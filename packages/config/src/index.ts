export * from './types.js';
export * from './address.js';
export { validateConfig, formatProblem, type Problem, type ValidationResult } from './validate.js';
export { ConfigError, EXIT } from './errors.js';
export { parseConfig, loadConfig } from './load.js';
export { DRILL_PAUSE_MS, DRILL_SCENARIOS, PAUSE_DRILL_SCENARIOS, type DrillScenario } from './drill.js';
