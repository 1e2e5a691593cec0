// @dbfork/node: every Vitest/Jest worker gets its own pre-seeded database
// from dbfork (docs/api.md). The code is CommonJS (lib/) so Jest's setup
// files can load it without ESM support in its VM; this is its ESM face.
import dbfork from './lib/index.cjs';

export const { API_VERSION, Client, DbforkError, findBinary, findSocket, globalSetup, setupWorker, lease, freshDatabase, onFresh, markFailed, keepFailed } = dbfork;
