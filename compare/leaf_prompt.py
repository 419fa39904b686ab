"""Leaf's own system prompt and tool schemas, read from a FrogNano clone the user points at (an arm's
`leaf_checkout`), so that a user who has Leaf sends byte-identical requests. The clone's code is never imported
or run: its files are parsed with `ast` and only literal assignments are evaluated."""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from compare.episode import LEAFCOST_PROMPT, EpisodePrompt
from compare.spec import RunSpec
from sandbox.leaf_tools import LEAF_TOOLS, tool_signatures

# Where FrogNano keeps Leaf, newest layout first (the package moved from frognano/leaf to frognano/harness/leaf).
LEAF_PACKAGES = ("frognano/harness/leaf", "frognano/leaf")
MAX_SOURCE_BYTES = 1 << 20  # Leaf's tools.py is under 5 KB; a bigger file is not the one we know


class LeafCheckoutError(ValueError):
    """A checkout leafcost cannot read Leaf's prompt from; the message names the file and what to do."""


def arm_prompts(spec: RunSpec) -> dict[str, EpisodePrompt]:
    """The prompt and tools every model arm of `spec` sends, by arm name; raises LeafCheckoutError (naming the
    arm and the file) before anything runs. The oracle sends no requests and has none."""
    prompts = {}
    for arm in spec.arms:
        if arm.kind == "oracle":
            if arm.leaf_checkout is not None:
                raise LeafCheckoutError(f"arm {arm.name}: an oracle arm sends no requests; remove leaf_checkout")
            continue
        try:
            prompts[arm.name] = read_leaf_checkout(arm.leaf_checkout) if arm.leaf_checkout else LEAFCOST_PROMPT
        except LeafCheckoutError as exc:
            raise LeafCheckoutError(f"arm {arm.name}: leaf_checkout: {exc}") from None
    return prompts


def run_spec_digest(spec: RunSpec, prompts: Mapping[str, EpisodePrompt]) -> str:
    """The run's spec hash: `spec.digest()` while every arm sends leafcost's own words (so earlier runs still
    resume), else a digest that also covers the bytes of each checkout's prompt and tools, so editing the
    checkout changes it even when its path does not."""
    read = {name: [p.prompt_sha256, p.tools_sha256] for name, p in sorted(prompts.items())
            if p.source == "leaf-checkout"}
    if not read:
        return spec.digest()
    return hashlib.sha256(json.dumps([spec.digest(), read]).encode()).hexdigest()


def read_leaf_checkout(checkout: Path | str) -> EpisodePrompt:
    """Leaf's system prompt and tool schemas as its agent sends them, from the clone at `checkout`."""
    root = Path(checkout).expanduser().resolve()
    if not root.is_dir():
        raise LeafCheckoutError(f"{root}: not a directory; point leaf_checkout at a clone of microsoft/FrogNano")
    package = _leaf_package(root)
    agent_file, tools_file = package / "agent.py", package / "tools.py"
    prompt_name, tools_name = _names_sent_by_agent(agent_file, _dotted(package.relative_to(root)))
    module = _parse(tools_file)
    system_prompt = _literal(module, prompt_name, tools_file)
    tools = _literal(module, tools_name, tools_file)
    if not isinstance(system_prompt, str):
        raise LeafCheckoutError(f"{tools_file}: {prompt_name} is a {type(system_prompt).__name__}, not a string")
    _check_tools(tools, tools_name, tools_file)
    return EpisodePrompt(source="leaf-checkout", system_prompt=system_prompt, tools=tools, leaf_checkout=str(root),
                         leaf_commit=git_head(root))


def git_head(root: Path) -> str | None:
    """The commit checked out at `root`, read from `.git` without running git; None when it is not a clone
    (or its HEAD cannot be read)."""
    try:
        git_dir = _git_dir(root)
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref: "):
            return head if _is_object_id(head) else None
        ref = head.removeprefix("ref: ").strip()
        if not ref.startswith("refs/") or ".." in ref.split("/"):
            return None
        common = _common_dir(git_dir)
        for base in (git_dir, common):
            loose = base / ref
            if loose.is_file():
                value = loose.read_text(encoding="utf-8").strip()
                return value if _is_object_id(value) else None
        return _packed_ref(common / "packed-refs", ref)
    except (OSError, UnicodeDecodeError):
        return None


# --- reading the clone -----------------------------------------------------------------------------------------

class _Parameters(BaseModel):
    type: str
    properties: dict[str, dict[str, Any]]
    required: list[str] = []


class _Function(BaseModel):
    name: str
    description: str
    parameters: _Parameters


class _Tool(BaseModel):
    model_config = ConfigDict(extra="allow")  # an extra key is sent as Leaf wrote it

    type: str
    function: _Function


_TOOLS = TypeAdapter(list[_Tool])


def _leaf_package(root: Path) -> Path:
    for relative in LEAF_PACKAGES:
        if (root / relative / "tools.py").is_file():
            return root / relative
    expected = " or ".join(f"{root / relative / 'tools.py'}" for relative in LEAF_PACKAGES)
    raise LeafCheckoutError(f"{expected}: no such file; point leaf_checkout at the root of a microsoft/FrogNano "
                            "clone (this layout is not one leafcost reads)")


def _dotted(relative: Path) -> str:
    return ".".join(relative.parts)


def _names_sent_by_agent(agent_file: Path, package: str) -> tuple[str, str]:
    """The names, in Leaf's tools.py, of the system prompt and the tool list that Leaf's agent sends: the
    `{"role": "system", "content": NAME}` message and the `tools=NAME` argument, NAME imported from tools.py."""
    module = _parse(agent_file)
    imported = _imported_from_tools(module, package)
    for local in imported:
        if (line := _changed(module, local)) is not None:
            raise LeafCheckoutError(f"{agent_file}:{line}: {local} is changed after its import from tools.py; "
                                    "leafcost would not send what Leaf sends")
    prompts = {imported[n] for n in _system_contents(module) if n in imported}
    tools = {imported[n] for n in _tools_arguments(module) if n in imported}
    for what, found, shape in (("system prompt", prompts, '{"role": "system", "content": NAME}'),
                               ("tool list", tools, "a call with tools=NAME")):
        if len(found) != 1:
            seen = f"found {sorted(found)}" if found else "found none"
            raise LeafCheckoutError(f"{agent_file}: cannot tell which {what} Leaf sends (looked for {shape} with "
                                    f"NAME imported from tools.py; {seen}); this FrogNano version's layout is not "
                                    "one leafcost reads")
    return prompts.pop(), tools.pop()


def _imported_from_tools(module: ast.Module, package: str) -> dict[str, str]:
    """Local name -> name in tools.py, for `from .tools import ...` and `from <package>.tools import ...`."""
    names = {}
    for node in ast.walk(module):
        if isinstance(node, ast.ImportFrom) and ((node.level == 1 and node.module == "tools")
                                                 or (node.level == 0 and node.module == f"{package}.tools")):
            names.update({alias.asname or alias.name: alias.name for alias in node.names})
    return names


def _system_contents(module: ast.Module) -> set[str]:
    found = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Dict):
            fields = {k.value: v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)}
            role, content = fields.get("role"), fields.get("content")
            if isinstance(role, ast.Constant) and role.value == "system" and isinstance(content, ast.Name):
                found.add(content.id)
    return found


def _tools_arguments(module: ast.Module) -> set[str]:
    return {keyword.value.id for node in ast.walk(module) if isinstance(node, ast.Call)
            for keyword in node.keywords if keyword.arg == "tools" and isinstance(keyword.value, ast.Name)}


def _parse(path: Path) -> ast.Module:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_SOURCE_BYTES + 1)
    except OSError as exc:
        raise LeafCheckoutError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_SOURCE_BYTES:
        raise LeafCheckoutError(f"{path}: larger than {MAX_SOURCE_BYTES} bytes; not Leaf's file")
    try:
        return ast.parse(data.decode("utf-8"), filename=str(path))
    except UnicodeDecodeError:
        raise LeafCheckoutError(f"{path}: not UTF-8 text") from None
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise LeafCheckoutError(f"{path}: not Python leafcost can parse: {exc}") from None


def _literal(module: ast.Module, name: str, path: Path) -> Any:
    """The value of the one module-level `NAME = <literal>` in `module`; refused when the name is bound again,
    changed in place, or built by code (leafcost evaluates literals only, it never runs the file)."""
    assignments = [node for node in module.body if _assigns(node, name)]
    if len(assignments) != 1:
        where = "is never assigned" if not assignments else "is assigned more than once"
        raise LeafCheckoutError(f"{path}: {name} {where} at module level; leafcost reads one literal assignment")
    if (line := _changed(module, name, assignments[0])) is not None:
        raise LeafCheckoutError(f"{path}:{line}: {name} is changed after its assignment; leafcost reads only the "
                                "literal and would not send what Leaf sends")
    value = assignments[0].value
    try:
        return ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        raise LeafCheckoutError(f"{path}:{value.lineno}: {name} is not a literal ({type(value).__name__} "
                                f"{ast.unparse(value)[:80]!r}...); leafcost evaluates literals only and never runs "
                                "Leaf's code") from None


def _assigns(node: ast.stmt, name: str) -> bool:
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    return isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name \
        and node.value is not None


_MUTATORS = frozenset({"append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse", "update",
                       "setdefault", "popitem", "__setitem__", "__delitem__", "__iadd__"})


def _changed(module: ast.Module, name: str, assignment: ast.stmt | None = None) -> int | None:
    """The line of a binding of `name` other than `assignment`, or of an in-place change (`NAME += ...`,
    `NAME[0]["description"] = ...`, `NAME.append(...)`), if any. Aliases are not followed."""
    allowed = [] if assignment is None else getattr(assignment, "targets", [getattr(assignment, "target", None)])
    for node in ast.walk(module):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, (ast.Store, ast.Del)) \
                and node not in allowed:
            return node.lineno
        if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)) \
                and _base_name(node) == name:
            return node.lineno
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS \
                and _base_name(node.func.value) == name:
            return node.lineno
        if isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return node.lineno
    return None


def _base_name(node: ast.expr) -> str | None:
    """`NAME` of `NAME[...]...` or `NAME.attr...`."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _check_tools(tools: Any, name: str, path: Path) -> None:
    """Leaf's schemas may word things differently, never differ in what the tool runner relies on."""
    try:
        _TOOLS.validate_python(tools)
    except ValidationError as exc:
        problem = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors()[:3])
        raise LeafCheckoutError(f"{path}: {name} is not a list of OpenAI function schemas ({problem})") from None
    theirs, ours = tool_signatures(tools), tool_signatures(LEAF_TOOLS)
    if theirs != ours:
        difference = next((f"{t} where leafcost has {o}" for t, o in zip(theirs, ours) if t != o),
                          f"tools {[t[0] for t in theirs]} where leafcost has {[o[0] for o in ours]}")
        raise LeafCheckoutError(f"{path}: {name} differs from the tools leafcost's runner executes (name, "
                                f"parameters and types in order, required): {difference}")


def _git_dir(root: Path) -> Path:
    dot_git = root / ".git"
    if dot_git.is_file():  # a worktree or submodule: `gitdir: PATH`
        line = dot_git.read_text(encoding="utf-8").strip()
        return (root / line.removeprefix("gitdir:").strip()).resolve()
    return dot_git


def _common_dir(git_dir: Path) -> Path:
    """Where a worktree's shared refs live (its `commondir`), else the git directory itself."""
    pointer = git_dir / "commondir"
    return (git_dir / pointer.read_text(encoding="utf-8").strip()).resolve() if pointer.is_file() else git_dir


def _packed_ref(packed: Path, ref: str) -> str | None:
    if not packed.is_file():
        return None
    for line in packed.read_text(encoding="utf-8").splitlines():
        value, _, name = line.partition(" ")
        if name == ref and _is_object_id(value):
            return value
    return None


def _is_object_id(value: str) -> bool:
    return re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", value) is not None
