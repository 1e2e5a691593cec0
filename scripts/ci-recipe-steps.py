#!/usr/bin/env python3
"""Prints, as one bash script, the steps of a CI job from docs/ci.md.

    ci-recipe-steps.py DOC NAME

NAME is the marker before the job's fenced yaml block
(`<!-- ci-test: NAME -->`). scripts/test-ci-recipe.sh runs what this
prints, so the doc is what is tested. What is not taken from the doc,
and why, is spelt out here:

- GitHub: `uses:` steps (checkout: the test runs in the project dir) and
  the step named `install dbfork` (the test puts the checkout's dbfork on
  PATH rather than downloading a release) are left out; `${{ ... }}`
  expressions and the host ghcr.io become the test registry's values,
  given in the environment as TEST_REGISTRY, TEST_REPOSITORY, TEST_USER,
  TEST_PASSWORD.
- GitLab: `variables:` are exported with the shell expanding `$VAR` as
  GitLab does; the test sets CI_REGISTRY* itself.
"""
import re
import shlex
import sys

import yaml

GH_EXPR = {
    "github.repository": "${TEST_REPOSITORY}",
    "github.actor": "${TEST_USER}",
    "secrets.GITHUB_TOKEN": "${TEST_PASSWORD}",
    "github.token": "${TEST_PASSWORD}",
}


def block(doc, name):
    m = re.search(r"<!-- ci-test: " + re.escape(name) + r" -->\n```yaml\n(.*?)\n```", doc, re.S)
    if not m:
        sys.exit(f"ci-recipe-steps: no yaml block marked ci-test: {name}")
    return yaml.safe_load(m.group(1))


def github_value(v):
    v = str(v)

    def expr(m):
        e = m.group(1).strip()
        if e not in GH_EXPR:
            sys.exit(f"ci-recipe-steps: no test value for the expression ${{{{ {e} }}}}")
        return GH_EXPR[e]

    v = re.sub(r"\$\{\{(.*?)\}\}", expr, v)
    # Double quotes so the TEST_* values above expand; nothing else in a
    # literal value of the doc may expand.
    v = v.replace("ghcr.io", "${TEST_REGISTRY}")
    literal = re.split(r"(\$\{TEST_[A-Z]+\})", v)
    return "".join(p if p.startswith("${TEST_") else shlex.quote(p) for p in literal if p)


def github(job):
    out = [f"export {k}={github_value(v)}" for k, v in (job.get("env") or {}).items()]
    for step in job["steps"]:
        if "uses" in step or step.get("name") == "install dbfork":
            continue
        env = " ".join(f"{k}={github_value(v)}" for k, v in (step.get("env") or {}).items())
        # GitHub runs each step as `bash --noprofile --norc -eo pipefail FILE`.
        out.append(f"echo '::step {step.get('name', '')}' >&2")
        out.append(f"{env} bash --noprofile --norc -eo pipefail -c {shlex.quote(step['run'])}".strip())
    return out


def gitlab(job):
    out = []
    for k, v in (job.get("variables") or {}).items():
        out.append(f'export {k}="{v}"')
    for line in job["script"]:
        out.append(f"echo {shlex.quote('$ ' + line)} >&2")
        out.append(line)
    return out


def main():
    doc_path, name = sys.argv[1], sys.argv[2]
    y = block(open(doc_path).read(), name)
    if "jobs" in y:
        lines = github(y["jobs"]["test"])
    else:
        lines = gitlab(y["test"])
    print("set -eo pipefail")
    print("\n".join(lines))


main()
