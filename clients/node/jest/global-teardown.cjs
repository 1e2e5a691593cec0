'use strict';
// Jest `globalTeardown`: releases the leases of the run's workers.
module.exports = async function dbforkGlobalTeardown() {
  const teardown = globalThis[Symbol.for('dbfork.teardown')];
  if (teardown) await teardown();
};
