'use strict';
// Jest `globalSetup`: finds the daemon and makes sure the golden exists
// once per run. The recipe is $DBFORK_RECIPE or ./dbfork.toml.
const { globalSetup } = require('../lib/run.cjs');

module.exports = async function dbforkGlobalSetup() {
  globalThis[Symbol.for('dbfork.teardown')] = await globalSetup();
};
