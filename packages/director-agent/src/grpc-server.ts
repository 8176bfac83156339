import type * as grpc from '@grpc/grpc-js';
import { hostPort } from '@lbd/config';

/** Binds `server` to address:port (IPv6 in brackets); resolves with the port bound. */
export function bindServer(server: grpc.Server, address: string, port: number, creds: grpc.ServerCredentials): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(hostPort(address, port), creds, (err, bound) => (err ? reject(err) : resolve(bound)));
  });
}

/** Stops accepting calls and gives calls in flight `graceMs` to end before they are cut. */
export function stopServer(server: grpc.Server | undefined, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    if (server === undefined) return resolve();
    const timer = setTimeout(() => { server.forceShutdown(); resolve(); }, graceMs);
    server.tryShutdown(() => { clearTimeout(timer); resolve(); });
  });
}
