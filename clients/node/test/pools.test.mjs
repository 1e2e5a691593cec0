// An app's module-level pg.Pool (made from DATABASE_URL when its module
// loads) across freshDatabase() calls, under real Vitest: with the
// onFresh hook every test sees the golden's row only, in each mode this
// machine has (reset on PostgreSQL 15, database on PostgreSQL 18); without
// it the run fails, never passing quietly with earlier tests' rows.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { PG18_ENV, PKG, World, linkSelf } from './world.mjs';

const CWD = path.join(PKG, 'test/fixtures/pools');
const VITEST = path.join(PKG, 'node_modules/.bin/vitest');

function run(world, env, follow) {
  const res = spawnSync(process.execPath, [VITEST, 'run', 'pool.test.js'], { cwd: CWD, encoding: 'utf8',
    env: world.env({ ...env, CI: 'true', FOLLOW: follow ? '1' : '0' }), timeout: 600e3 });
  return { status: res.status, out: `${res.stdout}\n${res.stderr}` };
}

const MODES = [
  { mode: 'reset', env: {}, recipe: 'postgres', stale: /Connection terminated unexpectedly|terminating connection/ },
  { mode: 'database', env: PG18_ENV, recipe: 'postgres18', stale: /not currently accepting connections|terminating connection/ },
];

if (process.getuid() !== 0) {
  test('needs root', { skip: 'dbfork mounts and runs servers as its system user; CI runs as root' }, () => {});
} else {
  for (const m of MODES) {
    test(`module-level pool, fresh = ${m.mode}: followed with onFresh, loud without`, async () => {
      linkSelf();
      const world = new World();
      try {
        const env = { ...m.env, DBFORK_RECIPE: world.recipes[m.recipe] };
        const ok = run(world, env, true);
        assert.equal(ok.status, 0, `with onFresh:\n${ok.out}`);
        assert.match(ok.out, /3 passed/, ok.out);
        const stale = run(world, env, false);
        assert.notEqual(stale.status, 0, `a stale pool passed quietly:\n${stale.out}`);
        assert.match(stale.out, m.stale, stale.out);
      } finally {
        await world.waitDaemonGone();
        assert.deepEqual(world.close(), [], 'instances left after gc');
      }
    });
  }
}
