import assert from 'node:assert/strict';
import { ctnlWriterFromEnv, EnvError } from './default-dataplane.js';

describe('LBD_CTNETLINK_WRITER', () => {
  it('is unset, in-process or helper; in-process only where the addon loads, and the error says why and what to do', async () => {
    const loads = async (): Promise<string | null> => null;
    const missing = async (): Promise<string | null> => '/usr/lib/lbd/ctnl-writer.node was not built';
    assert.equal(await ctnlWriterFromEnv({}, missing), undefined);
    assert.equal(await ctnlWriterFromEnv({ LBD_CTNETLINK_WRITER: 'helper' }, missing), 'helper');
    assert.equal(await ctnlWriterFromEnv({ LBD_CTNETLINK_WRITER: 'in-process' }, loads), 'in-process');
    await assert.rejects(ctnlWriterFromEnv({ LBD_CTNETLINK_WRITER: 'in-process' }, missing), (e: unknown) => e instanceof EnvError
      && e.message === 'LBD_CTNETLINK_WRITER is "in-process", but /usr/lib/lbd/ctnl-writer.node was not built: run pnpm run build (or reinstall the lbd package), or unset it for the default');
    await assert.rejects(ctnlWriterFromEnv({ LBD_CTNETLINK_WRITER: 'addon' }, loads), /LBD_CTNETLINK_WRITER is "addon": .* in-process or helper/);
  });
});
