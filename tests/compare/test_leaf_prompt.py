"""Leaf's own prompt and tool schemas read from a FrogNano clone without running it; every layout leafcost
does not know is one clear error naming the file; the spec hash follows the checkout's bytes; `preset: leaf`
turns thinking on as Leaf's configs do, seen on the wire."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from leaf_checkouts import (FAKE_PROMPT, HARNESS, OLD_HARNESS, agent_source, commit, fake_tools, tools_source,
                            write_checkout)
from support.sglang_fake import ScriptedServer

from compare.episode import LEAFCOST_PROMPT, SYSTEM_PROMPT
from compare.leaf_prompt import LeafCheckoutError, arm_prompts, read_leaf_checkout, run_spec_digest
from compare.spec import parse_run_spec
from sandbox.leaf_tools import LEAF_TOOLS


def spec_with(checkout=None, **arm):
    model_arm = {"name": "frognano", "adapter": "router", "model": "m", **arm}
    if checkout is not None:
        model_arm["leaf_checkout"] = str(checkout)
    return parse_run_spec({"name": "n", "suite": "s", "arms": [model_arm, {"name": "oracle", "adapter": "oracle"}]})


def test_reads_leafs_prompt_and_tools_byte_for_byte_with_the_commit(tmp_path):
    head = commit(write_checkout(tmp_path / "FrogNano"))
    prompt = read_leaf_checkout(tmp_path / "FrogNano")
    assert prompt.source == "leaf-checkout" and prompt.system_prompt == FAKE_PROMPT
    assert json.dumps(prompt.tools) == json.dumps(fake_tools())  # same keys, same order, same words
    assert prompt.config() == {"prompt_source": "leaf-checkout", "leaf_checkout": str(tmp_path / "FrogNano"),
                               "leaf_commit": head, "prompt_sha256": prompt.prompt_sha256,
                               "tools_sha256": prompt.tools_sha256}
    assert prompt.tools_sha256 != LEAFCOST_PROMPT.tools_sha256


def test_the_older_layout_and_a_checkout_that_is_not_a_clone(tmp_path):
    prompt = read_leaf_checkout(write_checkout(tmp_path, package=OLD_HARNESS))
    assert prompt.system_prompt == FAKE_PROMPT and prompt.leaf_commit is None


def test_the_names_sent_are_found_through_the_agent_even_when_renamed(tmp_path):
    renamed = tools_source().replace("SYSTEM_PROMPT", "PROMPT").replace("OPENAI_TOOLS", "SCHEMAS")
    agent = agent_source("from frognano.harness.leaf.tools import PROMPT as SYSTEM_PROMPT, SCHEMAS as OPENAI_TOOLS")
    prompt = read_leaf_checkout(write_checkout(tmp_path, tools_py=renamed + 'OPENAI_TOOLS = []\n', agent_py=agent))
    assert prompt.system_prompt == FAKE_PROMPT and len(prompt.tools) == 5


def test_the_checkout_is_read_never_run(tmp_path):
    marker = tmp_path / "ran"
    payload = f"open({str(marker)!r}, 'w').write('x')\nraise SystemExit(3)\n"
    write_checkout(tmp_path / "c", tools_py=tools_source(tail=payload),
                   agent_py=payload + agent_source())
    assert read_leaf_checkout(tmp_path / "c").system_prompt == FAKE_PROMPT
    assert not marker.exists()


BROKEN_TOOLS = {
    "assigned twice": (tools_source(tail="OPENAI_TOOLS = build_tools()\n"), "assigned more than once"),
    "built by a helper": (tools_source().replace("OPENAI_TOOLS = [", "OPENAI_TOOLS = _schemas([", 1).rstrip("\n")
                          + ")\n", "OPENAI_TOOLS is not a literal (Call"),
    "changed in place": (tools_source(tail="OPENAI_TOOLS[0]['function']['description'] = 'other'\n"),
                         "changed after its assignment"),
    "appended to": (tools_source(tail="OPENAI_TOOLS.append({})\n"), "changed after its assignment"),
    "prompt not a string": (tools_source().replace("SYSTEM_PROMPT = (", "SYSTEM_PROMPT = (1,", 1),
                            "SYSTEM_PROMPT is a tuple, not a string"),
    "not Python": ("OPENAI_TOOLS = [\n", "not Python leafcost can parse"),
    "a parameter renamed": (tools_source(json.loads(json.dumps(fake_tools()).replace('"file_path"', '"path"', 1))),
                            "('Read', (('path', 'string')"),
    "a type changed": (tools_source(json.loads(json.dumps(fake_tools()).replace('"integer"', '"string"', 1))),
                       "('offset', 'string')"),
    "a tool missing": (tools_source(fake_tools()[:4]), "tools ['Read', 'Write', 'Edit', 'Glob'] where leafcost has"),
    "tools reordered": (tools_source(fake_tools()[::-1]), "('Bash'"),
    "not schemas": (tools_source([{"type": "function", "function": {"name": "Read"}}]),
                    "OPENAI_TOOLS is not a list of OpenAI function schemas (0.function.description: Field required"),
}


@pytest.mark.parametrize("case", sorted(BROKEN_TOOLS))
def test_a_tools_py_leafcost_cannot_trust_is_one_error_naming_it(tmp_path, case):
    text, expected = BROKEN_TOOLS[case]
    write_checkout(tmp_path, tools_py=text)
    with pytest.raises(LeafCheckoutError) as error:
        read_leaf_checkout(tmp_path)
    assert str(error.value).startswith(str(tmp_path / HARNESS / "tools.py"))
    assert expected in str(error.value)


BROKEN_AGENTS = {
    "imports from elsewhere": (agent_source("from somewhere.other import OPENAI_TOOLS, SYSTEM_PROMPT"),
                               "cannot tell which system prompt Leaf sends"),
    "rebinds a name": (agent_source() + "SYSTEM_PROMPT = 'other'\n", "SYSTEM_PROMPT is changed after its import"),
    "sends no tools argument": (agent_source().replace("tools=OPENAI_TOOLS", "OPENAI_TOOLS"),
                                "cannot tell which tool list Leaf sends"),
    "not UTF-8": ("# \xff\n", "not UTF-8 text"),
}


@pytest.mark.parametrize("case", sorted(BROKEN_AGENTS))
def test_an_agent_py_leafcost_cannot_follow_is_one_error_naming_it(tmp_path, case):
    text, expected = BROKEN_AGENTS[case]
    write_checkout(tmp_path, agent_py="")
    (tmp_path / HARNESS / "agent.py").write_bytes(text.encode("latin-1") if case == "not UTF-8" else text.encode())
    with pytest.raises(LeafCheckoutError) as error:
        read_leaf_checkout(tmp_path)
    assert str(error.value).startswith(str(tmp_path / HARNESS / "agent.py")) and expected in str(error.value)


def test_missing_files_and_directories_are_named(tmp_path):
    with pytest.raises(LeafCheckoutError, match=re.escape(f"{tmp_path / 'absent'}: not a directory")):
        read_leaf_checkout(tmp_path / "absent")
    expected = f"{tmp_path / HARNESS / 'tools.py'} or {tmp_path / OLD_HARNESS / 'tools.py'}: no such file"
    with pytest.raises(LeafCheckoutError, match=re.escape(expected)):
        read_leaf_checkout(tmp_path)
    write_checkout(tmp_path)
    (tmp_path / HARNESS / "agent.py").unlink()
    with pytest.raises(LeafCheckoutError, match=re.escape(f"{tmp_path / HARNESS / 'agent.py'}: cannot read")):
        read_leaf_checkout(tmp_path)


def test_arms_get_ours_by_default_and_errors_name_the_arm(tmp_path):
    prompts = arm_prompts(spec_with())
    assert list(prompts) == ["frognano"]  # the oracle sends no requests
    assert prompts["frognano"].system_prompt == SYSTEM_PROMPT and prompts["frognano"].tools == LEAF_TOOLS
    assert prompts["frognano"].config()["prompt_source"] == "leafcost"
    expected = f"arm frognano: leaf_checkout: {tmp_path / 'nothing-here'}: not a directory"
    with pytest.raises(LeafCheckoutError, match=re.escape(expected)):
        arm_prompts(spec_with(tmp_path / "nothing-here"))
    oracle = parse_run_spec({"name": "n", "suite": "s", "arms": [
        {"name": "oracle", "adapter": "oracle", "leaf_checkout": str(tmp_path)}]})
    with pytest.raises(LeafCheckoutError, match="an oracle arm sends no requests"):
        arm_prompts(oracle)


def test_the_spec_hash_follows_the_checkouts_bytes_not_only_its_path(tmp_path):
    plain = spec_with()
    assert run_spec_digest(plain, arm_prompts(plain)) == plain.digest()  # runs from before still resume
    spec = spec_with(write_checkout(tmp_path))
    first = run_spec_digest(spec, arm_prompts(spec))
    assert first != spec.digest() and first == run_spec_digest(spec, arm_prompts(spec))
    (tmp_path / HARNESS / "tools.py").write_text(tools_source(prompt=FAKE_PROMPT + " Now edited."),
                                                 encoding="utf-8")
    edited = run_spec_digest(spec, arm_prompts(spec))
    assert edited != first
    tools = fake_tools()
    tools[0]["function"]["description"] += " Edited too."
    (tmp_path / HARNESS / "tools.py").write_text(tools_source(tools), encoding="utf-8")
    assert run_spec_digest(spec, arm_prompts(spec)) not in {first, edited}


# --- preset: leaf ------------------------------------------------------------------------------------------------

def preset_spec(server_url, sampling=None):
    arm = {"name": "frognano", "adapter": "sglang", "model": "frognano-4b", "base_url": server_url,
           "gpu": {"type": "H200", "usd_per_hour": 3.5}}
    if sampling is not None:
        arm["sampling"] = sampling
    return parse_run_spec({"name": "n", "suite": "swe-bench-verified.jsonl", "preset": "leaf",
                           "arms": [arm, {"name": "oracle", "adapter": "oracle"}]})


def sent_body(spec):
    async def chat():
        adapter = spec.arms[0].build_adapter()
        try:
            await adapter.chat([{"role": "user", "content": "hi"}], LEAF_TOOLS)
        finally:
            await adapter.stop()

    asyncio.run(chat())


@pytest.mark.parametrize("sampling, expected", [
    (None, {"enable_thinking": True}),
    ({"chat_template_kwargs": {"enable_thinking": False}}, {"enable_thinking": False}),
    ({"chat_template_kwargs": {"thinking_budget": 512}}, {"enable_thinking": True, "thinking_budget": 512}),
])
def test_preset_leaf_turns_thinking_on_under_what_the_arm_sets(sampling, expected):
    with ScriptedServer({"turns": [{"content": "ok"}]}) as server:
        spec = preset_spec(server.base_url, sampling)
        sent_body(spec)
        body = server.chat_bodies[0]
    assert body["chat_template_kwargs"] == expected
    assert (body["top_k"], body["min_p"], body["temperature"]) == (20, 0.0, 0.6)
    assert spec.arms[1].sampling.body() == {}  # the oracle sends nothing


def test_an_arm_can_send_no_chat_template_kwargs_under_the_preset():
    with ScriptedServer({"turns": [{"content": "ok"}]}) as server:
        sent_body(preset_spec(server.base_url, {"chat_template_kwargs": None}))
        assert "chat_template_kwargs" not in server.chat_bodies[0]


def test_a_run_records_which_prompt_each_arm_sent_and_compare_refuses_to_mix_them(make_task, tmp_path):
    """Through the real runner: the summary names each arm's prompt source, and arms that sent different words
    are not comparable (the fairness guard refuses unless told)."""
    from compare.comparison import UnfairComparison, compare_arms
    from compare.ledger import Ledger
    from compare.runner import Runner
    from compare.summary import summarize
    from conftest import SOLVE_SCRIPT

    checkout = write_checkout(tmp_path / "FrogNano")
    suite = Path(make_task("calc-a").path).parent
    arm = {"adapter": "sglang", "model": "frognano-4b", "max_retries": 0, "gpu": {"type": "H200", "usd_per_hour": 3}}
    db = tmp_path / "l.duckdb"
    with ScriptedServer(SOLVE_SCRIPT) as server:
        spec = parse_run_spec({"name": "prompts", "suite": str(suite), "seeds": 1, "workers": 1, "arms": [
            {"name": "ours", "base_url": server.base_url, **arm},
            {"name": "leafs", "base_url": server.base_url, "leaf_checkout": str(checkout), **arm}]})
        ledger = Ledger.open(db)
        try:
            summary = asyncio.run(Runner(spec, ledger, db_path=db).run())
            run_id = summary.run_id
            conn = ledger.reader()
            document = summarize(conn, run_id)
            with pytest.raises(UnfairComparison, match="system prompt and tool descriptions differ"):
                compare_arms(conn, run_id, "ours", "leafs")
        finally:
            ledger.close()
    sources = {a["arm"]: a["prompt_source"] for a in document["arms"]}
    assert sources == {"ours": "leafcost", "leafs": "leaf-checkout"}
