export { systemClock, type Clock, type TimerHandle } from './clock.js';
export { askAgainIfStalled } from './stalls.js';
