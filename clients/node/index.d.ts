// Types of @dbfork/node. The API's JSON is described in docs/api.md of
// the dbfork repository; fields not listed here are passed through.

export declare class DbforkError extends Error {
  /** The daemon's error kind: invalid, not_found, busy, unsupported, missing_tool, unavailable, internal, ... */
  kind: string;
  /** The HTTP status (0 when the daemon was not reached). */
  status: number;
  constructor(message: string, kind?: string, status?: number);
}

export interface Lease {
  id: string;
  golden: string;
  engine: string;
  backend: string;
  dsn: string;
  socket_dsn?: string;
  /** DATABASE_URL and the engine's variables (PG*, MYSQL_*), DBFORK_INSTANCE. */
  env: Record<string, string>;
  holder_pid?: number;
  acquire_ms?: number;
  /** How this lease gives a test the golden's data again. */
  fresh: 'database' | 'reset';
  [field: string]: unknown;
}

export interface Database {
  name: string;
  dsn: string;
  socket_dsn?: string;
  env: Record<string, string>;
  ms?: number;
  [field: string]: unknown;
}

export interface AcquireOptions {
  backend?: string;
  min?: number;
  max?: number;
  ttl_seconds?: number;
  wait_seconds?: number;
  pid?: number;
}

export declare class Client {
  constructor(socketPath: string, opts?: { timeoutMs?: number });
  socketPath: string;
  call(method: string, path: string, body?: unknown): Promise<any>;
  health(): Promise<Record<string, unknown>>;
  ensureGolden(recipe: string): Promise<Record<string, unknown>>;
  acquire(recipe: string, opts?: AcquireOptions): Promise<Lease>;
  release(id: string): Promise<void>;
  /** Ends the lease but keeps its instance running (until `dbfork down ID`). */
  keep(id: string): Promise<Lease>;
  reset(id: string): Promise<Lease>;
  createDatabase(id: string): Promise<Database>;
  dropDatabase(id: string, name: string): Promise<void>;
  leases(): Promise<Lease[]>;
}

/** The API socket by the rule of docs/api.md ("Finding the daemon"). */
/** The API version this client speaks; it refuses a daemon that speaks another. */
export declare const API_VERSION: number;
/** $DBFORK_BIN, else the binary of @dbfork/linux-x64 / @dbfork/linux-arm64, else "dbfork" (PATH). */
export declare function findBinary(env?: NodeJS.ProcessEnv): string;
export declare function findSocket(opts?: { store?: string; env?: NodeJS.ProcessEnv }): Promise<string>;

export interface GlobalSetupOptions {
  /** dbfork.toml; default $DBFORK_RECIPE or ./dbfork.toml. */
  recipe?: string;
  /** A store of your own (passed as `dbfork --store`); default dbfork's. */
  store?: string;
  /** Clone backend, as `dbfork up --backend` takes it (the server checks it); default $DBFORK_BACKEND, else auto. */
  backend?: string;
}

/** Finds the daemon, ensures the golden, hands DBFORK_SOCKET to workers; resolves to the teardown. */
export declare function globalSetup(opts?: GlobalSetupOptions): Promise<() => Promise<void>>;

/** This worker process's lease, acquired once; exports DATABASE_URL and the engine's variables. */
export declare function setupWorker(opts?: { env?: NodeJS.ProcessEnv }): Promise<Lease>;

/** Records that a test of this worker failed: with DBFORK_KEEP_FAILED the run keeps its lease. */
export declare function markFailed(opts?: { env?: NodeJS.ProcessEnv }): void;

/** DBFORK_KEEP_FAILED set to anything but the empty string. */
export declare function keepFailed(env?: NodeJS.ProcessEnv): boolean;

/** This worker's lease (acquired on first use). */
export declare function lease(opts?: { env?: NodeJS.ProcessEnv }): Promise<Lease>;

export interface Fresh {
  mode: 'slot' | 'database' | 'reset';
  dsn: string;
  env: Record<string, string>;
  /** The fresh database's name (mode "database"), else null. */
  name: string | null;
  lease: Lease;
  /** Drops the fresh database now (mode "database"); a no-op for "reset". */
  drop(): Promise<void>;
}

/** The golden's data for the calling test, by the fastest mode the lease offers. */
export declare function freshDatabase(opts?: { env?: NodeJS.ProcessEnv }): Promise<Fresh>;

/**
 * Rebuilds an app's connection pool around each freshDatabase() of this
 * process: `before()` runs before the fresh call (end the pool), `after(fresh)`
 * once the data is fresh (make the pool from fresh.dsn). Returns a function
 * that removes the hook.
 */
export declare function onFresh(after: (fresh: Fresh) => void | Promise<void>,
  opts?: { before?: () => void | Promise<void> }): () => void;
