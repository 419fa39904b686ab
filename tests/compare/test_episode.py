"""The Leaf episode loop against a real scripted OpenAI-protocol server and a real sandbox: tool order,
reasoning sent back, every exit reason, budgets enforced during slow calls and commands, every call recorded,
and the prompt and tools sent exactly as the arm's source has them (ours, or a Leaf checkout's)."""

from __future__ import annotations

import asyncio
import json

import pytest
from leaf_checkouts import FAKE_PROMPT, fake_tools, write_checkout
from support.sglang_fake import ScriptedServer

from adapters.openai_http import OpenAICompatibleAdapter
from compare.episode import LEAFCOST_PROMPT, SYSTEM_PROMPT, run_episode
from compare.leaf_prompt import read_leaf_checkout
from compare.spec import Budgets
from sandbox import LEAF_TOOLS, open_sandbox


class ListRecorder:
    """Keeps what the loop reports, in order (the runner's recorder writes the same to the ledger)."""

    def __init__(self):
        self.calls, self.tools = [], []
        self.settled = 0  # calls recorded when the loop last settled

    async def settle(self):
        self.settled = len(self.calls)

    async def model_call(self, step, attempt):
        self.calls.append((step, attempt))

    async def tool_call(self, step, index, call, output, started_at, seconds):
        self.tools.append((step, index, call.name, output))


def tool(name, **arguments):
    return {"name": name, "arguments": arguments}


def play(script, task, options, budgets=None, max_retries=0, prompt=LEAFCOST_PROMPT):
    """Runs one episode of `script` on `task`; returns the result, the recorder and the server's requests."""
    recorder = ListRecorder()

    async def scenario(server):
        adapter = OpenAICompatibleAdapter(base_url=server.base_url, model="frognano-4b", max_retries=max_retries)
        opened = await open_sandbox(task, options)
        try:
            result = await run_episode(adapter, opened.sandbox, task.instruction, budgets or Budgets(max_steps=10),
                                       recorder, prompt)
            listing = await opened.sandbox.exec("ls", timeout=10)
        finally:
            await opened.close()
            await adapter.stop()
        return result, listing.stdout

    with ScriptedServer(script) as server:
        result, listing = asyncio.run(scenario(server))
        return result, recorder, server.chat_bodies, listing


def test_tools_run_in_order_and_a_turn_without_tools_ends_the_episode(make_task, sandbox_options):
    script = {"turns": [
        {"tool_calls": [tool("Write", file_path="notes.txt", content="hello"), tool("Bash", command="cat notes.txt")],
         "usage": {"prompt_tokens": 120, "completion_tokens": 30, "cached_tokens": 100, "reasoning_tokens": 10}},
        {"content": "Fixed it.", "usage": {"prompt_tokens": 200, "completion_tokens": 5}}]}
    result, recorder, bodies, _ = play(script, make_task(), sandbox_options)
    assert result.exit_reason == "agent" and result.n_steps == 2 and result.final_message == "Fixed it."
    assert [(step, name) for step, _, name, _ in recorder.tools] == [(0, "Write"), (0, "Bash")]
    assert recorder.tools[1][3].startswith("Exit code: 0\nSTDOUT:\nhello")
    first = recorder.calls[0][1].usage
    assert (first.prompt_tokens, first.cached_tokens, first.completion_tokens, first.reasoning_tokens) == (120, 100,
                                                                                                          30, 10)
    assert result.usage.prompt_tokens == 320 and result.model_calls == 2
    sent = bodies[1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assert sent[3]["content"].startswith("Wrote notes.txt")
    assert bodies[0]["tool_choice"] == "auto" and bodies[0]["parallel_tool_calls"] is True
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["Read", "Write", "Edit", "Glob", "Bash"]


def test_reasoning_is_sent_back_and_kept_in_the_trajectory(make_task, sandbox_options):
    script = {"turns": [{"reasoning": "Let me look.", "tool_calls": [tool("Glob", pattern="*.py")]},
                        {"content": "done"}]}
    result, _, bodies, _ = play(script, make_task(), sandbox_options)
    assistant = bodies[1]["messages"][2]
    assert assistant["reasoning_content"] == "Let me look."
    trajectory = result.trajectory(output_patch="")
    assert trajectory["trajectory_format"] == "leaf-function-calling"
    assert trajectory["steps"][0]["observations"][0]["observation"] == "calc.py"
    assert trajectory["steps"][0]["usage"]["prompt_tokens"] > 0


def test_malformed_tool_arguments_get_leafs_required_error(make_task, sandbox_options):
    script = {"turns": [{"tool_calls": [{"name": "Bash", "arguments": "{\"command\": "}]}, {"content": "ok"}]}
    result, recorder, _, _ = play(script, make_task(), sandbox_options)
    assert result.exit_reason == "agent"
    assert "command is required" in recorder.tools[0][3]


def test_max_turns(make_task, sandbox_options):
    script = {"turns": [{"tool_calls": [tool("Bash", command="true")]}]}
    result, _, _, _ = play(script, make_task(), sandbox_options, Budgets(max_steps=3))
    assert result.exit_reason == "max_turns" and result.n_steps == 3


def test_length_truncated_turn_runs_no_tools(make_task, sandbox_options):
    script = {"turns": [{"tool_calls": [tool("Write", file_path="never.txt", content="x")], "finish_reason": "length",
                         "usage": {"prompt_tokens": 50, "completion_tokens": 64}}]}
    result, recorder, _, listing = play(script, make_task(), sandbox_options, Budgets(max_tokens_per_turn=64))
    assert result.exit_reason == "max_tokens_per_turn"
    assert recorder.tools == [] and "never.txt" not in listing


def test_context_budget_counts_reported_tokens_plus_tool_output(make_task, sandbox_options):
    script = {"turns": [{"tool_calls": [tool("Bash", command="seq 1 2000")],
                         "usage": {"prompt_tokens": 900, "completion_tokens": 50}}, {"content": "never reached"}]}
    result, _, _, _ = play(script, make_task(), sandbox_options, Budgets(max_context_tokens=1000))
    assert result.exit_reason == "max_context_len" and result.n_steps == 1
    assert result.context_tokens > 1000


@pytest.mark.parametrize("turn", [
    {"content": "<tool_call>\n<function=Bash>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>"},
    {"content": None, "reasoning": "<tool_call>{\"name\": \"Bash\"}</tool_call>"},
    {"content": "hmm</think>the answer"},
    {"content": "", "finish_reason": "tool_calls"},
])
def test_each_misconfigured_parser_signature_is_a_harness_error(make_task, sandbox_options, turn):
    result, _, _, _ = play({"turns": [turn]}, make_task(), sandbox_options)
    assert result.exit_reason == "parser_misconfigured" and result.harness_error
    assert "--" in result.misconfiguration  # names the server flag to fix


def test_time_budget_holds_during_a_slow_model_call(make_task, sandbox_options):
    script = {"turns": [{"delay": 30, "content": "too late"}]}
    result, recorder, _, _ = play(script, make_task(), sandbox_options, Budgets(time_budget_sec=1.5))
    assert result.exit_reason == "max_time"
    assert [attempt.status for _, attempt in recorder.calls] == ["cancelled"]


@pytest.mark.parametrize("timeout", [{"timeout": 600}, {"timeout_ms": 600000}])
def test_time_budget_holds_during_a_slow_command(make_task, sandbox_options, timeout):
    script = {"turns": [{"tool_calls": [tool("Bash", command="sleep 60", **timeout)]}, {"content": "late"}]}
    result, recorder, _, _ = play(script, make_task(), sandbox_options, Budgets(time_budget_sec=2))
    assert result.exit_reason == "max_time"
    assert recorder.tools[0][3].startswith("Timed out after")


def test_server_errors_after_retries_are_an_infrastructure_error_with_every_attempt(make_task, sandbox_options):
    result, recorder, _, _ = play({"turns": [{"status": 500}]}, make_task(), sandbox_options, max_retries=2)
    assert result.exit_reason == "infrastructure_error" and result.infrastructure_error
    assert [a.http_status for _, a in recorder.calls] == [500, 500, 500]


def test_rate_limit_then_success_keeps_both_attempts(make_task, sandbox_options):
    script = {"turns": [{"attempts": [{"status": 429, "retry_after": 0}, {"content": "ok",
                                                                         "usage": {"prompt_tokens": 10,
                                                                                   "completion_tokens": 2}}]}]}
    result, recorder, _, _ = play(script, make_task(), sandbox_options, max_retries=2)
    assert result.exit_reason == "agent"
    assert [a.http_status for _, a in recorder.calls] == [429, 200]


def test_context_overflow_answer_and_garbage(make_task, sandbox_options):
    overflow = {"turns": [{"status": 400, "message": "This model's maximum context length is 131072 tokens"}]}
    garbage = {"turns": [{"garbage": "<html>oops</html>"}]}
    assert play(overflow, make_task(), sandbox_options)[0].exit_reason == "max_context_len"
    result, recorder, _, _ = play(garbage, make_task(), sandbox_options)
    assert result.exit_reason == "llm_query_error" and recorder.calls[0][1].status == "bad_response"


def test_trajectory_is_json_serialisable(make_task, sandbox_options):
    result, _, _, _ = play({"turns": [{"content": "nothing to do"}]}, make_task(), sandbox_options)
    json.dumps(result.trajectory(output_patch=""))


def test_a_flood_of_output_ends_the_turn_without_breaking_the_harness(make_task, sandbox_options):
    result, recorder, _, _ = play({"turns": [{"flood_chars": 3_000_000}]}, make_task(), sandbox_options,
                                  Budgets(max_tokens_per_turn=8192))
    assert result.exit_reason in {"max_tokens_per_turn", "max_context_len"}
    assert recorder.tools == [] and result.final_message.endswith("\n[truncated 2000000 chars]")  # capped at 1M
    assert result.steps[0]["truncated_chars"] == {"content": 2_000_000}


def test_by_default_every_request_carries_our_prompt_and_tools(make_task, sandbox_options):
    script = {"turns": [{"tool_calls": [tool("Glob", pattern="*.py")]}, {"content": "done"}]}
    result, _, bodies, _ = play(script, make_task(), sandbox_options)
    for body in bodies:
        assert body["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
        assert json.dumps(body["tools"]) == json.dumps(LEAF_TOOLS)
    assert result.trajectory()["tools"] == LEAF_TOOLS and result.trajectory()["prompt_source"] == "leafcost"


def test_a_leaf_checkout_sends_leafs_prompt_and_tools_byte_for_byte(make_task, sandbox_options, tmp_path):
    prompt = read_leaf_checkout(write_checkout(tmp_path / "FrogNano"))
    script = {"turns": [{"tool_calls": [tool("Bash", command="echo hi")]}, {"content": "done"}]}
    result, recorder, bodies, _ = play(script, make_task(), sandbox_options, prompt=prompt)
    assert len(bodies) == 2 and recorder.tools[0][3].startswith("Exit code: 0\nSTDOUT:\nhi")
    for body in bodies:  # what reached the server's socket, parsed with key order kept
        assert body["messages"][0]["content"].encode() == FAKE_PROMPT.encode()
        assert json.dumps(body["tools"], ensure_ascii=False) == json.dumps(fake_tools(), ensure_ascii=False)
    trajectory = result.trajectory()
    assert trajectory["tools"] == fake_tools() and trajectory["prompt_source"] == "leaf-checkout"
    assert trajectory["messages"][0]["content"] == FAKE_PROMPT
