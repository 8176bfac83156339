export { FakeDataPlane } from './fake.js';
export { FakeAddressOwner, type AddressCall } from './addresses.js';
export { FakeFlowTable } from './flows.js';
