"""The documentation against the code: every `leafcost ...` line shown in README.md and docs/*.md names a real
command and real options of the CLI, every `make ...` a real target, and every relative link reaches an existing
file and heading. And each works as typed after the README's set-up: `make demo`, `make test`, then `make install`
(which puts `leafcost` on PATH) before the first `leafcost` command, which no doc types by its path in `.venv/`."""

from __future__ import annotations

import re
import shlex
import unicodedata
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
import typer

from compare.cli import app

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SPAN_COMMAND = re.compile(r"^(?:leafcost|make|\S*/leafcost) ")
PROMPT = "$ "  # in a code block that shows one, only the prompted lines are commands: the rest is their output

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
SEPARATOR = re.compile(r"\s(?:\|\||&&|\||;)\s")
FLAG = re.compile(r"^\[*(--?[A-Za-z][\w-]*)")
HELP = {"--help"}


@dataclass(frozen=True)
class Problem:
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


# --- the CLI -----------------------------------------------------------------------------------------------


@cache
def cli_tree():
    return typer.main.get_command(app)


def options_of(command) -> set[str]:
    names = set(HELP)
    for param in command.params:
        if param.param_type_name == "option":
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names


def check_command_line(line: str, where: str) -> list[Problem]:
    """Problems with one shell line: each `leafcost ...` command on it must exist, with every flag it uses."""
    problems = []
    for words in leafcost_commands(line):
        command, path = cli_tree(), ["leafcost"]
        rest = list(words)
        if rest[:1] == ["--help"]:
            continue
        while hasattr(command, "commands") and rest and not rest[0].startswith("-"):
            name = rest.pop(0)
            sub = command.commands.get(name)
            if sub is None:
                problems.append(Problem(where, f"`{' '.join(path)} {name}`: no such command"))
                break
            command, path = sub, [*path, name]
        else:
            if hasattr(command, "commands"):
                problems.append(Problem(where, f"`{' '.join(path)}` needs a subcommand"))
                continue
            known = options_of(command)
            for word in rest:
                match = FLAG.match(word)
                if match and match.group(1).split("=")[0] not in known:
                    problems.append(Problem(where, f"`{' '.join(path)}` has no option {match.group(1)}"))
    return problems


def leafcost_commands(line: str) -> list[list[str]]:
    """The words after `leafcost` of every command on a shell line (prompt, `time`, assignments, pipes and
    comments aside); a line of program output such as `leafcost: ...` is not a command."""
    return [words[1:] for words in shell_commands(line) if words[0] == "leafcost" or words[0].endswith("/leafcost")]


def shell_commands(line: str) -> list[list[str]]:
    """The words of every command on a shell line, its program first (prompt, `time`, assignments, pipes and
    comments aside)."""
    found = []
    for segment in SEPARATOR.split(line.strip()):
        try:
            words = shlex.split(segment, comments=True)
        except ValueError:  # an unbalanced quote in an example: read the words as they stand
            words = segment.split("#")[0].split()
        while words and (words[0] in {"$", "time"} or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0])):
            words = words[1:]
        if words:
            found.append(words)
    return found


# --- the Markdown ------------------------------------------------------------------------------------------


def split_markdown(text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(lines inside fenced code blocks, lines of prose), each with its line number."""
    prose, blocks = _read_fences(text)
    return [line for block in blocks for line in block], prose


def code_blocks(text: str) -> list[list[tuple[int, str]]]:
    """The lines of each fenced code block, with their line numbers."""
    return _read_fences(text)[1]


def _read_fences(text: str) -> tuple[list[tuple[int, str]], list[list[tuple[int, str]]]]:
    prose: list[tuple[int, str]] = []
    blocks: list[list[tuple[int, str]]] = []
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
            blocks.append([])
        elif fence is not None and match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
            fence = None
        elif fence is not None:
            blocks[-1].append((number, line))
        else:
            prose.append((number, line))
    return prose, blocks


def command_lines(text: str) -> list[tuple[int, str]]:
    """The command lines of a page, in order: in fenced code blocks (only the prompted ones where a block shows a
    `$ ` prompt), and the inline code spans of the prose that run leafcost or make with arguments (a span
    naming the program alone, `.venv/bin/leafcost`, is not a command)."""
    found = []
    for block in code_blocks(text):
        prompted = any(line.lstrip().startswith(PROMPT) for _, line in block)
        found += [(n, line) for n, line in block if not prompted or line.lstrip().startswith(PROMPT)]
    found += [(n, span) for n, line in split_markdown(text)[1] for _, span in INLINE_CODE.findall(line)
              if SPAN_COMMAND.match(span.strip())]
    return sorted(found)


def github_anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower-case, punctuation dropped (hyphens and underscores kept), spaces to
    hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text only
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    kept = "".join(c for c in text if c in "-_ " or unicodedata.category(c)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for _, line in split_markdown(text)[1]:
        match = re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            slug = github_anchor(match.group(1))
            found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return found


def check_links(text: str, source: Path, repo: Path = REPO) -> list[Problem]:
    """Every relative link: the file exists inside the repository, and its #anchor is a heading there. Links are
    read over the prose with code spans blanked, so a link whose text wraps onto the next line is still seen."""
    numbered = split_markdown(text)[1]
    prose = "\n".join(INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line) for _, line in numbered)
    problems = []
    for match in LINK.finditer(prose):
        target = match.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # http:, https:, mailto: ...
        where = f"{source.name}:{numbered[prose.count(chr(10), 0, match.start(1))][0]}"
        path_part, _, anchor = target.partition("#")
        file = (source.parent / path_part).resolve()
        if not path_part:  # a heading of this very text
            headings = anchors(text)
        elif not file.is_relative_to(repo.resolve()):
            problems.append(Problem(where, f"{target}: points outside the repository"))
            continue
        elif not file.exists():
            problems.append(Problem(where, f"{target}: no such file"))
            continue
        else:
            headings = anchors(file.read_text(encoding="utf-8")) if file.suffix == ".md" else set()
        if anchor and anchor not in headings:
            named = file.name if path_part else source.name
            problems.append(Problem(where, f"{target}: no heading #{anchor} in {named}"))
    return problems


def command_problems(text: str, source: Path) -> list[Problem]:
    """Commands in fenced code blocks, and in inline code spans of the prose that start with `leafcost `."""
    return [p for n, line in command_lines(text) for p in check_command_line(line, f"{source.name}:{n}")]


@cache
def make_targets(makefile: Path = REPO / "Makefile") -> frozenset[str]:
    return frozenset(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", makefile.read_text(), re.M))


def make_problems(text: str, source: Path, targets: frozenset[str] | None = None) -> list[Problem]:
    """Every `make TARGET` shown names a target of the Makefile (VAR=value arguments aside)."""
    targets = make_targets() if targets is None else targets
    return [Problem(f"{source.name}:{n}", f"`make {word}`: no such target in the Makefile")
            for n, line in command_lines(text) for words in shell_commands(line) if words[0] == "make"
            for word in words[1:] if not word.startswith("-") and "=" not in word and word not in targets]


def venv_path_problems(text: str, source: Path) -> list[Problem]:
    """`leafcost` typed by its path in `.venv/` (after the README's set-up, `leafcost` is on PATH): the docs
    write every command one way. Output lines of a prompted block and prose naming the path alone aside."""
    return [Problem(f"{source.name}:{n}", f"`{words[0]}`: type `leafcost` (on PATH after `make install`)")
            for n, line in command_lines(text) for words in shell_commands(line)
            if words[0].endswith("/leafcost")]


def setup_order_problems(text: str) -> list[str]:
    """The README's set-up as typed: `make demo` and `make test` first, then `make install` before the first
    command that runs `leafcost`."""
    commands = [words for _, line in command_lines(text) for words in shell_commands(line)]
    makes = [words[1:2] for words in commands if words[0] == "make"]
    first_leafcost = next((i for i, words in enumerate(commands) if words[0] == "leafcost"), len(commands))
    install = next((i for i, words in enumerate(commands) if words[:2] == ["make", "install"]), None)
    problems = []
    if makes[:2] != [["demo"], ["test"]]:
        problems.append(f"the first two commands are {makes[:2]}, not `make demo` and `make test`")
    if install is None or install > first_leafcost:
        problems.append(f"`{' '.join(commands[first_leafcost])}` comes before `make install`"
                        if first_leafcost < len(commands) else "no `make install`")
    return problems


# --- the checks --------------------------------------------------------------------------------------------


# Each check reads one page and lists its problems: the commands shown exist with their options, relative links
# resolve, `make` targets exist, and `leafcost` is typed as a command on PATH, never by its path in the venv.
CHECKS = {"commands": command_problems, "links": check_links, "make-targets": make_problems,
          "leafcost-on-path": venv_path_problems}


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_doc_passes_each_check(doc, check):
    problems = CHECKS[check](doc.read_text(encoding="utf-8"), doc)
    assert not problems, "\n".join(map(str, problems))


def test_the_readme_sets_up_leafcost_on_path_before_its_first_leafcost_command():
    assert setup_order_problems((REPO / "README.md").read_text(encoding="utf-8")) == []


def test_the_docs_show_commands_at_all():
    """The checks above must have something to check: the README shows the quickest path."""
    shown = {words[0] for doc in DOCS for _, line in command_lines(doc.read_text("utf-8"))
             for words in leafcost_commands(line) if words}
    assert {"run", "summary", "serve", "sglang"} <= shown


# --- the checker's own checks: each must be able to fail ------------------------------------------------------


def test_the_checker_reports_a_made_up_command_subcommand_and_flag():
    text = "\n".join(["```bash", "leafcost sglang deploy",
                      "leafcost run spec.yaml --fast  # comment --ignored", "leafcost images",
                      "time leafcost summary RUN --json | jq . && leafcost compare RUN --arms a,b --pairs",
                      "leafcost run spec.yaml --resume X --db f.duckdb --serve 8000 --json",
                      "leafcost images lock suite -o x.json --backend podman", "```",
                      "```console", "$ leafcost frobnicate --now", "leafcost is what it printed --not-a-flag",
                      "leafcost: s05.yaml: seeds: ...", "```",
                      "Prose with `leafcost validate builtin --worker 2` inline."])
    found = [p.what for p in command_problems(text, Path("made-up.md"))]
    assert found == ["`leafcost sglang deploy`: no such command",
                     "`leafcost run` has no option --fast", "`leafcost images` needs a subcommand",
                     "`leafcost compare` has no option --pairs", "`leafcost frobnicate`: no such command",
                     "`leafcost validate` has no option --worker"]


def test_the_checker_reports_a_made_up_make_target_and_leafcost_typed_by_its_venv_path(tmp_path):
    makefile = tmp_path / "Makefile"
    makefile.write_text("PYTHON ?= python3\nX := 1\ndemo: deps\n\techo\ntest-fast: deps\ndeps:\n")
    text = "\n".join(["```bash", "make demo && make test-fast PYTEST_ARGS=-x -j2", "make tests", "```",
                      "Then `make instal` and `make deps`; `.venv/bin/leafcost` is where the command lives.",
                      "```console", "$ .venv/bin/leafcost serve", "next: .venv/bin/leafcost report RUN", "```",
                      "Or `/opt/x/bin/leafcost run spec.yaml`."])
    assert [p.what for p in make_problems(text, Path("m.md"), make_targets(makefile))] == [
        "`make tests`: no such target in the Makefile", "`make instal`: no such target in the Makefile"]
    assert [str(p) for p in venv_path_problems(text, Path("m.md"))] == [
        "m.md:7: `.venv/bin/leafcost`: type `leafcost` (on PATH after `make install`)",
        "m.md:10: `/opt/x/bin/leafcost`: type `leafcost` (on PATH after `make install`)"]


@pytest.mark.parametrize(("commands", "problems"), [
    (["make demo", "make test", "make install", "leafcost serve"], []),
    (["make demo", "make test", "leafcost serve", "make install"], ["`leafcost serve` comes before `make install`"]),
    (["make demo", "make test", "leafcost serve"], ["`leafcost serve` comes before `make install`"]),
    (["make install", "make demo", "make test"], ["the first two commands are [['install'], ['demo']], not "
                                                  "`make demo` and `make test`"]),
])
def test_the_checker_reads_the_readmes_set_up_in_order(commands, problems):
    text = "\n".join(["# x", "```bash", *commands, "```", "Prose: `leafcost` alone is not a command."])
    assert setup_order_problems(text) == problems


def test_the_checker_reads_synopses_with_brackets_and_short_flags():
    line = "leafcost validate SUITE [--workers N] [--json] [--backend local|podman|docker] [-w 2] [--nope]"
    assert [p.what for p in check_command_line(line, "x")] == ["`leafcost validate` has no option --nope"]


def test_the_checker_reports_broken_links_and_anchors(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Some `code`: and, punctuation!\n\n## Dup\n\n## Dup\n")
    source = tmp_path / "README.md"
    text = "\n".join([
        "[ok](docs/a.md) [ok](docs/a.md#a-page) [ok](docs/a.md#some-code-and-punctuation) [ok](docs/a.md#dup-1)",
        "[ok](https://example.com/x) [ok](#top) ![ok](docs/a.md) [a link whose text",
        "wraps](docs/gone.md)",
        "[bad file](docs/missing.md) [bad anchor](docs/a.md#no-such) [outside](../elsewhere.md)",
        "![bad image](img/none.png) [bad local](#nowhere) `[not a link](nowhere.md)`",
        "```", "[in code](nowhere.md)", "```",
        "# Top"])
    found = [p.what for p in check_links(text, source, repo=tmp_path)]
    assert found == ["docs/gone.md: no such file", "docs/missing.md: no such file",
                     "docs/a.md#no-such: no heading #no-such in a.md", "../elsewhere.md: points outside the repository",
                     "img/none.png: no such file", "#nowhere: no heading #nowhere in README.md"]


@pytest.mark.parametrize(("heading", "anchor"), [
    ("`leafcost run SPEC.yaml`", "leafcost-run-specyaml"),
    ("`leafcost summary` / `compare` / `reprice` / `breakeven`", "leafcost-summary--compare--reprice--breakeven"),
    ("Leaf's own prompt, if you have Leaf", "leafs-own-prompt-if-you-have-leaf"),
    ("Sandbox backends: `local`, `podman`, `docker`", "sandbox-backends-local-podman-docker"),
    ("`leafcost report RUN_ID`", "leafcost-report-run_id"),
    ("What was verified, and what was not", "what-was-verified-and-what-was-not"),
    ("Über × cost ÷ resolved", "über--cost--resolved"),
])
def test_anchors_follow_githubs_rules(heading, anchor):
    assert github_anchor(heading) == anchor
