export { systemClock, type Clock, type TimerHandle } from './clock.js';
