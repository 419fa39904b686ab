"""Reads a Dockerfile into the instructions the local sandbox replays (FROM, WORKDIR, ENV, ARG, COPY/ADD, RUN)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from pydantic import BaseModel

# Instructions that describe how an image is run or published, not what is in it.
IGNORED = {"CMD", "ENTRYPOINT", "EXPOSE", "LABEL", "VOLUME", "HEALTHCHECK", "STOPSIGNAL", "MAINTAINER",
           "ONBUILD", "USER", "SHELL"}
REPLAYED = {"FROM", "WORKDIR", "ENV", "ARG", "COPY", "ADD", "RUN"}


class DockerfileError(ValueError):
    """A Dockerfile the local sandbox cannot replay; the message names the file and line."""


class Instruction(BaseModel):
    line: int
    keyword: str
    args: list[str]
    text: str


def parse_dockerfile(path: Path) -> list[Instruction]:
    instructions = []
    try:
        source = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DockerfileError(f"{Path(path).name}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except OSError as exc:
        raise DockerfileError(f"{Path(path).name}: cannot be read: {exc.strerror}") from None
    for line, text in _logical_lines(source):
        keyword, _, rest = text.partition(" ")
        keyword = keyword.upper()
        rest = rest.strip()
        where = f"{Path(path).name}:{line}"
        if keyword in IGNORED:
            instructions.append(Instruction(line=line, keyword=keyword, args=[rest], text=text))
            continue
        if keyword not in REPLAYED:
            raise DockerfileError(f"{where}: unknown instruction {keyword!r}")
        if "<<" in rest and keyword in {"RUN", "COPY"}:
            raise DockerfileError(f"{where}: heredocs are not supported by the local sandbox")
        instructions.append(Instruction(line=line, keyword=keyword, args=_arguments(keyword, rest, where),
                                        text=text))
    if not any(i.keyword == "FROM" for i in instructions):
        raise DockerfileError(f"{Path(path).name}: no FROM instruction")
    return instructions


def substitute(text: str, variables: dict[str, str]) -> str:
    """`$NAME`, `${NAME}` and `${NAME:-default}` as Docker expands them in WORKDIR/ENV/COPY arguments."""

    def repl(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        default = match.group(3)
        value = variables.get(name, "")
        return value if value or default is None else default

    return re.sub(r"\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\})", repl, text)


def _logical_lines(source: str) -> list[tuple[int, str]]:
    """Joins backslash continuations and drops comments and blank lines, keeping each instruction's first line."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(source.splitlines(), start=1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        out.append((start, (pending + stripped).strip()))
        pending = ""
    if pending:
        out.append((start, pending.strip()))
    return out


def _arguments(keyword: str, rest: str, where: str) -> list[str]:
    if not rest:
        raise DockerfileError(f"{where}: {keyword} needs arguments")
    if keyword == "RUN":
        if rest.startswith("["):
            return [shlex.join(_json_form(rest, where))]
        return [rest]
    if keyword in {"COPY", "ADD"}:
        parts = _json_form(rest, where) if rest.startswith("[") else shlex.split(rest)
        flags = [p for p in parts if p.startswith("--")]
        paths = [p for p in parts if not p.startswith("--")]
        if any(f.startswith("--from") for f in flags):
            raise DockerfileError(f"{where}: {keyword} --from (multi-stage builds) is not supported")
        if len(paths) < 2:
            raise DockerfileError(f"{where}: {keyword} needs a source and a destination")
        return paths
    if keyword == "ENV":
        return _env_pairs(rest, where)
    if keyword == "ARG":
        name, sep, default = rest.partition("=")
        return [name.strip(), default.strip().strip('"') if sep else ""]
    if keyword == "FROM":
        return [rest.split()[0]]
    return [rest]


def _env_pairs(rest: str, where: str) -> list[str]:
    parts = shlex.split(rest)
    if parts and "=" not in parts[0]:  # legacy `ENV NAME value with spaces`
        return [parts[0], rest[len(rest.split(None, 1)[0]):].strip()]
    pairs = []
    for part in parts:
        name, sep, value = part.partition("=")
        if not sep or not name:
            raise DockerfileError(f"{where}: ENV expects NAME=value, got {part!r}")
        pairs += [name, value]
    return pairs


def _json_form(rest: str, where: str) -> list[str]:
    try:
        value = json.loads(rest)
    except json.JSONDecodeError as exc:
        raise DockerfileError(f"{where}: invalid JSON form: {exc}") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DockerfileError(f"{where}: the JSON form must be a list of strings")
    return value
