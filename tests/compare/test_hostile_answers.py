"""No answer a model can send stops a run, and no answer or task name breaks the files a run writes: a lone
UTF-16 surrogate anywhere in an answer, any bytes or JSON shape (fuzzed through a real HTTP server, the real
adapter, the real ledger and trajectory writer), a 250-character task folder, a 100 MB answer. The end-to-end
cases go through `leafcost run` / `leafcost validate` with scripted models over HTTP and real sandboxes."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.sglang_fake import ScriptedServer

from adapters.answers import ANSWER_BODY_CAP_BYTES, ANSWER_FIELD_CAP_CHARS
from adapters.base import AdapterError, utcnow
from adapters.openai_http import OpenAICompatibleAdapter
from compare.episode import _assistant_message
from compare.ledger import Ledger
from compare.recording import LedgerRecorder
from compare.runner import Runner
from compare.spec import parse_run_spec
from compare.trajectory_files import read_trajectory, trajectory_path, write_trajectory

LEAFCOST = Path(sys.executable).with_name("leafcost")
SURROGATES = ["\ud800", "\udfff", "a\udc80b", "\udbff\udbff"]


def leafcost(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    environment = {**os.environ, "LEAFCOST_CACHE": str(cwd / "cache")}
    return subprocess.run([str(LEAFCOST), *args], capture_output=True, text=True, env=environment, timeout=600,
                          cwd=cwd)


def model_arm(name: str, base_url: str) -> dict:
    return {"name": name, "adapter": "sglang", "model": "frognano-4b", "base_url": base_url, "max_retries": 0,
            "gpu": {"type": "H200", "usd_per_hour": 3.5}}


def write_spec(path: Path, suite: Path, arms: list[dict]) -> Path:
    raw = {"name": "hostile", "suite": str(suite), "seeds": 1, "workers": 1, "max_attempts": 1,
           "task_order_seed": None, "budgets": {"max_steps": 4, "time_budget_sec": 120}, "arms": arms}
    path.write_text(json.dumps(raw))  # JSON is YAML
    return path


def completion(message: dict, finish_reason: str = "stop", model: str = "frognano-4b") -> str:
    """A chat completion's raw body; json.dumps writes a lone surrogate as its `\\udXXX` escape, as a server may."""
    return json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "model": model,
                       "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
                       "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}})


def surrogate_script() -> dict:
    """Lone surrogates in every string a turn has: content, reasoning, tool call id, tool name, arguments (raw,
    and escaped inside the arguments' own JSON), finish_reason, model."""
    first = {"role": "assistant", "content": "looking \ud800", "reasoning_content": "think \udc00 hard",
             "tool_calls": [
                 {"id": "call_\ud800", "type": "function", "function": {
                     "name": "Bash", "arguments": json.dumps({"command": "echo '\udfff' > seen.txt"},
                                                             ensure_ascii=False)}},
                 {"id": "call_2", "type": "function", "function": {
                     "name": "Bash", "arguments": json.dumps({"command": "echo '\udfff'"})}},
                 {"id": "call_3", "type": "function", "function": {"name": "Bash\ud800", "arguments": "{}"}}]}
    final = {"role": "assistant", "content": "done \ud800\udbff", "reasoning_content": None}
    return {"turns": [{"garbage": completion(first, "tool_calls\udfff", model="m\ud800")},
                      {"garbage": completion(final)}]}


def episodes_of(db: Path) -> list[dict]:
    ledger = Ledger.open(db)
    try:
        return ledger.query("SELECT arm, task_id, exit_reason, resolved, harness_error, infra_error, status, "
                            "error_detail, trajectory_path FROM episodes ORDER BY arm, task_id")
    finally:
        ledger.close()


def strict_json(path: str | Path) -> dict:
    """The file as a strict reader takes it: UTF-8 without errors, JSON."""
    return json.loads(Path(path).read_bytes().decode("utf-8"))


def test_lone_surrogates_in_every_field_end_no_run_and_resume_goes_on(make_task, tmp_path):
    """`leafcost run` with an arm answering a lone surrogate in its content (the issue's case: the trajectory
    writer raised, the run stopped `interrupted` and `--resume` hit it again), an arm answering them in every
    field, and an honest arm: the run finishes, the hostile episodes end as their model decided (the text holds
    U+FFFD), the honest arm resolves both tasks, every trajectory is valid UTF-8 JSON, and `--resume` has
    nothing left to do."""
    from conftest import SOLVE_SCRIPT

    make_task("calc-a")
    suite = Path(make_task("calc-b").path).parent
    content_only = {"turns": [{"garbage": completion({"role": "assistant", "content": "fixed \ud800"})}]}
    with (ScriptedServer(content_only) as content, ScriptedServer(surrogate_script()) as everywhere,
          ScriptedServer(SOLVE_SCRIPT) as honest):
        spec = write_spec(tmp_path / "spec.yaml", suite, [
            model_arm("content", content.base_url), model_arm("everywhere", everywhere.base_url),
            model_arm("honest", honest.base_url)])
        done = leafcost("run", str(spec), "--db", str(tmp_path / "l.duckdb"), "--json", cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        summary = json.loads(done.stdout)
        assert summary["status"] == "finished"
        episodes = episodes_of(tmp_path / "l.duckdb")
        assert [(e["arm"], e["task_id"], e["exit_reason"], e["resolved"]) for e in episodes] == [
            ("content", "calc-a", "agent", False), ("content", "calc-b", "agent", False),
            ("everywhere", "calc-a", "agent", False), ("everywhere", "calc-b", "agent", False),
            ("honest", "calc-a", "agent", True), ("honest", "calc-b", "agent", True)]
        trajectories = [strict_json(episode["trajectory_path"]) for episode in episodes]
        assert trajectories[0]["final_message"] == "fixed \ufffd"
        hostile_trajectory = trajectories[2]
        assert hostile_trajectory["final_message"] == "done \ufffd\ufffd"
        first = hostile_trajectory["steps"][0]
        assert first["finish_reason"] == "tool_calls\ufffd" and first["model"] == "m\ufffd"
        assert first["assistant"]["reasoning_content"] == "think \ufffd hard"
        assert [c["id"] for c in first["assistant"]["tool_calls"]] == ["call_\ufffd", "call_2", "call_3"]
        assert first["assistant"]["tool_calls"][2]["function"]["name"] == "Bash\ufffd"
        ledger = Ledger.open(tmp_path / "l.duckdb")
        try:
            calls = ledger.query("SELECT finish_reason, model FROM model_calls WHERE arm = 'everywhere' AND "
                                 "step = 0")
            tools = ledger.query("SELECT tool_call_id, tool_name FROM tool_calls WHERE arm = 'everywhere' "
                                 "ORDER BY episode_id, idx")
        finally:
            ledger.close()
        assert {(c["finish_reason"], c["model"]) for c in calls} == {("tool_calls\ufffd", "m\ufffd")}
        assert tools[:3] == [{"tool_call_id": "call_\ufffd", "tool_name": "Bash"},
                             {"tool_call_id": "call_2", "tool_name": "Bash"},
                             {"tool_call_id": "call_3", "tool_name": "Bash\ufffd"}]
        servers = (content, everywhere, honest)
        requests = sum(len(server.chat_bodies) for server in servers)
        resumed = leafcost("run", str(spec), "--resume", summary["run_id"], "--db", str(tmp_path / "l.duckdb"),
                           "--json", cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert json.loads(resumed.stdout)["status"] == "finished"
        assert sum(len(server.chat_bodies) for server in servers) == requests  # nothing ran again
    assert len(episodes_of(tmp_path / "l.duckdb")) == 6


def test_a_250_character_task_folder_is_valid_and_runs(make_task, tmp_path):
    """validate and run agree on a task whose folder name is 250 characters: both accept it; the trajectory's
    file name is bounded (a hash keeps it unique) and the API's reader serves it."""
    name = "long-" + "x" * 245
    suite = Path(make_task(name).path).parent
    validated = leafcost("validate", str(suite), "--json", cwd=tmp_path)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert json.loads(validated.stdout)["tasks"][0]["task_id"] == name
    spec = write_spec(tmp_path / "spec.yaml", suite, [{"name": "oracle", "adapter": "oracle"}])
    done = leafcost("run", str(spec), "--db", str(tmp_path / "l.duckdb"), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["status"] == "finished"
    [episode] = episodes_of(tmp_path / "l.duckdb")
    assert (episode["task_id"], episode["exit_reason"], episode["resolved"]) == (name, "oracle", True)
    path = Path(episode["trajectory_path"])
    assert len(path.name.encode()) <= 200 and path.name.endswith(".s0.a1.json")
    document, error = read_trajectory(tmp_path / "l.duckdb", str(path.relative_to(tmp_path)))
    assert error is None and document["task_id"] == name


def test_a_task_folder_named_in_bytes_that_are_not_utf8_is_refused_alike_by_validate_and_run(make_task, tmp_path):
    """Such a name would reach the ledger (which refuses it: the run died with a traceback) and the terminal:
    validate lists it invalid and run skips it, each saying to rename it; the other task runs."""
    good = Path(make_task("calc-a").path)
    suite = good.parent
    os.rename(good, os.path.join(os.fsencode(suite), b"calc-\xff"))
    make_task("calc-b")
    validated = leafcost("validate", str(suite), "--json", cwd=tmp_path)
    assert validated.returncode == 1, validated.stderr
    tasks = {t["task_id"]: t for t in json.loads(validated.stdout)["tasks"]}
    assert tasks["calc-b"]["valid"] is True
    assert "not valid UTF-8; rename it" in tasks["calc-\ufffd"]["error"]
    spec = write_spec(tmp_path / "spec.yaml", suite, [{"name": "oracle", "adapter": "oracle"}])
    done = leafcost("run", str(spec), "--db", str(tmp_path / "l.duckdb"), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["status"] == "finished" and summary["arms"][0]["resolved"] == 1
    assert any("calc-\ufffd skipped" in w and "rename it" in w for w in summary["warnings"])


@pytest.mark.parametrize("task_id", ["../../escape", "a/b", ".hidden", "", "x" * 255, "x" * 254 + "y",
                                     "name with spaces\x1b[2J\n", "\ud800"],
                         ids=["dotdot", "slash", "hidden", "empty", "255", "255b", "controls", "surrogate"])
def test_a_trajectory_path_is_one_bounded_plain_name_under_its_arm(tmp_path, task_id):
    path = trajectory_path(tmp_path, "arm", task_id, 3, 2)
    assert path.parent == tmp_path / "arm" and len(path.name.encode()) <= 200
    assert set(path.name) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-%~")
    assert not path.name.startswith(".") and path.name.endswith(".s3.a2.json")
    write_trajectory(path, {"task_id": task_id})
    assert strict_json(path)["task_id"] == task_id.replace("\ud800", "\ufffd")
    assert os.listdir(path.parent) == [path.name]  # the temporary file is gone


def test_distinct_long_task_ids_get_distinct_trajectory_files(tmp_path):
    names = {trajectory_path(tmp_path, "arm", "x" * 250 + suffix, 0, 1).name for suffix in ("a", "b", "%61")}
    assert len(names) == 3


# --- answer size ----------------------------------------------------------------------------------------------

def runner_run(spec, db: Path):
    ledger = Ledger.open(db)
    try:
        summary = asyncio.run(Runner(spec, ledger, db_path=db).run())
        calls = ledger.query("SELECT arm, status, error, answer_truncated_chars FROM model_calls ORDER BY arm")
        episodes = ledger.query("SELECT arm, exit_reason, error_detail, trajectory_path FROM episodes ORDER BY arm")
    finally:
        ledger.close()
    return summary, calls, episodes


def test_a_huge_answer_is_capped_and_a_larger_one_is_not_read(make_task, tmp_path):
    """A 3,000,000-character answer keeps 1,000,000 (the cut recorded in the call's row and the trajectory's
    step); a body past 16 MiB is not read at all: that call is a bad_response, the episode llm_query_error, and
    neither trajectory holds the flood."""
    suite = Path(make_task("calc-a").path).parent
    big = {"turns": [{"flood_chars": 3 * ANSWER_FIELD_CAP_CHARS, "finish_reason": "stop"}]}
    huge = {"turns": [{"flood_chars": ANSWER_BODY_CAP_BYTES + 2**20, "finish_reason": "stop"}]}
    with ScriptedServer(big) as capped, ScriptedServer(huge) as refused:
        raw = {"name": "sizes", "suite": str(suite), "seeds": 1, "workers": 1, "max_attempts": 1,
               "task_order_seed": None, "budgets": {"max_steps": 2, "time_budget_sec": 120},
               "arms": [model_arm("big", capped.base_url), model_arm("huge", refused.base_url)]}
        summary, calls, episodes = runner_run(parse_run_spec(raw), tmp_path / "l.duckdb")
    assert summary.status == "finished"
    assert [(c["arm"], c["status"], c["answer_truncated_chars"]) for c in calls] == [
        ("big", "ok", 2 * ANSWER_FIELD_CAP_CHARS), ("huge", "bad_response", 0)]
    assert "answer too large" in calls[1]["error"] and "16 MiB" in calls[1]["error"]
    by_arm = {e["arm"]: e for e in episodes}
    assert by_arm["huge"]["exit_reason"] == "llm_query_error" and "answer too large" in by_arm["huge"]["error_detail"]
    big_trajectory = strict_json(by_arm["big"]["trajectory_path"])
    assert big_trajectory["steps"][0]["truncated_chars"] == {"content": 2 * ANSWER_FIELD_CAP_CHARS}
    assert big_trajectory["final_message"].endswith(f"\n[truncated {2 * ANSWER_FIELD_CAP_CHARS} chars]")
    assert len(big_trajectory["final_message"]) < ANSWER_FIELD_CAP_CHARS + 100
    assert Path(by_arm["big"]["trajectory_path"]).stat().st_size < 4 * ANSWER_FIELD_CAP_CHARS  # 9 MB uncapped
    assert Path(by_arm["huge"]["trajectory_path"]).stat().st_size < 100_000


# --- fuzz -----------------------------------------------------------------------------------------------------

class _BodyServer:
    """A real HTTP server answering every POST with `body`, whatever bytes it holds."""

    def __init__(self):
        outer = self
        self.body = b"{}"

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


_odd_text = st.one_of(st.text(max_size=20), st.sampled_from(SURROGATES + ["\x00", "\x1b[2J", "[/--/]", "é"]),
                      st.lists(st.sampled_from(SURROGATES + ["x", "\\", '"']), max_size=6).map("".join))
_scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
                     st.floats(allow_nan=True, allow_infinity=True), _odd_text)
_anything = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                            st.dictionaries(_odd_text, inner, max_size=3)),
                         max_leaves=8)


def _maybe(value_strategy):
    """Mostly the right shape, sometimes anything at all."""
    return st.one_of(value_strategy, value_strategy, _anything)


_tool_call = st.fixed_dictionaries({}, optional={
    "id": _maybe(_odd_text), "type": _maybe(st.just("function")),
    "function": _maybe(st.fixed_dictionaries({}, optional={
        "name": _maybe(st.one_of(st.sampled_from(["Bash", "Read", "Glob"]), _odd_text)),
        "arguments": _maybe(st.one_of(_odd_text, st.dictionaries(_odd_text, _odd_text, max_size=2)))}))})
_message = st.fixed_dictionaries({}, optional={
    "content": _maybe(_odd_text), "reasoning_content": _maybe(_odd_text), "reasoning": _maybe(_odd_text),
    "tool_calls": _maybe(st.lists(_maybe(_tool_call), max_size=3))})
_usage = st.fixed_dictionaries({}, optional={
    name: _anything for name in ("prompt_tokens", "completion_tokens", "total_tokens", "reasoning_tokens",
                                 "prompt_tokens_details", "completion_tokens_details")})
_answer = st.fixed_dictionaries({}, optional={
    "model": _maybe(_odd_text), "usage": _maybe(_usage),
    "choices": _maybe(st.lists(_maybe(st.fixed_dictionaries({}, optional={
        "message": _maybe(_message), "finish_reason": _maybe(_odd_text)})), max_size=2))})


def _encoded(document, ascii_only: bool) -> bytes:
    """As a server could send it: `\\udXXX` escapes, or raw CESU-8 bytes for a surrogate (invalid UTF-8)."""
    return json.dumps(document, ensure_ascii=ascii_only, allow_nan=True).encode("utf-8", "surrogatepass")


_bodies = st.one_of(st.binary(max_size=200), st.builds(_encoded, _answer, st.booleans()),
                    st.sampled_from([b"[" * 100_000, b'{"choices": ' + b"[" * 5000, b"null", b'{"choices": []}']))


@pytest.fixture(scope="module")
def fuzz_bench(tmp_path_factory):
    """One real ledger holding a run, and one real HTTP server, shared by every fuzzed answer."""
    folder = tmp_path_factory.mktemp("fuzz")
    spec = parse_run_spec({"name": "fuzz", "suite": "builtin", "arms": [model_arm("m", "http://127.0.0.1:9/v1")]})
    ledger = Ledger.open(folder / "l.duckdb")
    asyncio.run(ledger.create_run("fuzz", spec, task_ids=["t"]))
    server = _BodyServer()
    try:
        yield folder, spec, ledger, server, itertools.count(1)
    finally:
        server.close()
        ledger.close()


async def _one_answer(ledger: Ledger, spec, server: _BodyServer, folder: Path, attempt: int) -> tuple[str | None, Path]:
    """What the runner does with one answer: the adapter's call, every attempt and tool call to the ledger, the
    assistant message kept, the trajectory written, the episode finished. Returns (error kind, trajectory)."""
    episode_id = await ledger.start_episode("fuzz", "m", "t", 0, attempt)
    recorder = LedgerRecorder(ledger, spec.arms[0], episode_id)
    adapter = OpenAICompatibleAdapter(base_url=server.base_url, model="frognano-4b", max_retries=0)
    kind = None
    try:
        turn = await adapter.chat([{"role": "user", "content": "fix it"}], [], max_tokens=100)
    except AdapterError as exc:
        kind, attempts, document = exc.kind, exc.attempts, {"error": f"{exc.kind}: {exc}"}
    else:
        attempts = turn.attempts
        document = {"messages": [_assistant_message(turn)], "final_message": turn.content, "error": None,
                    "steps": [{"finish_reason": turn.finish_reason, "model": turn.model,
                               "usage": turn.usage.model_dump(), "truncated_chars": turn.truncated_chars}]}
        for index, call in enumerate(turn.tool_calls):
            await recorder.tool_call(0, index, call, "output", utcnow(), 0.0)
        json.dumps(adapter.request_body([document["messages"][0]], [], 100)).encode()  # sent back next step
    finally:
        await adapter.stop()
    for call in attempts:
        await recorder.model_call(0, call)
    await recorder.settle()
    path = trajectory_path(folder / "trajectories" / "fuzz", "m", "t", 0, attempt)
    write_trajectory(path, document)
    await ledger.finish_episode(episode_id, exit_reason="agent" if kind is None else "llm_query_error",
                                resolved=False, reward=None, final=True, n_steps=1, error_detail=document["error"],
                                trajectory_path=str(path))
    return kind, path


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                                   HealthCheck.data_too_large])
@given(body=_bodies)
def test_any_bytes_a_model_sends_end_at_most_their_call_as_a_bad_response(fuzz_bench, body):
    """Content, reasoning, tool names, ids and arguments, usage, finish_reason, model: any bytes, any JSON type,
    lone surrogates raw or escaped, nesting deeper than Python's recursion limit. The call is either a turn or
    a `bad_response`; the ledger takes every row; the trajectory is strict UTF-8 JSON."""
    folder, spec, ledger, server, attempts = fuzz_bench
    server.body = body
    kind, path = asyncio.run(_one_answer(ledger, spec, server, folder, next(attempts)))
    assert kind in (None, "bad_response")
    document = strict_json(path)
    assert (document["error"] is None) == (kind is None)
    if kind is not None:
        assert document["error"].startswith("bad_response: ")
