"""A write's body is never read for a client that may not write, nor beyond its cap (security review #20, last
bullet): `leafcost serve` over a real socket answers 401 to a POST that announces 100 MB and sends 1 KB of it,
and 413 to an authorised one that announces more than the cap, both without waiting for the body; a chunked body
past the cap is cut off with 413."""

from __future__ import annotations

import http.client
import json
import sys
import urllib.request
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from compare.api import WRITE_BODY_MAX_BYTES, create_app
from conftest import leafcost_serve

LEAFCOST = Path(sys.executable).with_name("leafcost")
TOKEN = "test-write-guard-token-0001"
# The client sends this much of the body, then waits: a server that reads the body first never answers.
SENT = b'{"name": "flood", "arms": {}, "pad": "' + b"x" * 1000
ANSWER_WITHIN_SEC = 60  # a generous bound: only a server that waits for the body's remaining bytes exceeds it


@pytest.fixture(scope="module")
def served(four_arm_run, tmp_path_factory):
    db, run_id = four_arm_run
    log = tmp_path_factory.mktemp("guard") / "serve.log"
    with leafcost_serve(db, log, env={"LEAFCOST_API_TOKEN": TOKEN}) as base:
        yield int(base.rpartition(":")[2]), run_id


def post_partially(port: int, path: str, announced: int, headers: dict[str, str]) -> tuple[int, dict]:
    """POST announcing `announced` bytes, send only SENT of them, and read the answer."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=ANSWER_WITHIN_SEC)
    try:
        conn.putrequest("POST", path)
        for name, value in {"Content-Type": "application/json", "Content-Length": str(announced),
                            **headers}.items():
            conn.putheader(name, value)
        conn.endheaders(SENT)
        try:
            answer = conn.getresponse()
        except TimeoutError:
            raise AssertionError("the server waited for the rest of the body instead of answering") from None
        return answer.status, json.loads(answer.read())
    finally:
        conn.close()


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token"}, {"Authorization": f"Basic {TOKEN}"}])
def test_a_write_without_the_token_is_refused_before_its_body_is_read(served, headers):
    port, run_id = served
    status, body = post_partially(port, f"/runs/{run_id}/scenarios", 100_000_000, headers)
    assert status == 401 and "bearer token" in body["detail"]


def test_an_authorised_write_announcing_more_than_the_cap_is_413_unread(served):
    port, run_id = served
    status, body = post_partially(port, f"/runs/{run_id}/scenarios", WRITE_BODY_MAX_BYTES + 1,
                                  {"Authorization": f"Bearer {TOKEN}"})
    assert status == 413 and f"{WRITE_BODY_MAX_BYTES:,} bytes" in body["detail"]


def test_the_server_still_answers_after_refusals(served):
    port, run_id = served
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/runs/{run_id}", timeout=30) as answer:
        assert json.loads(answer.read())["run_id"] == run_id


def test_a_chunked_body_past_the_cap_is_413(four_arm_run):
    db, run_id = four_arm_run
    client = TestClient(create_app(db, api_token=TOKEN), raise_server_exceptions=False)

    def chunks():  # no Content-Length: the cap holds while reading
        yield b'{"name": "flood", "arms": {}, "pad": "'
        for _ in range(24):
            yield b"x" * 65536
        yield b'"}'

    answer = client.post(f"/runs/{run_id}/scenarios", content=chunks(),
                         headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    assert answer.status_code == 413, answer.text
    # a body under the cap goes through to the route (which names the unknown field)
    small = client.post(f"/runs/{run_id}/scenarios", content=b'{"name": "small", "pad": "' + b"x" * 1000 + b'"}',
                        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    assert small.status_code == 422 and small.json()["detail"][0]["loc"] == ["body", "pad"]


def test_writes_disabled_is_403_before_the_body(four_arm_run):
    db, run_id = four_arm_run
    client = TestClient(create_app(db), raise_server_exceptions=False)
    answer = client.post(f"/runs/{run_id}/scenarios", content=b"x" * (WRITE_BODY_MAX_BYTES + 10),
                         headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    assert answer.status_code == 403 and "LEAFCOST_API_TOKEN" in answer.json()["detail"]
