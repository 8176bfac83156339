import assert from 'node:assert/strict';
import { Metadata, status } from '@grpc/grpc-js';
import { EXIT } from '@lbd/config';
import { describeFailure } from './errors.js';

describe('describeFailure', () => {
  const socket = '/run/lbd/admin.sock';
  const grpcError = (code: status, details: string): Error => Object.assign(new Error(details), { code, details, metadata: new Metadata() });
  const cases: [string, unknown, number, RegExp][] = [
    ['EACCES on the socket', Object.assign(new Error('x'), { code: 'EACCES' }), EXIT.noPermission, /permission denied on \/run\/lbd\/admin\.sock: .*run lbadm as root/],
    ['ENOENT', Object.assign(new Error('x'), { code: 'ENOENT' }), EXIT.unavailable, /no admin socket at \/run\/lbd\/admin\.sock/],
    ['refused connect', grpcError(status.UNAVAILABLE, 'No connection established. Last error: connect ECONNREFUSED /run/lbd/admin.sock'), EXIT.unavailable, /nothing is listening on/],
    ['EACCES via gRPC', grpcError(status.UNAVAILABLE, 'connect EACCES /run/lbd/admin.sock'), EXIT.noPermission, /run lbadm as root/],
    ['deadline', grpcError(status.DEADLINE_EXCEEDED, 'Deadline exceeded'), EXIT.unavailable, /did not answer in time/],
    ['data plane refused', grpcError(status.FAILED_PRECONDITION, 'the data plane refused: apply: PermissionDenied'), EXIT.failure, /^lbadm: the agent cannot do that now: the data plane refused/],
    ['bad request field', grpcError(status.INVALID_ARGUMENT, 'source: is required'), EXIT.usage, /^lbadm: the agent refused the request: source: is required$/],
    ['internal', grpcError(status.INTERNAL, 'boom'), EXIT.failure, /^lbadm: lbd-agent failed: boom$/],
    ['unimplemented', grpcError(status.UNIMPLEMENTED, 'x'), EXIT.failure, /older than lbadm/],
  ];
  for (const [name, err, exit, message] of cases) {
    it(`${name} -> ${exit}`, () => {
      const f = describeFailure(err, socket);
      assert.equal(f.exit, exit);
      assert.match(f.message, message);
    });
  }
});
