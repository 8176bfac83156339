import { createServer, type Server } from 'node:net';

/**
 * The real servers of `pnpm bench health`: one process holding one `net.Server` per address × port
 * (5 000 listeners for the full run), run inside the benchmark's targets namespace.
 *
 *   node health-targets.js '{"addresses":["198.19.1.1",...],"firstPort":10000,"ports":100}'
 *
 * A connection is read until the client closes it, then closed: the health checker's tcp probe connects
 * and closes, as it would against a real service. Prints `{"ready":true,"listeners":N}` on stdout once
 * every server listens; runs until it is signalled.
 */

interface Spec {
  readonly addresses: readonly string[];
  readonly firstPort: number;
  readonly ports: number;
}

function parseSpec(text: string | undefined): Spec {
  const v = JSON.parse(text ?? '') as Partial<Spec>;
  if (!Array.isArray(v.addresses) || !Number.isInteger(v.firstPort) || !Number.isInteger(v.ports)) {
    throw new Error('usage: health-targets.js \'{"addresses":[...],"firstPort":N,"ports":N}\'');
  }
  return v as Spec;
}

function listen(address: string, port: number): Promise<Server> {
  const server = createServer((socket) => {
    socket.on('error', () => {});
    socket.resume();
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: address, port, backlog: 128 }, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

async function main(): Promise<void> {
  const spec = parseSpec(process.argv[2]);
  const servers: Server[] = [];
  // One address at a time: a few hundred listen() calls in flight at once, not thousands.
  for (const address of spec.addresses) {
    const ports = Array.from({ length: spec.ports }, (_, i) => spec.firstPort + i);
    servers.push(...(await Promise.all(ports.map((p) => listen(address, p)))));
  }
  process.stdout.write(`${JSON.stringify({ ready: true, listeners: servers.length })}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`health-targets: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
