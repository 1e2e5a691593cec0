# scripts/test-install.sh: `npm install --save-dev` of the @dbfork/node
# tarball and this platform's @dbfork/linux-* tarball into a fresh project
# of a fresh user; the helper finds the binary in the platform package
# (no DBFORK_BIN, no dbfork on PATH), `dbfork version` through it says the
# release, a lease on a real golden holds the seed, and `npx vitest run`
# of a project set up as clients/node/README.md says passes.
h="$(new_home h-node)"
cp "$OUT"/node/dbfork-node-"$VERSION".tgz "$OUT"/node/dbfork-linux-"$NODEARCH"-"$VERSION".tgz "$h/"
proj="$h/proj"
mkdir -p "$proj"
write_recipe "$proj"
cat > "$proj/check.cjs" <<'JS'
const { execFileSync } = require('node:child_process');
const { Client, findBinary, findSocket } = require('@dbfork/node');
(async () => {
  const bin = findBinary();
  if (!bin.includes('node_modules/@dbfork/linux-')) throw new Error(`binary not from the platform package: ${bin}`);
  process.stdout.write(execFileSync(bin, ['version'], { encoding: 'utf8' }));
  const c = new Client(await findSocket());
  await c.ensureGolden('dbfork.toml');
  const l = await c.acquire('dbfork.toml');
  try {
    const n = execFileSync('psql', [l.dsn, '-tAc', 'select count(*) from notes'], { encoding: 'utf8' }).trim();
    if (n !== '1') throw new Error(`the lease holds ${n} rows, want the seed's 1`);
    console.log('seeded lease ok');
  } finally {
    await c.release(l.id);
  }
})().catch((e) => { console.error(e.message); process.exit(1); });
JS
# And a Vitest project as clients/node/README.md shows it.
cat > "$proj/vitest.config.js" <<'JS'
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    globalSetup: ['@dbfork/node/vitest/global-setup'],
    setupFiles: ['@dbfork/node/vitest/setup'],
    maxWorkers: 2,
  },
});
JS
for n in 1 2; do
  cat > "$proj/notes$n.test.js" <<'JS'
import { test, expect } from 'vitest';
import pg from 'pg';

test('each file gets the golden, not the other files rows', async () => {
  const c = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await c.connect();
  const { rows } = await c.query('select count(*)::int as n from notes');
  expect(rows[0].n).toBe(1);
  await c.query("insert into notes(who) values ('vitest')");
  await c.end();
});
JS
done
# npm's cache starts as a copy of root's, so only what it lacks is fetched.
[ -d "$HOME/.npm/_cacache" ] && cp -a "$HOME/.npm/_cacache" "$h/npm-cache" || mkdir -p "$h/npm-cache"
chown -R 65534:65534 "$h"
IN="$proj" as_user "$h" sh -c "npm init -y >/dev/null && npm pkg set type=module >/dev/null &&
  npm install -q --save-dev --no-audit --no-fund --prefer-offline --cache $h/npm-cache \
  ../dbfork-node-$VERSION.tgz ../dbfork-linux-$NODEARCH-$VERSION.tgz vitest@4.1.12 pg@8.23.1 >/dev/null 2>&1" ||
  fail "npm install of the tarballs"
grep -q '"@dbfork/node"' "$proj/package.json" || fail "npm install --save-dev did not record @dbfork/node"
out="$(IN="$proj" as_user "$h" env NO_COLOR=1 DBFORK_RECIPE=dbfork.toml npx vitest run 2>&1)" || fail "npx vitest run: $out"
grep -Eq "Tests +2 passed" <<<"$out" || fail "npx vitest run: $out"
out="$(IN="$proj" as_user "$h" node check.cjs 2>&1)" || fail "the node project: $out"
grep -qF "dbfork $VERSION " <<<"$out" || fail "dbfork version through @dbfork/node: $out"
grep -q "seeded lease ok" <<<"$out" || fail "the node project: $out"
