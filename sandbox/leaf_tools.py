"""The five Leaf tool schemas sent to the model, and where the in-sandbox runner that executes them lives.

Names, parameters, types and required lists are exactly Leaf's: FrogNano was trained on these calls.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from sandbox.shared import tool_runner

LEAF_TOOL_NAMES = ("Read", "Write", "Edit", "Glob", "Bash")
TOOL_RUNNER_PATH = Path(tool_runner.__file__).resolve()
RUNNER_VERSION = tool_runner.RUNNER_VERSION


def bash_arguments(arguments: str | dict) -> tuple[dict, float] | None:
    """A Bash call's arguments and its timeout in seconds, by the runner's own rule (`tool_runner.bash_timeout`);
    None when they are not usable (the runner then answers with Leaf's error observation)."""
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
        return (parsed, tool_runner.bash_timeout(parsed)) if isinstance(parsed, dict) else None
    except ValueError:
        return None


ToolSignature = tuple[str, tuple[tuple[str, str], ...], tuple[str, ...]]


def tool_signatures(tools: list[dict]) -> list[ToolSignature]:
    """What the runner relies on in a list of tool schemas: each tool's name, its parameters (name and type, in
    order) and its required list. Descriptions are left out: they are only words to the model."""
    signatures = []
    for tool in tools:
        function = tool["function"]
        parameters = function["parameters"]
        properties = tuple((name, spec.get("type")) for name, spec in parameters["properties"].items())
        signatures.append((function["name"], properties, tuple(parameters.get("required", ()))))
    return signatures


def _tool(name: str, description: str, properties: dict, required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


def _param(kind: str, description: str) -> dict:
    return {"type": kind, "description": description}


LEAF_TOOLS: list[dict] = [
    _tool(
        "Read",
        "Read a text file; returns its lines, numbered.",
        {
            "file_path": _param("string", "Path of the file to read."),
            "offset": _param("integer", "Optional 1-based number of the first line to return."),
            "limit": _param("integer", "Optional maximum number of lines to return."),
        },
        ["file_path"],
    ),
    _tool(
        "Write",
        "Write a whole file, creating missing parent directories.",
        {
            "file_path": _param("string", "Path of the file to write."),
            "content": _param("string", "The complete new contents of the file."),
        },
        ["file_path", "content"],
    ),
    _tool(
        "Edit",
        "Replace an exact piece of text in a file.",
        {
            "file_path": _param("string", "Path of the file to edit."),
            "old_string": _param("string", "The exact text to replace."),
            "new_string": _param("string", "The text to put in its place."),
            "replace_all": _param("boolean", "Replace every occurrence instead of requiring exactly one."),
        },
        ["file_path", "old_string", "new_string"],
    ),
    _tool(
        "Glob",
        "List files matching a glob pattern.",
        {
            "pattern": _param("string", "Glob pattern, e.g. **/*.py."),
            "path": _param("string", "Optional directory to search in."),
        },
        ["pattern"],
    ),
    _tool(
        "Bash",
        "Run a shell command in the repository's working directory.",
        {
            "command": _param("string", "The command to run."),
            "description": _param("string", "A short description of what the command does."),
            "timeout": _param("number", "Optional timeout in seconds."),
        },
        ["command"],
    ),
]


# Which tool definitions the model was offered: part of every sandbox spec.
LEAF_TOOLS_SHA256 = hashlib.sha256(json.dumps(LEAF_TOOLS, sort_keys=True).encode()).hexdigest()
