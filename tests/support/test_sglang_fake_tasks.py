"""The fake SGLang server's per-task scripting, over real HTTP: a marker in the first user message picks the task,
the first `resolve` conversations of it answer from `resolving`, later ones from `missing`, and every later step
of a conversation stays on the branch its first request got, however the conversations interleave."""

from __future__ import annotations

import httpx
import pytest
from pydantic import ValidationError

from support.sglang_fake import Script, ScriptedServer


def bash(command: str) -> dict:
    return {"tool_calls": [{"name": "Bash", "arguments": {"command": command}}]}


SCRIPT = {
    "turns": [{"content": "no task here"}],
    "tasks": {
        "[task copy-1]": {"resolve": 2, "resolving": [bash("fix 1"), {"content": "fixed 1"}],
                          "missing": [bash("look 1"), bash("look again 1"), {"content": "gave up 1"}]},
        "[task copy-10]": {"resolve": 1, "resolving": [bash("fix 10"), {"content": "fixed 10"}],
                           "missing": [{"content": "gave up 10"}]},
    },
}


def opening(text: str) -> list[dict]:
    return [{"role": "system", "content": "You are Leaf."}, {"role": "user", "content": text}]


def ask(server: ScriptedServer, messages: list[dict]) -> dict:
    response = httpx.post(f"{server.base_url}/chat/completions", json={"model": "frognano-4b", "messages": messages},
                          timeout=10)
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["message"]


def answered(message: dict) -> str:
    """What an answer says: its Bash command, or its content."""
    calls = message.get("tool_calls") or []
    return calls[0]["function"]["arguments"] if calls else message["content"]


def next_request(messages: list[dict], message: dict) -> list[dict]:
    """The conversation's next request, as Leaf sends it: the answer back, a tool result per call."""
    calls = message.get("tool_calls") or []
    results = [{"role": "tool", "tool_call_id": call["id"], "content": "ok"} for call in calls]
    return [*messages, {"role": "assistant", "content": message.get("content"),
                        "tool_calls": message.get("tool_calls")}, *results]


def test_the_first_resolve_conversations_of_a_task_resolve_and_later_steps_follow_their_branch():
    with ScriptedServer(SCRIPT) as server:
        # Three conversations of copy-1 open before any continues; they continue in reverse order.
        conversations = [opening(f"Fix the bug. [task copy-1] (seed {seed})") for seed in range(3)]
        first = [ask(server, messages) for messages in conversations]
        assert [answered(message) for message in first] == ['{"command": "fix 1"}', '{"command": "fix 1"}',
                                                            '{"command": "look 1"}']
        followed = {seed: answered(ask(server, next_request(conversations[seed], first[seed])))
                    for seed in (2, 1, 0)}
        assert followed == {0: "fixed 1", 1: "fixed 1", 2: '{"command": "look again 1"}'}
        # A missing conversation's third step, and past the list's end its last turn again.
        second = next_request(conversations[2], first[2])
        third = next_request(second, ask(server, second))
        assert answered(ask(server, third)) == "gave up 1"
        assert answered(ask(server, [*third, {"role": "assistant", "content": "x"}, {"role": "user", "content": "go"}])
                        ) == "gave up 1"
        assert server.stats()["tasks"] == {"[task copy-1]": {"resolving": 2, "missing": 1}}


def test_the_longest_marker_wins_and_unmarked_conversations_answer_from_turns():
    with ScriptedServer(SCRIPT) as server:
        assert answered(ask(server, opening("Fix it. [task copy-10]"))) == '{"command": "fix 10"}'
        assert answered(ask(server, opening("Fix it. [task copy-10]"))) == "gave up 10"
        assert answered(ask(server, opening("Fix it. [task copy-1]"))) == '{"command": "fix 1"}'
        assert answered(ask(server, opening("Fix it, no marker."))) == "no task here"
        # The marker counts only in the first user message: a later one never moves a conversation to a task.
        unmarked = [*opening("No marker."), {"role": "assistant", "content": "?"},
                    {"role": "user", "content": "[task copy-1]"}]
        assert answered(ask(server, unmarked)) == "no task here"
        assert server.stats()["tasks"] == {"[task copy-10]": {"resolving": 1, "missing": 1},
                                           "[task copy-1]": {"resolving": 1, "missing": 0}}


def test_a_conversation_the_server_did_not_open_misses():
    """A later step whose first answer carries tool-call ids this server never sent follows `missing`."""
    with ScriptedServer(SCRIPT) as server:
        foreign = {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_elsewhere", "type": "function", "function": {"name": "Bash", "arguments": "{}"}}]}
        messages = [*opening("[task copy-1]"), foreign, {"role": "tool", "tool_call_id": "call_elsewhere",
                                                         "content": "ok"}]
        assert answered(ask(server, messages)) == '{"command": "look again 1"}'
        assert server.stats()["tasks"] == {}


def test_task_scripts_that_cannot_work_are_refused():
    with pytest.raises(ValidationError, match="`resolve` is 2 but `resolving` has no turns"):
        Script.model_validate({"tasks": {"m": {"resolve": 2, "missing": [{"content": "no"}]}}})
    with pytest.raises(ValidationError, match="may not set tool-call ids"):
        Script.model_validate({"tasks": {"m": {"resolve": 1, "resolving": [
            {"tool_calls": [{"name": "Bash", "id": "call_fixed"}]}]}}})
    with pytest.raises(ValidationError, match="non-empty"):
        Script.model_validate({"tasks": {"": {"missing": [{"content": "no"}]}}})
