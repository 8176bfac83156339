/** Fakes for tests of code that uses the coordinator. Never imported by production code. */
export { FakeClock } from '@lbd/clock/testing';
export { KvUnreachable, MemoryKv, type KvFault } from './memory-kv.js';
