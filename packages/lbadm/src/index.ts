/** lbadm: the operator's CLI for lbd-agent. `main(argv, io)` runs it in-process (tests, embedding). */
export { main, type Io } from './cli.js';
export { parseArgs, parseSince, UsageError, COMMANDS, USAGE, HELP, type Command, type Invocation, type Since } from './args.js';
export { describeFailure, type Failure } from './errors.js';
export { completionScript, SHELLS } from './completion.js';
export {
  formatStatus, formatStats, formatRates, formatConns, formatApply, formatProblems, formatDoctor, computeRates,
  formatHealth, formatHealthEvent, formatAge, formatEvents, formatEvent,
  type Rates, type ServiceRate, type RealServerRate, type Rate,
} from './format.js';
