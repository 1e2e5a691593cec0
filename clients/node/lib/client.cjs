'use strict';
// A small client for the API of `dbfork serve` (HTTP/JSON on a unix
// socket), Node's standard library only. See docs/api.md in the dbfork
// repository. CommonJS so that Jest's setup files can require it without
// ESM support in its VM; the ESM entry points re-export it.

const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { execFile } = require('node:child_process');

// The API version this client speaks; /v1/health says the daemon's (its
// "api"), and a client refuses a daemon of another version up front.
const API_VERSION = 1;

class DbforkError extends Error {
  // kind is the daemon's: invalid, not_found, busy, unsupported, ...
  constructor(message, kind = 'internal', status = 0) {
    super(message);
    this.name = 'DbforkError';
    this.kind = kind;
    this.status = status;
  }
}

// findBinary: $DBFORK_BIN, else the binary of this platform's package
// (@dbfork/linux-x64 or @dbfork/linux-arm64, an optional dependency npm
// installs only on its platform), else 'dbfork' from PATH.
function findBinary(env = process.env) {
  if (env.DBFORK_BIN) return env.DBFORK_BIN;
  try {
    const dir = path.dirname(require.resolve(`@dbfork/${process.platform}-${process.arch}/package.json`));
    const bin = path.join(dir, 'bin', 'dbfork');
    fs.accessSync(bin, fs.constants.X_OK);
    return bin;
  } catch (_) {
    return 'dbfork';
  }
}

// findSocket applies the one rule of docs/api.md ("Finding the daemon"):
// $DBFORK_SOCKET as it is, else whatever `dbfork daemon start --json` says
// (it starts a daemon for the store when none answers; that daemon leaves
// by itself when idle). Fails with dbfork's own one-line reason.
function findSocket({ store, env = process.env } = {}) {
  if (env.DBFORK_SOCKET) return Promise.resolve(env.DBFORK_SOCKET);
  const bin = findBinary(env);
  const args = [...(store ? ['--store', store] : []), 'daemon', 'start', '--json'];
  return new Promise((resolve, reject) => {
    execFile(bin, args, { env, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      if (err && err.code === 'ENOENT') {
        const why = bin === 'dbfork' ? ` (@dbfork/${process.platform}-${process.arch}, which carries it, is not ` +
          'installed: npm skips optional dependencies with --omit=optional)' : '';
        reject(new DbforkError(`dbfork: cannot run ${bin}: install dbfork, or set DBFORK_BIN to it ` +
          `(or DBFORK_SOCKET to a running daemon's socket)${why}`, 'missing_tool'));
        return;
      }
      if (err) {
        const lines = String(stderr).split('\n').filter((l) => l.trim());
        reject(new DbforkError(lines.length ? lines[lines.length - 1]
          : `dbfork: daemon start failed (${err.message})`, 'unavailable'));
        return;
      }
      try {
        resolve(JSON.parse(stdout).socket);
      } catch (e) {
        reject(new DbforkError(`dbfork: daemon start printed no socket: ${String(stdout).trim()}`, 'unavailable'));
      }
    });
  });
}

class Client {
  // The daemon learns the calling process's PID from the socket, so a
  // lease acquired here ends when this process does.
  constructor(socketPath, { timeoutMs = 1800e3 } = {}) {
    this.socketPath = socketPath;
    this.timeoutMs = timeoutMs;
  }

  // Rejects (kind "conflict") unless the daemon speaks API_VERSION: a
  // daemon left running by another dbfork install would otherwise misread
  // requests in the middle of a test run.
  checkApi() {
    if (!this.apiChecked) {
      this.apiChecked = this.raw('GET', '/v1/health').then((h) => {
        if (!h || h.api !== API_VERSION) {
          throw new DbforkError(`dbfork: the daemon on ${this.socketPath} speaks API version ${(h && h.api) || 0} ` +
            `(dbfork ${(h && h.version) || 'unknown'}) but @dbfork/node speaks ${API_VERSION}: stop it with ` +
            '`dbfork daemon stop` and run again (or install the dbfork that matches)', 'conflict', 409);
        }
        return h;
      });
      this.apiChecked.catch(() => { this.apiChecked = null; });
    }
    return this.apiChecked;
  }

  async call(method, urlPath, body) {
    if (!urlPath.startsWith('/v1/health')) await this.checkApi();
    return this.raw(method, urlPath, body);
  }

  raw(method, urlPath, body) {
    const data = body === undefined ? null : Buffer.from(JSON.stringify(body));
    const headers = data ? { 'Content-Type': 'application/json', 'Content-Length': data.length } : {};
    return new Promise((resolve, reject) => {
      const req = http.request({ socketPath: this.socketPath, method, path: urlPath, headers, host: 'dbfork' }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const raw = Buffer.concat(chunks).toString();
          if (res.statusCode >= 300) {
            let e;
            try {
              const j = JSON.parse(raw);
              e = new DbforkError(`dbfork: ${j.error}`, j.kind || 'internal', res.statusCode);
            } catch (_) {
              e = new DbforkError(`dbfork: HTTP ${res.statusCode}: ${raw.trim()}`, 'internal', res.statusCode);
            }
            reject(e);
            return;
          }
          try {
            resolve(raw ? JSON.parse(raw) : null);
          } catch (e) {
            reject(new DbforkError(`dbfork: bad answer to ${method} ${urlPath}: ${raw.slice(0, 200)}`));
          }
        });
        res.on('error', reject);
      });
      req.setTimeout(this.timeoutMs, () => req.destroy(new Error(`no answer within ${this.timeoutMs} ms`)));
      req.on('error', (e) => reject(new DbforkError(`dbfork: ${method} ${urlPath} on ${this.socketPath}: ${e.message}`,
        'unavailable')));
      if (data) req.write(data);
      req.end();
    });
  }

  health() { return this.call('GET', '/v1/health'); }

  // The environment goes along: a build's run steps run in it (npx,
  // node_modules, nvm), not in the daemon's (docs/api.md).
  ensureGolden(recipe) { return this.call('POST', '/v1/goldens', { recipe: path.resolve(recipe), env: { ...process.env } }); }

  // opts: backend, min, max, ttl_seconds, wait_seconds, pid (docs/api.md).
  acquire(recipe, opts = {}) {
    const body = { recipe: path.resolve(recipe), env: { ...process.env } };
    for (const k of ['backend', 'min', 'max', 'ttl_seconds', 'wait_seconds', 'pid']) {
      if (opts[k] !== undefined && opts[k] !== null && opts[k] !== '') body[k] = opts[k];
    }
    return this.call('POST', '/v1/leases', body);
  }

  release(id) { return this.call('DELETE', `/v1/leases/${encodeURIComponent(id)}`); }

  // Ends the lease but keeps its instance running (until `dbfork down ID`).
  keep(id) { return this.call('POST', `/v1/leases/${encodeURIComponent(id)}/keep`, {}); }

  // Back to the golden's data in place: same DSN, open connections broken.
  reset(id) { return this.call('POST', `/v1/leases/${encodeURIComponent(id)}/reset`, {}); }

  // A database cloned inside the lease's server (lease.fresh === 'database').
  createDatabase(id) { return this.call('POST', `/v1/leases/${encodeURIComponent(id)}/databases`, {}); }

  // Fresh data for the lease's next test, the way the daemon finds
  // cheapest: {mode: 'slot'|'database'|'reset'|'none', name, dsn, env, conn}.
  fresh(id) { return this.call('POST', `/v1/leases/${encodeURIComponent(id)}/fresh`, {}); }

  dropDatabase(id, name) {
    return this.call('DELETE', `/v1/leases/${encodeURIComponent(id)}/databases/${encodeURIComponent(name)}`);
  }

  async leases() { return (await this.call('GET', '/v1/leases')).leases || []; }
}

module.exports = { API_VERSION, Client, DbforkError, findBinary, findSocket };
