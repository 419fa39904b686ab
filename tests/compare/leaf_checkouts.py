"""Fake FrogNano clones for tests: files laid out and shaped like Leaf's (a literal SYSTEM_PROMPT and
OPENAI_TOOLS in tools.py, an agent.py that imports and sends them), with words of our own."""

from __future__ import annotations

import copy
import pprint
import subprocess
from pathlib import Path

from sandbox.leaf_tools import LEAF_TOOLS

FAKE_PROMPT = "A stand-in for Leaf's prompt, line one — with a ✓.\nLine two: keep answers brief."
HARNESS = "frognano/harness/leaf"  # the current layout
OLD_HARNESS = "frognano/leaf"  # where Leaf lived before it moved under harness/


def fake_tools() -> list[dict]:
    """Our five schemas (same names, parameters, types and required lists) with every description reworded."""
    tools = copy.deepcopy(LEAF_TOOLS)
    for tool in tools:
        function = tool["function"]
        function["description"] = f"Stand-in words for {function['name']} (é, ✓)."
        for name, parameter in function["parameters"]["properties"].items():
            parameter["description"] = f"Stand-in words for {function['name']}.{name}."
    return tools


def tools_source(tools: list[dict] | None = None, prompt: str = FAKE_PROMPT, *, tail: str = "") -> str:
    """A tools.py in Leaf's shape: a docstring, a parenthesised multi-line prompt literal, a list literal."""
    pieces = "".join(f"    {line!r}\n" for line in prompt.splitlines(keepends=True))
    return ('"""System prompt and tool schemas (test stand-in)."""\n\nfrom __future__ import annotations\n\n'
            f"SYSTEM_PROMPT = (\n{pieces})\n\n"
            f"OPENAI_TOOLS = {pprint.pformat(fake_tools() if tools is None else tools, sort_dicts=False)}\n{tail}")


def agent_source(import_line: str = "from frognano.harness.leaf.tools import OPENAI_TOOLS, SYSTEM_PROMPT") -> str:
    """An agent.py in Leaf's shape: imports both names, starts the conversation with the prompt, sends the tools."""
    return (f'"""Model and tool orchestration (test stand-in)."""\n\nfrom __future__ import annotations\n\n'
            f"{import_line}\n\n\nclass Agent:\n    def __init__(self, client):\n        self.client = client\n\n"
            "    def run(self, instruction):\n"
            '        messages = [{"role": "system", "content": SYSTEM_PROMPT},\n'
            '                    {"role": "user", "content": instruction}]\n'
            "        return self.client.complete(messages, tools=OPENAI_TOOLS)\n")


def write_checkout(root: Path, *, package: str = HARNESS, tools_py: str | None = None,
                   agent_py: str | None = None, git: bool = False) -> Path:
    """A fake clone at `root`; `tools_py`/`agent_py` replace the files' text; `git` commits it."""
    leaf = root / package
    leaf.mkdir(parents=True, exist_ok=True)
    for init in ("frognano/__init__.py", f"{package}/__init__.py"):
        (root / init).write_text("")
    (leaf / "tools.py").write_text(tools_source() if tools_py is None else tools_py, encoding="utf-8")
    import_line = ("from .tools import OPENAI_TOOLS, SYSTEM_PROMPT" if package == OLD_HARNESS else
                   "from frognano.harness.leaf.tools import OPENAI_TOOLS, SYSTEM_PROMPT")
    (leaf / "agent.py").write_text(agent_source(import_line) if agent_py is None else agent_py, encoding="utf-8")
    if git:
        commit(root)
    return root


def commit(root: Path) -> str:
    """Commits everything in `root` (a repository is created if needed); returns the new HEAD."""
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid",
           "-c", "commit.gpgsign=false"]
    if not (root / ".git").exists():
        subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "stand-in"], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
