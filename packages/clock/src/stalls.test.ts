import assert from 'node:assert/strict';
import { askAgainIfStalled } from './stalls.js';

describe('askAgainIfStalled: a "no" from a stalled event loop is asked again', () => {
  /** Answers in order; each answer comes `tookMs` after the ask, on a clock the test moves. */
  function asker(answers: Array<{ yes: boolean; tookMs: number }>): { ask: () => Promise<boolean>; now: () => number; asked: () => number } {
    let t = 0;
    let i = 0;
    return {
      ask: async () => {
        const a = answers[i++]!;
        t += a.tookMs;
        return a.yes;
      },
      now: () => t,
      asked: () => i,
    };
  }

  it('a yes is a yes, asked once', async () => {
    const a = asker([{ yes: true, tookMs: 900 }]);
    assert.equal(await askAgainIfStalled(a.ask, 100, a.now), true);
    assert.equal(a.asked(), 1);
  });

  it('a no within 1.5 bounds is the far end\'s: no second ask', async () => {
    const a = asker([{ yes: false, tookMs: 150 }, { yes: true, tookMs: 1 }]);
    assert.equal(await askAgainIfStalled(a.ask, 100, a.now), false);
    assert.equal(a.asked(), 1);
  });

  it('a no that took longer was the loop\'s: asked again, and that answer stands, yes or no', async () => {
    const yes = asker([{ yes: false, tookMs: 151 }, { yes: true, tookMs: 2 }]);
    assert.equal(await askAgainIfStalled(yes.ask, 100, yes.now), true);
    assert.equal(yes.asked(), 2);
    const no = asker([{ yes: false, tookMs: 800 }, { yes: false, tookMs: 100 }]);
    assert.equal(await askAgainIfStalled(no.ask, 100, no.now), false);
    assert.equal(no.asked(), 2);
  });
});
