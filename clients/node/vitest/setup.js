// Vitest `setupFiles`: this worker's lease, DATABASE_URL and the engine's
// variables set before the test file loads.
import { setupWorker } from '../index.js';

await setupWorker();
