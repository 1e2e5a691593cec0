"""The client contract (docs/api.md, "The client contract";
clients/contract.json) checked against the pytest plugin with a real
`dbfork serve`: every case of the shared file, keep-failed, and the mode
names the plugin reports."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from test_plugin import PKG, plugin_args, records

CONTRACT = os.path.join(PKG, "..", "contract.json")

INNER = textwrap.dedent('''\
    import json, os
    import pytest

    def record(kind, **kw):
        with open(os.path.join(os.environ["DBFORK_TEST_OUT"], "%s-%d.json" % (kind, os.getpid())), "a") as f:
            f.write(json.dumps(kw) + "\\n")

    def test_lease(dbfork_db):
        record("lease", id=dbfork_db.id, backend=dbfork_db.backend)

    @pytest.mark.parametrize("n", range(2))
    def test_fresh(dbfork_fresh, n):
        record("fresh", mode=dbfork_fresh.mode)

    def test_fails(dbfork_db):
        record("failed", id=dbfork_db.id)
        assert os.environ.get("DBFORK_CONTRACT_FAIL") != "1"
''')


def contract():
    with open(CONTRACT) as f:
        return json.load(f)


def run(world, tmp, options, env, *args):
    """One inner pytest run from a directory without an ini file, so only
    the options and the environment given here configure the plugin."""
    suite = os.path.join(world.root, "contract")
    os.makedirs(suite, exist_ok=True)
    with open(os.path.join(suite, "test_inner.py"), "w") as f:
        f.write(INNER)
    for name in os.listdir(tmp):
        os.remove(os.path.join(tmp, name))
    base = dict(os.environ, DBFORK_TEST_OUT=str(tmp), PYTHONPATH=PKG, DBFORK_BIN=world.bin,
                DBFORK_STORE=world.store, DBFORK_STORE_FS="plain", DBFORK_DAEMON_IDLE="2s")
    for k in ("DBFORK_SOCKET", "DBFORK_RECIPE", "DBFORK_BACKEND", "DBFORK_KEEP_FAILED"):
        base.pop(k, None)
    base.update(env)
    args = list(args)
    for k, v in options.items():
        args += ["--dbfork-" + k, v]
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin_args(), *args],
                          cwd=suite, env=base, capture_output=True, text=True)


def test_client_contract(world, tmp_path):
    try:
        check_contract(world, tmp_path)
    finally:
        world.wait_daemon_gone()  # also after a failure: the fixture's clean-up needs the daemon gone


def check_contract(world, tmp_path):
    c = contract()
    values = {"@recipe": world.recipe, "@missing": os.path.join(world.root, "missing", "dbfork.toml")}

    def subst(d):
        return {k: values.get(v, v) for k, v in d.items()}

    for case in c["cases"]:
        env = subst(case.get("env", {}))
        options = subst(case.get("option", {}))
        # Every case needs a recipe: the world's, unless the case names it.
        if "DBFORK_RECIPE" not in env and "recipe" not in options:
            options["recipe"] = world.recipe
        r = run(world, tmp_path, options, env)
        out = r.stdout + r.stderr
        assert r.returncode == 0, "%s: %s" % (case["name"], out)
        leases = records(tmp_path, "lease")
        assert len(leases) == 1, (case["name"], out)
        if "backend" in case["want"]:
            assert leases[0]["backend"] == case["want"]["backend"], (case["name"], leases)
        modes = {x["mode"] for x in records(tmp_path, "fresh")}
        assert modes and modes <= set(c["fresh_modes"]), (case["name"], modes)

    # Keep-failed: the failed test's instance runs on, and is named.
    assert "DBFORK_KEEP_FAILED" in c["variables"]
    r = run(world, tmp_path, {"recipe": world.recipe}, {"DBFORK_CONTRACT_FAIL": "1", "DBFORK_KEEP_FAILED": "1"},
            "-k", "test_fails")
    assert r.returncode == 1, r.stdout + r.stderr
    failed = records(tmp_path, "failed")[0]["id"]
    assert "kept instance %s" % failed in r.stdout + r.stderr, r.stdout + r.stderr
    kept = [i for i in world.instances() if i["id"] == failed]
    try:
        assert kept and kept[0]["status"] == "ready", world.instances()
    finally:
        world.dbfork("down", failed, check=False)
    # Without it the failed test's lease is released like any other.
    r = run(world, tmp_path, {"recipe": world.recipe}, {"DBFORK_CONTRACT_FAIL": "1"}, "-k", "test_fails")
    assert r.returncode == 1, r.stdout + r.stderr
    failed = records(tmp_path, "failed")[0]["id"]
    assert "kept instance" not in r.stdout + r.stderr
    world.wait_daemon_gone()
    assert failed not in {i["id"] for i in world.instances()}


def test_django_runner_keeps_a_failed_runs_lease(world, tmp_path):
    """Keep-failed under Django's own runner: a failed serial run's lease is
    kept (its instance runs on, and is named); a passing one is released."""
    pytest.importorskip("django")
    from test_django import env_for, project
    d = project(world, "postgres")
    with open(os.path.join(d, "notes", "tests_contract.py"), "w") as f:
        f.write("import os\nfrom django.test import SimpleTestCase\n\n\nclass Contract(SimpleTestCase):\n"
                "    databases = {'default'}\n\n    def test_fails_when_asked(self):\n"
                "        self.assertNotEqual(os.environ.get('DBFORK_CONTRACT_FAIL'), '1')\n")
    env = env_for(world, "postgres", tmp_path, DBFORK_RECIPE=os.path.join(d, "dbfork.toml"),
                  DBFORK_CONTRACT_FAIL="1", DBFORK_KEEP_FAILED="1")
    try:
        r = subprocess.run([sys.executable, "manage.py", "test", "--parallel", "1", "notes.tests_contract"],
                           cwd=d, env=env, capture_output=True, text=True, timeout=900)
        out = r.stdout + r.stderr
        assert r.returncode != 0, out
        kept = [i for i in world.instances() if "kept instance %s " % i["id"] in out]
        assert len(kept) == 1 and kept[0]["status"] == "ready", (out, world.instances())
        world.dbfork("down", kept[0]["id"])
        env.pop("DBFORK_CONTRACT_FAIL")
        r = subprocess.run([sys.executable, "manage.py", "test", "--parallel", "1", "notes.tests_contract"],
                           cwd=d, env=env, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0 and "kept instance" not in r.stdout + r.stderr, r.stdout + r.stderr
    finally:
        world.wait_daemon_gone()
