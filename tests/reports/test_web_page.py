"""The web page in a real browser: `leafcost serve` on a real ledger, Debian's headless Chromium loading the run
page, its arm table's numbers checked against the API's summary, a screenshot saved with the test's output; the
page's layout measured in a 1280-pixel window through Chromium's DevTools protocol (nothing scrolls sideways, no
chart label runs past its chart); and its episode table checked against the API's episode list."""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from html.parser import HTMLParser
from typing import Any

import pytest
from conftest import SOLVE_SCRIPT, _write_calc_task, leafcost_serve
from fastapi.testclient import TestClient
from websockets.sync.client import connect

from compare.serve import build_app

ESTIMATES = ["avg_at_k", "cost_per_resolved_attempt", "cost_per_resolved_task"]
COSTS = ["total", "tokens", "gpu", "sandbox"]  # the cells cost_total, cost_tokens, ... (compare.arm_table)


@pytest.fixture(scope="module")
def served(four_arm_run, tmp_path_factory):
    db, run_id = four_arm_run
    with leafcost_serve(db, tmp_path_factory.mktemp("serve") / "serve.log") as base:
        yield base, run_id


def chromium(*args: str) -> subprocess.CompletedProcess:
    browser = shutil.which("chromium")
    assert browser, "chromium is missing: `make test` installs it (apt-get install chromium)"
    # --no-sandbox: the tests run as root in CI, where Chromium refuses its own sandbox.
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
                          capture_output=True, text=True, timeout=120)


class ArmRows(HTMLParser):
    """The `data-value` of every numeric cell of each `tr.arm` row by its `data-key`, and every link."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, str]] = {}
        self.links: list[str] = []
        self._arm: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "tr" and attributes.get("class") == "arm":
            self._arm = attributes["data-arm"]
            self.rows[self._arm] = {}
        elif tag == "td" and self._arm and "data-value" in attributes:
            self.rows[self._arm][attributes["data-key"]] = attributes["data-value"] or ""
        elif tag == "a" and attributes.get("href"):
            self.links.append(attributes["href"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._arm = None


@pytest.mark.slow  # a real Chromium end to end: `make test` runs it, `make test-fast` does not
def test_the_run_page_shows_the_apis_numbers_in_a_real_browser(served, tmp_path):
    base, run_id = served
    with urllib.request.urlopen(f"{base}/runs/{run_id}/summary", timeout=60) as answer:
        api = {arm["arm"]: arm for arm in json.loads(answer.read())["arms"]}
    page = chromium("--dump-dom", f"{base}/run/{run_id}")
    assert page.returncode == 0, page.stderr[-2000:]
    parsed = ArmRows()
    parsed.feed(page.stdout)
    assert set(parsed.rows) == set(api)
    for arm, cells in parsed.rows.items():
        expected = [api[arm][k]["value"] for k in ESTIMATES] + [api[arm]["cost_usd"][k] for k in COSTS]
        shown = [float(cells[k]) if cells[k] else None for k in ESTIMATES + [f"cost_{k}" for k in COSTS]]
        assert shown == expected, arm  # the very same floats, not a rounding of them
    assert "Pareto" in page.stdout or "pareto" in page.stdout  # the chart's frontier is on the page
    episodes = [link for link in parsed.links if "/episode/" in link]
    assert len(episodes) == 4 * 3 * 2  # 4 arms × 3 tasks × 2 seeds, all on the first page
    trajectory = chromium("--dump-dom", base + episodes[0])
    assert "step 0" in trajectory.stdout and "back to the run" in trajectory.stdout
    screenshot = tmp_path / "run-page.png"
    shot = chromium(f"--screenshot={screenshot}", "--window-size=1400,1800", f"{base}/run/{run_id}")
    assert shot.returncode == 0 and screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert screenshot.stat().st_size > 20_000  # a rendered page, not a blank one
    print(f"screenshot: {screenshot}")


def test_the_run_list_links_every_run_and_an_unknown_run_is_a_404(served):
    base, run_id = served
    listing = chromium("--dump-dom", base + "/")
    assert f'href="/run/{run_id}"' in listing.stdout
    try:
        urllib.request.urlopen(f"{base}/run/no-such-run", timeout=30)
        raise AssertionError("expected a 404")
    except urllib.error.HTTPError as error:
        assert error.code == 404


# --- the layout at 1280 pixels --------------------------------------------------------------------------------------

# Arm names as people write them: model, server and hardware in one name
LONG_NAMES = {"self_hosted": "frognano-4b-on-sglang-h200-tp1", "hosted": "gpt-5-mini-through-the-litellm-router",
              "unpriced": "hosted-model-without-a-price-sheet"}


@pytest.fixture(scope="module")
def realistic_runs(tmp_path_factory):
    """One ledger, two finished runs. The wide one: a self-hosted arm (an H200 lease), a priced hosted arm, an
    unpriced one and the oracle, long names, 3 tasks × 3 seeds; the oracle resolves every task (at 100 %, the
    right edge of the chart), the models two of three. The small one: the oracle on 1 task × 1 seed. Returns
    (db, wide run id, small run id)."""
    from support.sglang_fake import ScriptedServer

    from compare.ledger import Ledger
    from compare.runner import Runner
    from compare.spec import parse_run_spec

    root = tmp_path_factory.mktemp("realistic-runs")
    tasks = root / "tasks"
    _write_calc_task(tasks / "calc-a", "a - b")
    _write_calc_task(tasks / "calc-b", "a - b")
    _write_calc_task(tasks / "calc-c", "b - a")  # the model's edit cannot fix this one; the reference solution can
    (tasks / "calc-c" / "solution" / "solve.sh").write_text("sed -i 's/b - a/a + b/' calc.py\n")
    db = root / "ledger.duckdb"
    with (pytest.MonkeyPatch.context() as env, ScriptedServer(SOLVE_SCRIPT) as sglang,
          ScriptedServer(SOLVE_SCRIPT) as openai):
        env.setenv("LEAFCOST_TEST_LAYOUT_KEY", "sk-test-layout-key-0001")
        router = {"adapter": "router", "base_url": openai.base_url, "api_key_env": "LEAFCOST_TEST_LAYOUT_KEY",
                  "max_retries": 0, "allow_unlisted_model": True}
        wide = {"name": "layout", "suite": str(tasks), "seeds": 3, "workers": 4, "max_attempts": 1,
                "budgets": {"max_steps": 4, "time_budget_sec": 120},
                "arms": [{"name": LONG_NAMES["self_hosted"], "adapter": "sglang", "model": "frognano-4b",
                          "base_url": sglang.base_url, "max_retries": 0, "gpu": {"type": "H200", "usd_per_hour": 3.5},
                          "metrics_interval_sec": 0.2},
                         {"name": LONG_NAMES["hosted"], "model": "hosted-gpt", **router,
                          "prices": {"input": 1.25, "output": 10.0, "cached_input": 0.125}},
                         {"name": LONG_NAMES["unpriced"], "model": "no-price-anywhere", **router,
                          "allow_unpriced": True},
                         {"name": "oracle", "adapter": "oracle"}]}
        small = {"name": "one", "suite": str(tasks), "tasks": ["calc-a"], "seeds": 1, "max_attempts": 1,
                 "arms": [{"name": "oracle", "adapter": "oracle"}]}
        run_ids = []
        for raw in (wide, small):
            ledger = Ledger.open(db)
            try:
                summary = asyncio.run(Runner(parse_run_spec(raw), ledger, db_path=db).run())
            finally:
                ledger.close()
            assert summary.status == "finished"
            run_ids.append(summary.run_id)
    return db, *run_ids


@contextmanager
def devtools_page(width: int, height: int) -> Iterator[Any]:
    """Headless Chromium with its DevTools protocol on a free port, the window `width` × `height` CSS pixels;
    yields `load(url, expression)`, which opens `url`, waits for its load event and returns the expression's
    value (JSON)."""
    browser = shutil.which("chromium")
    assert browser, "chromium is missing: `make test` installs it (apt-get install chromium)"
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        process = subprocess.Popen([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                                    "--remote-debugging-port=0", f"--user-data-dir={profile}",
                                    f"--window-size={width},{height}", "about:blank"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            port = _devtools_port(process)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=60) as answer:
                page = next(t for t in json.loads(answer.read()) if t["type"] == "page")
            with connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=60) as socket:
                session = _Session(socket)
                session.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                             mobile=False)
                yield session.load
        finally:
            process.terminate()
            process.wait(timeout=60)


def _devtools_port(process: subprocess.Popen) -> int:
    """The port Chromium prints ("DevTools listening on ws://127.0.0.1:PORT/..."); the rest of its output is
    drained in the background so that it never blocks on a full pipe."""
    lines = []
    for line in process.stderr:
        lines.append(line)
        if line.startswith("DevTools listening on ws://"):
            threading.Thread(target=process.stderr.read, daemon=True).start()
            return int(line.split("127.0.0.1:", 1)[1].split("/", 1)[0])
    raise AssertionError("chromium exited before it listened: " + "".join(lines)[-2000:])


class _Session:
    """Requests and their answers on one page's DevTools socket; events in between are kept for `wait`."""

    def __init__(self, socket) -> None:
        self.socket = socket
        self.ids = itertools.count(1)
        self.events: list[str] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self.ids)
        self.socket.send(json.dumps({"id": number, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=120))
            if message.get("id") == number:
                assert "error" not in message, message
                return message["result"]
            self.events.append(message.get("method", ""))

    def wait(self, event: str) -> None:
        while event not in self.events:
            self.events.append(json.loads(self.socket.recv(timeout=120)).get("method", ""))
        self.events.clear()

    def load(self, url: str, expression: str) -> Any:
        self.call("Page.enable")
        self.events.clear()
        self.call("Page.navigate", url=url)
        self.wait("Page.loadEventFired")
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"]["value"]


# What the layout checks read from the page: how wide the document is against the window, every element whose box
# runs past the window's right edge (inside a scrolled box too), every chart text outside its chart, every number
# cell whose figure takes more than one line, and the header line.
MEASURE = """(() => {
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (el.getAttribute('class') ? '.' + el.getAttribute('class').split(' ').join('.') : '');
  const past = [...document.body.querySelectorAll('*')].filter(el => {
    const box = el.getBoundingClientRect();
    return box.width > 0 && box.right > window.innerWidth + 0.5;
  }).map(name);
  const charts = [...document.querySelectorAll('svg')].map(svg => {
    const frame = svg.getBoundingClientRect();
    const outside = [...svg.querySelectorAll('text')].filter(text => {
      const box = text.getBoundingClientRect();
      return box.left < frame.left - 0.5 || box.right > frame.right + 0.5 || box.top < frame.top - 0.5 ||
             box.bottom > frame.bottom + 0.5;
    }).map(text => text.textContent);
    return {id: svg.id, texts: svg.querySelectorAll('text').length, outside};
  });
  const wrapped = [...document.querySelectorAll('td.num')].filter(td => {
    const figure = td.firstChild;
    if (!figure || figure.nodeType !== Node.TEXT_NODE || !td.getClientRects().length) return false;
    const range = document.createRange();
    range.selectNodeContents(figure);
    return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size > 1;
  }).map(td => td.textContent);
  const folded = [...document.querySelectorAll('#arms th')].filter(th => !th.getClientRects().length).length;
  return {scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth, past, charts, wrapped,
          header: document.querySelector('p.note').textContent, folded,
          labels: [...document.querySelectorAll('svg text.arm-label')].map(t => t.firstChild.nodeValue)};
})()"""


@pytest.mark.slow  # a real Chromium end to end: `make test` runs it, `make test-fast` does not
def test_at_1280_pixels_the_run_page_fits_the_window_and_its_charts_keep_their_labels(realistic_runs):
    db, wide, small = realistic_runs
    with leafcost_serve(db, db.parent / "serve.log") as base, devtools_page(1280, 1800) as load:
        page = load(f"{base}/run/{wide}", MEASURE)
        assert page["innerWidth"] == 1280
        assert page["scrollWidth"] <= page["innerWidth"], page["past"]
        assert page["past"] == []  # nothing runs past the window, not even inside a box that scrolls
        assert page["wrapped"] == []  # a figure is never broken over two lines
        assert {chart["id"] for chart in page["charts"]} == {"cost-vs-resolve", "cost-breakdown"}
        one = load(f"{base}/run/{small}", MEASURE)
        for chart in page["charts"] + one["charts"]:
            assert chart["texts"] > 3 and chart["outside"] == [], chart
        assert "oracle (reference)" in page["labels"]  # whole, not cut by the chart's edge
        for name in LONG_NAMES.values():  # each arm named in the breakdown, whole or cut with an ellipsis
            assert any(label == name or (label.endswith("…") and name.startswith(label[:-1]))
                       for label in page["labels"]), page["labels"]
        assert "3 tasks × 3 seeds;" in page["header"]
        assert "1 task × 1 seed;" in one["header"]
        # the less-needed columns are folded; unfolded, the arm table may scroll in its own box, never the page
        assert page["folded"] > 0
        unfolded = load(f"{base}/run/{wide}", "document.getElementById('all-figures').click(), " + MEASURE)
        assert unfolded["folded"] == 0 and unfolded["scrollWidth"] <= unfolded["innerWidth"]


# --- the episode table and the API's episode list ------------------------------------------------------------------

class EpisodeRows(HTMLParser):
    """The page's episode table: each row's episode id and its token cost's `data-value`."""

    def __init__(self) -> None:
        super().__init__()
        self.costs: dict[str, str] = {}
        self._episode: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "tr" and "data-episode" in attributes:
            self._episode = attributes["data-episode"]
        elif tag == "td" and self._episode and attributes.get("data-key") == "cost_usd":
            self.costs[self._episode] = attributes["data-value"] or ""


def test_the_pages_episode_table_lists_the_apis_episodes_at_the_apis_costs(four_arm_run):
    db, run_id = four_arm_run
    client = TestClient(build_app(db, api_token=None))
    for arm in (None, "hosted", "frognano"):
        query = {"limit": 500} | ({"arm": arm} if arm else {})
        api = client.get(f"/runs/{run_id}/episodes", params=query).json()
        page = client.get(f"/run/{run_id}", params={"arm": arm} if arm else {})
        assert page.status_code == 200
        rows = EpisodeRows()
        rows.feed(page.text)
        assert list(rows.costs) == [e["episode_id"] for e in api["episodes"]]  # the same rows, in the same order
        assert [float(c) if c else None for c in rows.costs.values()] == [e["cost_usd"] for e in api["episodes"]]
        assert f"Episodes ({api['total']} final" in page.text
    hosted = client.get(f"/runs/{run_id}/episodes", params={"arm": "hosted"}).json()["episodes"]
    assert all(e["cost_usd"] > 0 for e in hosted)  # priced calls: the comparison above compared real numbers
    detail = client.get(f"/runs/{run_id}/episodes/{hosted[0]['episode_id']}").json()["episode"]
    assert detail["cost_usd"] == hosted[0]["cost_usd"]  # one attempt's cost is the list's, to the last bit
