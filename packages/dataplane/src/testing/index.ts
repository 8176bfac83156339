export { FakeDataPlane } from './fake.js';
export { FakeAddressOwner, type AddressCall } from './addresses.js';
