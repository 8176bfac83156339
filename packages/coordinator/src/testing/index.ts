/** Fakes for tests of code that uses the coordinator. Never imported by production code. */
export { FakeClock, ProcessClock } from '@lbd/clock/testing';
export { FakeCoordinator, type FakeCoordinatorOptions } from './fake-coordinator.js';
export { KvUnreachable, MemoryKv, type KvFault } from './memory-kv.js';
