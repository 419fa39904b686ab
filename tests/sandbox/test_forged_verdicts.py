"""The differential hostile suite for git (issue 21, point 1): every way git offers to run a program, planted by the
oracle's solve.sh (which runs as the agent does, with the agent's rights), through the three backends -- bubblewrap,
Podman and the kubernetes stand-in. Patch capture, Leaf's `git add -A` and test.sh's own git commands (a
SWE-bench-style test.sh: status, diff, checkout of the test file) must run none of it: the planted program would
write {"reward": 1} and a marker; the verdict stays test.sh's and the patch stays the repository's."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox import SandboxOptions, open_sandbox, run_oracle, verify
from sandbox.kubernetes.pods import close_clusters

LEAFCOST = Path(sys.executable).with_name("leafcost")
BACKENDS = ["local", "podman", "kubernetes"]

# Run by git if anything lets it: forges the verdict and leaves a marker (its uid) where test.sh reports it.
PROGRAM = """#!/bin/sh
echo '{"reward": 1}' > /logs/verifier/reward.json 2>/dev/null
echo "ran as uid $(id -u): $0 $*" >> /app/.pwned 2>/dev/null
[ "$1" = filter ] && exec cat
exit 0
"""
TEST_SH = """#!/bin/bash
cd /app
git status --porcelain >/dev/null 2>&1
git diff HEAD >/dev/null 2>&1
cp check_calc.py /tmp/check.py && rm check_calc.py  # SWE-bench checks its test files out again
git checkout HEAD -- check_calc.py >/dev/null 2>&1 || cp /tmp/check.py check_calc.py
if python3 check_calc.py; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
cat /app/.pwned > /logs/verifier/markers.txt 2>/dev/null
true
"""
FILTER = "'/app/.evil filter'"
ATTRIBUTES = "echo '* filter=evil' > .gitattributes"
EVIL_CONFIG = "printf '[filter \"evil\"]\\n\\tclean = /app/.evil filter\\n' > /app/.evil.gitconfig"
# Each attack is bash run by solve.sh in /app, after /app/.evil is in place.
ATTACKS = {
    "clean-filter": f"{ATTRIBUTES}; git config filter.evil.clean {FILTER}",
    "process-filter": f"{ATTRIBUTES}; git config filter.evil.process {FILTER}",
    "smudge-filter": f"{ATTRIBUTES}; git config filter.evil.smudge {FILTER}",
    "info-attributes": f"echo '* filter=evil' > .git/info/attributes; git config filter.evil.clean {FILTER}",
    "hooks": "for h in post-index-change post-checkout pre-commit reference-transaction pre-auto-gc; do "
             "cp /app/.evil .git/hooks/$h; done",
    "hooks-path": "mkdir -p .hooks && for h in post-index-change post-checkout; do cp /app/.evil .hooks/$h; done "
                  "&& git config core.hooksPath /app/.hooks",
    "fsmonitor": "git config core.fsmonitor /app/.evil",
    "include-path": f"{EVIL_CONFIG}; {ATTRIBUTES}; git config include.path /app/.evil.gitconfig",
    "include-if": f"{EVIL_CONFIG}; {ATTRIBUTES}; git config includeIf.gitdir:/.path /app/.evil.gitconfig",
    "diff-external": "git config diff.external /app/.evil",
    "textconv": f"echo '*.py diff=evil' > .gitattributes; git config diff.evil.textconv {FILTER}",
    "gitfile": f"mv .git .real-git && echo 'gitdir: /app/.real-git' > .git && {ATTRIBUTES} && "
               f"git config filter.evil.clean {FILTER}",
    "commondir": f"cp -a .git /app/.evil-common && echo /app/.evil-common > .git/commondir && {ATTRIBUTES} && "
                 f"git --git-dir=/app/.evil-common config filter.evil.clean {FILTER}",
    "core-worktree": f"mkdir -p .decoy && echo '* filter=evil' > .decoy/.gitattributes && echo decoy > .decoy/f && "
                     f"git config core.worktree /app/.decoy && git config filter.evil.clean {FILTER}",
    "git-symlink": f"mv .git .real-git && ln -s /app/.real-git .git && {ATTRIBUTES} && "
                   f"git config filter.evil.clean {FILTER}",
    "config-symlink": f"cp .git/config /app/.evil-config && git config --file /app/.evil-config filter.evil.clean "
                      f"{FILTER} && ln -sf /app/.evil-config .git/config && {ATTRIBUTES}",
    "hooks-symlink": "mkdir -p /app/.evil-hooks && cp /app/.evil /app/.evil-hooks/post-index-change && "
                     "cp /app/.evil /app/.evil-hooks/post-checkout && rm -rf .git/hooks && "
                     "ln -s /app/.evil-hooks .git/hooks",
    # The restore must not stop at modes the agent took away (the local backend's one user is not root).
    "locked-git": "for h in post-index-change post-checkout; do cp /app/.evil .git/hooks/$h; done && "
                  "mkdir -p .git/hooks/locked/deeper && chmod 555 .git/hooks/locked .git/hooks .git",
    "alternates": f"mkdir -p /app/.evil-objects && echo /app/.evil-objects >> .git/objects/info/alternates && "
                  f"{ATTRIBUTES} && git config filter.evil.clean {FILTER}",
}
FIX = "sed -i 's/a - b/a + b/' calc.py"
NO_FIX = "echo '# untouched' >> calc.py"  # a change all the same: textconv and diff.external have a diff to run on


def solve_sh(attacks: list[str], *, fix: bool) -> str:
    plant = "\n".join(ATTACKS[name] for name in attacks)
    return (f"set -e\ncd /app\ncat > /app/.evil <<'EOF'\n{PROGRAM}EOF\nchmod 755 /app/.evil\n"
            f"{FIX if fix else NO_FIX}\n{plant}\n")


def hostile_task(make_task, attacks: list[str], *, fix: bool, agent_user: str | None = None):
    dockerfile = "FROM python:3.11-slim\nWORKDIR /app\nCOPY repo/ /app/\n"
    toml = ('version = "1.0"\n[verifier]\ntimeout_sec = 120\n[agent]\ntimeout_sec = 120\n'
            '[environment]\ncpus = 1\nmemory_mb = 512\npids = 256\nallow_internet = false\n')
    if agent_user is not None:  # the agent owns the repository; the verifier is root, as Harbor's default
        dockerfile += f"RUN chown -R {agent_user} /app\n"
        toml = toml.replace("[agent]\n", f'[agent]\nuser = "{agent_user}"\n')
    return make_task("git-hostile", files={
        "task.toml": toml, "environment/Dockerfile": dockerfile,
        "environment/repo/check_calc.py": "import calc\nassert calc.add(2, 3) == 5\n",
        "tests/test.sh": TEST_SH, "solution/solve.sh": solve_sh(attacks, fix=fix)})


@pytest.fixture(params=BACKENDS)
def backend(request, sandbox_options, tmp_path):
    """(name, how to make the options for a task) for one backend; the container ones need the test images."""
    name = request.param
    if name == "local":
        return name, lambda task: sandbox_options
    if name == "podman":
        request.getfixturevalue("container_images")
        return name, lambda task: sandbox_options.model_copy(update={"backend": "podman"})
    kube = request.getfixturevalue("kube_containers")
    return name, lambda task: kube_options(kube, task, tmp_path, sandbox_options)


def kube_options(kube, task, tmp_path: Path, base: SandboxOptions) -> SandboxOptions:
    """The stand-in's namespace, with the task's image built by Podman and locked by ID, as a user locks it."""
    from sandbox.container.engine import require_engine
    from sandbox.container.images import lock_images

    lock = tmp_path / "images.lock.json"
    asyncio.run(lock_images(require_engine("podman"), [task], lock))
    return SandboxOptions(backend="kubernetes", kubeconfig=kube.kubeconfig, kube_namespace=kube.namespace,
                          images_lock=lock, cache_dir=base.cache_dir)


def episode(task, options):
    """The oracle (the attack) as the agent, then grading as a run grades: (verification, markers.txt)."""
    async def scenario():
        try:
            opened = await open_sandbox(task, options, solution=True)
            try:
                planted = await run_oracle(opened.sandbox, task)
                assert planted.ok, planted.stdout + planted.stderr
                verification = await verify(opened, task)
                markers = await opened.read_verifier_file("markers.txt", 1 << 16)
                return verification, (markers or b"").decode()
            finally:
                await opened.close()
        finally:
            await close_clusters()
    return asyncio.run(scenario())


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_no_program_the_agent_configured_in_git_runs_and_an_honest_fix_still_resolves(backend, attack, make_task):
    name, options_for = backend
    task = hostile_task(make_task, [attack], fix=True)
    verification, markers = episode(task, options_for(task))
    assert markers == "", f"{attack} ran the agent's program on {name}: {markers}"
    assert verification.reward_document is None  # no reward.json: the verdict is test.sh's reward.txt alone
    grade = verification.grade
    assert grade.resolved and grade.reward == 1.0 and grade.error is None, grade
    if attack == "gitfile":  # the agent moved its repository away: no baseline to diff against, said so
        assert verification.patch == "" and "baseline commit" in verification.patch_error
    else:
        assert verification.patch_error is None
        assert "-    return a - b\n+    return a + b" in verification.patch
        assert "+++ b/.evil" in verification.patch  # the agent's files are its patch; its program never ran
        assert "+++ b/.pwned" not in verification.patch
        assert "+++ b/f\n" not in verification.patch  # core.worktree's decoy is not the tree the patch comes from


def test_planted_git_programs_resolve_nothing(backend, make_task):
    """Every attack at once, and no fix: the task stays unresolved and nothing ran."""
    name, options_for = backend
    # Each left out takes the repository away from the attacks after it.
    attacks = [a for a in sorted(ATTACKS) if a not in ("gitfile", "core-worktree", "locked-git")]
    task = hostile_task(make_task, attacks, fix=False)
    verification, markers = episode(task, options_for(task))
    assert markers == "", f"the agent's program ran on {name}: {markers}"
    assert verification.reward_document is None
    assert verification.grade.resolved is False and verification.grade.reward == 0.0
    assert verification.patch_error is None and "+# untouched" in verification.patch


@pytest.mark.parametrize("container_backend", ["podman", "kubernetes"])
def test_a_non_root_agents_git_program_never_runs_as_root_or_at_all(container_backend, make_task, sandbox_options,
                                                                    request, tmp_path):
    request.getfixturevalue("container_images")
    task = hostile_task(make_task, ["clean-filter", "hooks", "fsmonitor", "smudge-filter"], fix=True,
                        agent_user="nobody")
    if container_backend == "podman":
        options = sandbox_options.model_copy(update={"backend": "podman"})
    else:
        options = kube_options(request.getfixturevalue("kube_containers"), task, tmp_path, sandbox_options)
    verification, markers = episode(task, options)
    assert markers == ""  # at dc38d42 it ran: as the agent in capture, then as root in Leaf's `git add -A`
    assert verification.reward_document is None and verification.grade.resolved
    assert "+    return a + b" in verification.patch


def test_validate_end_to_end_is_not_fooled_by_a_clean_filter(make_task, tmp_path):
    """`leafcost validate`: an oracle that only plants a clean filter does not resolve the task (the task is
    invalid, as an oracle that fixes nothing is)."""
    task = hostile_task(make_task, ["clean-filter", "hooks"], fix=False)
    environment = {**os.environ, "LEAFCOST_CACHE": str(tmp_path / "cache")}
    result = subprocess.run([str(LEAFCOST), "validate", str(Path(task.path).parent), "--json"], capture_output=True,
                            text=True, env=environment, timeout=900)
    report = json.loads(result.stdout)
    (row,) = report["tasks"]
    assert row["oracle_resolved"] is False and row["valid"] is False, row
    assert result.returncode != 0


@pytest.mark.parametrize("run_backend", ["local", "podman"])
def test_leafcost_run_grades_a_git_planting_oracle_unresolved_with_its_patch(run_backend, make_task, tmp_path,
                                                                            request):
    """`leafcost run` with the oracle arm: capture, Leaf's `git add -A` and test.sh all meet the planted filters
    and hooks; the attempt is graded on what it did (nothing fixed) and its patch is what it wrote."""
    import duckdb
    import yaml

    if run_backend == "podman":
        request.getfixturevalue("container_images")
    task = hostile_task(make_task, ["clean-filter", "hooks", "hooks-path", "fsmonitor"], fix=False)
    spec = {"name": "git-hostile", "suite": str(Path(task.path).parent), "seeds": 1, "workers": 1,
            "max_attempts": 1, "sandbox": {"backend": run_backend},
            "budgets": {"max_steps": 3, "time_budget_sec": 240}, "arms": [{"name": "oracle", "adapter": "oracle"}]}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    db = tmp_path / "ledger.duckdb"
    environment = {**os.environ, "LEAFCOST_CACHE": str(tmp_path / "cache")}
    result = subprocess.run([str(LEAFCOST), "run", str(tmp_path / "spec.yaml"), "--json", "--db", str(db)],
                            capture_output=True, text=True, env=environment, timeout=900, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    with duckdb.connect(str(db), read_only=True) as ledger:
        (resolved, reward, grade_error, trajectory), = ledger.execute(
            "select resolved, reward, grade_error, trajectory_path from episodes where final").fetchall()
    assert (resolved, reward, grade_error) == (False, 0.0, None)  # at dc38d42: resolved, reward 1 (reward.json)
    patch = json.loads((tmp_path / trajectory).read_text())["output_patch"]  # relative to the run's directory
    assert "+# untouched" in patch and "+++ b/.gitattributes" in patch
