"""Leaf fidelity: a table of tool calls with the observation and file effects Leaf's own runner gives.

Each expectation is written by us from Leaf's documented behaviour (the public FrogNano harness: pathlib reads and
writes in text mode, `str()` of arguments, Python's own `int()`/`float()` errors, `glob.glob(recursive=True)`, a
text-mode `subprocess.run`), never produced by our runner. Every call runs through `tool_runner.run_tool` in a
fresh working directory. `{w}` in an expectation or argument stands for that directory's absolute path.
A second, short table lists where we differ from Leaf on purpose (Leaf would hang, exhaust memory or destroy a
file); the README's tool runner section documents both.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from sandbox.shared import tool_runner

DIR = object()  # setup: a directory
FIFO = object()  # setup: a named pipe
ABSENT = object()  # effect: no such path afterwards


@dataclass(frozen=True)
class Link:
    target: str


@dataclass(frozen=True)
class Case:
    name: str
    tool: str
    arguments: Any
    expected: str | Callable[[Path], str]
    files: dict[str, Any] = field(default_factory=dict)
    effects: dict[str, Any] = field(default_factory=dict)


def python_error(convert: Callable[[Any], Any], value: Any) -> str:
    """Leaf shows Python's own conversion error for a bad offset, limit or timeout, whatever its version says."""
    try:
        convert(value)
    except Exception as exc:  # noqa: BLE001 - the message itself is the expectation
        return f"{type(exc).__name__}: {exc}"
    raise AssertionError(f"{convert.__name__}({value!r}) did not fail")


def leaf_cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}\n[truncated {len(text) - limit} chars]"


TEN_LINES = "".join(f"line {i}\n" for i in range(1, 11))
BIG_TABLE = "".join(f"row {i:05d} of the table\n" for i in range(3000))
BIG_TABLE_READ = leaf_cut("big.txt\n" + "\n".join(f"{n}. row {n - 1:05d} of the table" for n in range(1, 3001)), 20000)
SRC_TREE = {"z.py": b"", "a.py": b"", "src/b.py": b"", "src/deep/c.py": b"", "src/notes.txt": b"", "dir.py": DIR,
            ".hidden/h.py": b"", ".env": b"", ".git/config": b"[core]\n", ".git/hooks/pre-commit": b""}
MANY_FILES = {f"f{i:04d}.txt": b"" for i in range(1005)}
MANY_FILES_GLOB = "\n".join(f"f{i:04d}.txt" for i in range(1000)) + "\n... 5 more files"

LEAF_CASES = [
    # ------------------------------------------------------------------------------------------ Read
    Case("read numbers lines", "Read", {"file_path": "a.txt"}, "a.txt\n1. one\n2. \n3. three",
         {"a.txt": b"one\n\nthree\n"}),
    Case("read absolute path shows it relative", "Read", {"file_path": "{w}/a.txt"}, "a.txt\n1. one",
         {"a.txt": b"one\n"}),
    Case("read `path` alias", "Read", {"path": "a.txt"}, "a.txt\n1. one", {"a.txt": b"one\n"}),
    Case("read offset and limit", "Read", {"file_path": "f.txt", "offset": 4, "limit": 2},
         "f.txt\n4. line 4\n5. line 5", {"f.txt": TEN_LINES.encode()}),
    Case("read offset past the end", "Read", {"file_path": "f.txt", "offset": 50}, "f.txt\n",
         {"f.txt": TEN_LINES.encode()}),
    Case("read offset 0 is line 1", "Read", {"file_path": "f.txt", "offset": 0, "limit": 1}, "f.txt\n1. line 1",
         {"f.txt": TEN_LINES.encode()}),
    Case("read negative limit is no limit", "Read", {"file_path": "f.txt", "offset": 9, "limit": -3},
         "f.txt\n9. line 9\n10. line 10", {"f.txt": TEN_LINES.encode()}),
    Case("read offset as a numeric string", "Read", {"file_path": "f.txt", "offset": "10"}, "f.txt\n10. line 10",
         {"f.txt": TEN_LINES.encode()}),
    Case("read offset float truncates", "Read", {"file_path": "f.txt", "offset": 9.9, "limit": 1}, "f.txt\n9. line 9",
         {"f.txt": TEN_LINES.encode()}),
    Case("read empty offset string is the default", "Read", {"file_path": "f.txt", "offset": "", "limit": 1},
         "f.txt\n1. line 1", {"f.txt": TEN_LINES.encode()}),
    Case("read offset x is int()'s error", "Read", {"file_path": "f.txt", "offset": "x"},
         "ValueError: invalid literal for int() with base 10: 'x'", {"f.txt": b"a\n"}),
    Case("read limit list is int()'s error", "Read", {"file_path": "f.txt", "limit": [1]},
         python_error(int, [1]), {"f.txt": b"a\n"}),
    Case("read missing file wins over a bad offset", "Read", {"file_path": "missing.txt", "offset": "x"},
         "FileNotFoundError: [Errno 2] No such file or directory: '{w}/missing.txt'"),
    Case("read a directory", "Read", {"file_path": "pkg"}, "IsADirectoryError: [Errno 21] Is a directory: '{w}/pkg'",
         {"pkg": DIR}),
    Case("read without a path", "Read", {}, "ValueError: file_path is required"),
    Case("read empty file", "Read", {"file_path": "e.txt"}, "e.txt\n", {"e.txt": b""}),
    Case("read CRLF and CR line ends", "Read", {"file_path": "c.txt"}, "c.txt\n1. a\n2. b\n3. c\n4. d",
         {"c.txt": b"a\r\nb\rc\nd"}),
    Case("read other line breaks split too", "Read", {"file_path": "c.txt"}, "c.txt\n1. a\n2. b\n3. c",
         {"c.txt": "a\x0cb\u2028c".encode()}),
    Case("read invalid UTF-8 as U+FFFD", "Read", {"file_path": "bin.txt"}, "bin.txt\n1. ok\ufffd\ufffd end",
         {"bin.txt": b"ok\xff\xfe end\n"}),
    Case("read cuts at 20000 chars", "Read", {"file_path": "big.txt"}, BIG_TABLE_READ,
         {"big.txt": BIG_TABLE.encode()}),
    Case("read outside the workdir shows the path as given", "Read", {"file_path": "../out.txt"},
         "{w}/../out.txt\n1. far", {"../out.txt": b"far\n"}),
    Case("read through a symlink shows the target", "Read", {"file_path": "link.txt"}, "a.txt\n1. one",
         {"a.txt": b"one\n", "link.txt": Link("a.txt")}),
    # ----------------------------------------------------------------------------------------- Write
    Case("write counts characters, not bytes", "Write", {"file_path": "u.txt", "content": "héllo ✓\n"},
         "Wrote u.txt (8 bytes).", effects={"u.txt": "héllo ✓\n".encode()}),
    Case("write creates parents", "Write", {"file_path": "a/b/c.txt", "content": "x"}, "Wrote a/b/c.txt (1 bytes).",
         effects={"a/b/c.txt": b"x"}),
    Case("write without content writes an empty file", "Write", {"file_path": "n.txt"}, "Wrote n.txt (0 bytes).",
         effects={"n.txt": b""}),
    Case("write null content writes None", "Write", {"file_path": "n.txt", "content": None},
         "Wrote n.txt (4 bytes).", effects={"n.txt": b"None"}),
    Case("write an object writes its Python form", "Write", {"file_path": "o.json", "content": {"k": [1, 2]}},
         "Wrote o.json (13 bytes).", effects={"o.json": b"{'k': [1, 2]}"}),
    Case("write a list writes its Python form", "Write", {"file_path": "l.txt", "content": [1, "a", None]},
         "Wrote l.txt (14 bytes).", effects={"l.txt": b"[1, 'a', None]"}),
    Case("write a number or boolean", "Write", {"file_path": "t.txt", "content": True}, "Wrote t.txt (4 bytes).",
         effects={"t.txt": b"True"}),
    Case("write overwrites", "Write", {"file_path": "a.txt", "content": "new"}, "Wrote a.txt (3 bytes).",
         {"a.txt": b"old contents\n"}, {"a.txt": b"new"}),
    Case("write keeps CRLF as sent", "Write", {"file_path": "w.txt", "content": "a\r\nb"}, "Wrote w.txt (4 bytes).",
         effects={"w.txt": b"a\r\nb"}),
    Case("write without a path", "Write", {"content": "x"}, "ValueError: file_path is required"),
    Case("write onto a directory", "Write", {"file_path": "pkg", "content": "x"},
         "IsADirectoryError: [Errno 21] Is a directory: '{w}/pkg'", {"pkg": DIR}),
    Case("write under a file", "Write", {"file_path": "f.txt/x", "content": "x"},
         "FileExistsError: [Errno 17] File exists: '{w}/f.txt'", {"f.txt": b"file\n"}),
    # ------------------------------------------------------------------------------------------ Edit
    Case("edit one occurrence", "Edit", {"file_path": "m.py", "old_string": "y = 2", "new_string": "y = 3"},
         "Edited m.py (1 replacement).", {"m.py": b"x = 1\ny = 2\n"}, {"m.py": b"x = 1\ny = 3\n"}),
    Case("edit replace_all", "Edit", {"file_path": "m.py", "old_string": "a", "new_string": "z", "replace_all": True},
         "Edited m.py (3 replacements).", {"m.py": b"a a a b\n"}, {"m.py": b"z z z b\n"}),
    Case("edit replace_all as the string true", "Edit",
         {"file_path": "m.py", "old_string": "a", "new_string": "z", "replace_all": "true"},
         "Edited m.py (2 replacements).", {"m.py": b"a a\n"}, {"m.py": b"z z\n"}),
    Case("edit twice without replace_all", "Edit",
         {"file_path": "m.py", "old_string": "a", "new_string": "z", "replace_all": "no"},
         "ValueError: old_string matched 2 times; set replace_all=true or use a more specific old_string",
         {"m.py": b"a a\n"}, {"m.py": b"a a\n"}),
    Case("edit without new_string deletes the match", "Edit", {"file_path": "a.txt", "old_string": "b"},
         "Edited a.txt (1 replacement).", {"a.txt": b"abc\n"}, {"a.txt": b"ac\n"}),
    Case("edit null new_string deletes", "Edit", {"file_path": "a.txt", "old_string": "b", "new_string": None},
         "Edited a.txt (1 replacement).", {"a.txt": b"abc\n"}, {"a.txt": b"ac\n"}),
    Case("edit new_string 0 deletes (falsy)", "Edit", {"file_path": "a.txt", "old_string": "b", "new_string": 0},
         "Edited a.txt (1 replacement).", {"a.txt": b"abc\n"}, {"a.txt": b"ac\n"}),
    Case("edit new_string number is its str", "Edit", {"file_path": "a.txt", "old_string": "b", "new_string": 5},
         "Edited a.txt (1 replacement).", {"a.txt": b"abc\n"}, {"a.txt": b"a5c\n"}),
    Case("edit empty old_string", "Edit", {"file_path": "a.txt", "old_string": "", "new_string": "z"},
         "ValueError: old_string must be non-empty", {"a.txt": b"abc\n"}, {"a.txt": b"abc\n"}),
    Case("edit without old_string", "Edit", {"file_path": "a.txt", "new_string": "z"},
         "ValueError: old_string must be non-empty", {"a.txt": b"abc\n"}, {"a.txt": b"abc\n"}),
    Case("edit old_string not found", "Edit", {"file_path": "a.txt", "old_string": "q", "new_string": "z"},
         "ValueError: old_string was not found", {"a.txt": b"abc\n"}, {"a.txt": b"abc\n"}),
    Case("edit of a non-UTF-8 file writes U+FFFD", "Edit",
         {"file_path": "latin.txt", "old_string": "1", "new_string": "2"},
         "Edited latin.txt (1 replacement).", {"latin.txt": b"caf\xe9 = 1\n"},
         {"latin.txt": "caf\ufffd = 2\n".encode()}),
    Case("edit turns CRLF into LF", "Edit", {"file_path": "w.txt", "old_string": "a", "new_string": "z"},
         "Edited w.txt (1 replacement).", {"w.txt": b"a\r\nb\r\n"}, {"w.txt": b"z\nb\n"}),
    Case("edit cannot match a CRLF", "Edit", {"file_path": "w.txt", "old_string": "a\r\nb", "new_string": "z"},
         "ValueError: old_string was not found", {"w.txt": b"a\r\nb\r\n"}, {"w.txt": b"a\r\nb\r\n"}),
    Case("edit missing file", "Edit", {"file_path": "nope.txt", "old_string": "a", "new_string": "b"},
         "FileNotFoundError: [Errno 2] No such file or directory: '{w}/nope.txt'", effects={"nope.txt": ABSENT}),
    Case("edit missing file, empty old_string checked first", "Edit", {"file_path": "nope.txt", "old_string": ""},
         "ValueError: old_string must be non-empty"),
    Case("edit a directory", "Edit", {"file_path": "pkg", "old_string": "a", "new_string": "b"},
         "IsADirectoryError: [Errno 21] Is a directory: '{w}/pkg'", {"pkg": DIR}),
    # ------------------------------------------------------------------------------------------ Glob
    Case("glob recursive, sorted, files only, dot names skipped", "Glob", {"pattern": "**/*.py"},
         "a.py\nsrc/b.py\nsrc/deep/c.py\nz.py", SRC_TREE),
    Case("glob from a path", "Glob", {"pattern": "**/*.py", "path": "src"}, "src/b.py\nsrc/deep/c.py", SRC_TREE),
    Case("glob ** alone lists every non-hidden file", "Glob", {"pattern": "**"},
         "a.py\nsrc/b.py\nsrc/deep/c.py\nsrc/notes.txt\nz.py", SRC_TREE),
    Case("glob .git/* matches", "Glob", {"pattern": ".git/*"}, ".git/config", SRC_TREE),
    Case("glob **/.git/* matches", "Glob", {"pattern": "**/.git/*"}, ".git/config", SRC_TREE),
    Case("glob .git/** walks it", "Glob", {"pattern": ".git/**"}, ".git/config\n.git/hooks/pre-commit", SRC_TREE),
    Case("glob .* matches dot files", "Glob", {"pattern": ".*"}, ".env", SRC_TREE),
    Case("glob no match", "Glob", {"pattern": "**/*.rs"}, "No files matched.", SRC_TREE),
    Case("glob at most 1000", "Glob", {"pattern": "*.txt"}, MANY_FILES_GLOB, MANY_FILES),
    Case("glob absolute pattern shows relative paths", "Glob", {"pattern": "{w}/src/*.py"}, "src/b.py", SRC_TREE),
    Case("glob outside the workdir shows the path as given", "Glob", {"pattern": "../*.txt"}, "{w}/../out.txt",
         {"../out.txt": b""}),
    Case("glob magic in path is magic", "Glob", {"pattern": "*.py", "path": "s*"}, "src/b.py", SRC_TREE),
    Case("glob trailing slash is dropped by pathlib", "Glob", {"pattern": "src/"}, "No files matched.", SRC_TREE),
    Case("glob a file symlink shows its target, twice", "Glob", {"pattern": "*.txt"}, "a.txt\na.txt",
         {"a.txt": b"", "link.txt": Link("a.txt")}),
    Case("glob without a pattern", "Glob", {"path": "src"}, "ValueError: pattern is required"),
    # ------------------------------------------------------------------------------------------ Bash
    Case("bash format", "Bash", {"command": "echo out; echo err >&2; exit 3", "description": "probe"},
         "Exit code: 3\nSTDOUT:\nout\n\nSTDERR:\nerr\n"),
    Case("bash runs in the workdir", "Bash", {"command": "pwd"}, "Exit code: 0\nSTDOUT:\n{w}\n\nSTDERR:\n"),
    Case("bash universal newlines", "Bash", {"command": r"printf 'a\r\nb\rc'"},
         "Exit code: 0\nSTDOUT:\na\nb\nc\nSTDERR:\n"),
    Case("bash non-UTF-8 stdout", "Bash", {"command": r"printf '\xff\xfe'"},
         "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"),
    Case("bash non-UTF-8 stderr", "Bash", {"command": r"echo fine; printf 'abc\xfe' >&2"},
         "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xfe in position 3: invalid start byte"),
    Case("bash stdout is decoded before stderr", "Bash", {"command": r"printf '\xfe' >&2; printf 'ab\xff'"},
         "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 2: invalid start byte"),
    Case("bash output ending inside a character", "Bash", {"command": r"printf 'x\xe6\x97'"},
         "UnicodeDecodeError: 'utf-8' codec can't decode bytes in position 1-2: unexpected end of data"),
    Case("bash killed by a signal", "Bash", {"command": "kill -9 $$"}, "Exit code: -9\nSTDOUT:\n\nSTDERR:\n"),
    Case("bash stdin is empty", "Bash", {"command": "cat; echo after"}, "Exit code: 0\nSTDOUT:\nafter\n\nSTDERR:\n"),
    Case("bash timeout keeps partial output", "Bash",
         {"command": "echo started; echo half >&2; sleep 60", "timeout": 5},
         "Timed out after 5.0s\nSTDOUT:\nstarted\n\nSTDERR:\nhalf\n"),
    Case("bash timeout output is raw: no newline translation, U+FFFD", "Bash",
         {"command": r"printf 'a\r\n\xff'; sleep 60", "timeout": 5},
         "Timed out after 5.0s\nSTDOUT:\na\r\n\ufffd\nSTDERR:\n"),
    Case("bash timeout above 1000 is milliseconds", "Bash", {"command": "sleep 60", "timeout": 1500},
         "Timed out after 1.5s\nSTDOUT:\n\nSTDERR:\n"),
    Case("bash timeout_ms", "Bash", {"command": "sleep 60", "timeout_ms": 1200},
         "Timed out after 1.2s\nSTDOUT:\n\nSTDERR:\n"),
    Case("bash timeout 0 is 0.1 s", "Bash", {"command": "sleep 60", "timeout": 0},
         "Timed out after 0.1s\nSTDOUT:\n\nSTDERR:\n"),
    Case("bash timeout abc is float()'s error", "Bash", {"command": "true", "timeout": "abc"},
         "ValueError: could not convert string to float: 'abc'"),
    Case("bash timeout object is float()'s error", "Bash", {"command": "true", "timeout": {"s": 1}},
         python_error(float, {"s": 1})),
    Case("bash without a command", "Bash", {"timeout": 5}, "ValueError: command is required"),
    Case("bash command 0 is missing", "Bash", {"command": 0}, "ValueError: command is required"),
    Case("bash cuts at 30000 chars", "Bash", {"command": "printf 'x%.0s' $(seq 40000)"},
         leaf_cut("Exit code: 0\nSTDOUT:\n" + "x" * 40000 + "\nSTDERR:\n", 30000)),
    # --------------------------------------------------------------------------------------- dispatch
    Case("unknown tool", "Nope", {"x": 1}, "Unknown tool: Nope"),
    Case("malformed JSON arguments are {}", "Write", '{"file_path": "a.txt", "content": ',
         "ValueError: file_path is required"),
    Case("non-object arguments are {}", "Bash", '["ls"]', "ValueError: command is required"),
]

# Where Leaf would hang, exhaust memory or destroy a file, we answer (see the README's tool runner section).
DELIBERATE_CASES = [
    Case("read a FIFO is refused, not a hang", "Read", {"file_path": "p"},
         "OSError: {w}/p is a FIFO; opening it could block forever (use Bash)", {"p": FIFO}),
    Case("write a FIFO is refused", "Write", {"file_path": "p", "content": "x"},
         "OSError: {w}/p is a FIFO; opening it could block forever (use Bash)", {"p": FIFO}),
    Case("edit a FIFO is refused", "Edit", {"file_path": "p", "old_string": "x"},
         "OSError: {w}/p is a FIFO; opening it could block forever (use Bash)", {"p": FIFO}),
    Case("write with a lone surrogate: Leaf's error, but the old file stays", "Write",
         {"file_path": "a.txt", "content": "ok\ud800"},
         "UnicodeEncodeError: 'utf-8' codec can't encode character '\\ud800' in position 2: surrogates not allowed",
         {"a.txt": b"old\n"}, {"a.txt": b"old\n"}),
    Case("edit with a lone surrogate: Leaf's error, but the file stays", "Edit",
         {"file_path": "a.txt", "old_string": "o", "new_string": "\ud800"},
         "UnicodeEncodeError: 'utf-8' codec can't encode character '\\ud800' in position 0: surrogates not allowed",
         {"a.txt": b"old\n"}, {"a.txt": b"old\n"}),
    Case("bash does not wait for a background child holding the pipe", "Bash",
         {"command": "sleep 10 & echo done", "timeout": 30},  # Leaf waits for the pipe: "Timed out after 30.0s"
         "Exit code: 0\nSTDOUT:\ndone\n\nSTDERR:\n"),
]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "app"
    path.mkdir()
    home = tmp_path / "home"  # Bash runs a login shell: keep the host's ~/.bashrc out of it
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(path)
    return Path(os.getcwd())  # as Leaf sees it: the resolved working directory


def _place(workdir: Path, files: dict[str, Any]) -> None:
    for name, value in files.items():
        path = workdir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if value is DIR:
            path.mkdir(exist_ok=True)
        elif value is FIFO:
            os.mkfifo(path)
        elif isinstance(value, Link):
            path.symlink_to(value.target)
        else:
            path.write_bytes(value)


def _substitute(value: Any, workdir: Path) -> Any:
    if isinstance(value, str):
        return value.replace("{w}", str(workdir))
    if isinstance(value, dict):
        return {key: _substitute(item, workdir) for key, item in value.items()}
    return value


def _check(case: Case, workdir: Path) -> None:
    _place(workdir, case.files)
    output = tool_runner.run_tool(case.tool, _substitute(case.arguments, workdir), workdir)
    expected = case.expected(workdir) if callable(case.expected) else _substitute(case.expected, workdir)
    assert output == expected
    untouched = {name: value for name, value in case.files.items() if isinstance(value, bytes)}
    for name, value in {**untouched, **case.effects}.items():
        path = workdir / name
        if value is ABSENT:
            assert not os.path.lexists(path), name
        else:
            assert path.read_bytes() == value, name


# The two cases that wait out a multi-second Bash timeout: make test-fast leaves them out.
WAITS_OUT = {"bash timeout keeps partial output", "bash timeout output is raw: no newline translation, U+FFFD"}


@pytest.mark.parametrize("case", [pytest.param(case, id=case.name, marks=[pytest.mark.slow] * (case.name in WAITS_OUT))
                                  for case in LEAF_CASES])
def test_observation_and_effects_are_leafs(case: Case, workdir: Path) -> None:
    _check(case, workdir)


@pytest.mark.parametrize("case", DELIBERATE_CASES, ids=[case.name for case in DELIBERATE_CASES])
def test_deliberate_differences(case: Case, workdir: Path) -> None:
    _check(case, workdir)


def test_the_table_is_at_least_as_broad_as_the_review() -> None:
    assert len(LEAF_CASES) >= 50
    assert {case.tool for case in LEAF_CASES} >= {"Read", "Write", "Edit", "Glob", "Bash"}
    assert len({case.name for case in LEAF_CASES + DELIBERATE_CASES}) == len(LEAF_CASES) + len(DELIBERATE_CASES)


def test_edit_of_a_file_over_the_cap_is_refused_not_loaded(workdir: Path) -> None:
    big = workdir / "big.log"
    with open(big, "wb") as handle:
        handle.truncate(tool_runner.EDIT_CAP_BYTES + 1)
    output = tool_runner.run_tool("Edit", {"file_path": "big.log", "old_string": "a", "new_string": "b"}, workdir)
    assert output == f"ValueError: {big} is larger than 32 MiB; Edit refuses it (use Bash)"
    assert big.stat().st_size == tool_runner.EDIT_CAP_BYTES + 1
