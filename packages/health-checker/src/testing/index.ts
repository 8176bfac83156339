/** Fakes for tests of the scheduler and of its users (the agent): import only from tests. */
export { FakeClock } from '@lbd/clock/testing';
export { FakeProber, type FakeCall, type FakeOutcome } from './fake-prober.js';
export { holdUpEventLoop } from './hold-up.js';
