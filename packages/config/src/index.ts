export * from './types.js';
export * from './address.js';
export { validateConfig, formatProblem, type Problem, type ValidationResult } from './validate.js';
export { ConfigError, EXIT } from './errors.js';
export { parseConfig, loadConfig } from './load.js';
export { DRILL_PAUSE_MS, DRILL_RESULTS, DRILL_SCENARIOS, PAUSE_DRILL_SCENARIOS, type DrillResultWord, type DrillScenario } from './drill.js';
export { EVENT_KINDS, isLbdEvent, isStoredEvent, type ApplyResultWord, type EventKind, type LbdEvent, type StoredEvent } from './events.js';
export { SEVERITIES, type Severity } from './findings.js';
