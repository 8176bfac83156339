export * from './types.js';
export { DataPlaneError } from './errors.js';
export type { AddressOwner, Announce, FloatingAddress } from './addresses.js';
