import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createConnection, createServer, type AddressInfo } from 'node:net';
import { answerWithin } from './bounded.js';

/** Blocks the event loop, as a saturated core or a paused process does. */
function stall(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) { /* stalled */ }
}

describe('answerWithin: a bound that a stalled event loop does not turn into a lost answer', () => {
  it('gives the answer that comes in time, and the late value for one that never comes', async () => {
    assert.equal(await answerWithin(Promise.resolve('answer'), 50, 'late'), 'answer');
    assert.equal(await answerWithin(new Promise<string>(() => undefined), 20, 'late'), 'late');
    await assert.rejects(answerWithin(Promise.reject(new Error('refused')), 50, 'late'), /refused/);
  });

  it('an answer that reached the socket while the loop was stalled past the bound counts', async () => {
    let echoes = 0;
    const server = createServer((s) => s.on('data', (b) => { s.write(b); echoes++; }));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const client = createConnection((server.address() as AddressInfo).port, '127.0.0.1');
    try {
      await once(client, 'connect');
      for (let i = 1; i <= 3; i++) {
        const echoed = once(client, 'data').then(() => 'answer');
        client.write('ping');
        // Turns of the loop (not time) until the server has echoed: the answer is in the client's socket,
        // unread, since sockets are read in the loop's poll phase. Then a stall ten times the bound.
        while (echoes < i) await new Promise((resolve) => setImmediate(resolve));
        const verdict = answerWithin(echoed, 20, 'late');
        stall(200);
        assert.equal(await verdict, 'answer', `round ${i}`);
      }
    } finally {
      client.destroy();
      server.close();
    }
  });
});
