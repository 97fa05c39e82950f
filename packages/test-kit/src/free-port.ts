// A port nothing listens on now, for the throwaway servers the tests start (redis-server, nats-server).
import { createServer } from 'node:net';

/** A free TCP port on 127.0.0.1, found by listening on port 0 and closing at once. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}
