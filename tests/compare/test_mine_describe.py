"""`--describe-with ARM`: a run spec's router arm writes a mined task's problem statement over real HTTP (the
scripted OpenAI-protocol server), from the commit message, the failing tests and the test patch only; a statement
that quotes the solution is refused with the call's spend kept; arms that cannot write one are named in one line;
the arm's key never comes back."""

from __future__ import annotations

import asyncio
import json

import pytest
from support.sglang_fake import ScriptedServer

from compare.mine_describe import DescribedStatement, NoStatement, describe
from compare.spec import RunSpec
from sandbox.mining.errors import MiningError

MODEL = "writer-model"
KEY_ENV = "LEAFCOST_TEST_DESCRIBE_KEY"
KEY = "sk-describe-test-0123456789abcdef"
ADDED_LINE = 'raise MissingSchema(f"no scheme in {url!r}: add http://")'
SOLUTION_PATCH = f"""diff --git a/src/urls.py b/src/urls.py
--- a/src/urls.py
+++ b/src/urls.py
@@ -1,2 +1,4 @@
 def host_of(url):
+    if "://" not in url:
+        {ADDED_LINE}
     return url.split("://", 1)[1].split("/")[0]
"""
TEST_PATCH = """diff --git a/tests/test_urls.py b/tests/test_urls.py
--- a/tests/test_urls.py
+++ b/tests/test_urls.py
@@ -1,2 +1,6 @@
 from urls import host_of
+
+def test_host_of_without_scheme():
+    with pytest.raises(MissingSchema):
+        host_of("example.com")
"""
MESSAGE = ("Raise MissingSchema from host_of (#812)\n\nhost_of('example.com') failed with IndexError.\n\n"
           "Signed-off-by: Alice Example <alice@example.org>\n")
FAILING = ["tests/test_urls.py::test_host_of_without_scheme"]
STATEMENT = ("host_of fails on a URL without a scheme\n\nCalling `host_of(\"example.com\")` raises IndexError. "
             "I expected MissingSchema telling me the URL needs a scheme.")
USAGE = {"prompt_tokens": 1000, "completion_tokens": 500}


def spec_for(server: ScriptedServer) -> RunSpec:
    return RunSpec.model_validate({"name": "mine", "suite": "unused", "arms": [
        {"name": "writer", "adapter": "router", "model": MODEL, "base_url": server.base_url, "api_key_env": KEY_ENV,
         "max_retries": 0, "prices": {"input": 1.0, "output": 4.0}},
        {"name": "reference", "adapter": "oracle"}]})


def run_describe(server: ScriptedServer, arm: str = "writer") -> DescribedStatement:
    return asyncio.run(describe(spec_for(server), arm, message=MESSAGE, fail_to_pass=FAILING, test_patch=TEST_PATCH,
                                patch=SOLUTION_PATCH))


@pytest.fixture(autouse=True)
def router_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def script(content: str, **turn) -> dict:
    return {"model": MODEL, "auth": f"Bearer {KEY}", "turns": [{"content": content, "usage": USAGE, **turn}]}


def test_a_statement_comes_back_with_its_source_and_what_it_cost():
    with ScriptedServer(script(STATEMENT)) as server:
        described = run_describe(server)
    assert described.text == STATEMENT
    assert described.source == "model:writer"
    assert (described.usage.prompt_tokens, described.usage.completion_tokens) == (1000, 500)
    assert described.cost_usd == pytest.approx(1000 * 1.0 / 1e6 + 500 * 4.0 / 1e6)


def test_the_request_holds_the_message_tests_and_test_patch_but_never_the_solution():
    with ScriptedServer(script(STATEMENT)) as server:
        run_describe(server)
        requests = server.requests
        bodies = server.chat_bodies
    assert len(bodies) == 1
    body = bodies[0]
    assert "tools" not in body  # a plain chat call: the writer has nothing to run
    sent = json.dumps(body)
    for shown in ("Raise MissingSchema from host_of (#812)", FAILING[0], 'host_of(\\"example.com\\")'):
        assert shown in sent
    assert "alice@example.org" not in sent  # the trailers went with statement_from_commit
    everything = json.dumps([request.body for request in requests]) + "".join(r.raw or "" for r in requests)
    assert "no scheme in" not in everything and "src/urls.py" not in everything
    assert requests[-1].headers["authorization"] == f"Bearer {KEY}"  # the arm's key did reach its endpoint


def test_a_statement_quoting_the_solution_is_refused_with_its_spend_kept():
    leaky = STATEMENT + f"\n\nFix: in host_of add\n```python\n{ADDED_LINE}\n```"
    with ScriptedServer(script(leaky)) as server, pytest.raises(NoStatement) as refused:
        run_describe(server)
    assert refused.value.reason == "leaky_instruction"
    assert str(refused.value) == f"the statement arm writer wrote quotes the solution: src/urls.py: {ADDED_LINE}"
    assert refused.value.log == leaky
    assert refused.value.usage.completion_tokens == 500 and refused.value.cost_usd == pytest.approx(0.003)


def test_an_empty_answer_is_no_statement():
    with ScriptedServer(script("  \n")) as server, pytest.raises(NoStatement) as refused:
        run_describe(server)
    assert refused.value.reason == "harness_error"
    assert "wrote no statement" in str(refused.value)


def test_an_unknown_arm_and_the_oracle_are_refused_in_one_line():
    with ScriptedServer(script(STATEMENT)) as server:
        with pytest.raises(MiningError) as unknown:
            run_describe(server, "gpt")
        with pytest.raises(MiningError) as oracle:
            run_describe(server, "reference")
        chats = len(server.chat_bodies)
    assert str(unknown.value) == "--describe-with gpt: the spec has no such arm; its arms: writer, reference"
    assert str(oracle.value) == ("--describe-with reference: the arm is an oracle arm, which calls no model; name "
                                 "one that does (the spec's arms: writer, reference)")
    assert chats == 0


def test_the_key_never_comes_back_in_a_statement_or_an_error():
    with ScriptedServer(script(f"{STATEMENT}\nAuthorization: Bearer {KEY}")) as server:
        described = run_describe(server)
    assert KEY not in described.model_dump_json() and "[redacted]" in described.text
    refusing = {"model": MODEL, "turns": [{"status": 401, "message": f"key {KEY} was revoked"}]}
    with ScriptedServer(refusing) as server, pytest.raises(MiningError) as refused:
        run_describe(server)
    assert "--describe-with writer" in str(refused.value) and "401" in str(refused.value)
    assert KEY not in str(refused.value) and "\n" not in str(refused.value)
