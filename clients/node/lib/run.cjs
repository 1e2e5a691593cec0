'use strict';
// One test run: the global setup (in the runner's main process) finds the
// daemon and makes sure the golden exists once, then hands the socket to
// the workers through the environment; each worker process acquires its
// own lease over the socket, so the daemon ends it when the worker dies.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Client, DbforkError, findSocket } = require('./client.cjs');

// What the global setup hands to the workers.
const HANDED = ['DBFORK_SOCKET', 'DBFORK_RECIPE', 'DBFORK_BACKEND', 'DBFORK_RUN_DIR'];

function recipePath(recipe, env) {
  const p = path.resolve(recipe || env.DBFORK_RECIPE || 'dbfork.toml');
  if (!fs.existsSync(p)) {
    throw new DbforkError(`dbfork: recipe ${p} not found: pass { recipe } to the global setup or set DBFORK_RECIPE`,
      'not_found');
  }
  return p;
}

// globalSetup: options { recipe, store, backend }; returns the teardown.
async function globalSetup(opts = {}) {
  const env = process.env;
  const saved = Object.fromEntries(HANDED.map((k) => [k, env[k]]));
  const recipe = recipePath(opts.recipe, env);
  const socket = await findSocket({ store: opts.store, env });
  const client = new Client(socket);
  await client.ensureGolden(recipe);
  env.DBFORK_SOCKET = socket;
  env.DBFORK_RECIPE = recipe;
  if (opts.backend) env.DBFORK_BACKEND = opts.backend;
  env.DBFORK_RUN_DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'dbfork-run-'));
  const runDir = env.DBFORK_RUN_DIR;
  // A daemon started on demand leaves when idle; keep it for the run even
  // while the runner is still starting its workers (a touch is a call).
  const keepAlive = setInterval(() => { client.call('GET', '/v1/health?touch=1').catch(() => {}); }, 1000);
  keepAlive.unref();
  return async function globalTeardown() {
    clearInterval(keepAlive);
    await releaseAll(socket, runDir, env);
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete env[k]; else env[k] = v;
    }
  };
}

// keepFailed: DBFORK_KEEP_FAILED set to anything but the empty string
// (docs/api.md, "The client contract").
function keepFailed(env = process.env) {
  const k = env.DBFORK_KEEP_FAILED;
  return k !== undefined && k !== '';
}

// releaseAll ends the leases the run's workers recorded (those whose
// worker already exited are gone already: not found is fine); a lease a
// failed test used (markFailed) is kept with DBFORK_KEEP_FAILED.
async function releaseAll(socket, runDir, env = process.env) {
  const c = new Client(socket);
  let names = [];
  try { names = fs.readdirSync(runDir); } catch (_) { return; }
  await Promise.all(names.filter((n) => n.startsWith('lease-')).map(async (n) => {
    try {
      const st = JSON.parse(fs.readFileSync(path.join(runDir, n), 'utf8'));
      if (st.failed && keepFailed(env)) {
        await c.keep(st.lease.id);
        process.stderr.write(`dbfork: kept instance ${st.lease.id} of a failed test: ${st.lease.dsn} ` +
          `(dbfork down ${st.lease.id} when done)\n`);
        return;
      }
      await c.release(st.lease.id);
    } catch (_) { /* reclaimed already, or the daemon went away: nothing to leak */ }
  }));
  fs.rmSync(runDir, { recursive: true, force: true });
}

// The worker's state lives in globalThis for this module instance and in
// a file of the run dir named by the PID, so test files that get a fresh
// module registry (Jest) in the same worker process find the same lease.
const KEY = Symbol.for('dbfork.worker');

function stateFile(env) {
  return env.DBFORK_RUN_DIR ? path.join(env.DBFORK_RUN_DIR, `lease-${process.pid}.json`) : null;
}

function loadState(env) {
  const mem = globalThis[KEY];
  if (mem && mem.pid === process.pid) return mem;
  const f = stateFile(env);
  if (f && fs.existsSync(f)) {
    const st = JSON.parse(fs.readFileSync(f, 'utf8'));
    if (st.pid === process.pid) return (globalThis[KEY] = st);
  }
  return null;
}

function saveState(st, env) {
  globalThis[KEY] = st;
  const f = stateFile(env);
  if (f) fs.writeFileSync(f, JSON.stringify(st));
}

function exportEnv(vars, env) {
  for (const [k, v] of Object.entries(vars || {})) env[k] = v;
}

// setupWorker gives this worker process its lease (acquired once per
// process) and exports DATABASE_URL and the engine's variables.
async function setupWorker({ env = process.env } = {}) {
  let st = loadState(env);
  if (!st) {
    const recipe = recipePath(undefined, env);
    const socket = await findSocket({ env });
    const lease = await new Client(socket).acquire(recipe, { backend: env.DBFORK_BACKEND });
    st = { pid: process.pid, socket, lease, database: null };
    saveState(st, env);
  }
  env.DBFORK_SOCKET = st.socket;
  exportEnv(st.lease.env, env);
  if (st.database) exportEnv(st.database.env, env);
  env.DBFORK_LEASE_ID = st.lease.id;
  return st.lease;
}

// markFailed records that a test of this worker failed: with
// DBFORK_KEEP_FAILED the run's teardown keeps the worker's lease instead
// of releasing it. The Vitest setup file calls it for every failed test;
// under Jest call it yourself (e.g. from a custom environment).
function markFailed({ env = process.env } = {}) {
  const st = loadState(env);
  if (!st || st.failed) return;
  st.failed = true;
  saveState(st, env);
}

// lease is this worker's lease (acquired on first use).
async function lease({ env = process.env } = {}) {
  const st = loadState(env);
  if (st) return st.lease;
  return setupWorker({ env });
}

// freshDatabase gives the calling test the golden's data by the fastest
// mode the daemon finds for the worker's lease (docs/api.md, "A fresh
// database per test"; POST /v1/leases/{id}/fresh): mode "slot" is the
// next unused copy of the database built into the golden ([fresh] slots);
// "database" a database cloned inside the server (the one handed out
// before in this worker is dropped); "reset" puts the lease's instance
// back in place (its open connections break), or finds it untouched.
// Either way DATABASE_URL and the engine's variables point at the fresh
// data.
//
// A pool the app made from DATABASE_URL before the call does not follow:
// onFresh(after, { before }) lets it be rebuilt. `before()` runs before the
// fresh call (end the pool: a reset in place would break its idle
// connections, which pg reports as "Connection terminated unexpectedly"),
// `after(fresh)` once the fresh data is there (make the pool from
// fresh.dsn). Slot and database modes close the lease's own database, so
// a pool left behind fails ("not currently accepting connections") rather
// than quietly showing earlier tests' rows.
const hooks = [];

function onFresh(after, { before } = {}) {
  const h = { after, before };
  hooks.push(h);
  return () => { const i = hooks.indexOf(h); if (i >= 0) hooks.splice(i, 1); };
}

async function freshDatabase({ env = process.env } = {}) {
  await lease({ env });
  const st = loadState(env);
  const c = new Client(st.socket);
  st.database = null; // the daemon retires the previous one
  for (const h of hooks) if (h.before) await h.before();
  const f = await c.fresh(st.lease.id);
  const mode = f.mode === 'none' ? 'reset' : f.mode; // untouched: the golden's data already
  const named = mode === 'slot' || mode === 'database';
  const fresh = { mode, dsn: f.dsn, env: f.env, name: named ? f.name : null, lease: st.lease };
  if (named) st.database = { name: f.name, env: f.env };
  fresh.drop = async () => {
    const cur = loadState(env);
    if (cur && cur.database && cur.database.name === f.name) {
      cur.database = null;
      saveState(cur, env);
    }
    if (mode === 'database') await c.dropDatabase(st.lease.id, f.name).catch(() => {});
    exportEnv(st.lease.env, env);
  };
  saveState(st, env);
  exportEnv(fresh.env, env);
  for (const h of hooks) if (h.after) await h.after(fresh);
  return fresh;
}

module.exports = { globalSetup, releaseAll, setupWorker, lease, freshDatabase, onFresh, markFailed, keepFailed };
