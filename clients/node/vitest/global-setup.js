// Vitest `globalSetup`: finds the daemon and makes sure the golden exists
// once per run; the returned teardown releases the workers' leases. The
// recipe is $DBFORK_RECIPE or ./dbfork.toml; for options, write your own
// global setup that returns globalSetup({ recipe, store, backend }).
import { globalSetup } from '../index.js';

export default function setup() {
  return globalSetup();
}
