"""A served call lost at `kill -9`: every request to a per-token endpoint is committed as an intent before it
leaves, so a runner killed while the endpoint holds a request leaves the intent without an answer. After
`leafcost run --resume`, the call is listed as unrecorded spend with its upper bound (the request's bytes as
input tokens, its completion cap as output tokens, at the arm's prices), and looked up in the router's spend log
by the id sent as `x-litellm-call-id` (litellm's proxy keeps it as `litellm_call_id`; `/spend/logs?request_id=`
finds it). The router here is a stand-in on a real socket that speaks litellm's chat and spend-log protocol: the
real proxy keeps its spend log only in a Postgres database through prisma, which cannot be set up offline."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
import yaml

from compare.ledger import connect_read_only
from compare.ledger.intent_journal import journal_path

LEAFCOST = Path(sys.executable).with_name("leafcost")
KEY = "sk-unrecorded-spend-test-key"
INPUT_PER_M, OUTPUT_PER_M, MAX_TOKENS = 2.0, 8.0, 256
BILLED_TOKENS = (900, 40)  # what the stand-in's spend log says the lost call used, and so cost:
BILLED_USD = (BILLED_TOKENS[0] * INPUT_PER_M + BILLED_TOKENS[1] * OUTPUT_PER_M) / 1e6


class StandInRouter(ThreadingHTTPServer):
    """litellm's proxy as the harness sees it: `/v1/models`, `/v1/chat/completions` and `/spend/logs`. The first
    chat request is held (it is "being served") until `release` is set; later ones answer at once."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.received = threading.Event()  # the first request arrived: the runner may be killed now
        self.release = threading.Event()
        self.requests: list[tuple[str | None, int]] = []  # (x-litellm-call-id, body bytes) per chat request
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: StandInRouter

    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):
        if self.headers.get("Authorization") != f"Bearer {KEY}":
            return self._json(401, {"error": {"message": "bad key"}})
        url = urlparse(self.path)
        if url.path == "/v1/models":
            return self._json(200, {"data": [{"id": "hosted-gpt"}]})
        if url.path == "/spend/logs":
            wanted = parse_qs(url.query).get("request_id", [None])[0]
            with self.server.lock:
                first = self.server.requests[0][0] if self.server.requests else None
            row = {"request_id": "chatcmpl-held", "litellm_call_id": first, "spend": BILLED_USD,
                   "prompt_tokens": BILLED_TOKENS[0], "completion_tokens": BILLED_TOKENS[1], "model": "hosted-gpt"}
            return self._json(200, [row] if wanted == first else [])
        self._json(404, {"error": {"message": "not found"}})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with self.server.lock:
            self.server.requests.append((self.headers.get("x-litellm-call-id"), len(body)))
            first = len(self.server.requests) == 1
        if first:
            self.server.received.set()
            self.server.release.wait()
            return
        self._json(200, {"id": "chatcmpl-2", "object": "chat.completion", "model": "hosted-gpt",
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": "done"}}],
                         "usage": {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105}})

    def _json(self, status: int, value) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def router():
    server = StandInRouter()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()


def leafcost(*args: str, **popen) -> subprocess.Popen:
    env = {**os.environ, "LEAFCOST_TEST_ROUTER_KEY": KEY}
    return subprocess.Popen([str(LEAFCOST), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, **popen)


@pytest.mark.slow
def test_a_call_in_flight_at_kill_9_is_unrecorded_spend_with_its_bound_and_found_in_the_spend_log(
        make_task, tmp_path, router):
    suite = Path(make_task("calc-a").path).parent
    spec_file, db = tmp_path / "spec.yaml", tmp_path / "ledger.duckdb"
    spec_file.write_text(yaml.safe_dump({
        "name": "t", "suite": str(suite), "seeds": 1, "workers": 1, "max_attempts": 1,
        "budgets": {"max_steps": 3, "time_budget_sec": 600, "max_tokens_per_turn": MAX_TOKENS},
        "arms": [{"name": "hosted", "adapter": "router", "model": "hosted-gpt", "base_url": router.base_url,
                  "api_key_env": "LEAFCOST_TEST_ROUTER_KEY", "max_retries": 0, "request_timeout_sec": 600,
                  "prices": {"input": INPUT_PER_M, "output": OUTPUT_PER_M}}]}))
    first = leafcost("run", str(spec_file), "--db", str(db), "--json", start_new_session=True)
    try:
        assert router.received.wait(timeout=300), first.stderr.read() if first.poll() is not None else "no request"
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the request is held by the router: its answer never comes back
        first.communicate()
    [(call_key, request_bytes)] = router.requests
    assert call_key and call_key.startswith("leafcost-")

    conn = connect_read_only(db)
    try:
        [run_id] = conn.execute("SELECT run_id FROM runs").fetchone()
        assert conn.execute("SELECT count(*) FROM model_calls").fetchone() == (0,)  # its answer was never recorded
    finally:
        conn.close()
    # The intent was written to the ledger's journal before the request left.
    [line] = [json.loads(line) for line in journal_path(db).read_text().splitlines()]
    assert (line["call_key"], line["request_bytes"], line["max_tokens"]) == (call_key, request_bytes, MAX_TOKENS)

    resumed = leafcost("run", str(spec_file), "--db", str(db), "--json", "--resume", run_id)
    out, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err
    warnings = " ".join(json.loads(out)["warnings"])
    assert "hosted: 1 call(s) sent but never recorded" in warnings and "spend log billed 1 of them" in warnings
    # The resume took the killed process's journal into the ledger, and emptied it once its own rows committed.
    conn = connect_read_only(db)
    try:
        assert conn.execute("SELECT count(*) FROM call_intents WHERE call_key = ?", [call_key]).fetchone() == (1,)
    finally:
        conn.close()
    assert journal_path(db).read_bytes() == b""
    summary = leafcost("summary", run_id, "--db", str(db), "--json")
    out, err = summary.communicate(timeout=300)
    assert summary.returncode == 0, err
    [arm] = json.loads(out)["arms"]
    bound = (request_bytes * INPUT_PER_M + MAX_TOKENS * OUTPUT_PER_M) / 1e6
    lost = arm["unrecorded_spend"]
    assert lost["calls"] == 1 and lost["bound_usd"] == pytest.approx(bound, rel=1e-9)
    assert lost["prompt_tokens_bound"] == request_bytes and lost["completion_tokens_bound"] == MAX_TOKENS
    assert lost["found_in_router_log"] == 1 and lost["router_spend_usd"] == pytest.approx(BILLED_USD)
    assert lost["router_spend_usd"] <= lost["bound_usd"]  # the bound holds for what the router billed
    # The resumed attempt's call was answered and recorded: it is not unrecorded.
    assert len(router.requests) == 2 and arm["attempts_including_retries"] == 2
    text = leafcost("summary", run_id, "--db", str(db))
    out, err = text.communicate(timeout=300)
    assert text.returncode == 0, err
    assert "1 call(s) sent but never recorded" in " ".join(out.split())


@pytest.mark.slow
def test_the_real_litellm_proxy_takes_our_call_id_and_says_when_it_keeps_no_spend_log(litellm_proxy, monkeypatch):
    """litellm's own proxy adopts the x-litellm-call-id we send as the call's id (the id its spend log is searched
    by); without a database it keeps no spend log, and the lookup says so instead of finding nothing."""
    from support.sglang_fake import ScriptedServer

    from adapters.router import RouterAdapter

    with ScriptedServer({"turns": [{"content": "done"}]}) as backend:
        proxy = litellm_proxy(backend.base_url, input_cost=1e-6, output_cost=1e-5)
        monkeypatch.setenv("LEAFCOST_TEST_PROXY_KEY", proxy.master_key)
        adapter = RouterAdapter(model="hosted-gpt", base_url=proxy.base_url, api_key_env="LEAFCOST_TEST_PROXY_KEY",
                                max_retries=0)

        async def call_then_look_up():
            try:
                turn = await adapter.chat([{"role": "user", "content": "hi"}], [], max_tokens=16)
                return turn, await adapter.spend_log(turn.attempts[0].call_key)
            finally:
                await adapter.stop()
        turn, log = asyncio.run(call_then_look_up())
        # What the adapter sends with every request: the proxy adopts it as the call's id.
        echoed = httpx.post(f"{proxy.base_url}/chat/completions", timeout=60,
                            headers={"Authorization": f"Bearer {proxy.master_key}",
                                     "x-litellm-call-id": turn.attempts[0].call_key},
                            json={"model": "hosted-gpt", "messages": [{"role": "user", "content": "hi"}]})
    [attempt] = turn.attempts
    assert attempt.status == "ok" and attempt.call_key.startswith("leafcost-")
    assert echoed.headers["x-litellm-call-id"] == attempt.call_key
    assert log.entries is None and "Database not connected" in log.note and proxy.master_key not in log.note


def test_the_bound_takes_the_dearest_rates_and_is_missing_without_a_cap():
    """Cache writes may cost more than input and reasoning more than output: the bound prices the request's bytes
    and its cap at the dearer of each pair, so it holds whatever mix the endpoint billed."""
    from adapters.base import CallIntent
    from compare.recording import intent_bound
    from compare.spec import parse_run_spec

    spec = parse_run_spec({"name": "t", "suite": "builtin", "arms": [
        {"name": "hosted", "adapter": "router", "model": "hosted-gpt", "base_url": "http://127.0.0.1:9/v1",
         "prices": {"input": 1.0, "output": 4.0, "cache_write": 1.25, "reasoning": 6.0},
         "fallback_prices": {"cheaper": {"input": 0.5, "output": 2.0}, "dearer": {"input": 3.0, "output": 5.0}}}]})
    [arm] = spec.arms
    capped = CallIntent(call_key="leafcost-x", attempt=1, model="hosted-gpt", request_bytes=1000, max_tokens=100)
    bound, source = intent_bound(arm, capped)
    # The dearer fallback's input (3.0 > 1.25) and the arm's own reasoning rate (6.0 > 5.0) are not one sheet: the
    # bound is the dearest whole call any one model can bill.
    assert bound == pytest.approx(max(1000 * 1.25 + 100 * 6.0, 1000 * 3.0 + 100 * 5.0) / 1e6)
    assert source == "explicit"
    assert intent_bound(arm, capped.model_copy(update={"max_tokens": None})) == (None, None)


def test_a_killed_writers_journal_is_taken_in_once_and_a_line_cut_short_is_skipped(tmp_path):
    """What a process killed mid-write leaves: whole lines become call_intents rows when the ledger is next opened
    for writing (once, however often the journal is read), the torn last line is skipped, and the journal empties."""
    from compare.ledger import Ledger

    db = tmp_path / "l.duckdb"
    Ledger.open(db).close()
    whole = {"call_key": "leafcost-1", "run_id": "r", "arm": "hosted", "episode_id": "r/hosted/t/s0/a1",
             "attempt": 1, "model": "hosted-gpt", "sent_at": "2026-12-04T10:00:00+00:00", "request_bytes": 512,
             "max_tokens": 64, "bound_usd": 0.5, "price_source": "spec"}
    torn = json.dumps({**whole, "call_key": "leafcost-2"})[:40]
    journal_path(db).write_text(json.dumps(whole) + "\n" + json.dumps(whole) + "\n" + torn)
    Ledger.open(db).close()
    conn = connect_read_only(db)
    try:
        assert conn.execute("SELECT call_key, request_bytes, max_tokens, bound_usd FROM call_intents").fetchall() == [
            ("leafcost-1", 512, 64, 0.5)]
    finally:
        conn.close()
    assert journal_path(db).read_bytes() == b""
