"""Running the fake: embedded in a background thread with its own event loop, as a subprocess, or from the
command line (`python -m support.sglang_fake --script FILE.json [--port 0] [--port-file PATH]`, with `tests/`
on the path)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess as _subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from support.sglang_fake.app import RecordedRequest, ScriptedApp
from support.sglang_fake.script import Script, load_script
from support.sglang_fake.serving import serve

__all__ = ["ScriptedServer", "main"]

_TESTS_DIR = Path(__file__).resolve().parents[2]  # holds the `support` package


class ScriptedServer:
    """A running scripted server on a real loopback socket: `with ScriptedServer(script) as server: ...`.

    In-process (default) the server has its own event loop in a daemon thread, so it never competes with the
    caller's loop for turns; with `subprocess=True` it is a separate Python process (best for benchmarks: it
    gets its own GIL). `requests` lists what clients sent, in arrival order (not recorded in `instant` mode).
    """

    def __init__(self, script: Script | dict[str, Any] | str | os.PathLike[str], *, host: str = "127.0.0.1",
                 port: int = 0, subprocess: bool = False, startup_timeout: float = 30.0) -> None:
        self.script = load_script(script)
        self.host = host
        self.port = port
        self.use_subprocess = subprocess
        self.startup_timeout = startup_timeout
        self._app: ScriptedApp | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None
        self._process: _subprocess.Popen[bytes] | None = None
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (…/v1)."""
        return f"{self.root_url}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        if self._app is not None:
            return list(self._app.recorded)
        return [RecordedRequest(**item) for item in self._fetch_json("/_scripted/requests")]

    @property
    def chat_bodies(self) -> list[Any]:
        """The bodies of the chat-completion requests, in arrival order."""
        return [r.body for r in self.requests if r.method == "POST" and r.path == "/v1/chat/completions"]

    def stats(self) -> dict[str, Any]:
        """Counters: chat requests received, answers and errors sent, requests in flight."""
        if self._app is not None:
            return self._app.stats_snapshot()
        return self._fetch_json("/_scripted/stats")

    def start(self) -> ScriptedServer:
        if self.use_subprocess:
            self._start_subprocess()
        else:
            self._start_thread()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            loop, stopping = self._loop, self._stopping
            if loop is not None and stopping is not None and not loop.is_closed():
                loop.call_soon_threadsafe(stopping.set)
            self._thread.join(timeout=10)
            self._thread = None
        if self._process is not None:
            _stop_process(self._process)
            self._process = None
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> ScriptedServer:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)

    def _start_thread(self) -> None:
        ready = threading.Event()
        failure: list[BaseException] = []

        async def run_server() -> None:
            self._stopping = asyncio.Event()
            try:
                serving = await serve(self.script, self.host, self.port)
            except BaseException as error:  # report bind errors to the starting thread
                failure.append(error)
                ready.set()
                return
            self._app, self.port = serving.app, serving.port
            ready.set()
            try:
                await self._stopping.wait()
            finally:
                await serving.close()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            try:
                self._loop.run_until_complete(run_server())
            finally:
                self._loop.close()

        self._thread = threading.Thread(target=run, name=f"scripted-server-{id(self):x}", daemon=True)
        self._thread.start()
        if not ready.wait(self.startup_timeout):
            raise RuntimeError(f"scripted server did not start within {self.startup_timeout}s")
        if failure:
            self._thread.join()
            self._thread = None
            raise RuntimeError(f"scripted server could not listen on {self.host}:{self.port}: {failure[0]}")

    def _start_subprocess(self) -> None:
        self._tmpdir = tempfile.TemporaryDirectory(prefix="scripted-server-")
        script_path = Path(self._tmpdir.name) / "script.json"
        port_file = Path(self._tmpdir.name) / "port"
        # exclude_unset keeps "content left out" apart from "content: null" across the round trip.
        script_path.write_text(self.script.model_dump_json(exclude_unset=True))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_TESTS_DIR),
                                                                          os.environ.get("PYTHONPATH")]))}
        # stderr goes to a file: a pipe nobody reads during a long run could fill up and block the server.
        stderr_path = Path(self._tmpdir.name) / "stderr"
        with open(stderr_path, "wb") as stderr:
            self._process = _subprocess.Popen(
                [sys.executable, "-m", "support.sglang_fake", "--host", self.host, "--port", str(self.port),
                 "--script", str(script_path), "--port-file", str(port_file)],
                stdout=_subprocess.DEVNULL, stderr=stderr, env=env)
        deadline = time.monotonic() + self.startup_timeout
        while not port_file.exists():
            if self._process.poll() is not None:
                error = stderr_path.read_text(errors="replace")
                self._process = None
                raise RuntimeError(f"scripted server exited at start: {error.strip()[-2000:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"scripted server did not write its port within {self.startup_timeout}s")
            time.sleep(0.01)
        self.port = int(port_file.read_text())

    def _fetch_json(self, path: str) -> Any:
        with urllib.request.urlopen(self.root_url + path, timeout=30) as response:
            return json.loads(response.read())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m support.sglang_fake",
                                     description="A fake SGLang server answering from a script.")
    parser.add_argument("--script", required=True, help="the script, a JSON file")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed, and written to --port-file)")
    parser.add_argument("--port-file", help="write the bound port here (atomically) once listening")
    args = parser.parse_args(argv)
    try:
        script = load_script(args.script)
    except (OSError, ValueError) as error:
        print(f"sglang_fake: cannot load --script {args.script}: {error}", file=sys.stderr)
        return 2
    asyncio.run(_run_cli(script, args.host, args.port, args.port_file))
    return 0


async def _run_cli(script: Script, host: str, port: int, port_file: str | None) -> None:
    serving = await serve(script, host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    print(serving.port, flush=True)
    if port_file:
        _write_atomically(Path(port_file), f"{serving.port}\n")
    try:
        await stop.wait()
    finally:
        await serving.close()


def _stop_process(process: _subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except _subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)
