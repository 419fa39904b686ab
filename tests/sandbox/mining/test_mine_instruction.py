"""A mined task's instruction: the commit message as a problem statement (trailers gone, issue references and
release notes kept) and the leakage check that refuses a statement quoting the solution patch's added code, read
from patches git itself wrote."""

from __future__ import annotations

import os
import subprocess

import pytest

from sandbox.mining.instruction import is_news_fragment, leaks, news_fragments, statement_from_commit, strip_trailers

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}

BEFORE = {
    "src/urls.py": '''def parse(url):
    scheme, rest = url.split("://", 1)
    return scheme, rest


def host_of(url):
    return parse(url)[1].split("/")[0]
''',
    "db/schema.sql": "-- users of the service\nCREATE TABLE users (id INTEGER);\n",
}
AFTER = {
    "src/urls.py": '''from urllib.parse import urlsplit


def parse(url):
    if "://" not in url:
        return None
    scheme, rest = url.split("://", 1)
    return scheme, rest


def host_of(url):
    parsed = parse(url)
    if parsed is None:
        raise MissingSchema(f"no scheme in {url!r}: add http://")
    return parsed[1].split("/")[0]
''',
    "db/schema.sql": "CREATE TABLE users (id INTEGER, email TEXT NOT NULL DEFAULT '');\n",
    "changes/812.bugfix.rst": "``host_of`` no longer raises ``ValueError`` for a URL without a scheme.\n",
}


@pytest.fixture(scope="module")
def patch(tmp_path_factory) -> str:
    """The solution patch as git writes it: a Python fix, a SQL change whose removed line starts with `--`, and a
    news fragment."""
    repo = tmp_path_factory.mktemp("repo")
    git = ["git", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True, env=GIT_ENV)
    for files in (BEFORE, AFTER):
        for name, text in files.items():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text(text)
        subprocess.run([*git, "add", "-A"], check=True, env=GIT_ENV)
        subprocess.run([*git, "commit", "-q", "-m", "state"], check=True, env=GIT_ENV)
    return subprocess.run([*git, "diff", "HEAD~1", "HEAD"], check=True, env=GIT_ENV, capture_output=True,
                          text=True).stdout


# statement_from_commit ---------------------------------------------------------------------------------------------

def test_trailers_go_and_issue_references_stay():
    message = """Fix host_of for URLs without a scheme (gh-811)

host_of("example.com") raised ValueError instead of saying what is wrong.
Reported in #810 and owner/other#3.

Fixes: #812
Fixes: 0123456789ab ("Parse URLs by hand")
Signed-off-by: Alice Example <alice@example.org>
Co-authored-by: Bob Example <bob@example.org>
Reviewed-by: Carol <carol@example.org>
Change-Id: I8f3c2a1b0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b
(cherry picked from commit 0123456789abcdef0123456789abcdef01234567)
"""
    statement = statement_from_commit(message)
    assert statement == ('Fix host_of for URLs without a scheme (gh-811)\n\nhost_of("example.com") raised ValueError '
                         'instead of saying what is wrong.\nReported in #810 and owner/other#3.\n\nFixes: #812')
    for gone in ("Signed-off-by", "alice@example.org", "Co-authored-by", "Reviewed-by", "Change-Id", "0123456789ab",
                 "cherry picked"):
        assert gone not in statement


def test_a_trailer_continuation_line_goes_with_its_trailer_and_prose_in_the_block_stays():
    message = "Fix parsing\n\nSome detail.\nThe last line of prose.\nSigned-off-by: A <a@example.org>\n" \
              "Link: https://lists.example.org/\n  archive/123\n"
    assert strip_trailers(message) == "Fix parsing\n\nSome detail.\nThe last line of prose."


def test_a_last_paragraph_that_only_looks_like_trailers_is_prose():
    message = "Fix parsing\n\nNote: host_of still needs a scheme for IPv6 literals."
    assert strip_trailers(message) == message
    assert strip_trailers("Subject: only a subject") == "Subject: only a subject"


def test_a_merge_pull_request_line_gives_way_to_the_pr_title():
    message = "Merge pull request #813 from alice/fix-scheme\n\nhost_of fails on URLs without a scheme\n\nDetails."
    assert statement_from_commit(message) == "host_of fails on URLs without a scheme\n\nDetails."


def test_news_fragments_are_appended_as_release_notes_in_path_order():
    statement = statement_from_commit("Fix host_of", news={"news/2.feature": "Second.", "news/1.bugfix": " First.\n"})
    assert statement == "Fix host_of\n\nRelease note: First.\n\nRelease note: Second."


def test_the_news_fragments_a_patch_adds(patch):
    assert news_fragments(patch) == {
        "changes/812.bugfix.rst": "``host_of`` no longer raises ``ValueError`` for a URL without a scheme."}


@pytest.mark.parametrize(("path", "fragment"), [
    ("changes/812.bugfix.rst", True), ("CHANGES/4520.bugfix", True), ("docs/newsfragments/+a1b.misc.md", True),
    ("changelog.d/20240101_fix.md", True), ("news/1.feature", True), ("changes/models.py", False),
    ("src/changes.rst", False), ("CHANGES.rst", False)])
def test_which_paths_are_news_fragments(path, fragment):
    assert is_news_fragment(path) is fragment


# leaks -------------------------------------------------------------------------------------------------------------

def test_a_statement_naming_the_function_and_the_symptom_does_not_leak(patch):
    statement = ('host_of("example.com") raises ValueError: not enough values to unpack. It should raise '
                 'MissingSchema and say that the URL needs a scheme such as http://.')
    assert leaks(statement, patch) is None


def test_a_statement_quoting_an_added_code_line_leaks(patch):
    statement = 'Please make host_of do `raise MissingSchema(f"no scheme in {url!r}: add http://")`.'
    assert leaks(statement, patch) == 'src/urls.py: raise MissingSchema(f"no scheme in {url!r}: add http://")'


def test_whitespace_and_diff_markers_do_not_hide_a_quote(patch):
    statement = "Apply this:\n+    parsed  =  parse(url)\n+    if parsed is None:\n+        raise MissingSchema(" \
                "f\"no scheme in {url!r}:   add http://\")"
    assert leaks(statement, patch) == 'src/urls.py: raise MissingSchema(f"no scheme in {url!r}: add http://")'


def test_a_whole_added_hunk_of_short_lines_in_a_code_block_leaks(patch):
    statement = 'parse should cope:\n\n```python\nif "://" not in url:\n    return None\n```\n'
    assert leaks(statement, patch) == 'src/urls.py: 2 added lines from if "://" not in url:'


def test_trivial_lines_imports_and_old_code_never_leak_alone(patch):
    for statement in ("return None", "if parsed is None:", "from urllib.parse import urlsplit",
                      'scheme, rest = url.split("://", 1)  # the line that fails',
                      "return parsed[1]", "parsed = parse(url)"):
        assert leaks(statement, patch) is None, statement


def test_a_removed_line_starting_with_dashes_does_not_end_the_file(patch):
    statement = "The table should read: CREATE TABLE users (id INTEGER, email TEXT NOT NULL DEFAULT '');"
    assert leaks(statement, patch) == "db/schema.sql: CREATE TABLE users (id INTEGER, email TEXT NOT NULL DEFAULT '');"


def test_quoting_the_news_fragment_is_not_a_leak(patch):
    statement = statement_from_commit("Fix host_of", news=news_fragments(patch))
    assert "Release note: ``host_of`` no longer raises" in statement
    assert leaks(statement, patch) is None


def test_a_long_line_of_keywords_and_punctuation_is_trivial():
    patch = ("--- a/app.js\n+++ b/app.js\n@@ -1,2 +1,3 @@\n function f(x) {\n+  } else if (true) { return null; }\n"
             "   return x;\n")
    assert leaks("} else if (true) { return null; }", patch) is None
    named, line = patch.replace("null", "fallback(x)"), "} else if (true) { return fallback(x); }"
    assert leaks(line, named) == f"app.js: {line}"
