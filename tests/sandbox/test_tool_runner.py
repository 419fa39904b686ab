"""The in-sandbox tool runner, driven as a real subprocess over its JSON-lines protocol."""

from __future__ import annotations

import glob
import io
import json
import os
import random
import selectors
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.shared import tool_runner

RUNNER = Path(__file__).resolve().parents[2] / "sandbox" / "shared" / "tool_runner.py"
SPARSE_SIZE = 200 * 1024 * 1024


# The host's own login files can be slow or block (pyenv's rehash waits up to 60 s on a stale lock), and the Bash
# tool runs a login shell. Real sandboxes bind a minimal /etc/profile and have an empty home; the runner under
# test gets the same, with the host's root otherwise unchanged. Like a real sandbox it runs as uid 1000 without
# capabilities in its own user namespace (so /proc protections apply even when the tests run as root).
MINIMAL_LOGIN = ["bwrap", "--unshare-user", "--uid", "1000", "--gid", "1000", "--cap-drop", "ALL",
                 "--dev-bind", "/", "/", "--ro-bind", str(RUNNER.parents[1] / "local" / "profile.sh"), "/etc/profile",
                 "--die-with-parent", "--"]


class RunnerClient:
    """Speaks the runner's protocol: one JSON line out, one JSON line back."""

    def __init__(self, workdir: Path, command: list[str] | None = None) -> None:
        self.stderr_path = workdir.parent / "runner.stderr"
        self._stderr = open(self.stderr_path, "wb")
        home = workdir.parent / "home"  # empty, as in a sandbox: the host's ~/.bashrc may run pyenv too
        home.mkdir(exist_ok=True)
        self.proc = subprocess.Popen(
            command or [*MINIMAL_LOGIN, sys.executable, "-u", str(RUNNER), "--workdir", str(workdir)],
            env={**os.environ, "HOME": str(home)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self.ready = self.receive()
        self._next_id = 0

    def send_line(self, line: bytes) -> None:
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float = 60) -> dict:
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            if not selector.select(timeout):
                raise TimeoutError(f"no answer from the runner within {timeout} s")
        line = self.proc.stdout.readline()
        assert line.endswith(b"\n"), f"runner sent no complete line: {line!r}"
        return json.loads(line)

    def request(self, op: str, wait: float = 60, **fields) -> dict:
        self._next_id += 1
        self.send_line(json.dumps({"id": self._next_id, "op": op, **fields}).encode())
        answer = self.receive(wait)
        assert answer["id"] == self._next_id
        return answer

    def tool(self, name: str, arguments: dict | str, wait: float = 60) -> str:
        return self.request("tool", wait, name=name, arguments=arguments)["output"]

    def peak_memory_bytes(self) -> int:
        for line in Path(f"/proc/{self.ready['pid']}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM in /proc status")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            stream.close()
        self._stderr.close()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "app"
    path.mkdir()
    return path


@pytest.fixture
def runner(workdir: Path):
    client = RunnerClient(workdir)
    yield client
    client.close()


def leaf_read(display: str, data: bytes, offset: int | None = None, limit: int | None = None) -> str:
    """Leaf's Read, written the simple way (whole file in memory), as the oracle for the streaming one."""
    lines = data.decode("utf-8", errors="replace").splitlines()
    first = max(1, offset or 1)
    end = len(lines) if not limit or limit <= 0 else min(len(lines), first - 1 + limit)
    body = "\n".join(f"{n}. {line}" for n, line in enumerate(lines[first - 1 : end], start=first))
    full = f"{display}\n{body}"
    return full if len(full) <= 20000 else f"{full[:20000]}\n[truncated {len(full) - 20000} chars]"


def live_members(pgid: int) -> list[int]:
    members = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != b"Z":
            members.append(int(name))
    return members


# ------------------------------------------------------------------------------------------- protocol


def test_ready_line_and_ping(runner: RunnerClient) -> None:
    assert runner.ready["ready"] is True
    assert b"tool_runner" in Path(f"/proc/{runner.ready['pid']}/cmdline").read_bytes()
    assert runner.ready["python"] == sys.version.split()[0]
    assert isinstance(runner.ready["runner_version"], str) and runner.ready["runner_version"]
    assert runner.request("ping") == {"id": 1, "ok": True}


def test_shutdown_answers_then_exits_zero(runner: RunnerClient) -> None:
    assert runner.request("shutdown") == {"id": 1, "ok": True}
    assert runner.proc.wait(timeout=30) == 0


def test_eof_on_stdin_exits_zero(runner: RunnerClient) -> None:
    runner.proc.stdin.close()
    assert runner.proc.wait(timeout=30) == 0


def test_missing_workdir_is_reported_not_ready(tmp_path: Path) -> None:
    client = RunnerClient(tmp_path / "missing")
    try:
        assert client.ready["ready"] is False
        assert "FileNotFoundError" in client.ready["error"]
        assert client.proc.wait(timeout=30) == 2
    finally:
        client.close()


def test_malformed_request_lines_get_errors_and_the_runner_keeps_serving(runner: RunnerClient) -> None:
    runner.send_line(b"this is not json")
    bad_json = runner.receive()
    runner.send_line(b'{"id": 7, "op": "teleport"}')
    unknown_op = runner.receive()
    runner.send_line(b'{"id": 8, "op": "exec", "timeout": 5}')
    missing_field = runner.receive()
    runner.send_line(b'{"id": 9, "op": "exec", "command": "true", "timeout": "soon"}')
    wrong_type = runner.receive()
    runner.send_line(b"[1, 2]")
    not_object = runner.receive()

    assert bad_json["id"] is None and "not valid JSON" in bad_json["error"]
    assert unknown_op["id"] == 7 and "teleport" in unknown_op["error"]
    assert missing_field["id"] == 8 and "'command'" in missing_field["error"]
    assert wrong_type["id"] == 9 and "'timeout'" in wrong_type["error"]
    assert not_object["id"] is None and "JSON object" in not_object["error"]
    assert runner.request("ping")["ok"] is True


def test_a_stray_print_in_a_tool_cannot_corrupt_the_protocol(tmp_path: Path, workdir: Path) -> None:
    wrapper = tmp_path / "noisy_runner.py"
    wrapper.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(RUNNER.parent)!r})\n"
        "import tool_runner\n"
        "real_read = tool_runner.TOOLS['Read']\n"
        "def noisy_read(args, workdir):\n"
        "    print('stray print from a tool')\n"
        "    return real_read(args, workdir)\n"
        "tool_runner.TOOLS['Read'] = noisy_read\n"
        f"sys.exit(tool_runner.main(['--workdir', {str(workdir)!r}]))\n"
    )
    (workdir / "a.txt").write_text("hello\n")
    client = RunnerClient(workdir, [sys.executable, "-u", str(wrapper)])
    try:
        assert client.tool("Read", {"file_path": "a.txt"}) == "a.txt\n1. hello"
        assert client.request("ping")["ok"] is True
    finally:
        client.close()
    assert "stray print from a tool" in client.stderr_path.read_text()


def test_commands_cannot_reach_the_runners_fds_through_proc(runner: RunnerClient) -> None:
    forge = """printf '{"id": 2, "ok": true}\\n' > /proc/$PPID/fd/3; echo $?"""
    sneak = "echo sneaky > /proc/$PPID/fd/1; echo $?"
    steal = "timeout 2 cat /proc/$PPID/fd/0; echo $?"
    output = runner.tool("Bash", {"command": f"{forge}; {sneak}; {steal}"})
    assert output.startswith("Exit code: 0\nSTDOUT:\n1\n1\n1\n\nSTDERR:\n")
    assert output.count("Permission denied") == 3
    assert runner.request("ping") == {"id": 2, "ok": True}  # the genuine answer, in order
    assert "sneaky" not in runner.stderr_path.read_text()


# ----------------------------------------------------------------------------------------- dispatch


def test_unknown_tool(runner: RunnerClient) -> None:
    assert runner.tool("Grep", {"pattern": "x"}) == "Unknown tool: Grep"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Read", "ValueError: file_path is required"),
        ("Write", "ValueError: file_path is required"),
        ("Edit", "ValueError: file_path is required"),
        ("Glob", "ValueError: pattern is required"),
        ("Bash", "ValueError: command is required"),
    ],
)
def test_malformed_json_arguments_read_as_empty(runner: RunnerClient, name: str, expected: str) -> None:
    assert runner.tool(name, '{"file_path": "a.txt", "command": ') == expected
    assert runner.tool(name, '["not", "an", "object"]') == expected


def test_arguments_may_be_a_json_string_or_an_object(runner: RunnerClient, workdir: Path) -> None:
    (workdir / "a.txt").write_text("x\n")
    assert runner.tool("Read", '{"file_path": "a.txt"}') == runner.tool("Read", {"file_path": "a.txt"}) == "a.txt\n1. x"


def test_missing_parameters_other_than_the_first_are_leafs_defaults(runner: RunnerClient, workdir: Path) -> None:
    (workdir / "a.txt").write_text("xy\n")
    assert runner.tool("Write", {"file_path": "b.txt"}) == "Wrote b.txt (0 bytes)."
    assert runner.tool("Edit", {"file_path": "a.txt", "new_string": "y"}) == "ValueError: old_string must be non-empty"
    assert runner.tool("Edit", {"file_path": "a.txt", "old_string": "x"}) == "Edited a.txt (1 replacement)."
    assert (workdir / "b.txt").read_bytes() == b""
    assert (workdir / "a.txt").read_text() == "y\n"


# --------------------------------------------------------------------------------------------- Read


def test_read_numbers_lines_under_the_path(runner: RunnerClient, workdir: Path) -> None:
    (workdir / "src").mkdir()
    (workdir / "src" / "m.py").write_text("import os\n\nprint(os.sep)\n")
    expected = "src/m.py\n1. import os\n2. \n3. print(os.sep)"
    assert runner.tool("Read", {"file_path": "src/m.py"}) == expected
    assert runner.tool("Read", {"file_path": str(workdir / "src" / "m.py")}) == expected


def test_read_outside_the_workdir_shows_the_absolute_path(runner: RunnerClient, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("far\n")
    assert runner.tool("Read", {"file_path": str(outside)}) == f"{outside}\n1. far"


def test_read_offset_and_limit(runner: RunnerClient, workdir: Path) -> None:
    (workdir / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    assert runner.tool("Read", {"file_path": "f.txt", "offset": 4, "limit": 2}) == "f.txt\n4. line 4\n5. line 5"
    assert runner.tool("Read", {"file_path": "f.txt", "offset": 9}) == "f.txt\n9. line 9\n10. line 10"
    assert runner.tool("Read", {"file_path": "f.txt", "limit": 1}) == "f.txt\n1. line 1"
    assert runner.tool("Read", {"file_path": "f.txt", "offset": 50}) == "f.txt\n"


def test_read_bad_offset_is_an_observation(runner: RunnerClient, workdir: Path) -> None:
    (workdir / "f.txt").write_text("a\n")
    assert runner.tool("Read", {"file_path": "f.txt", "offset": "abc"}) == (
        "ValueError: invalid literal for int() with base 10: 'abc'"
    )


def test_read_shows_invalid_utf8_as_replacement_characters(runner: RunnerClient, workdir: Path) -> None:
    (workdir / "bin.txt").write_bytes(b"ok\xff\xfe end\n")
    assert runner.tool("Read", {"file_path": "bin.txt"}) == "bin.txt\n1. ok\ufffd\ufffd end"


def test_read_errors_are_observations(runner: RunnerClient, workdir: Path) -> None:
    (workdir / "pkg").mkdir()
    assert runner.tool("Read", {"file_path": "pkg"}).startswith("IsADirectoryError: ")
    assert runner.tool("Read", {"file_path": "nope.txt"}).startswith("FileNotFoundError: ")
    os.mkfifo(workdir / "pipe")
    assert runner.tool("Read", {"file_path": "pipe"}).startswith("OSError: ")


def test_read_cuts_a_long_file_at_20000_chars(runner: RunnerClient, workdir: Path) -> None:
    data = "".join(f"row {i:05d} of the table\n" for i in range(3000)).encode()
    (workdir / "big.txt").write_bytes(data)
    output = runner.tool("Read", {"file_path": "big.txt"})
    full = "big.txt\n" + "\n".join(f"{n}. row {n - 1:05d} of the table" for n in range(1, 3001))
    assert output == f"{full[:20000]}\n[truncated {len(full) - 20000} chars]"


def test_read_streams_exactly_like_leafs_whole_file_read(runner: RunnerClient, workdir: Path) -> None:
    rng = random.Random(42)
    alphabet = [b"abc", b"x" * 300, b"\n", b"\r\n", b"\r", b"\xff", "é".encode(), "\u2028".encode(),
                "\u0085".encode(), b"\x0c", b"\x1c", "日本".encode(), b"\xe6\x97"]
    tricky = bytearray()
    while len(tricky) < 900_000:
        tricky += rng.choice(alphabet)
    tricky[262_143:262_145] = b"\r\n"  # a CRLF across the reader's chunk boundary
    tricky[524_287:524_290] = "日".encode()  # a multi-byte character across one
    (workdir / "tricky.txt").write_bytes(bytes(tricky))
    for offset, limit in [(None, None), (7, None), (2000, 30), (3, 100_000), (10**6, None), (None, 1)]:
        arguments = {"file_path": "tricky.txt", "offset": offset, "limit": limit}
        assert runner.tool("Read", arguments) == leaf_read("tricky.txt", bytes(tricky), offset, limit), arguments


def test_read_counts_many_short_lines_exactly(runner: RunnerClient, workdir: Path) -> None:
    data = b"x\n" * 600_000 + b"tail without newline"
    (workdir / "short.txt").write_bytes(data)
    for offset, limit in [(None, None), (123_456, 250_000), (599_990, None)]:
        arguments = {"file_path": "short.txt", "offset": offset, "limit": limit}
        assert runner.tool("Read", arguments) == leaf_read("short.txt", data, offset, limit), arguments


def test_read_of_a_200_mb_sparse_file_stays_small(runner: RunnerClient, workdir: Path) -> None:
    with open(workdir / "sparse.bin", "wb") as handle:
        handle.truncate(SPARSE_SIZE)
    whole = runner.tool("Read", {"file_path": "sparse.bin"})
    past_the_end = runner.tool("Read", {"file_path": "sparse.bin", "offset": 2})
    head = "sparse.bin\n1. "
    assert whole.startswith(head + "\x00" * 100)
    assert whole.endswith(f"\n[truncated {len(head) + SPARSE_SIZE - 20000} chars]")
    assert past_the_end == "sparse.bin\n"
    assert runner.peak_memory_bytes() < 150 * 1024 * 1024


# -------------------------------------------------------------------------------------- Write, Edit


def test_write_creates_parents_and_counts_characters_as_leaf_does(runner: RunnerClient, workdir: Path) -> None:
    assert runner.tool("Write", {"file_path": "a/b/c.txt", "content": "héllo\n"}) == "Wrote a/b/c.txt (6 bytes)."
    assert (workdir / "a" / "b" / "c.txt").read_bytes() == "héllo\n".encode()
    assert runner.tool("Write", {"file_path": "a/b/c.txt", "content": ""}) == "Wrote a/b/c.txt (0 bytes)."
    assert (workdir / "a" / "b" / "c.txt").read_bytes() == b""


def test_write_creates_files_with_the_mode_open_would_give_as_leaf_does(runner: RunnerClient, workdir: Path) -> None:
    """Leaf's Write is a plain open(): a new file is 0o666 minus the umask, never executable."""
    umask = os.umask(0)
    os.umask(umask)  # the runner inherited this process's umask
    runner.tool("Write", {"file_path": "new.txt", "content": "x\n"})
    assert (workdir / "new.txt").stat().st_mode & 0o777 == 0o666 & ~umask


def test_edit_replaces_one_occurrence(runner: RunnerClient, workdir: Path) -> None:
    (workdir / "m.py").write_text("x = 1\ny = 2\n")
    assert runner.tool("Edit", {"file_path": "m.py", "old_string": "y = 2", "new_string": "y = 3"}) == (
        "Edited m.py (1 replacement)."
    )
    assert (workdir / "m.py").read_text() == "x = 1\ny = 3\n"


def test_edit_replace_all(runner: RunnerClient, workdir: Path) -> None:
    (workdir / "m.py").write_text("a a a b\n")
    arguments = {"file_path": "m.py", "old_string": "a", "new_string": "z", "replace_all": True}
    assert runner.tool("Edit", arguments) == "Edited m.py (3 replacements)."
    assert (workdir / "m.py").read_text() == "z z z b\n"


def test_edit_errors_leave_the_file_alone(runner: RunnerClient, workdir: Path) -> None:
    (workdir / "m.py").write_text("a a\n")
    empty = runner.tool("Edit", {"file_path": "m.py", "old_string": "", "new_string": "z"})
    absent = runner.tool("Edit", {"file_path": "m.py", "old_string": "q", "new_string": "z"})
    twice = runner.tool("Edit", {"file_path": "m.py", "old_string": "a", "new_string": "z"})
    assert empty == "ValueError: old_string must be non-empty"
    assert absent == "ValueError: old_string was not found"
    assert twice.startswith("ValueError: old_string matched 2 times") and "replace_all=true" in twice
    assert (workdir / "m.py").read_text() == "a a\n"


def test_edit_replaces_bytes_that_are_not_utf8_as_leaf_does(runner: RunnerClient, workdir: Path) -> None:
    (workdir / "latin.txt").write_bytes(b"caf\xe9 = 1\n")
    assert runner.tool("Edit", {"file_path": "latin.txt", "old_string": "1", "new_string": "2"}) == (
        "Edited latin.txt (1 replacement)."
    )
    assert (workdir / "latin.txt").read_bytes() == "caf\ufffd = 2\n".encode()


# --------------------------------------------------------------------------------------------- Glob


def test_glob_is_recursive_sorted_relative_files_only_and_shows_git_when_named(runner: RunnerClient,
                                                                              workdir: Path) -> None:
    for name in ["z.py", "a.py", "sub/b.py", "sub/deep/c.py", "sub/notes.txt", ".git/hooks/h.py"]:
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).write_text("")
    (workdir / "dir.py").mkdir()
    assert runner.tool("Glob", {"pattern": "**/*.py"}) == "a.py\nsub/b.py\nsub/deep/c.py\nz.py"
    assert runner.tool("Glob", {"pattern": "**/*.py", "path": "sub"}) == "sub/b.py\nsub/deep/c.py"
    assert runner.tool("Glob", {"pattern": ".git/**"}) == ".git/hooks/h.py"
    assert runner.tool("Glob", {"pattern": "**/.git/*/*"}) == ".git/hooks/h.py"
    assert runner.tool("Glob", {"pattern": "**/*.rs"}) == "No files matched."


def test_glob_shows_at_most_1000_files(runner: RunnerClient, workdir: Path) -> None:
    for i in range(1005):
        (workdir / f"f{i:04d}.txt").write_text("")
    lines = runner.tool("Glob", {"pattern": "*.txt"}).split("\n")
    assert len(lines) == 1001
    assert lines[:1000] == [f"f{i:04d}.txt" for i in range(1000)]
    assert lines[1000] == "... 5 more files"


def glob_here(workdir: Path, pattern: str, path: str | None = None) -> str:
    arguments = {"pattern": pattern} if path is None else {"pattern": pattern, "path": path}
    return tool_runner.run_tool("Glob", arguments, workdir)


def leaf_glob(workdir: Path, pattern: str, path: str | None = None) -> str:
    """Leaf's Glob written the simple way, on Python's own glob: the oracle wherever that glob terminates."""
    root = Path(path or ".").expanduser()
    root = root if root.is_absolute() else workdir / root

    def shown(match: Path) -> str:
        try:
            return match.resolve().relative_to(workdir).as_posix()
        except ValueError:
            return str(match)

    matches = sorted(shown(Path(m)) for m in glob.glob(str(root / pattern), recursive=True) if Path(m).is_file())
    more = f"\n... {len(matches) - 1000} more files" if len(matches) > 1000 else ""
    return "\n".join(matches[:1000]) + more if matches else "No files matched."


def plant(base: Path, names: list[str]) -> None:
    for name in names:
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_text("")


def exponential_tree(top: Path, levels: int) -> None:
    """L1..Ln each hold two symlinks to the level below: 2**n paths to L0's file, all inside `top`, no loop."""
    plant(top, ["L0/leaf.txt"])
    for level in range(1, levels + 1):
        (top / f"L{level}").mkdir()
        for name in "ab":
            (top / f"L{level}" / name).symlink_to(f"../L{level - 1}")


@pytest.mark.parametrize(
    ("pattern", "path"),
    [("**/*.py", None), ("**", None), ("*", None), ("**/**/*.md", None), ("src/**/", None), ("*/*.py", None),
     (".*/*", None), ("**/.*", None), ("**/.git/*", None), (".git/**", None), ("b/[[]x].py", None), ("?.py", None),
     ("[!s]*/**", None), ("src/../*.py", None), ("**/*.md", "src"), ("*.py", "s*"), ("../**/*.md", None),
     ("../../o/**/x", None), ("../*/app/*.py", None), ("**/x", ".."), ("{abs}/**/*.py", None), ("nothing/**", None),
     ("lib/*.py", None), ("**/*.py", "../m")],
)
def test_glob_matches_pythons_glob_on_an_ordinary_tree(tmp_path: Path, pattern: str, path: str | None) -> None:
    base = tmp_path / "o"
    workdir = base / "m" / "app"
    plant(base, ["x", "m/x", "m/notes.md", "m/app/x.py", "m/app/src/a.py", "m/app/src/deep/b.md", "m/app/.h/c.py",
                 "m/app/.git/config", "m/app/b/[x].py", "m/app/d e/f.md", "m/app/src/deep/x"])
    (workdir / "dir.py").mkdir()
    (workdir / "link.py").symlink_to("x.py")  # a file symlink: listed as Leaf lists it (its target, twice)
    (workdir / "lib").symlink_to("src")  # a directory symlink inside the tree: followed, as Python's glob does
    pattern = pattern.replace("{abs}", str(workdir))
    assert glob_here(workdir, pattern, path) == leaf_glob(workdir, pattern, path)


@pytest.mark.timeout(120)
def test_glob_through_a_symlink_loop_answers(runner: RunnerClient, workdir: Path) -> None:
    (workdir / "d").mkdir()
    (workdir / "d" / "a").symlink_to(".")
    (workdir / "d" / "b").symlink_to(".")
    plant(workdir, ["d/r.md", "top.md"])
    assert runner.tool("Glob", {"pattern": "**/*.md"}, wait=60) == "d/r.md\ntop.md"
    assert runner.tool("Glob", {"pattern": "d/*/r.md"}) == "d/r.md\nd/r.md"  # one level, as Python's glob
    assert runner.request("ping")["ok"] is True


def test_glob_never_walks_a_directory_symlink_out_of_its_root(tmp_path: Path, workdir: Path) -> None:
    plant(tmp_path, ["outside/y.md", "outside/deeper/z.md"])
    (workdir / "ext").symlink_to(tmp_path / "outside")
    plant(workdir, ["in.md"])
    assert glob_here(workdir, "**/*.md") == "in.md"
    assert leaf_glob(workdir, "**/*.md") == f"{workdir}/ext/deeper/z.md\n{workdir}/ext/y.md\nin.md"  # Leaf's
    assert glob_here(workdir, "ext/*.md") == leaf_glob(workdir, "ext/*.md") == f"{workdir}/ext/y.md"


def test_glob_stops_after_its_entry_budget_and_says_so(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exponential_tree(workdir / "dag", 40)
    monkeypatch.setattr(tool_runner, "GLOB_MAX_ENTRIES", 20000)
    monkeypatch.setattr(tool_runner, "GLOB_SECONDS", 1e9)  # only the entry budget can stop it, however loaded
    lines = glob_here(workdir, "**/*", "dag").split("\n")
    assert lines[0] == "dag/L0/leaf.txt"
    assert lines[-1] == "... search stopped after 20000 entries; results may be incomplete"


def test_glob_stops_after_its_time_budget_and_says_so(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exponential_tree(workdir / "dag", 40)
    monkeypatch.setattr(tool_runner, "GLOB_SECONDS", 0.5)
    monkeypatch.setattr(tool_runner, "GLOB_MAX_ENTRIES", 1 << 62)  # only the clock can stop it: the tree is 2**40
    output = glob_here(workdir, "**/*.txt")
    assert output.startswith("dag/L0/leaf.txt\n")
    assert output.endswith("\n... search stopped after 0.5s; results may be incomplete")


def test_glob_of_the_whole_filesystem_stops(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_runner, "GLOB_MAX_ENTRIES", 5000)
    monkeypatch.setattr(tool_runner, "GLOB_SECONDS", 1e9)  # only the entry budget can stop it, however loaded
    output = glob_here(workdir, "**/*", "/")
    assert output.endswith("\n... search stopped after 5000 entries; results may be incomplete")


# --------------------------------------------------------------------------------------------- Bash


def test_bash_reports_exit_code_stdout_and_stderr(runner: RunnerClient, workdir: Path) -> None:
    output = runner.tool("Bash", {"command": "pwd; echo oops >&2; exit 3", "description": "probe"})
    assert output == f"Exit code: 3\nSTDOUT:\n{workdir}\n\nSTDERR:\noops\n"


def test_bash_has_no_stdin(runner: RunnerClient) -> None:
    assert runner.tool("Bash", {"command": "cat; echo after"}, wait=30) == "Exit code: 0\nSTDOUT:\nafter\n\nSTDERR:\n"


@pytest.mark.slow
def test_bash_timeout_keeps_partial_output(runner: RunnerClient) -> None:
    # Timeouts here leave the host's login profile (slow under load) ample time to run first.
    output = runner.tool("Bash", {"command": "echo started; echo half >&2; sleep 60", "timeout": 8}, wait=60)
    assert output == "Timed out after 8.0s\nSTDOUT:\nstarted\n\nSTDERR:\nhalf\n"


def test_bash_timeout_above_1000_is_milliseconds(runner: RunnerClient) -> None:
    output = runner.tool("Bash", {"command": "sleep 30", "timeout": 1500})
    assert output == "Timed out after 1.5s\nSTDOUT:\n\nSTDERR:\n"


def test_bash_bad_timeout_is_an_observation(runner: RunnerClient) -> None:
    output = runner.tool("Bash", {"command": "true", "timeout": "abc"})
    assert output == "ValueError: could not convert string to float: 'abc'"


def test_bash_cuts_output_at_30000_chars(runner: RunnerClient) -> None:
    output = runner.tool("Bash", {"command": "printf 'x%.0s' $(seq 40000)"})
    full = "Exit code: 0\nSTDOUT:\n" + "x" * 40000 + "\nSTDERR:\n"
    assert output == f"{full[:30000]}\n[truncated {len(full) - 30000} chars]"


def test_bash_does_not_wait_for_a_background_child_holding_the_pipe(runner: RunnerClient) -> None:
    output = runner.tool("Bash", {"command": "sleep 300 & echo $!; echo done"}, wait=30)
    child = int(output.split("\n")[2])
    os.kill(child, signal.SIGKILL)
    assert output == f"Exit code: 0\nSTDOUT:\n{child}\ndone\n\nSTDERR:\n"


@pytest.mark.slow
def test_bash_timeout_does_not_wait_for_a_setsid_grandchild(runner: RunnerClient) -> None:
    output = runner.tool("Bash", {"command": "setsid sleep 300 & echo $!; sleep 300", "timeout": 8}, wait=60)
    os.kill(int(output.split("\n")[2]), signal.SIGKILL)
    assert output.startswith("Timed out after 8.0s\nSTDOUT:\n")


@pytest.mark.slow
def test_bash_timeout_kills_the_whole_spawning_process_group(runner: RunnerClient) -> None:
    spawners = "for i in 1 2 3; do (while true; do sleep 300 & sleep 0.02; done) & done; wait"
    output = runner.tool("Bash", {"command": f"echo $$; {spawners}", "timeout": 8}, wait=60)
    group = int(output.split("\n")[2])
    assert output.startswith("Timed out after 8.0s\n")
    assert live_members(group) == []


@pytest.mark.slow
def test_bash_output_is_capped_in_memory(runner: RunnerClient) -> None:
    output = runner.tool("Bash", {"command": "yes", "timeout": 8}, wait=60)
    assert output.startswith("Timed out after 8.0s\nSTDOUT:\ny\ny\n")
    assert int(output.rsplit("[truncated ", 1)[1].split()[0]) > 8 * 1024 * 1024
    assert runner.peak_memory_bytes() < 150 * 1024 * 1024


# --------------------------------------------------------------------------------------------- exec


def test_exec_with_env_and_cwd(runner: RunnerClient, workdir: Path) -> None:
    (workdir / "sub").mkdir()
    answer = runner.request(
        "exec", command="echo $GREETING; pwd; echo warn >&2; exit 4", timeout=30,
        cwd=str(workdir / "sub"), env={"GREETING": "hi"}, login=False,
    )
    assert answer == {
        "id": 1, "exit_code": 4, "stdout": f"hi\n{workdir / 'sub'}\n", "stderr": "warn\n",
        "timed_out": False, "seconds": answer["seconds"], "truncated_bytes": 0,
    }
    assert isinstance(answer["seconds"], float)


def test_exec_defaults_to_the_workdir_and_keeps_the_environment(runner: RunnerClient, workdir: Path) -> None:
    answer = runner.request("exec", command='pwd; echo "$PATH"', timeout=30, cwd=None, env=None)
    assert answer["stdout"] == f"{workdir}\n{os.environ['PATH']}\n"
    assert answer["exit_code"] == 0


def test_exec_timeout(runner: RunnerClient) -> None:
    answer = runner.request("exec", command="echo partial; sleep 30", timeout=1)
    assert answer["timed_out"] is True
    assert answer["exit_code"] is None
    assert answer["stdout"] == "partial\n"


def test_exec_caps_each_stream_at_8_mib(runner: RunnerClient) -> None:
    answer = runner.request("exec", command="yes | head -c 9000000", timeout=60)
    assert answer["exit_code"] == 0
    assert len(answer["stdout"]) == 8 * 1024 * 1024
    assert answer["truncated_bytes"] == 9000000 - 8 * 1024 * 1024


def test_exec_in_a_missing_directory_is_an_error_answer(runner: RunnerClient, workdir: Path) -> None:
    answer = runner.request("exec", command="true", timeout=5, cwd=str(workdir / "nowhere"))
    assert "FileNotFoundError" in answer["error"]
    assert runner.request("ping")["ok"] is True


# ------------------------------------------------------------------------------------------ hardening

FLOOD = "head -c 8388608 /dev/zero | tr '\\0' '\\1'"  # 8 MiB of \x01: six bytes each once JSON-escaped


def sent_line(answer: dict) -> bytes:
    sink = io.BytesIO()
    tool_runner._send(sink, answer)
    return sink.getvalue()


def test_an_exec_flooding_both_streams_with_control_bytes_fits_the_answer_cap(workdir: Path) -> None:
    request = {"id": 1, "op": "exec", "command": f"{FLOOD}; {FLOOD} >&2", "timeout": 60}
    answer, stop = tool_runner.handle_request(json.dumps(request).encode(), workdir)
    line = sent_line(answer)
    assert len(line) <= tool_runner.ANSWER_CAP_BYTES == 32 * 1024 * 1024
    back = json.loads(line)
    assert back["exit_code"] == 0 and not stop
    assert set(back["stdout"]) == set(back["stderr"]) == {"\x01"}
    assert abs(len(back["stdout"]) - len(back["stderr"])) <= 1  # each got half the room
    assert len(back["stdout"]) + len(back["stderr"]) + back["truncated_bytes"] == 2 * 8 * 1024 * 1024


def test_a_small_stream_is_kept_whole_beside_a_flooded_one(workdir: Path) -> None:
    request = {"id": "k", "op": "exec", "command": f"echo hello; {FLOOD} >&2", "timeout": 60}
    answer, _ = tool_runner.handle_request(json.dumps(request).encode(), workdir)
    back = json.loads(sent_line(answer))
    assert back["id"] == "k" and back["stdout"] == "hello\n"
    assert 0 < back["truncated_bytes"] == 8 * 1024 * 1024 - len(back["stderr"])


def test_a_huge_request_id_is_not_echoed(workdir: Path) -> None:
    line = json.dumps({"id": "x" * (40 << 20), "op": "ping"}).encode()
    answer, _ = tool_runner.handle_request(line, workdir)
    assert answer["id"] is None and "too large" in answer["error"]
    assert len(sent_line(answer)) <= tool_runner.ANSWER_CAP_BYTES


def test_an_answer_that_cannot_be_trimmed_becomes_an_error_line() -> None:
    line = sent_line({"id": 3, "error": "\x01" * (8 << 20)})
    assert len(line) <= tool_runner.ANSWER_CAP_BYTES
    assert json.loads(line)["id"] == 3 and "over the 33554432-byte cap" in json.loads(line)["error"]


def test_a_tool_answer_over_the_cap_is_cut_with_leafs_note(runner: RunnerClient) -> None:
    name = "é" * 17_000_000  # 34 MB in the request, 34 MB of observation: over the 32 MiB answer cap
    runner.send_line(json.dumps({"id": 1, "op": "tool", "name": name}, ensure_ascii=False).encode())
    line = runner.proc.stdout.readline()
    assert len(line) <= 32 * 1024 * 1024
    output = json.loads(line)["output"]
    kept, note = output.rsplit("\n", 1)
    assert kept.startswith("Unknown tool: éé")
    assert note == f"[truncated {len('Unknown tool: ') + len(name) - len(kept)} chars]"


def test_a_request_line_over_the_cap_is_refused_and_skipped(runner: RunnerClient) -> None:
    padding = b"x" * (64 * 1024 * 1024)
    runner.send_line(b'{"id": 1, "op": "ping", "pad": "' + padding + b'"}')
    assert runner.receive() == {"id": None, "error": "request line longer than 67108864 bytes"}
    runner.send_line(b"\xff\xfe not UTF-8")
    assert runner.receive()["error"].startswith("request is not valid JSON")
    runner.send_line(b"[" * 200_000)
    assert runner.receive()["error"].startswith("request is not valid JSON")
    runner.send_line(b'{"id": 5, "op": "' + b"y" * 1_000_000 + b'"}')
    unknown = runner.receive()
    assert unknown["id"] == 5 and len(unknown["error"]) < 1000
    assert runner.request("ping")["ok"] is True


def test_protocol_on_passed_fds_is_out_of_reach_of_every_process_inside(workdir: Path) -> None:
    # As a host can run it: the pipes passed as fds >= 3, which bubblewrap's PID-1 reaper does not keep.
    requests_read, requests_write = os.pipe()
    answers_read, answers_write = os.pipe()
    argv = [*MINIMAL_LOGIN[:-1], "--unshare-pid", "--proc", "/proc", "--", sys.executable, "-u", str(RUNNER),
            "--workdir", str(workdir), "--request-fd", str(requests_read), "--answer-fd", str(answers_write)]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            pass_fds=(requests_read, answers_write), env={**os.environ, "HOME": str(workdir)})
    os.close(requests_read)
    os.close(answers_write)
    with os.fdopen(requests_write, "wb", buffering=0) as requests, os.fdopen(answers_read, "rb") as answers:
        try:
            assert json.loads(answers.readline())["ready"] is True
            forge = ("for p in /proc/[0-9]*; do for f in 0 1 2 3 4 5 6 7 8 9; do "
                     """printf '{"id": 1, "output": "FORGED"}\\n' > $p/fd/$f 2>/dev/null && echo WROTE $p/fd/$f; """
                     "done; done; echo done")
            requests.write(json.dumps({"id": 1, "op": "tool", "name": "Bash", "arguments": {"command": forge}}).encode()
                           + b"\n")
            answer = json.loads(answers.readline())
            requests.write(b'{"id": 2, "op": "ping"}\n')
            assert json.loads(answers.readline()) == {"id": 2, "ok": True}
        finally:
            proc.kill()
            proc.wait()
    # Every answer was genuine and in order: the writes that succeeded reached bash's own pipes and the reaper's
    # /dev/null, never the runner's fds.
    assert answer["id"] == 1 and answer["output"].startswith("Exit code: 0\nSTDOUT:\n")
    assert "done" in answer["output"] and "WROTE /proc/2/" not in answer["output"]


def test_commands_are_the_oom_killers_first_choice_and_the_runner_is_not(workdir: Path) -> None:
    # Raising oom_score_adj needs no privilege (lowering does, and our machines' root lacks CAP_SYS_RESOURCE):
    # every command goes to 1000, the runner keeps its own value (300 here), so a hog dies before the runner.
    launch = ["sh", "-c", 'echo 300 > /proc/self/oom_score_adj && exec "$0" "$@"']
    client = RunnerClient(workdir, [*MINIMAL_LOGIN, *launch, sys.executable, "-u", str(RUNNER), "--workdir",
                                    str(workdir)])
    # The runner is at 1000 only for the instant of each spawn, so a command reading its parent's value races
    # with the restore: the runner's own value is read here, from outside, once its answer came back.
    runner = Path(f"/proc/{client.ready['pid']}/oom_score_adj")
    try:
        probe = "cat /proc/self/oom_score_adj"
        assert client.tool("Bash", {"command": probe}) == "Exit code: 0\nSTDOUT:\n1000\n\nSTDERR:\n"
        assert runner.read_text() == "300\n"
        assert client.request("exec", command=probe, timeout=30)["stdout"] == "1000\n"
        assert runner.read_text() == "300\n"
        # A command that cannot start (no such cwd) leaves the runner at its own value all the same.
        assert "error" in client.request("exec", command="true", timeout=30, cwd=str(workdir / "missing"))
        assert runner.read_text() == "300\n"
    finally:
        client.close()


# ------------------------------------------------------------------------------------------- schemas


def test_leaf_tool_schemas_match_leaf() -> None:
    from sandbox import leaf_tools

    by_name = {tool["function"]["name"]: tool["function"]["parameters"] for tool in leaf_tools.LEAF_TOOLS}
    assert tuple(by_name) == leaf_tools.LEAF_TOOL_NAMES == ("Read", "Write", "Edit", "Glob", "Bash")
    assert {name: params["required"] for name, params in by_name.items()} == {
        "Read": ["file_path"], "Write": ["file_path", "content"], "Edit": ["file_path", "old_string", "new_string"],
        "Glob": ["pattern"], "Bash": ["command"],
    }
    types = {name: {p: spec["type"] for p, spec in params["properties"].items()} for name, params in by_name.items()}
    assert types == {
        "Read": {"file_path": "string", "offset": "integer", "limit": "integer"},
        "Write": {"file_path": "string", "content": "string"},
        "Edit": {"file_path": "string", "old_string": "string", "new_string": "string", "replace_all": "boolean"},
        "Glob": {"pattern": "string", "path": "string"},
        "Bash": {"command": "string", "description": "string", "timeout": "number"},
    }
    assert leaf_tools.TOOL_RUNNER_PATH == RUNNER
    assert leaf_tools.RUNNER_VERSION == "3"


def test_runner_start_imports_neither_typing_nor_urllib(tmp_path: Path) -> None:
    """Every sandbox start pays for the runner's imports: typing is for type checkers only, and pathlib's
    urllib.parse (for Path.as_uri alone) is a stand-in while pathlib is imported."""
    runner = Path(tool_runner.__file__).resolve()
    done = subprocess.run([sys.executable, "-u", "-I", "-S", "-X", "importtime", str(runner), "--workdir",
                           str(tmp_path)], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and '"ready": true' in done.stdout
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "json" in imported and "pathlib" in imported  # the probe sees the imports
    assert not imported & {"typing", "urllib.parse", "ipaddress"}
    # pathlib works as ever, as_uri too (the real urllib.parse imported then), and nothing else sees the stand-in
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import tool_runner; "
             "assert 'urllib.parse' not in sys.modules; print(tool_runner.Path('/a b').as_uri()); "
             "import urllib.parse; print(urllib.parse.quote('a b'), urllib.parse.__file__ is not None)")
    checked = subprocess.run([sys.executable, "-I", "-S", "-c", probe, str(runner.parent)], capture_output=True,
                             text=True, timeout=60)
    assert checked.stdout.split() == ["file:///a%20b", "a%20b", "True"], checked.stderr


@pytest.mark.parametrize("text", ["", "plain", "héllo ✓ 𝄞", "a\ud800b", "\udcff", "x\ud83d\ude00y", "\udfff\ud800"])
def test_observations_lose_every_surrogate_as_the_regex_did(text: str) -> None:
    import re

    assert tool_runner._without_surrogates(text) == re.sub("[\ud800-\udfff]", "\ufffd", text)
