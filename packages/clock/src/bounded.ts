/**
 * What `call` settles to, or `late` when it has not within `ms`. A bound an operator can trust on a busy
 * box: after a stall (a saturated core, a paused process) timers come due before sockets are read, so a
 * bound that fired at once would call an answer already waiting in a socket lost. When the bound passes,
 * the event loop gets one more turn (its poll phase reads what arrived) before the verdict. A call's own
 * deadline is a timer too: keep it well after `ms`, only as the end of an abandoned call.
 */
export function answerWithin<T>(call: Promise<T>, ms: number, late: T): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let turn: ReturnType<typeof setImmediate> | undefined;
  const bound = new Promise<T>((resolve) => { timer = setTimeout(() => { turn = setImmediate(() => resolve(late)); }, ms); });
  return Promise.race([call, bound]).finally(() => {
    clearTimeout(timer);
    if (turn !== undefined) clearImmediate(turn);
  });
}
