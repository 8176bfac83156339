export { FakeDataPlane } from './fake.js';
export { FakeAddressOwner, type AddressCall } from './addresses.js';
export { FakeConnectionTable } from './connections.js';
