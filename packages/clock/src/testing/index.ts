export { FakeClock } from './fake-clock.js';
export { ProcessClock } from './process-clock.js';
