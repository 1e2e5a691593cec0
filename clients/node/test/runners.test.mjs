// Real Vitest and real Jest, 4 workers each, against PostgreSQL and
// MariaDB: every worker's test files see only their own rows, the seed
// row is there before the test file loads, freshDatabase() gives the
// golden's data back, and no lease is left after the run.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client, DbforkError, findSocket, globalSetup } from '../index.js';
import { PG18_ENV, PKG, World, linkSelf } from './world.mjs';

const RUNNERS = {
  vitest: { cwd: path.join(PKG, 'test/fixtures/vitest'), args: [path.join(PKG, 'node_modules/.bin/vitest'), 'run'],
    config: 'vitest.config.js' },
  jest: { cwd: path.join(PKG, 'test/fixtures/jest'), args: [path.join(PKG, 'node_modules/.bin/jest')],
    config: 'jest.config.js' },
};

if (process.getuid() !== 0) {
  test('needs root', { skip: 'dbfork mounts and runs servers as its system user; CI runs as root' }, () => {});
} else {
  let world;
  before(() => { linkSelf(); world = new World(); });
  after(async () => {
    await world.waitDaemonGone();
    assert.deepEqual(world.close(), [], 'instances left after gc');
  });

  function records(out, kind) {
    return fs.readdirSync(out).filter((n) => n.startsWith(`${kind}-`))
      .flatMap((n) => fs.readFileSync(path.join(out, n), 'utf8').trim().split('\n').map((l) => JSON.parse(l)));
  }

  async function leftLeases(socket) {
    const c = new Client(socket);
    const end = Date.now() + 20e3;
    let ls = await c.leases();
    while (ls.length && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 200));
      ls = await c.leases();
    }
    return ls;
  }

  for (const engine of ['postgres', 'mariadb']) {
    describe(engine, () => {
      for (const [name, r] of Object.entries(RUNNERS)) {
        test(`${name}: 4 workers, each its own database`, async () => {
          const out = fs.mkdtempSync(path.join(world.root, 'out-'));
          const env = world.env({ DBFORK_RECIPE: world.recipes[engine], DBFORK_TEST_OUT: out, CI: 'true' });
          // Jest runs a small suite in band (one process) when an earlier
          // run's cached timings say every file is fast: a fresh cache keeps
          // each run on its 4 worker processes.
          const args = name === 'jest' ? [...r.args, '--cacheDirectory', path.join(out, 'jest-cache')] : r.args;
          const res = spawnSync(process.execPath, args, { cwd: r.cwd, env, encoding: 'utf8', timeout: 600e3 });
          assert.equal(res.status, 0, `${name} failed:\n${res.stdout}\n${res.stderr}`);

          const iso = records(out, 'iso');
          assert.equal(iso.length, 7, JSON.stringify(iso));
          for (const rec of iso) {
            assert.deepEqual(rec.others, [], `${rec.file} saw other workers' rows`);
            assert.equal(rec.rows[0], 'golden');
            assert.ok(rec.url.startsWith(engine === 'postgres' ? 'postgres://' : 'mysql://'), rec.url);
          }
          // One lease per worker process, never shared between processes.
          const pidOf = new Map();
          for (const rec of iso) {
            assert.ok(rec.lease, 'DBFORK_LEASE_ID not set');
            if (pidOf.has(rec.lease)) assert.equal(pidOf.get(rec.lease), rec.pid, `lease ${rec.lease} in two processes`);
            pidOf.set(rec.lease, rec.pid);
          }
          const workers = new Set(iso.map((rec) => rec.worker));
          assert.ok(workers.size >= 2 && [...workers].every((w) => /^[1-4]$/.test(w)), `workers: ${[...workers]}`);

          const fresh = records(out, 'fresh');
          assert.equal(fresh.length, 1);
          assert.equal(fresh[0].mode, 'reset'); // PostgreSQL 15 and MariaDB: in-place reset

          // After the run: no lease left, the run dir gone.
          const socket = await findSocket({ env: world.env() });
          assert.deepEqual(await leftLeases(socket), []);
          assert.ok(iso[0].runDir && !fs.existsSync(iso[0].runDir), `run dir ${iso[0].runDir} left`);
        });
      }
    });
  }

  test('vitest: freshDatabase() clones a database inside PostgreSQL 18', async () => {
    const w18 = new World(); // its own store, on an XFS image
    try {
      const out = fs.mkdtempSync(path.join(w18.root, 'out-'));
      const env = w18.env({ ...PG18_ENV, DBFORK_RECIPE: w18.recipes.postgres18, DBFORK_TEST_OUT: out, CI: 'true' });
      const r = RUNNERS.vitest;
      const res = spawnSync(process.execPath, [...r.args, 'fresh.test.js'], { cwd: r.cwd, env, encoding: 'utf8',
        timeout: 600e3 });
      assert.equal(res.status, 0, `vitest failed:\n${res.stdout}\n${res.stderr}`);
      const fresh = records(out, 'fresh');
      assert.equal(fresh.length, 1);
      assert.equal(fresh[0].mode, 'database');
      assert.deepEqual(fresh[0].rows, ['golden']);
      const socket = await findSocket({ env: w18.env(PG18_ENV) });
      assert.deepEqual(await leftLeases(socket), []);
      await w18.waitDaemonGone();
    } finally {
      assert.deepEqual(w18.close(), [], 'instances left after gc');
    }
  });

  test('a worker that dies loses its lease', async () => {
    const socket = await findSocket({ env: world.env() });
    const env = world.env({ DBFORK_SOCKET: socket, DBFORK_RECIPE: world.recipes.postgres });
    const child = spawn(process.execPath, ['--input-type=module', '-e',
      "import('@dbfork/node').then(async (d) => { await d.setupWorker(); console.log(process.env.DBFORK_LEASE_ID);" +
      ' setInterval(() => {}, 1000); })'], { cwd: PKG, env, stdio: ['ignore', 'pipe', 'inherit'] });
    const id = await new Promise((resolve, reject) => {
      child.stdout.once('data', (d) => resolve(String(d).trim()));
      child.once('exit', (code) => reject(new Error(`worker exited ${code}`)));
    });
    const c = new Client(socket);
    assert.ok((await c.leases()).some((l) => l.id === id), 'the lease is not held');
    child.kill('SIGKILL');
    const left = await leftLeases(socket);
    assert.ok(!left.some((l) => l.id === id), `lease ${id} outlived its worker`);
  });

  test('no daemon to be had: one clear line', async () => {
    await assert.rejects(findSocket({ env: world.env({ DBFORK_BIN: '/nonexistent/dbfork' }) }),
      (e) => e instanceof DbforkError && /^dbfork: cannot run \/nonexistent\/dbfork: install dbfork/.test(e.message));
    const fake = path.join(world.root, 'fake-dbfork');
    fs.writeFileSync(fake, '#!/bin/sh\necho "some noise" >&2\necho "dbfork: starting a daemon needs root" >&2\nexit 1\n');
    fs.chmodSync(fake, 0o755);
    await assert.rejects(findSocket({ env: world.env({ DBFORK_BIN: fake }) }),
      { message: 'dbfork: starting a daemon needs root' });
    await assert.rejects(globalSetup({ recipe: path.join(world.root, 'nope.toml') }),
      /recipe .*nope\.toml not found: pass \{ recipe \} to the global setup or set DBFORK_RECIPE/);
  });

  test('the README shows the configs the tests run', () => {
    const readme = fs.readFileSync(path.join(PKG, 'README.md'), 'utf8');
    for (const r of Object.values(RUNNERS)) {
      const cfg = fs.readFileSync(path.join(r.cwd, r.config), 'utf8');
      assert.ok(readme.includes(cfg), `README.md lacks ${r.config} as the tests run it:\n${cfg}`);
    }
  });
}
