"""What a mined task's agent is told: a problem statement from the commit message (trailers removed, news fragments
the commit adds appended as release notes), and the leakage check that refuses a statement quoting the solution.

The leakage rules (`leaks`), kept few on purpose:
1. Only lines the solution patch adds count, outside news fragments (a release note is prose about the change,
   which the statement may carry). An added line that is also one of the patch's removed or context lines is old
   code moved or kept: quoting it reveals nothing the base commit does not show.
2. Text is compared after whitespace normalisation (every run of whitespace is one space, both ends stripped;
   a leading diff `+` or quote `>` marker on a statement line is dropped), verbatim otherwise (case included).
3. A trivial added line never counts alone: one with fewer than 20 non-space characters (`return None`, `else:`,
   `}`, `pass`), one whose words are all keywords and that holds no string or number (`} else if (true) {`;
   `raise NotImplementedError` names something), and an import or include line (a reproducer imports the same
   modules as the fix does).
4. A run of two or more consecutive added lines counts as a whole, trivial lines included, when it has 20 or more
   non-space characters: a statement holding an added hunk in a code block leaks even if each line is short.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

__all__ = ["MIN_QUOTE_CHARS", "NEWS_DIRECTORIES", "is_news_fragment", "leaks", "news_fragments",
           "statement_from_commit", "strip_trailers"]

MIN_QUOTE_CHARS = 20  # non-space characters an added line (or run of lines) needs before quoting it is a leak

# Directories towncrier-style projects keep one fragment per change in (compared case-insensitively, any depth).
NEWS_DIRECTORIES = frozenset({"changes", "news", "newsfragments", "changelog.d"})
# A file there with one of these suffixes is code or configuration, not a fragment (`changes/` may be a package).
_CODE_SUFFIXES = frozenset({".py", ".pyi", ".pyx", ".pxd", ".c", ".h", ".cc", ".cpp", ".hpp", ".rs", ".go", ".java",
                            ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".json", ".toml", ".cfg", ".ini", ".yaml",
                            ".yml", ".sh", ".html", ".css", ".sql"})

# A trailer line as git reads one: `Token: value`, the token letters, digits and hyphens.
_TRAILER = re.compile(r"^(?P<key>[A-Za-z0-9][A-Za-z0-9-]*)\s*:\s+(?P<value>\S.*)$")
_CHERRY_PICK = re.compile(r"^\(cherry picked from commit [0-9a-f]{7,40}\)$")
# Trailers git or review tools write: with one of them, a last paragraph of 25 % trailers is a trailer block.
_KNOWN_TRAILERS = frozenset({"signed-off-by", "co-authored-by", "reviewed-by", "acked-by", "tested-by",
                             "reported-by", "suggested-by", "helped-by", "cc", "change-id", "reviewed-on",
                             "fixes", "closes", "resolves", "refs", "see-also", "bug", "issue", "pr-url",
                             "backport-pr-url", "link"})
# An issue reference kept as text: `#123`, `gh-123`, `GH-123`, `owner/repo#12`, an issues or pull URL.
_ISSUE_REFERENCE = re.compile(r"(?:^|[\s(])(?:[\w.-]+/[\w.-]+)?#\d+\b|\bgh-\d+\b|/(?:issues|pull)/\d+",
                              re.IGNORECASE)
_MERGE_PULL = re.compile(r"^Merge pull request #\d+ from \S+$")

_IMPORT = re.compile(r"^(?:import\s|from\s+\S+\s+import\s|#\s*include\s|using\s|require\(|"
                     r"(?:const|let|var)\s+\w+\s*=\s*require\()")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS = frozenset({
    "and", "as", "assert", "async", "await", "break", "case", "catch", "class", "const", "continue", "def", "default",
    "del", "do", "elif", "else", "except", "false", "False", "finally", "for", "from", "function", "global", "if",
    "in", "is", "lambda", "let", "new", "nonlocal", "not", "null", "None", "or", "pass", "raise", "return", "self",
    "switch", "this", "throw", "true", "True", "try", "undefined", "var", "while", "with", "yield"})
_HUNK_HEADER = re.compile(r"^@@ -\d+(?:,(?P<old>\d+))? \+\d+(?:,(?P<new>\d+))? @@")


def statement_from_commit(message: str, *, news: dict[str, str] | None = None) -> str:
    """The commit message as a problem description: subject and body, git's trailer block at the end removed
    (issue references in it, `Fixes: #12`, kept), `(cherry picked from ...)` lines dropped, a GitHub
    `Merge pull request #N from user/branch` first line replaced by the PR title that follows it; then each news
    fragment the commit adds (`news`: path -> text, see `news_fragments`) as a `Release note:` paragraph, in path
    order. Empty when nothing is left (a bare merge line): the caller drops such a candidate. Whether it describes
    the problem rather than the fix is `leaks`' decision, not this function's."""
    lines = _merge_pull_reduced(strip_trailers(message).splitlines())
    paragraphs = ["\n".join(lines).strip()]
    for path in sorted(news or {}):
        text = (news or {})[path].strip()
        if text:
            paragraphs.append(f"Release note: {text}")
    return "\n\n".join(p for p in paragraphs if p)


def strip_trailers(message: str) -> str:
    """The message without its trailers and `(cherry picked from commit ...)` lines. The trailer block is the last
    paragraph when git would read it as one and it names a known trailer (Signed-off-by, Change-Id, ...) or a
    hyphenated one: every line a `Token: value` trailer or an indented continuation, or at least a quarter of its
    lines trailers (the other lines, prose, stay). A trailer whose value holds an issue reference (`Fixes: #123`,
    `Closes: gh-7`) stays too, as text about the problem; `Fixes: <sha>` goes."""
    lines = [line.rstrip() for line in message.strip().splitlines() if not _CHERRY_PICK.match(line.strip())]
    start = _last_paragraph_start(lines)
    if start == 0 or not _is_trailer_block(lines[start:]):
        return "\n".join(lines).strip()
    return "\n".join(lines[:start] + _without_trailers(lines[start:])).strip()


def news_fragments(patch: str) -> dict[str, str]:
    """The news fragments a unified diff adds (new files under a NEWS_DIRECTORIES directory that are not code):
    path -> their text, for `statement_from_commit(message, news=...)`."""
    return {diff.path: "\n".join(diff.added_text()) for diff in _parse_patch(patch)
            if diff.is_new and is_news_fragment(diff.path)}


def is_news_fragment(path: str) -> bool:
    """Whether `path` is a towncrier-style fragment: under a changes/, news/, newsfragments/, changelog.d/ or
    CHANGES/ directory (any depth) and not a code or configuration file."""
    parts = PurePosixPath(path).parts
    in_news = any(part.lower() in NEWS_DIRECTORIES for part in parts[:-1])
    return in_news and PurePosixPath(path).suffix.lower() not in _CODE_SUFFIXES


def leaks(statement: str, patch: str) -> str | None:
    """None when the statement quotes no added code of the solution patch (a unified diff); otherwise which:
    `PATH: LINE` for one added line, `PATH: N added lines from LINE` for a run of them (rules in the module doc)."""
    said = _normalised_statement(statement)
    for diff in _parse_patch(patch):
        if is_news_fragment(diff.path):
            continue
        old = {_normalised(line) for line in diff.old_lines}
        for run in diff.added_runs:
            found = _quoted(said, [line for line in run if _normalised(line) not in old])
            if found:
                return f"{diff.path}: {found}"
    return None


# Helpers -------------------------------------------------------------------------------------------------------


def _merge_pull_reduced(lines: list[str]) -> list[str]:
    """A GitHub merge commit's `Merge pull request #N from user/branch` line dropped, so the PR title after it
    becomes the subject (the branch name says nothing about the problem)."""
    if not lines or not _MERGE_PULL.match(lines[0].strip()):
        return lines
    rest = lines[1:]
    while rest and not rest[0].strip():
        rest = rest[1:]
    return rest


def _last_paragraph_start(lines: list[str]) -> int:
    for index in range(len(lines) - 1, -1, -1):
        if not lines[index].strip():
            return index + 1
    return 0  # a one-paragraph message: the subject is never a trailer block


def _is_trailer_block(lines: list[str]) -> bool:
    keys = [m.group("key").lower() for line in lines if (m := _TRAILER.match(line))]
    if not any(key in _KNOWN_TRAILERS or "-" in key for key in keys):
        return False  # `Note: ...` alone is prose
    continuations = [line for line in lines if line[:1] in (" ", "\t")]
    return len(keys) + len(continuations) == len(lines) or len(keys) * 4 >= len(lines)


def _without_trailers(block: list[str]) -> list[str]:
    """The trailer block's prose lines and issue-reference trailers; other trailers and their continuations go."""
    kept: list[str] = []
    dropping = False
    for line in block:
        if line[:1] in (" ", "\t") and dropping:
            continue
        trailer = _TRAILER.match(line)
        dropping = bool(trailer) and not _ISSUE_REFERENCE.search(line)
        if not dropping:
            kept.append(line)
    return kept


def _normalised(text: str) -> str:
    return " ".join(text.split())


def _normalised_statement(statement: str) -> str:
    """The statement as one line: each line without a leading diff `+` or quote `>` marker, whitespace collapsed."""
    return _normalised(" ".join(re.sub(r"^\s*[+>]+", "", line) for line in statement.splitlines()))


def _significant(text: str) -> int:
    return len("".join(text.split()))


def _trivial(line: str) -> bool:
    text = _normalised(line)
    if _significant(text) < MIN_QUOTE_CHARS or _IMPORT.match(text):
        return True
    words = _WORD.findall(text)
    return all(word in _KEYWORDS for word in words) and not re.search(r"['\"\d]", text)


def _quoted(said: str, run: list[str]) -> str | None:
    """The first non-trivial line of `run` the statement contains, or the run as a whole when it holds it."""
    for line in run:
        if not _trivial(line) and _normalised(line) in said:
            return _normalised(line)
    joined = " ".join(_normalised(line) for line in run if line.strip())
    if len(run) >= 2 and _significant(joined) >= MIN_QUOTE_CHARS and joined in said:
        return f"{len(run)} added lines from {_normalised(run[0])}"
    return None


@dataclass
class _FileDiff:
    """One file of a unified diff: its path (the new one; the old one for a deletion), whether the diff creates
    it, the runs of consecutive added lines, and every removed or context line (the code as it was)."""

    path: str
    is_new: bool = False
    added_runs: list[list[str]] = field(default_factory=list)
    old_lines: list[str] = field(default_factory=list)

    def added_text(self) -> list[str]:
        return [line for run in self.added_runs for line in run]


def _parse_patch(patch: str) -> list[_FileDiff]:
    """The files of a unified diff (git's or plain), hunks read by their header's line counts so a removed line
    starting with `--` is never taken for a file header."""
    files: list[_FileDiff] = []
    current: _FileDiff | None = None
    old_path: str | None = None
    lines = patch.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        header = _HUNK_HEADER.match(line)
        if line.startswith("--- "):
            old_path = _diff_path(line[4:])
        elif line.startswith("+++ "):
            new_path = _diff_path(line[4:])
            current = _FileDiff(path=new_path or old_path or "", is_new=old_path is None)
            files.append(current)
        elif header and current is not None:
            index = _read_hunk(lines, index + 1, header, current)
            continue
        index += 1
    return files


def _read_hunk(lines: list[str], index: int, header: re.Match[str], into: _FileDiff) -> int:
    """Reads one hunk's lines into `into`; returns the index after it."""
    old_left = int(header.group("old") or 1)
    new_left = int(header.group("new") or 1)
    run: list[str] = []
    while index < len(lines) and (old_left > 0 or new_left > 0):
        line = lines[index]
        marker, text = line[:1], line[1:]
        if marker == "+":
            run.append(text)
            new_left -= 1
        elif marker in ("-", " ", ""):
            into.old_lines.append(text)
            old_left -= 1
            new_left -= marker != "-"
        if marker != "+" and run:
            into.added_runs.append(run)
            run = []
        index += 1
    if run:
        into.added_runs.append(run)
    return index


def _diff_path(text: str) -> str | None:
    """A `---`/`+++` header's path without git's a/ or b/ prefix and any tab-separated timestamp; None for
    /dev/null."""
    path = text.split("\t", 1)[0].strip()
    if path == "/dev/null":
        return None
    if path.startswith(('"a/', '"b/')):
        path = path[1:-1]
    return path[2:] if path.startswith(("a/", "b/")) else path
