"""A mined candidate's images, built with the container backend's own build (its network namespace, base images
under their local names): an env image per dependency set, shared by every candidate that has it, and an instance
image per candidate (the exported tree at /testbed, the project's own install, and whatever the install left
committed on top of the base commit, so a captured patch shows only the agent's changes).

Network: every step may reach the internet through the build's namespace (pip through the host's CA bundle when one
is given). A step whose requirements the base image already satisfies needs no index: pip finds them installed, and
the project is built with `--no-build-isolation` from the build backend the env image holds. Without network any
step that must fetch fails, and the candidate is dropped as install_failed with that step's output.

A Node project's env image installs its dependencies into /testbed/node_modules from package.json and its lockfile
alone (npm ci, or npm install without a lockfile; nothing, and no npm, when nothing is declared); the instance image
copies the tree over that /testbed, so node_modules sits where npx, jest, vitest and Node's own resolution look for
it, and the tree ignores node_modules (a `/node_modules/` line added to its .gitignore in the set-up commit when it
does not already) so a captured patch never holds it."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import shlex
import shutil
import tempfile
from pathlib import Path

from sandbox.container.engine import Engine, EngineError, engine as container_engine
from sandbox.container.images import build_failure, build_image, repository_name
from sandbox.mining.environment import VENV, ProjectFacts
from sandbox.mining.errors import Dropped, MiningError
from sandbox.protocol import BuildError, SandboxError
from sandbox.shared.digests import update_with_tree

MINED_REPOSITORY = "localhost/leafcost-mined"
WORKDIR = "/testbed"
BUILD_DIR = "/tmp/leafcost-build"  # the CA bundle during the build; removed before the image is done
DEPS_DIR = "/tmp/leafcost-deps"
# The host's CA bundle for the build steps only: ARGs reach every RUN but are not the image's environment.
CA_ARGS = ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO")
BUILD_ARGS = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "PIP_ROOT_USER_ACTION": "ignore",
              "DEBIAN_FRONTEND": "noninteractive"}
NODE_CA_ARGS = ("NODE_EXTRA_CA_CERTS", "npm_config_cafile", "GIT_SSL_CAINFO")
NODE_BUILD_ARGS = {"npm_config_audit": "false", "npm_config_fund": "false", "npm_config_update_notifier": "false",
                   "DEBIAN_FRONTEND": "noninteractive"}
# git on the image's own copy of the tree: no hook, no fsmonitor, no signing, a fixed identity.
_GIT = ("git -c safe.directory='*' -c core.hooksPath=/dev/null -c core.fsmonitor=false -c commit.gpgsign=false "
        "-c user.name=leafcost -c user.email=leafcost@localhost")
SETUP_COMMIT_MESSAGE = "leafcost: environment set-up"

_GUARDS: dict[str, asyncio.Lock] = {}  # one build of a tag at a time in this process


async def build_instance_image(engine_name: str, facts: ProjectFacts, tree: Path, instance_id: str, *,
                               ca_bundle: Path | None, timeout: float, repo: str | None = None) -> str:
    """The instance image of the candidate whose exported tree is `tree` (built, and its env image, when not there
    yet); returns its reference. Dropped("install_failed", "<image>: <failing step>: <its last line>", log=the
    build's output) when a build fails; each build is tried once. `repo` names the env image (default: the
    instance id without its trailing commit). MiningError when the engine cannot run at all or `ca_bundle` is
    missing."""
    try:
        engine = container_engine(engine_name)
    except SandboxError as exc:  # no engine: no candidate can be built
        raise MiningError(str(exc)) from None
    if ca_bundle is not None and not Path(ca_bundle).is_file():
        raise MiningError(f"CA bundle {ca_bundle}: no such file (give the host's bundle, e.g. "
                          "/etc/ssl/certs/ca-certificates.crt)")
    env_tag = env_image_tag(facts, repo or _repository_of(instance_id))
    if (failed := _FAILED_ENVS.get(env_tag)) is not None:  # the same dependency set, built once: not again
        raise Dropped("install_failed", f"{failed} (the same dependency set failed for an earlier candidate; not "
                      "retried)", log=failed.log)
    try:
        await _ensure(engine, env_tag, env_dockerfile(facts, ca=ca_bundle is not None),
                      _env_files(facts), ca_bundle, timeout, "env image")
    except Dropped as exc:
        _FAILED_ENVS[env_tag] = exc
        raise
    instance_text = instance_dockerfile(env_tag, facts, ca=ca_bundle is not None)
    key = await asyncio.to_thread(_instance_key, env_tag, facts, Path(tree))  # reads the whole tree
    tag = f"{MINED_REPOSITORY}/{repository_name(instance_id)}:{key}"
    await _ensure(engine, tag, instance_text, {"tree": Path(tree)}, ca_bundle, timeout, "instance image")
    return tag


# Env images whose build failed in this process, by tag: every later candidate with that dependency set is dropped
# with the first failure's line and log instead of building it again.
_FAILED_ENVS: dict[str, Dropped] = {}


def env_image_tag(facts: ProjectFacts, repo: str) -> str:
    """`localhost/leafcost-mined/env-<repo>:<hash12>`, the hash over what the env image is made of (its Dockerfile
    and the dependency files it installs): equal for every candidate with the same dependency set."""
    digest = hashlib.sha256(env_dockerfile(facts, ca=False).encode())
    digest.update(json.dumps(sorted(facts.dependency_files.items())).encode())
    slug = repository_name("env-" + repo.replace("/", "-"))
    return f"{MINED_REPOSITORY}/{slug}:{digest.hexdigest()[:12]}"


def env_dockerfile(facts: ProjectFacts, *, ca: bool) -> str:
    """The env image: the base, git and the system packages it lacks, a venv over the base's packages on every
    shell's PATH (the agent's login shell too), the dependency installs, pytest when nothing provided it."""
    if facts.kind == "node":
        return _node_env_dockerfile(facts, ca=ca)
    lines = [f"# leafcost mine: the environment of every candidate with this dependency set ({facts.kind} "
             f"{facts.python})", f"FROM {facts.base_image}", *_build_args(ca)]
    lines.append(f"RUN {_system_packages(facts.system_packages)}")
    lines.append(f"RUN python3 -m venv --system-site-packages {VENV} \\\n && {_profile_script()}")
    # No bytecode beside the sources: a captured patch adds every untracked file a .gitignore does not cover.
    lines.append(f"ENV VIRTUAL_ENV={VENV} PATH={VENV}/bin:$PATH PYTHONDONTWRITEBYTECODE=1")
    lines += [f"ENV {name}={_quoted(value)}" for name, value in sorted(facts.env.items())]
    if facts.dependency_files:
        lines += [f"COPY deps/ {DEPS_DIR}/", f"WORKDIR {DEPS_DIR}"]
    lines += [f"RUN {step}" for step in facts.env_install]
    lines += ["WORKDIR /", f"RUN {_pytest_in_venv()}", f"RUN rm -rf {DEPS_DIR} {BUILD_DIR}"]
    return "\n".join(lines) + "\n"


def instance_dockerfile(env_image: str, facts: ProjectFacts, *, ca: bool) -> str:
    """The instance image: the env image, the tree at /testbed, each install step, then one set-up commit holding
    whatever the install left (empty when it left nothing), dated as the base commit."""
    lines = ["# leafcost mine: one candidate at its base commit", f"FROM {env_image}", *_build_args(ca, facts.kind),
             f"COPY tree/ {WORKDIR}/", f"WORKDIR {WORKDIR}"]
    lines += [f"RUN {step}" for step in facts.install]
    ignore = f"{_ignore_node_modules()} \\\n && " if facts.kind == "node" else ""
    lines.append(f"RUN rm -rf {BUILD_DIR} && {ignore}{_setup_commit()}")
    return "\n".join(lines) + "\n"


def _node_env_dockerfile(facts: ProjectFacts, *, ca: bool) -> str:
    """A Node project's env image: the base, git and the system packages it lacks, the dependencies installed into
    /testbed/node_modules from package.json and the lockfile (the tree is copied over them in the instance)."""
    lines = [f"# leafcost mine: the environment of every candidate with this dependency set (node {facts.node})",
             f"FROM {facts.base_image}", *_build_args(ca, "node"), f"RUN {_system_packages(facts.system_packages)}"]
    lines += [f"ENV {name}={_quoted(value)}" for name, value in sorted(facts.env.items())]
    if facts.dependency_files:
        lines += [f"COPY deps/ {WORKDIR}/", f"WORKDIR {WORKDIR}"]
    lines += [f"RUN {step}" for step in facts.env_install]
    lines += ["WORKDIR /", f"RUN rm -rf {BUILD_DIR}"]
    return "\n".join(lines) + "\n"


def _build_args(ca: bool, kind: str = "python") -> list[str]:
    values, ca_names = (NODE_BUILD_ARGS, NODE_CA_ARGS) if kind == "node" else (BUILD_ARGS, CA_ARGS)
    lines = [f"ARG {name}={value}" for name, value in values.items()]
    if ca:
        lines += [f"COPY ca.pem {BUILD_DIR}/ca.pem", *(f"ARG {name}={BUILD_DIR}/ca.pem" for name in ca_names)]
    return lines


def _ignore_node_modules() -> str:
    """node_modules ignored by the tree itself (a capture reads only the tree's .gitignore files): a `/node_modules/`
    line appended to .gitignore when it does not ignore it yet (a .gitignore that is a link is left alone, and a
    `*` in node_modules/.gitignore ignores the directory instead)."""
    return (f"if [ -d node_modules ] && ! {_GIT} check-ignore -q node_modules; then \\\n "
            "if [ -L .gitignore ]; then printf '*\\n' > node_modules/.gitignore; "
            "else printf '\\n/node_modules/\\n' >> .gitignore; fi; fi")


def _system_packages(packages: list[str]) -> str:
    """apt-get only for what is missing (git by command, the rest by dpkg), so a base that has it all needs no
    mirror."""
    checks = "command -v git >/dev/null 2>&1 || missing=git; " + "".join(
        f"dpkg -s {shlex.quote(name)} >/dev/null 2>&1 || missing=\"$missing {name}\"; " for name in packages)
    return (f"missing=''; {checks}\\\n if [ -n \"$missing\" ]; then apt-get update && apt-get install -y "
            "--no-install-recommends $missing && rm -rf /var/lib/apt/lists/*; fi")


def _profile_script() -> str:
    """/etc/profile.d/leafcost-venv.sh: a login shell's /etc/profile resets PATH, and Leaf's Bash is one."""
    body = [f"export VIRTUAL_ENV={VENV}", f"case \":$PATH:\" in *\":{VENV}/bin:\"*) ;; *) PATH=\"{VENV}/bin:$PATH\" ;; "
            "esac", "export PATH"]
    return "printf '%s\\n' " + " ".join(shlex.quote(line) for line in body) + " > /etc/profile.d/leafcost-venv.sh"


def _pytest_in_venv() -> str:
    """pytest from PyPI only when no package provides it, and a venv entry point for a base's own pytest (whose
    /usr/bin script runs the system Python, which cannot see what the venv installed)."""
    entry = " ".join(shlex.quote(line) for line in (f"#!{VENV}/bin/python", "import sys",
                                                     "from pytest import console_main", "sys.exit(console_main())"))
    return (f"(python -c 'import pytest' 2>/dev/null || pip install pytest) \\\n && if [ ! -e {VENV}/bin/pytest ]; "
            f"then printf '%s\\n' {entry} > {VENV}/bin/pytest && chmod 755 {VENV}/bin/pytest; fi")


def _setup_commit() -> str:
    return (f"when=\"$({_GIT} log -1 --format='%ct +0000' HEAD)\" \\\n && {_GIT} add -A \\\n "
            f"&& GIT_AUTHOR_DATE=\"$when\" GIT_COMMITTER_DATE=\"$when\" {_GIT} commit -q --allow-empty --no-verify "
            f"-m {shlex.quote(SETUP_COMMIT_MESSAGE)}")


def _quoted(value: str) -> str:
    """A Dockerfile ENV value in double quotes: no variable of the build is expanded in it."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def _env_files(facts: ProjectFacts) -> dict[str, str | Path]:
    return {f"deps/{path}": content for path, content in facts.dependency_files.items()}


def _instance_key(env_tag: str, facts: ProjectFacts, tree: Path) -> str:
    digest = hashlib.sha256(env_tag.encode() + b"\0" + instance_dockerfile(env_tag, facts, ca=False).encode())
    update_with_tree(digest, Path(tree))
    return digest.hexdigest()[:12]


def _repository_of(instance_id: str) -> str:
    """The repository part of an instance id (`owner__name-<commit>`): the id without a trailing hex or number."""
    return re.sub(r"[-_.][0-9a-fA-F]{6,40}$|[-_.][0-9]+$", "", instance_id) or instance_id


async def _ensure(engine: Engine, tag: str, dockerfile: str, files: dict, ca_bundle: Path | None, timeout: float,
                  what: str) -> None:
    """Builds `tag` unless it exists, in a fresh context holding the Dockerfile's files."""
    async with _GUARDS.setdefault(tag, asyncio.Lock()):
        present = await engine.run("image", "inspect", "--format", "{{.Id}}", "--", tag, check=False)
        if present.code == 0:
            return
        with tempfile.TemporaryDirectory(prefix="leafcost-mine-") as directory:
            context = Path(directory, "context")
            await asyncio.to_thread(_write_context, context, files, ca_bundle)
            Path(directory, "Dockerfile").write_text(dockerfile)
            await _build(engine, tag, Path(directory, "Dockerfile"), context, timeout, what)


def _write_context(context: Path, files: dict[str, str | Path], ca_bundle: Path | None) -> None:
    context.mkdir()
    for relative, content in files.items():
        target = context / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):  # a whole tree, links kept as links (never followed out of it)
            shutil.copytree(content, target, symlinks=True)
        else:
            target.write_text(content)
    if ca_bundle is not None:
        shutil.copyfile(ca_bundle, context / "ca.pem")


async def _build(engine: Engine, tag: str, dockerfile: Path, context: Path, timeout: float, what: str) -> None:
    try:
        done = await build_image(engine, dockerfile, context, tag, timeout=timeout)
    except EngineError:
        raise Dropped("install_failed", f"{what}: the build ran past {timeout:g}s") from None
    except BuildError as exc:
        raise Dropped("install_failed", f"{what}: {exc}") from None
    if done.code != 0:
        said = _subprocess_said(done.text)
        raise Dropped("install_failed", f"{what}: {build_failure(done.text, done.code).splitlines()[0]}"
                      + (f"; it said: {said}" if said else ""), log=done.text)


def _subprocess_said(output: str) -> str:
    """The last line a build backend printed before pip's own epilogue (`[end of output]`, then notes and hints that
    say only "see above"), or npm's error: what actually went wrong."""
    lines = output.splitlines()
    ends = [index for index, line in enumerate(lines) if line.strip() == "[end of output]"]
    if not ends:
        return _npm_said(lines)
    before = [line.strip() for line in lines[:ends[-1]] if line.strip()]
    return before[-1][:200] if before else ""


# npm's error block (`npm ERR!` to npm 9, `npm error` from 10): its fields and its closing pointer to a debug log say
# nothing about the cause, and npm ends with that pointer.
_NPM_ERROR = re.compile(r"npm (?:ERR!|error)(?: (.*))?$")
_NPM_FIELD = re.compile(r"(?:code|errno|syscall|path|dest|cwd|signal) \S+$|A complete log of this run|/\S+\.log$")


def _npm_said(lines: list[str]) -> str:
    """npm's cause, `<code>: <first line of its message>` (`EUSAGE: `npm ci` can only install packages when your
    package.json and package-lock.json ... are in sync. ...`), from the last error block; "" when npm said none."""
    bodies = [(found.group(1) or "").strip() for line in lines if (found := _NPM_ERROR.match(line.strip()))]
    codes = [body.split(" ", 1)[1] for body in bodies if body.startswith("code ")]
    start = max((index for index, body in enumerate(bodies) if body.startswith("code ")), default=0)
    message = next((body for body in bodies[start:] if body and not _NPM_FIELD.match(body)), "")
    if not message:
        return ""
    return (f"{codes[-1]}: {message}" if codes else message)[:200]
