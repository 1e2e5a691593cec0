// A temp store with a PostgreSQL and a MariaDB recipe, for the harness.
// Nothing starts a daemon here: the runners' global setup does, by the
// rule of docs/api.md (`dbfork daemon start`), and it leaves when idle.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const PKG = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const REPO = path.resolve(PKG, '..', '..');

const SEEDS = {
  postgres: "create table notes(id serial primary key, who text not null);\ninsert into notes(who) values ('golden');\n",
  mariadb: 'CREATE TABLE notes(id int AUTO_INCREMENT PRIMARY KEY, who varchar(200) NOT NULL);\n' +
    "INSERT INTO notes(who) VALUES ('golden');\n",
};

// The engine cache the tests share (scripts/lib.sh ensure_engines fills
// it), and a store on its own XFS image rather than a plain dir.
export const PG18_ENV = { DBFORK_ENGINE_CACHE: '/var/cache/dbfork-ci/engines', DBFORK_STORE_FS: '' };

export function dbforkBin() {
  const b = process.env.DBFORK_BIN || path.join(REPO, 'bin', 'dbfork');
  if (!fs.existsSync(b)) execFileSync('go', ['build', '-o', b, './cmd/dbfork'], { cwd: REPO, stdio: 'inherit' });
  return b;
}

// The fixtures name the package as a user would (@dbfork/node); link it
// into its own node_modules so they resolve it.
export function linkSelf() {
  const dir = path.join(PKG, 'node_modules', '@dbfork');
  fs.mkdirSync(dir, { recursive: true });
  const link = path.join(dir, 'node');
  if (!fs.existsSync(link)) fs.symlinkSync('../..', link);
}

export class World {
  // pg18: a PostgreSQL 18 recipe too (from the shared engine cache), whose
  // leases hand out databases cloned inside the server on the store's own
  // XFS image (env({ ...PG18_ENV })).
  constructor() {
    this.root = fs.mkdtempSync(path.join(os.tmpdir(), 'dbfork-node-'));
    fs.chmodSync(this.root, 0o755);
    this.store = path.join(this.root, 'store');
    this.bin = dbforkBin();
    this.recipes = {};
    for (const [engine, seed] of Object.entries(SEEDS)) {
      const dir = path.join(this.root, engine);
      fs.mkdirSync(dir);
      fs.writeFileSync(path.join(dir, 'seed.sql'), seed);
      fs.writeFileSync(path.join(dir, 'dbfork.toml'),
        `engine = "${engine}"\ndatabase = "app"\n[[load]]\nsql = ["seed.sql"]\n[pool]\nmin = 4\nmax = 8\n`);
      this.recipes[engine] = path.join(dir, 'dbfork.toml');
    }
    const pg18 = path.join(this.root, 'postgres18');
    fs.mkdirSync(pg18);
    fs.writeFileSync(path.join(pg18, 'seed.sql'), SEEDS.postgres);
    fs.writeFileSync(path.join(pg18, 'dbfork.toml'),
      'engine = "postgres"\nversion = "18"\ndatabase = "app"\n[[load]]\nsql = ["seed.sql"]\n[pool]\nmin = 2\nmax = 4\n');
    this.recipes.postgres18 = path.join(pg18, 'dbfork.toml');
  }

  // env for a test run: the store by DBFORK_STORE (so `dbfork daemon
  // start` picks it), no socket handed in.
  env(extra = {}) {
    const env = { ...process.env };
    for (const k of ['DBFORK_SOCKET', 'DBFORK_RECIPE', 'NODE_OPTIONS', 'NODE_TEST_CONTEXT']) delete env[k];
    return { ...env, DBFORK_STORE: this.store, DBFORK_STORE_FS: 'plain', DBFORK_DAEMON_IDLE: '2s', DBFORK_BIN: this.bin,
      ...extra };
  }

  dbfork(...args) {
    return spawnSync(this.bin, ['--store', this.store, ...args], { encoding: 'utf8', env: this.env() });
  }

  // PIDs of processes whose command line names this store (the daemon
  // and its servers).
  processes() {
    const out = [];
    for (const pid of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue;
      try {
        if (fs.readFileSync(`/proc/${pid}/cmdline`).includes(this.store)) out.push(Number(pid));
      } catch (_) { /* gone */ }
    }
    return out;
  }

  async waitDaemonGone(ms = 120e3) {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      if (!this.processes().length) return;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`the idle daemon did not leave: ${this.processes()}`);
  }

  // close gc's the store and returns the instances left behind.
  close() {
    this.dbfork('gc', '--all');
    const ls = JSON.parse(this.dbfork('ls', '--json').stdout || '{}');
    // Its own XFS image, or (a plain store root opened) its nosuid bind.
    this.dbfork('store', 'umount');
    const mounted = fs.readFileSync('/proc/self/mounts', 'utf8').split('\n')
      .filter((l) => (l.split(' ')[1] || '').startsWith(this.root + '/'));
    if (mounted.length) throw new Error(`still mounted, not removing ${this.root}: ${mounted.join('; ')}`);
    fs.rmSync(this.root, { recursive: true, force: true });
    return ls.instances || [];
  }
}
