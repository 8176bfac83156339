export { FakeAnnouncer } from './fake-announcer.js';
