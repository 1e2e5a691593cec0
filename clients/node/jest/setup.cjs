'use strict';
// Jest `setupFiles`: this worker's lease, DATABASE_URL and the engine's
// variables set before each test file loads (one lease per worker process).
const { setupWorker } = require('../lib/run.cjs');

module.exports = async function dbforkSetup() {
  await setupWorker();
};
