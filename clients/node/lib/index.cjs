'use strict';
// The CommonJS entry point (require('@dbfork/node'), e.g. in Jest tests).
module.exports = { ...require('./client.cjs'), ...require('./run.cjs') };
