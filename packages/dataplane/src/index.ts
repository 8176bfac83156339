export * from './types.js';
export { DataPlaneError } from './errors.js';
