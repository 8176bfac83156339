/**
 * lbd's version: what every program prints for --version, what an agent registers in the cluster (so
 * `lbadm cluster status` shows a rolling upgrade) and the Debian package's version. The workspace's
 * package.json files carry the same number (version.test.ts holds them to it).
 */
export const LBD_VERSION = '0.1.0';
