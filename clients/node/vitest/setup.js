// Vitest `setupFiles`: this worker's lease, DATABASE_URL and the engine's
// variables set before the test file loads.
// A failed test marks the lease, which DBFORK_KEEP_FAILED then keeps.
import { beforeEach } from 'vitest';
import { markFailed, setupWorker } from '../index.js';

await setupWorker();
beforeEach((ctx) => { ctx.onTestFailed(() => markFailed()); });
