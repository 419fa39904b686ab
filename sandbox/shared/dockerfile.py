"""Reads a Dockerfile into the instructions the local sandbox replays (FROM, WORKDIR, ENV, ARG, COPY/ADD, RUN), and
finds the images a build starts from (FROM, COPY --from) so the container backend can name them as Docker does."""

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


# How the local backend's refusals end: the backends that build the task's Dockerfile with a real engine.
CONTAINER_BACKENDS = "the task needs --backend podman (or docker; in a run spec, `backend:` under `sandbox:`)"
_FROM = re.compile(r"FROM\s+(?:--\S+\s+)*(?P<image>[^\s\\]+)(?:\s+AS\s+(?P<stage>[^\s\\]+))?", re.IGNORECASE)
_COPY_FROM = re.compile(r"(?<=\s)--from=(?P<image>[^\s\\]+)")
_HEREDOC = re.compile(r"<<-?\s*[\"']?(?P<word>[A-Za-z_][A-Za-z0-9_]*)[\"']?")


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
            raise DockerfileError(f"{where}: heredocs are not supported by the local backend: {CONTAINER_BACKENDS}")
        instructions.append(Instruction(line=line, keyword=keyword, args=_arguments(keyword, rest, where),
                                        text=text))
    if not any(i.keyword == "FROM" for i in instructions):
        raise DockerfileError(f"{Path(path).name}: no FROM instruction")
    return instructions


def base_images(source: str) -> list[str]:
    """The images a build of `source` starts from: each FROM's and each `COPY --from=`'s, in order, without the
    names of its own stages, `scratch`, stage indexes and names an ARG fills in (the engine expands those)."""
    return [source[start:end] for start, end in _image_spans(source)]


def replace_base_images(source: str, names: dict[str, str]) -> str:
    """`source` with every image `base_images` finds replaced by its entry in `names`; every other byte kept."""
    out, last = [], 0
    for start, end in _image_spans(source):
        out += [source[last:start], names.get(source[start:end], source[start:end])]
        last = end
    return "".join(out) + source[last:]


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
            raise DockerfileError(f"{where}: {keyword} --from (a multi-stage build) is not supported by the local "
                                  f"backend: {CONTAINER_BACKENDS}")
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


def _image_spans(source: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the image names in FROM and `COPY --from=` instructions, read from each
    instruction's first line; continuation lines, comments and heredoc bodies are passed over."""
    escape = "`" if re.match(r"\s*#\s*escape\s*=\s*`", source) else "\\"
    spans: list[tuple[int, int]] = []
    stages: set[str] = set()
    continued, heredocs, offset = False, [], 0
    for line in source.splitlines(keepends=True):
        text, start, offset = line.rstrip("\r\n"), offset, offset + len(line)
        if heredocs:
            if text.lstrip("\t") == heredocs[0]:
                heredocs.pop(0)
            continue
        stripped = text.lstrip()
        if not stripped or stripped.startswith("#"):
            continue  # neither starts nor ends an instruction, even between continued lines
        if continued:
            continued = stripped.rstrip().endswith(escape)
            continue
        indent = start + len(text) - len(stripped)
        keyword = stripped.split(None, 1)[0].upper()
        if keyword == "FROM" and (found := _FROM.match(stripped)):
            if _an_image(found["image"], stages):
                spans.append((indent + found.start("image"), indent + found.end("image")))
            if found["stage"]:
                stages.add(found["stage"].lower())
        elif keyword == "COPY":
            spans += [(indent + m.start("image"), indent + m.end("image")) for m in _COPY_FROM.finditer(stripped)
                      if _an_image(m["image"], stages)]
        if keyword in {"RUN", "COPY", "ADD"}:
            heredocs += [m["word"] for m in _HEREDOC.finditer(stripped)]
        continued = stripped.rstrip().endswith(escape)
    return spans


def _an_image(name: str, stages: set[str]) -> bool:
    return name.lower() not in stages and name.lower() != "scratch" and "$" not in name and not name.isdigit()
