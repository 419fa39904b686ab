"""The web page in a real browser: `leafcost serve` on a real ledger, Debian's headless Chromium loading the run
page, its arm table's numbers checked against the API's summary, a screenshot saved with the test's output."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from html.parser import HTMLParser

import pytest
from conftest import leafcost_serve

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
