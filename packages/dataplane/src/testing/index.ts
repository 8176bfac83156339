export { FakeDataPlane } from './fake.js';
