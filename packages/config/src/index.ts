export * from './types.js';
export * from './address.js';
export { validateConfig, formatProblem, type Problem, type ValidationResult } from './validate.js';
export { ConfigError, EXIT } from './errors.js';
export { parseConfig, loadConfig } from './load.js';
export { DRILL_MODES, DRILL_PAUSE_MS, PAUSE_DRILL_MODES, type DrillMode } from './drill.js';
