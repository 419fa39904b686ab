"""The kubernetes backend at scale: the orchestrator's CPU and memory per concurrent episode, and exec-stream
throughput, against the Kubernetes stand-in with instant pods.

Episodes: `leafcost run` (its own process; CPU and peak RSS of its reaped tree from os.wait4) runs N concurrent
episodes (one trivial task × N seeds, N workers, one `sglang` arm) through the kubernetes backend. Each episode is
`--steps` tool calls through the pod's tool-runner stream, then an answer; every model turn takes `--turn-sec`, as
a model would, so the N episodes overlap. The stand-in (bench/kube_standin.py: tests/support/kube_fake with
InstantPods, which answers what the backend sends and runs nothing) and the scripted SGLang server are each their
own process, so their CPU is in no orchestrator figure. While the run goes, the runner's CPU and RSS and the
stand-in's stored pods are sampled every `--sample-sec`: "cores with N live" is the runner's CPU rate over the
samples when at least 90 % of the N pods existed. N = 10, 50, 150 by default, so the marginal cost per episode
(largest N − smallest N) shows beside the totals.

Exec streams: through sandbox.kubernetes.exec_stream.ExecStream (what the backend uses) from this process to a
fresh stand-in process: MiB/s of `--mib` MiB through `cat` (the stand-in echoes it back, so it crosses the socket
both ways), and tool calls (`Bash` `true`, answered at once by InstantPods' runner) over one tool-runner stream
as PodSandbox makes them, interleaved round by round with one exec per call (`true`), the way a harness that
execs per call pays.

    .venv/bin/python bench/kube_scale.py [--episodes 10 50 150] [--steps 10] [--turn-sec 2] [--start-sec 1]
                                         [--mib 64] [--calls 2000] [--exec-calls 200] [--rounds 3] [--quick] [--json]

Each run records the machine's busy cores from /proc/stat and the outside load (busy cores that were neither the
runner nor the stand-ins), and the load average before and after. --quick runs 2 and 4 episodes of 2 short steps
and a few exec-stream calls: a check that the bench runs, not a measurement. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(BENCH)]

from trivial_task import make_suite  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
LIVE_SHARE = 0.9  # "N live": at least this share of the run's N pods stored at once
PEAK_WINDOW_SEC = 2.0  # "peak cores": the runner's highest CPU rate over a window this long
QUICK = {"episodes": [2, 4], "steps": 2, "turn_sec": 0.2, "start_sec": 0.1, "sample_sec": 0.2, "mib": 4, "calls": 50,
         "exec_calls": 10, "rounds": 1}


# --------------------------------------------------------------------------------------------- the stand-ins


class Child:
    """A helper process (the Kubernetes stand-in or the model); its CPU read from /proc while it lives."""

    def __init__(self, command: list[str], *, cwd: Path, env: dict | None = None):
        self.process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True)

    def line(self) -> str:
        text = self.process.stdout.readline()
        if not text:
            raise RuntimeError(f"{self.process.args[1]} ended: exit {self.process.poll()}")
        return text

    def cpu_now(self) -> float:
        return _proc_cpu(self.process.pid)

    def stop(self, *, terminate: bool) -> None:
        if terminate:
            self.process.terminate()
        self.process.stdin.close()
        self.process.wait(60)


class StandIn(Child):
    def __init__(self, cwd: Path, *, start_sec: float):
        super().__init__([sys.executable, str(BENCH / "kube_standin.py"), "--start-delay", str(start_sec)], cwd=cwd)
        ready = json.loads(self.line())
        self.kubeconfig, self.namespace = ready["kubeconfig"], ready["namespace"]

    def seen(self) -> dict:
        self.process.stdin.write("seen\n")
        self.process.stdin.flush()
        return json.loads(self.line())


class Model(Child):
    """The scripted SGLang server: `steps` Bash calls, then an answer, each turn `turn_sec` long."""

    def __init__(self, cwd: Path, *, steps: int, turn_sec: float):
        turn = {"tool_calls": [{"name": "Bash", "arguments": {"command": "true"}}], "delay": turn_sec}
        script = cwd / "model.json"
        script.write_text(json.dumps({"turns": [turn] * steps + [{"content": "done", "delay": turn_sec}]}))
        super().__init__([sys.executable, "-m", "support.sglang_fake", "--script", str(script)], cwd=cwd,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "tests")})
        self.base_url = f"http://127.0.0.1:{int(self.line())}/v1"


# --------------------------------------------------------------------------------------------- episodes


def run_episodes(n: int, *, steps: int, turn_sec: float, start_sec: float, sample_sec: float,
                 scratch: Path) -> dict:
    """One `leafcost run` of n concurrent episodes; its figures."""
    run_dir = Path(tempfile.mkdtemp(prefix=f"n{n}-", dir=scratch))
    suite = make_suite(run_dir)
    lock = run_dir / "images.lock.json"  # a locally built image by ID: the instant kubelet pulls nothing
    lock.write_text(json.dumps({"format": 1, "engine": "podman", "tasks": {
        "trivial": {"image": "trivial", "id": "sha256:" + "b" * 64, "repo_digest": None}}}))
    kube, model = StandIn(run_dir, start_sec=start_sec), Model(run_dir, steps=steps, turn_sec=turn_sec)
    try:
        spec = {"name": "kube-scale", "suite": str(suite), "seeds": n, "workers": n, "max_attempts": 1,
                "budgets": {"max_steps": steps + 5, "time_budget_sec": 3600},
                "sandbox": {"backend": "kubernetes", "images": str(lock),
                            "kubernetes": {"kubeconfig": kube.kubeconfig, "namespace": kube.namespace}},
                "arms": [{"name": "model", "adapter": "sglang", "model": "frognano-4b", "base_url": model.base_url,
                          "max_retries": 0, "gpu": {"type": "H200", "usd_per_hour": 3.5}}]}
        (run_dir / "spec.yaml").write_text(json.dumps(spec))  # JSON is YAML
        figures = _sampled_run(run_dir, kube, model, sample_sec, n)
        seen = kube.seen()
    finally:
        kube.stop(terminate=False)
        model.stop(terminate=True)
    own = figures["runner_cpu_sec"] + figures["standin_cpu_sec"] + figures["model_cpu_sec"]
    figures["outside_load_cores"] = max(0.0, figures["machine_busy_cores"] - own / figures["wall_sec"])
    figures.update(_ledger_figures(run_dir / "ledger.duckdb"))
    return {"episodes": n, **figures, **{k: seen[k] for k in ("max_live", "max_creating", "max_deleting",
                                                              "created", "deleted", "live")}}


def _sampled_run(run_dir: Path, kube: StandIn, model: Model, sample_sec: float, n: int) -> dict:
    """`leafcost run` to its end, sampling its CPU and RSS and the stand-in's stored pods as it goes."""
    command = [str(Path(sys.executable).parent / "leafcost"), "run", str(run_dir / "spec.yaml"), "--db",
               str(run_dir / "ledger.duckdb"), "--json"]
    env = {**os.environ, "LEAFCOST_CACHE": str(run_dir / "cache")}
    machine_before, started = _machine_jiffies(), time.monotonic()
    kube_before, model_before = kube.cpu_now(), model.cpu_now()
    samples = []  # (seconds, runner CPU seconds, runner RSS MiB, pods stored)
    with open(run_dir / "stdout", "wb") as out, open(run_dir / "stderr", "wb") as err:
        process = subprocess.Popen(command, env=env, cwd=run_dir, stdout=out, stderr=err)
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            try:
                samples.append((time.monotonic() - started, _proc_cpu(process.pid),
                                _proc_rss_mib(process.pid), kube.seen()["live"]))
            except (FileNotFoundError, ProcessLookupError):
                pass  # it ended between the two looks
            time.sleep(sample_sec)
    wall = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    machine_after = _machine_jiffies()
    kube_cpu, model_cpu = kube.cpu_now() - kube_before, model.cpu_now() - model_before
    if process.returncode != 0:
        raise RuntimeError(f"leafcost run exited {process.returncode}: "
                           f"{(run_dir / 'stderr').read_text(errors='replace')[-2000:]}")
    busy = (machine_after[0] - machine_before[0]) / max(1, machine_after[1] - machine_before[1]) * os.cpu_count()
    cpu = usage.ru_utime + usage.ru_stime
    return {"wall_sec": wall, "runner_cpu_sec": cpu, "runner_max_rss_mib": usage.ru_maxrss / 1024,
            "runner_mean_cores": cpu / wall, **_live_phase(samples, n), "machine_busy_cores": busy,
            "standin_cpu_sec": kube_cpu, "model_cpu_sec": model_cpu,
            "summary_status": json.loads((run_dir / "stdout").read_text())["status"]}


def _live_phase(samples: list[tuple[float, float, float, int]], n: int) -> dict:
    """The runner's CPU rate over the samples when nearly all n pods existed at once (None if they never did),
    its highest rate over any PEAK_WINDOW_SEC once the first pod existed (before it: start-up, imports), and the
    largest RSS sampled."""
    if not samples:
        return {"live_phase_sec": 0.0, "cores_with_n_live": None, "peak_cores": None, "peak_sampled_rss_mib": None}
    busy_sec = cpu_sec = 0.0
    for before, after in zip(samples, samples[1:]):
        if before[3] >= LIVE_SHARE * n and after[3] >= LIVE_SHARE * n:
            busy_sec += after[0] - before[0]
            cpu_sec += after[1] - before[1]
    rates, first = [], next((i for i, s in enumerate(samples) if s[3] > 0), len(samples))
    for i, before in enumerate(samples[first:], first):
        after = next((s for s in samples[i + 1:] if s[0] - before[0] >= PEAK_WINDOW_SEC), None)
        if after is not None:
            rates.append((after[1] - before[1]) / (after[0] - before[0]))
    return {"live_phase_sec": busy_sec, "cores_with_n_live": cpu_sec / busy_sec if busy_sec else None,
            "peak_cores": max(rates, default=None), "peak_sampled_rss_mib": max(s[2] for s in samples)}


def _ledger_figures(db: Path) -> dict:
    from compare.ledger import connect_read_only

    conn = connect_read_only(db)
    try:
        resolved, errors = conn.execute("SELECT count(*) FILTER (WHERE resolved), count(*) FILTER (WHERE "
                                        "infra_error OR harness_error) FROM episodes WHERE final").fetchone()
        calls, = conn.execute("SELECT count(*) FROM model_calls").fetchone()
        tools, = conn.execute("SELECT count(*) FROM tool_calls").fetchone()
    finally:
        conn.close()
    return {"resolved": resolved, "errors": errors, "model_calls": calls, "tool_calls": tools}


# --------------------------------------------------------------------------------------------- exec streams


async def exec_streams(kube: StandIn, *, mib: int, calls: int, exec_calls: int, rounds: int) -> dict:
    """`cat` throughput and tool-call round trips over one stream against one exec per call, in one pod."""
    from sandbox.kubernetes.manifests import CONTAINER, attempt_pod
    from sandbox.kubernetes.pods import KubeCluster, PodSandbox
    from sandbox.protocol import SandboxOptions
    from sandbox.tasks import EnvironmentConfig

    options = SandboxOptions(backend="kubernetes", kubeconfig=Path(kube.kubeconfig), kube_namespace=kube.namespace)
    cluster = KubeCluster(options)
    try:
        pod = "bench-exec"
        await cluster.call(cluster.core.create_namespaced_pod, cluster.namespace, attempt_pod(
            name=pod, namespace=cluster.namespace, image="bench", environment=EnvironmentConfig(), workdir="/",
            labels={"leafcost.run": "bench"}, spec_hash="0", deadline_sec=3600))
        cat = await _cat(cluster, pod, mib << 20, kube)
        sandbox = PodSandbox(cluster, pod, user=None, workdir="/", has_python=True, image="bench", spare="")
        await sandbox.run_tool("Bash", {"command": "true"})  # starts the runner: copied in, one stream opened
        stream_rounds, exec_rounds = [], []
        for _ in range(rounds):
            stream_rounds.append(await _timed(calls, kube, lambda: sandbox.run_tool("Bash", {"command": "true"})))
            exec_rounds.append(await _timed(exec_calls, kube, lambda: _exec_true(cluster, pod, CONTAINER)))
        await sandbox.close()
    finally:
        await cluster.close()
    return {"cat": cat, "stream": _rounds(stream_rounds), "exec_per_call": _rounds(exec_rounds),
            "exec_over_stream_p50": [e["p50_ms"] / s["p50_ms"] for s, e in zip(stream_rounds, exec_rounds)]}


async def _cat(cluster, pod: str, size: int, kube: StandIn) -> dict:
    chunk = os.urandom(1 << 20)
    stream = await cluster.exec(pod, ["cat"], stdin=True)
    cpu, server, started = time.process_time(), kube.cpu_now(), time.perf_counter()

    async def feed() -> None:
        for _ in range(size // len(chunk)):
            await stream.write(chunk)
        await stream.close_stdin()

    feeding, got = asyncio.create_task(feed()), 0
    while got < size and (data := await stream.stdout.read(1 << 20)):
        got += len(data)
    await feeding
    code = await stream.wait()
    seconds = time.perf_counter() - started
    await stream.close()
    return {"mib": size >> 20, "echoed_mib": got / (1 << 20), "exit_code": code, "seconds": seconds,
            "mib_per_sec": got / (1 << 20) / seconds, "client_cpu_sec": time.process_time() - cpu,
            "standin_cpu_sec": kube.cpu_now() - server}


async def _exec_true(cluster, pod: str, container: str) -> None:
    from sandbox.kubernetes.exec_stream import ExecStream

    stream = await ExecStream.open(cluster.session, cluster.configuration, cluster.namespace, pod, container,
                                   ["true"], stdin=False)
    try:
        if await stream.wait() != 0:
            raise RuntimeError("`true` failed in the stand-in")
    finally:
        await stream.close()


async def _timed(count: int, kube: StandIn, call) -> dict:
    latencies, cpu, server, started = [], time.process_time(), kube.cpu_now(), time.perf_counter()
    for _ in range(count):
        t = time.perf_counter()
        await call()
        latencies.append(time.perf_counter() - t)
    seconds = time.perf_counter() - started
    latencies.sort()
    return {"calls": count, "per_sec": count / seconds, "p50_ms": statistics.median(latencies) * 1e3,
            "p90_ms": latencies[int(0.9 * (count - 1))] * 1e3,
            "client_cpu_ms": (time.process_time() - cpu) / count * 1e3,
            "standin_cpu_ms": (kube.cpu_now() - server) / count * 1e3}


def _rounds(rounds: list[dict]) -> dict:
    return {key: statistics.median(r[key] for r in rounds) for key in rounds[0]} | {"rounds": rounds}


# --------------------------------------------------------------------------------------------- the machine


def _proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _proc_rss_mib(pid: int) -> float:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / (1 << 20)


def _machine_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat (busy: everything but idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    total = sum(fields[:8])
    return total - fields[3] - fields[4], total


def _commit() -> str:
    done = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                          text=True)
    return done.stdout.strip() or "unknown"


# --------------------------------------------------------------------------------------------- main


def measure(*, episodes: list[int], steps: int, turn_sec: float, start_sec: float, sample_sec: float, mib: int,
            calls: int, exec_calls: int, rounds: int, progress=lambda text: None) -> dict:
    loadavg_at_start = Path("/proc/loadavg").read_text().split()[:3]
    runs = []
    with tempfile.TemporaryDirectory(prefix="leafcost-kube-scale-") as tmp:
        for n in episodes:
            run = run_episodes(n, steps=steps, turn_sec=turn_sec, start_sec=start_sec, sample_sec=sample_sec,
                               scratch=Path(tmp))
            runs.append(run)
            progress(f"{n} episodes: {run['wall_sec']:.1f} s, runner {run['runner_cpu_sec']:.2f} CPU s, "
                     f"{run['runner_max_rss_mib']:.0f} MiB, {run['max_live']} pods at once, "
                     f"{run['resolved']}/{n} resolved")
        kube = StandIn(Path(tmp), start_sec=0.0)
        try:
            streams = asyncio.run(exec_streams(kube, mib=mib, calls=calls, exec_calls=exec_calls, rounds=rounds))
        finally:
            kube.stop(terminate=False)
    small, large = runs[0], runs[-1]
    span = large["episodes"] - small["episodes"]
    marginal = None if span <= 0 else {
        "cpu_sec_per_episode": (large["runner_cpu_sec"] - small["runner_cpu_sec"]) / span,
        "rss_mib_per_episode": (large["runner_max_rss_mib"] - small["runner_max_rss_mib"]) / span}
    return {"design": {"episodes": episodes, "steps": steps, "turn_sec": turn_sec, "start_sec": start_sec,
                       "sample_sec": sample_sec, "mib": mib, "calls": calls, "exec_calls": exec_calls,
                       "rounds": rounds},
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "commit": _commit(),
                        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                        "loadavg_at_start": loadavg_at_start,
                        "loadavg_at_end": Path("/proc/loadavg").read_text().split()[:3]},
            "runs": runs, "marginal": marginal, "exec_streams": streams}


def render(result: dict) -> str:
    design, machine = result["design"], result["machine"]
    lines = [f"machine: {machine['cpus']} cores, Python {machine['python']}, {machine['commit']}, {machine['date']}, "
             f"load average at the start {' '.join(machine['loadavg_at_start'])}, at the end "
             f"{' '.join(machine['loadavg_at_end'])}"
             + ("; --quick: a check that the bench runs, not a measurement" if result.get("quick") else ""),
             f"episodes of {design['steps']} tool calls + an answer, {design['turn_sec']:g} s per model turn, pods "
             f"Running {design['start_sec']:g} s after creation", "",
             "| concurrent episodes | wall s | runner CPU s | CPU ms per episode | mean cores | cores with N live "
             "| peak cores (2 s) | peak RSS MiB | pods at once | resolved | stand-in CPU s | outside load, cores |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for run in result["runs"]:
        lines.append(f"| {run['episodes']} | {run['wall_sec']:.1f} | {run['runner_cpu_sec']:.2f} | "
                     f"{run['runner_cpu_sec'] / run['episodes'] * 1e3:.0f} | {run['runner_mean_cores']:.2f} | "
                     f"{_num(run['cores_with_n_live'])} | {_num(run['peak_cores'])} | "
                     f"{run['runner_max_rss_mib']:.0f} | {run['max_live']} | {run['resolved']}/{run['episodes']} | "
                     f"{run['standin_cpu_sec']:.2f} | {run['outside_load_cores']:.2f} |")
    if result["marginal"]:
        m = result["marginal"]
        lines.append(f"\nmarginal per concurrent episode ({result['runs'][0]['episodes']} → "
                     f"{result['runs'][-1]['episodes']}): {m['cpu_sec_per_episode'] * 1e3:.0f} ms CPU, "
                     f"{m['rss_mib_per_episode']:.2f} MiB RSS")
    s = result["exec_streams"]
    cat, stream, per_call = s["cat"], s["stream"], s["exec_per_call"]
    ratio = statistics.median(s["exec_over_stream_p50"])
    lines += ["", f"exec streams (medians of {design['rounds']} interleaved rounds):",
              f"  `cat` of {cat['mib']} MiB, echoed back: {cat['mib_per_sec']:.0f} MiB/s each way "
              f"(client CPU {cat['client_cpu_sec']:.2f} s, stand-in {cat['standin_cpu_sec']:.2f} s)",
              "", "| variant | calls/s | p50 ms | p90 ms | client CPU ms/call | stand-in CPU ms/call |",
              "|---|---|---|---|---|---|"]
    for name, row in (("Bash `true` over the tool-runner stream", stream), ("one exec per call (`true`)", per_call)):
        lines.append(f"| {name} | {row['per_sec']:.0f} | {row['p50_ms']:.2f} | {row['p90_ms']:.2f} | "
                     f"{row['client_cpu_ms']:.2f} | {row['standin_cpu_ms']:.2f} |")
    lines.append(f"\none exec per call ÷ the stream, p50, within each round: {ratio:.1f}×")
    return "\n".join(lines)


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, nargs="+", default=[10, 50, 150], help="concurrent episodes")
    parser.add_argument("--steps", type=int, default=10, help="tool calls per episode before its answer")
    parser.add_argument("--turn-sec", type=float, default=2.0, help="seconds each model turn takes")
    parser.add_argument("--start-sec", type=float, default=1.0, help="seconds a pod is Pending before it runs")
    parser.add_argument("--sample-sec", type=float, default=0.5)
    parser.add_argument("--mib", type=int, default=64, help="MiB through `cat`")
    parser.add_argument("--calls", type=int, default=2000, help="tool calls over the stream per round")
    parser.add_argument("--exec-calls", type=int, default=200, help="execs per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true",
                        help="2 and 4 episodes, short turns, small counts: a check that the bench runs, not a "
                             "measurement")
    parser.add_argument("--json", action="store_true", help="every run's record as JSON")
    args = parser.parse_args()
    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, value)
    result = measure(episodes=sorted(args.episodes), steps=args.steps, turn_sec=args.turn_sec,
                     start_sec=args.start_sec, sample_sec=args.sample_sec, mib=args.mib, calls=args.calls,
                     exec_calls=args.exec_calls, rounds=args.rounds,
                     progress=lambda text: print(text, file=sys.stderr, flush=True))
    result["quick"] = args.quick
    print(json.dumps(result, indent=2) if args.json else render(result))


if __name__ == "__main__":
    main()
