export { answerWithin } from './bounded.js';
export { systemClock, type Clock, type TimerHandle } from './clock.js';
