"""The web page reads trajectories exactly as the API does (security review #16): from the ledger's own
`trajectories/` folder only, through no symlink, up to the same 64 MB; and its status codes are the API's: a bad
`offset` is 422, an unreadable ledger 503. On a crafted copy of conftest's `four_arm_run` ledger, served by the
app `leafcost serve` runs (compare.serve.build_app)."""

from __future__ import annotations

import html
import json
import os
import shutil
import threading

import duckdb
import pytest
from fastapi.testclient import TestClient

from compare.serve import build_app
from compare.trajectory_files import TRAJECTORY_MAX_BYTES, read_trajectory
from sandbox.shared import confined

CANARY = "HOST-SECRET-CANARY-7731"


def trajectory_with(text: str) -> dict:
    return {"trajectory_format": "leaf-function-calling",
            "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": text}],
            "steps": [{"step": 0, "assistant": {"content": text}, "usage": {"prompt_tokens": 1}}],
            "output_patch": f"+{text}\n"}


@pytest.fixture(scope="module")
def crafted(four_arm_run, tmp_path_factory):
    """A copy of the run's ledger whose episodes point at: a file outside the folder, a symlink in the folder to
    it, a path through a symlinked directory, a `..` escape, a FIFO, a file over the cap, an oddly shaped
    trajectory, and a genuine one. Returns (client, run_id, {case: episode_id})."""
    db, run_id = four_arm_run
    root = tmp_path_factory.mktemp("crafted")
    copy = root / "ledger" / "ledger.duckdb"
    copy.parent.mkdir()
    shutil.copy(db, copy)
    outside = root / "outside"
    outside.mkdir()
    secret = outside / "secret.json"
    secret.write_text(json.dumps(trajectory_with(CANARY)))
    folder = copy.parent / "trajectories" / run_id
    folder.mkdir(parents=True)
    (folder / "genuine.json").write_text(json.dumps(trajectory_with("a genuine step")))
    (folder / "link.json").symlink_to(secret)
    (folder / "dir").symlink_to(outside, target_is_directory=True)
    os.mkfifo(folder / "fifo.json")
    with open(folder / "big.json", "wb") as big:
        big.truncate(TRAJECTORY_MAX_BYTES + 1)  # sparse: over the cap without writing 64 MB
    (folder / "odd.json").write_text(json.dumps({
        "messages": [1, "two", {"role": "user", "content": {"nested": True}}],
        "steps": [None, {"step": "x", "usage": {"prompt_tokens": "many"}, "latency_sec": "slow",
                         "assistant": {"tool_calls": [{"function": None}, "call", {"function": {"name": 7}}]},
                         "observations": "not a list"}],
        "output_patch": ["not", "text"]}))
    paths = {"outside": str(secret), "link": str(folder / "link.json"),
             "through-dir": str(folder / "dir" / "secret.json"),
             "dotdot": f"trajectories/{run_id}/../../../outside/secret.json", "fifo": str(folder / "fifo.json"),
             "big": str(folder / "big.json"), "odd": str(folder / "odd.json"),
             "genuine": f"trajectories/{run_id}/genuine.json"}
    with duckdb.connect(str(copy)) as conn:
        ids = [r[0] for r in conn.execute("SELECT episode_id FROM episodes WHERE run_id = ? AND final "
                                          "ORDER BY episode_id LIMIT ?", [run_id, len(paths)]).fetchall()]
        episodes = dict(zip(paths, ids))
        for case, path in paths.items():
            conn.execute("UPDATE episodes SET trajectory_path = ? WHERE episode_id = ?", [path, episodes[case]])
    client = TestClient(build_app(copy, api_token=None), raise_server_exceptions=False)
    return client, run_id, episodes


REFUSED = {"outside": "not under the ledger's trajectories folder",
           "link": "not under the ledger's trajectories folder",
           "through-dir": "not under the ledger's trajectories folder",
           "dotdot": "not under the ledger's trajectories folder", "fifo": "not a regular file",
           "big": f"larger than {TRAJECTORY_MAX_BYTES // 2**20} MB"}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_page_and_the_api_refuse_the_same_files_for_the_same_reason(crafted, case):
    client, run_id, episodes = crafted
    episode_id = episodes[case]
    if case == "fifo":  # a reader that blocks on the FIFO gets end-of-file instead of hanging the test
        fifo = client.get(f"/runs/{run_id}/episodes/{episode_id}").json()["episode"]["trajectory_path"]
        threading.Thread(target=lambda: open(fifo, "wb").close(), daemon=True).start()
    page = client.get(f"/run/{run_id}/episode/{episode_id}")
    assert page.status_code == 200 and CANARY not in page.text
    text = html.unescape(page.text)
    assert REFUSED[case] in text, text[-1500:]
    api = client.get(f"/runs/{run_id}/episodes/{episode_id}").json()
    assert api["trajectory"] is None and REFUSED[case] in api["trajectory_reason"]
    assert api["trajectory_reason"] in text  # the very same reason


def test_a_genuine_trajectory_in_the_folder_is_shown_by_both(crafted):
    client, run_id, episodes = crafted
    page = client.get(f"/run/{run_id}/episode/{episodes['genuine']}")
    assert page.status_code == 200 and "a genuine step" in page.text and "step 0" in page.text
    assert "1 call, cost" in page.text and "2 steps" in page.text  # counted in words: never "1 calls"
    api = client.get(f"/runs/{run_id}/episodes/{episodes['genuine']}").json()
    assert api["trajectory"]["output_patch"] == "+a genuine step\n"
    # the attempt's id after the run id names it on the page as in the API (one lookup, compare.episode_list)
    short = episodes["genuine"].removeprefix(f"{run_id}/")
    assert client.get(f"/run/{run_id}/episode/{short}").text == page.text
    assert client.get(f"/runs/{run_id}/episodes/{short}").json() == api


def test_an_oddly_shaped_trajectory_renders_instead_of_failing(crafted):
    client, run_id, episodes = crafted
    page = client.get(f"/run/{run_id}/episode/{episodes['odd']}")
    assert page.status_code == 200, page.text[-1500:]
    text = html.unescape(page.text)
    assert "<b>step x</b>" in text and "nested" in text and "→ 7" in text


def test_a_huge_offset_is_a_bad_parameter(crafted):
    client, run_id, _ = crafted
    answer = client.get(f"/run/{run_id}", params={"offset": "99999999999999999999999"})
    assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["query", "offset"]
    assert client.get(f"/run/{run_id}", params={"offset": "-1"}).status_code == 422
    assert client.get(f"/run/{run_id}", params={"offset": "100"}).status_code == 200


@pytest.mark.parametrize("content", [None, b"this is not a DuckDB file" * 100])
def test_an_unreadable_ledger_is_503_on_the_page_as_in_the_api(tmp_path, content):
    db = tmp_path / "ledger.duckdb"
    if content is not None:
        db.write_bytes(content)
    client = TestClient(build_app(db, api_token=None), raise_server_exceptions=False)
    for path in ("/", "/run/some-run", "/run/some-run/episode/x", "/runs"):
        answer = client.get(path)
        assert answer.status_code == 503, (path, answer.text)
        assert answer.json()["detail"]


def test_reading_beneath_the_folder_never_follows_a_link_on_the_way(tmp_path):
    """What protects a read raced by a link swapped in after the path was resolved: each component is opened
    without following links, beneath the folder's own descriptor."""
    root = tmp_path / "trajectories"
    (root / "run").mkdir(parents=True)
    (root / "run" / "t.json").write_text("{}")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "t.json").write_text('{"secret": 1}')
    (root / "swapped").symlink_to(tmp_path / "elsewhere")
    (root / "run" / "link.json").symlink_to(root / "run" / "t.json")
    assert confined.read_capped(root, "run/t.json", 100) == b"{}"
    assert confined.read_capped(root, "run/t.json", 1) == b"{"  # capped
    for relative in ("swapped/t.json", "run/link.json"):
        with pytest.raises(confined.ConfinementError):
            confined.read_capped(root, relative, 100)
    with pytest.raises(confined.ConfinementError):  # the folder itself replaced by a link
        confined.read_capped(tmp_path / "trajectories" / "swapped", "t.json", 100)


def test_a_symlinked_trajectories_folder_is_not_served(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "t.json").write_text('{"secret": 1}')
    (tmp_path / "trajectories").symlink_to(tmp_path / "elsewhere")
    document, reason = read_trajectory(tmp_path / "ledger.duckdb", "trajectories/t.json")
    assert document is None and "trajectories folder" in reason
