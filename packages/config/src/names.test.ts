import assert from 'node:assert/strict';
import { nearestName } from './names.js';

describe('nearestName', () => {
  it('names the known word a typo most likely meant, case differences free', () => {
    assert.equal(nearestName('--verison', ['--version', '--socket', '--json']), '--version');
    assert.equal(nearestName('realservers', ['realServers', 'vip']), 'realServers');
  });
  it('names nothing for a word far from every known one', () => {
    assert.equal(nearestName('foo', ['vip', 'port']), undefined);
    assert.equal(nearestName('--frobnicate', ['--socket', '--json']), undefined);
  });
});
