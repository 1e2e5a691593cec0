// The client contract (docs/api.md, "The client contract";
// clients/contract.json) checked against a real Vitest run with the
// package's global setup and setup file and a real `dbfork serve`: every
// case of the shared file, keep-failed, and the mode names freshDatabase()
// reports.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { PKG, World, linkSelf } from './world.mjs';

const CONTRACT = JSON.parse(fs.readFileSync(path.join(PKG, '..', 'contract.json'), 'utf8'));
const FIXTURE = path.join(PKG, 'test/fixtures/contract');

if (process.getuid() !== 0) {
  test('needs root', { skip: 'dbfork mounts and runs servers as its system user; CI runs as root' }, () => {});
} else {
  let world;
  before(() => { linkSelf(); world = new World(); });
  after(async () => {
    await world.waitDaemonGone();
    assert.deepEqual(world.close(), [], 'instances left after gc');
  });

  // run: one Vitest run of the fixture; the options go to globalSetup,
  // env on top of a clean environment. Returns the run and its record.
  function run(option, env) {
    const out = fs.mkdtempSync(path.join(world.root, 'out-'));
    const base = world.env({ DBFORK_TEST_OUT: out, DBFORK_CONTRACT_OPTION: JSON.stringify(option), CI: 'true' });
    for (const k of ['DBFORK_BACKEND', 'DBFORK_KEEP_FAILED']) delete base[k];
    const res = spawnSync(process.execPath, [path.join(PKG, 'node_modules/.bin/vitest'), 'run'],
      { cwd: FIXTURE, env: { ...base, ...env }, encoding: 'utf8', timeout: 600e3 });
    const f = path.join(out, 'contract.json');
    return { res, rec: fs.existsSync(f) ? JSON.parse(fs.readFileSync(f, 'utf8')) : {} };
  }

  function instances() {
    return JSON.parse(world.dbfork('ls', '--json').stdout || '{}').instances || [];
  }

  test('the client contract', async () => {
    const values = { '@recipe': world.recipes.postgres, '@missing': path.join(world.root, 'missing', 'dbfork.toml') };
    const subst = (o = {}) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, values[v] ?? v]));
    for (const c of CONTRACT.cases) {
      const env = subst(c.env);
      const option = subst(c.option);
      if (!env.DBFORK_RECIPE && !option.recipe) option.recipe = world.recipes.postgres;
      const { res, rec } = run(option, env);
      assert.equal(res.status, 0, `${c.name}: vitest failed:\n${res.stdout}\n${res.stderr}`);
      assert.ok(rec.id, `${c.name}: no lease`);
      if (c.want.backend) assert.equal(rec.backend, c.want.backend, c.name);
      assert.ok(rec.modes.length && rec.modes.every((m) => CONTRACT.fresh_modes.includes(m)),
        `${c.name}: modes ${rec.modes}`);
    }

    // Keep-failed: the failed worker's instance runs on, and is named.
    assert.ok(CONTRACT.variables.DBFORK_KEEP_FAILED);
    let { res, rec } = run({ recipe: world.recipes.postgres }, { DBFORK_CONTRACT_FAIL: '1', DBFORK_KEEP_FAILED: '1' });
    assert.notEqual(res.status, 0);
    try {
      assert.match(res.stdout + res.stderr, new RegExp(`kept instance ${rec.id}`));
      const kept = instances().find((i) => i.id === rec.id);
      assert.equal(kept && kept.status, 'ready', JSON.stringify(instances()));
    } finally {
      if (rec.id) world.dbfork('down', rec.id);
    }

    // Without it the failed worker's lease is released like any other.
    ({ res, rec } = run({ recipe: world.recipes.postgres }, { DBFORK_CONTRACT_FAIL: '1' }));
    assert.notEqual(res.status, 0);
    assert.doesNotMatch(res.stdout + res.stderr, /kept instance/);
    await world.waitDaemonGone();
    assert.ok(!instances().some((i) => i.id === rec.id), `instance ${rec.id} outlived its run`);
  });
}
