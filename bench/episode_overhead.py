"""The fixed cost of one episode on the local (bubblewrap) backend (issue 26, goal 1: at most 50 ms of CPU, host and
sandbox, and 250 ms of wall time): a zero-step episode (open the sandbox, no agent step, verify, close) on the
trivial task, broken down by stage, in CPU (the harness's side and the sandboxes') and wall time.

    .venv/bin/python bench/episode_overhead.py [--episodes 30] [--against /path/to/other/checkout] [--json]

Each checkout (this one, and with --against another one, e.g. a base commit's worktree) runs in a worker process of
its own with that checkout's code first on sys.path; the driver asks the workers for one episode each in turn
(A, B, A, B, ...), after one unrecorded warm-up episode each, so outside load hits them alike. The stages are timed
by wrapping the functions that do them (names looked up, skipped where a checkout does not have them); a stage's
figures exclude the stages nested in it, so the stages add up to the episode.
- Sandbox CPU: what each sandbox's cgroup counted, read just before the cgroup is removed (root only: without
  cgroups it is 0).
- Host CPU: the worker's own cpuacct cgroup, i.e. its process and every child that has not moved into a sandbox's
  cgroup (`cp`, the `sh` before it joins one), so nothing counts twice. Without root: getrusage of the worker and
  its reaped children, where bubblewrap's CPU counts twice.
Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOAL_CPU_MS = 50.0
GOAL_WALL_MS = 250.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=30, help="measured episodes per checkout (default 30)")
    parser.add_argument("--against", type=Path, action="append", default=[],
                        help="another checkout measured side by side (repeatable)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument("--quick", action="store_true", help="a check that it runs: 2 episodes per checkout")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        asyncio.run(_worker(args.worker))
        return
    if args.quick:
        args.episodes = 2
    checkouts = [HERE.parent, *[p.resolve() for p in args.against]]
    load_before = os.getloadavg()
    results = _drive(checkouts, args.episodes)
    report = {"command": " ".join([os.path.relpath(sys.executable), *sys.argv]),
              "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
              "machine": {"nproc": len(os.sched_getaffinity(0)), "python": platform.python_version()},
              "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()],
              "episodes": args.episodes, "quick": args.quick, "checkouts": results}
    print(json.dumps(report, indent=2) if args.json else render(report))


def _drive(checkouts: list[Path], episodes: int) -> list[dict]:
    workers = []
    for checkout in checkouts:
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        workers.append(subprocess.Popen([sys.executable, __file__, "--worker", str(checkout)], cwd=checkout,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env))
    samples: list[list[dict]] = [[] for _ in checkouts]
    try:
        for round_number in range(episodes + 1):
            for index, worker in enumerate(workers):
                assert worker.stdin and worker.stdout
                worker.stdin.write("go\n")
                worker.stdin.flush()
                line = worker.stdout.readline()
                if not line:
                    raise RuntimeError(f"the worker for {checkouts[index]} died")
                if round_number:  # the first episode of each worker builds the environment and warms up
                    samples[index].append(json.loads(line))
    finally:
        for worker in workers:
            if worker.stdin:
                worker.stdin.close()
            worker.wait()
    return [_summarize(checkout, episode_samples) for checkout, episode_samples in zip(checkouts, samples)]


def _summarize(checkout: Path, episodes: list[dict]) -> dict:
    commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    stages: dict[str, dict[str, float]] = {}
    names = list(dict.fromkeys(name for e in episodes for name in e["stages"]))
    for name in names:
        rows = [e["stages"].get(name, dict.fromkeys(("wall", "host", "sandbox", "calls"), 0.0)) for e in episodes]
        stages[name] = {key: statistics.median(r[key] for r in rows) for key in ("wall", "host", "sandbox", "calls")}
    totals = {key: statistics.median(e["total"][key] for e in episodes) for key in episodes[0]["total"]}
    spread = {key: [min(e["total"][key] for e in episodes), max(e["total"][key] for e in episodes)]
              for key in ("wall", "cpu")}
    return {"checkout": str(checkout), "commit": commit + ("+changes" if dirty else ""), "stages": stages,
            "total": totals, "range": spread, "resolved": sum(e["resolved"] for e in episodes),
            "episodes": len(episodes), "host_cpu_from": episodes[0]["host_cpu_from"]}


def render(report: dict) -> str:
    lines = [f"{report['date']}; nproc {report['machine']['nproc']}, Python {report['machine']['python']}; "
             f"load average before {report['load_before']}, after {report['load_after']}",
             f"command: {report['command']}",
             f"{report['episodes']} zero-step episodes per checkout, interleaved; medians per episode, in ms "
             "(host: the harness's side; sandbox: the sandboxes' cgroups)", ""]
    for result in report["checkouts"]:
        lines.append(f"checkout {result['checkout']} at {result['commit']} "
                     f"({result['resolved']}/{result['episodes']} graded as the task says: reward 0; host CPU from "
                     f"{result['host_cpu_from']})")
        lines.append(f"   {'stage':34} {'calls':>5} {'wall':>8} {'host CPU':>9} {'sandbox CPU':>12}")
        for name, s in result["stages"].items():
            lines.append(f"   {name:34} {s['calls']:5.0f} {s['wall'] * 1e3:8.1f} {s['host'] * 1e3:9.1f} "
                         f"{s['sandbox'] * 1e3:12.1f}")
        t, r = result["total"], result["range"]
        lines.append(f"   {'episode':34} {'':5} {t['wall'] * 1e3:8.1f} {t['host'] * 1e3:9.1f} "
                     f"{t['sandbox'] * 1e3:12.1f}")
        lines.append(f"   CPU (host + sandbox) {t['cpu'] * 1e3:.1f} ms "
                     f"[{r['cpu'][0] * 1e3:.1f}–{r['cpu'][1] * 1e3:.1f}] (goal <= {GOAL_CPU_MS:g}), "
                     f"wall {t['wall'] * 1e3:.1f} ms "
                     f"[{r['wall'][0] * 1e3:.1f}–{r['wall'][1] * 1e3:.1f}] (goal <= {GOAL_WALL_MS:g})")
        lines.append("")
    if len(report["checkouts"]) > 1:
        base = report["checkouts"][0]["total"]
        for other in report["checkouts"][1:]:
            o = other["total"]
            lines.append(f"{other['commit']} / {report['checkouts'][0]['commit']} at the median: CPU "
                         f"{o['cpu'] / base['cpu']:.2f}x, wall {o['wall'] / base['wall']:.2f}x")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ worker


class _Clock:
    """Exclusive wall and CPU per stage: a nested stage's figures are taken out of its parent's."""

    def __init__(self, host_cgroup: Path | None) -> None:
        self.host_cgroup = host_cgroup
        self.stages: dict[str, dict[str, float]] = {}
        self._stack: list[list] = []
        self.cgroup_final = 0.0  # CPU of the sandboxes whose cgroups are gone
        self.live: list = []  # AppliedLimits of the sandboxes still running

    def sandbox_cpu(self) -> float:
        return self.cgroup_final + sum(limits.cpu_seconds() or 0.0 for limits in self.live)

    def now(self) -> dict[str, float]:
        if self.host_cgroup is not None:
            host = int((self.host_cgroup / "cpuacct.usage").read_text()) / 1e9
        else:
            own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
            host = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
        return {"wall": time.perf_counter(), "host": host, "sandbox": self.sandbox_cpu()}

    def wrap(self, name: str, function):
        clock = self

        async def timed(*args, **kwargs):
            start = clock.now()
            frame = [name, start, {k: 0.0 for k in start}]
            clock._stack.append(frame)
            try:
                return await function(*args, **kwargs)
            finally:
                clock._stack.pop()
                end = clock.now()
                spent = {k: end[k] - start[k] for k in start}
                stage = clock.stages.setdefault(name, {k: 0.0 for k in (*start, "calls")})
                for key in spent:
                    stage[key] += spent[key] - frame[2][key]
                stage["calls"] += 1
                if clock._stack:
                    for key in spent:
                        clock._stack[-1][2][key] += spent[key]
        return timed


def _patch(clock: _Clock) -> None:
    """Wraps the stages where this checkout has them."""
    import sandbox.grading as grading
    import sandbox.local.bwrap as bwrap
    import sandbox.local.environment as environment
    import sandbox.local.limits as limits
    import sandbox.protocol as protocol

    def wrap_attr(owner, attribute: str, name: str, *, static: bool = False) -> None:
        function = owner.__dict__.get(attribute) if isinstance(owner, type) else getattr(owner, attribute, None)
        if function is None:
            return
        if isinstance(function, classmethod):
            inner = function.__func__
            setattr(owner, attribute, classmethod(clock.wrap(name, inner)))
        else:
            setattr(owner, attribute, clock.wrap(name, function))

    wrap_attr(environment, "build_environment", "open: environment lookup (hash)")
    wrap_attr(environment, "_copy_tree", "open: copy of the environment")
    wrap_attr(bwrap.LocalSandbox, "start", "sandbox start (bwrap + runner)")
    wrap_attr(bwrap.LocalSandbox, "close", "sandbox stop")
    wrap_attr(environment.LocalOpened, "close", "close: workspace removal")
    wrap_attr(environment.LocalOpened, "quiesce", "verify: quiesce (agent's sandbox stopped)")
    wrap_attr(environment.LocalOpened, "start_verifier", "verify: verifier's sandbox, /tests copy")
    wrap_attr(grading, "capture_patch", "verify: patch capture (git)")
    wrap_attr(grading, "restore_repository", "verify: git restore")
    wrap_attr(grading, "prepare_repository", "verify: capture + restore + git add + test.sh (one exec)")
    wrap_attr(grading, "_run_verifier", "verify: test.sh (+ git add)")
    wrap_attr(grading, "read_reward", "verify: reward read")
    if hasattr(grading, "write_file"):
        grading.write_file = clock.wrap("verify: write_file", protocol.write_file)

    apply_limits, release = bwrap.apply_limits, limits.AppliedLimits.release

    def tracked_apply(*args, **kwargs):
        applied = apply_limits(*args, **kwargs)
        clock.live.append(applied)
        return applied

    async def tracked_release(self):
        clock.cgroup_final += self.cpu_seconds() or 0.0
        clock.live = [x for x in clock.live if x is not self]
        await release(self)

    bwrap.apply_limits = tracked_apply
    try:
        import sandbox.local.commands as commands  # the verifier's sandbox, where a checkout has it
    except ImportError:
        pass
    else:
        commands.apply_limits = tracked_apply
        wrap_attr(commands.CommandSandbox, "close", "sandbox stop")
    limits.AppliedLimits.release = tracked_release


async def _worker(checkout: Path) -> None:
    sys.path.insert(0, str(HERE))
    import sandbox

    if not Path(sandbox.__file__).resolve().is_relative_to(checkout):
        raise RuntimeError(f"the worker for {checkout} imported {sandbox.__file__}")
    host_cgroup = _own_cgroup()
    clock = _Clock(host_cgroup)
    _patch(clock)
    try:
        await _episodes(clock)
    finally:
        if host_cgroup is not None:
            (host_cgroup.parent / "cgroup.procs").write_text(str(os.getpid()))
            try:
                host_cgroup.rmdir()
            except OSError:
                pass  # a child still in it; the kernel keeps an empty cgroup harmlessly


def _own_cgroup() -> Path | None:
    """A cpuacct cgroup (v1) of this worker's own, which every child inherits until it joins a sandbox's."""
    parent = Path("/sys/fs/cgroup/cpuacct")
    if os.geteuid() != 0 or not (parent / "cgroup.procs").exists():
        return None
    directory = parent / f"bench-episode-overhead-{os.getpid()}"
    try:
        directory.mkdir()
        (directory / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return None
    return directory


async def _episodes(clock: _Clock) -> None:
    from trivial_task import make_suite

    from sandbox import SandboxOptions, load_suite, open_sandbox, verify

    with tempfile.TemporaryDirectory(prefix="leafcost-bench-") as scratch:
        options = SandboxOptions(cache_dir=Path(scratch) / "cache", work_dir=Path(scratch) / "work")
        task = load_suite(str(make_suite(Path(scratch)))).tasks[0]
        episode = clock.wrap("open: rest", open_sandbox)
        verify_timed = clock.wrap("verify: rest", verify)
        for _ in sys.stdin:
            clock.stages = {}
            start = clock.now()
            opened = await episode(task, options)
            verification = await verify_timed(opened, task)
            await opened.close()
            end = clock.now()
            total = {k: end[k] - start[k] for k in start}
            total["cpu"] = total["host"] + total["sandbox"]
            resolved = verification.grade.error is None and verification.grade.reward == 0
            source = "its cgroup" if clock.host_cgroup else "getrusage"
            print(json.dumps({"stages": clock.stages, "total": total, "resolved": resolved, "host_cpu_from": source}),
                  flush=True)


if __name__ == "__main__":
    main()
