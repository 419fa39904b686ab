"""bench/startup.py: the design interleaves checkouts and reverses every other repetition, ratios stay inside a
repetition (its quick mode runs in tests/bench/test_bench_quick_modes.py)."""

from __future__ import annotations

import pytest
from support.bench_scripts import load_bench

bench = load_bench("startup")


def run(what, src, rep, seconds, cpu=0.1):
    figures = {"rep": rep, "what": what, "src": src, "wall_sec": seconds + 1, "cpu_sec": cpu,
               "outside_load_cores": 0.0}
    return {**figures, "wall_sec": seconds} if what == "help" else {**figures, "first_request_sec": seconds,
                                                                      "first_request_cpu_sec": cpu}


def test_a_repetition_puts_checkouts_side_by_side_and_the_next_reverses_it():
    first = bench.plan(["base", "head"], ["help", "run-router"], 0)
    assert first == [("help", "base"), ("help", "head"), ("run-router", "base"), ("run-router", "head")]
    assert bench.plan(["base", "head"], ["help", "run-router"], 1) == first[::-1]


def test_ratios_are_taken_inside_each_repetition_and_the_goal_is_read_on_the_headline_figure():
    # Repetition 1 is three times as slow for both checkouts: head is half of base in both.
    runs = [run("run-router", "base", 0, 0.8), run("run-router", "head", 0, 0.4),
            run("run-router", "base", 1, 2.4), run("run-router", "head", 1, 1.2),
            run("help", "base", 0, 0.2), run("help", "head", 0, 0.1)]
    rows = {(r["what"], r["src"]): r for r in bench.summarize(runs, ["base", "head"], ["help", "run-router"])["rows"]}
    head = rows["run-router", "head"]
    assert head["vs_first"] == {"median": pytest.approx(0.5), "min": pytest.approx(0.5), "max": pytest.approx(0.5)}
    assert head["first_request_sec"]["median"] == pytest.approx(0.8) and not head["goal_met"]
    assert rows["help", "head"]["goal_met"] and "vs_first" not in rows["help", "base"]
